"""Request ids, as OpenStack services keep them, on every log line of a request.

Each request gets a local id ``req-<uuid4>``, returned in ``x-openstack-request-id``
(oslo.middleware's ``RequestId``, which Placement runs). An inbound
``X-OpenStack-Request-ID`` is the caller's *global* request id (nova sends the one it
gave the whole boot): kept when it has oslo.middleware's form ``req-<uuid>`` (lower-case
hex), dropped otherwise, as oslo.middleware does. Both are bound to the request's
context (a :mod:`contextvars` variable, so threads and workers never mix them) and
:class:`RequestIdFilter` adds them to every log record made meanwhile as
``record.request_id`` / ``record.global_request_id``; :data:`LOG_FORMAT` prints them
the way oslo.log's context format does (``[req-... req-... user project]``).

>>> valid_global_id("req-9a6e0a4b-2b5e-4f3c-8c1d-0e1f2a3b4c5d")
True
>>> valid_global_id("req-NOT-A-UUID"), valid_global_id("9a6e0a4b-2b5e-4f3c-8c1d-0e1f2a3b4c5d")
(False, False)
"""

from __future__ import annotations

import contextvars
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ENV_GLOBAL_REQUEST_ID",
    "ENV_REQUEST_ID",
    "LOG_FORMAT",
    "RequestIds",
    "RequestIdFilter",
    "RequestIdMiddleware",
    "bind",
    "current",
    "ids_for",
    "new_id",
    "install_log_filter",
    "valid_global_id",
]

#: The WSGI environ keys oslo.middleware's ``RequestId`` sets (honoured when it runs
#: in front of rpquery, e.g. in a paste pipeline).
ENV_REQUEST_ID = "openstack.request_id"
ENV_GLOBAL_REQUEST_ID = "openstack.global_request_id"
#: oslo.middleware's ``request_id.ID_FORMAT``.
_ID_FORMAT = re.compile(
    r"^req-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$"
)
LOG_FORMAT = (
    "%(asctime)s %(process)d %(levelname)s %(name)s "
    "[%(request_id)s %(global_request_id)s %(user_identity)s] %(message)s"
)


@dataclass(frozen=True)
class RequestIds:
    """The ids of one request and who made it (``-`` until known)."""

    request_id: str = "-"
    global_request_id: str = "-"
    user_identity: str = "- -"


_CURRENT: contextvars.ContextVar[RequestIds] = contextvars.ContextVar(
    "rpquery_request_ids", default=RequestIds()  # noqa: B039 - frozen: never mutated
)


def valid_global_id(value: str) -> bool:
    """Whether an inbound ``X-OpenStack-Request-ID`` is kept (oslo.middleware's rule)."""
    return bool(_ID_FORMAT.match(value))


def ids_for(environ: Mapping[str, Any]) -> RequestIds:
    """The local id (oslo.middleware's if it ran in front, else a new one) and the
    caller's global id when valid."""
    local = environ.get(ENV_REQUEST_ID) or new_id()
    inbound = environ.get(ENV_GLOBAL_REQUEST_ID) or environ.get(
        "HTTP_X_OPENSTACK_REQUEST_ID", ""
    )
    return RequestIds(local, inbound if valid_global_id(inbound) else "-")


def new_id() -> str:
    """A local id, ``req-`` and a random (version 4) uuid, as ``f"req-{uuid.uuid4()}"``
    writes it, without building a ``uuid.UUID`` (a third of the cost).

    >>> import uuid
    >>> valid_global_id(new_id()), uuid.UUID(new_id()[4:]).version
    (True, 4)
    """
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"req-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def bind(ids: RequestIds) -> contextvars.Token[RequestIds]:
    """Make ``ids`` the current request's (until :func:`unbind` with the token)."""
    return _CURRENT.set(ids)


def unbind(token: contextvars.Token[RequestIds]) -> None:
    _CURRENT.reset(token)


def current() -> RequestIds:
    return _CURRENT.get()


class RequestIdFilter(logging.Filter):
    """Adds the current request's ids to every record (``-`` outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = _CURRENT.get()
        record.request_id = ids.request_id
        record.global_request_id = ids.global_request_id
        record.user_identity = ids.user_identity
        return True


#: What :func:`install_log_filter` appends to a handler's own format.
IDS_SUFFIX = " [%(request_id)s %(global_request_id)s %(user_identity)s]"


def install_log_filter(handler: logging.Handler) -> None:
    """Put :class:`RequestIdFilter` on ``handler`` (once) and the ids in its lines:
    :data:`LOG_FORMAT` for a handler without a format, else its own format (gunicorn's
    shape, what ``rpquery serve`` prints) followed by :data:`IDS_SUFFIX`."""
    if any(isinstance(f, RequestIdFilter) for f in handler.filters):
        return
    handler.addFilter(RequestIdFilter())
    current = handler.formatter
    if current is None:
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
    else:
        own = current._fmt or "%(message)s"  # noqa: SLF001 - the format it was given
        handler.setFormatter(logging.Formatter(own + IDS_SUFFIX, current.datefmt))


class RequestIdMiddleware:
    """WSGI middleware (outermost): gives the request its ids before anything else
    runs (``openstack.request_id`` / ``openstack.global_request_id`` in the environ,
    as oslo.middleware's ``RequestId``), binds them while the request runs and puts
    ``x-openstack-request-id`` on any answer that lacks it (auth_token's 401s)."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        ids = ids_for(environ)
        environ[ENV_REQUEST_ID] = ids.request_id
        if ids.global_request_id != "-":
            environ[ENV_GLOBAL_REQUEST_ID] = ids.global_request_id

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if not any(name.lower() == "x-openstack-request-id" for name, _ in headers):
                headers.append(("x-openstack-request-id", ids.request_id))
            return start_response(status, headers, exc_info)

        token = bind(ids)
        try:
            return self.app(environ, start)
        finally:
            unbind(token)
