"""gunicorn workers for ``rpquery serve``: gunicorn's own, with their error answers
(request line too long: 414, headers too large: 431, bad framing: 400) in Placement's
JSON error shape instead of gunicorn's HTML, quoting at most 200 characters of what
the client sent.

``GeventWorker`` (``gevent``, the default of ``rpquery serve``; built on first access,
so that only the processes that run it import gevent) is gunicorn's gevent worker: one
greenlet per connection, so a client that sends slowly holds a greenlet, never a
worker; every read of a request line or header waits at most ``read_timeout`` seconds
(:class:`rpquery.api.limits.Limits`), the body is bounded by
:class:`rpquery.api.limits.BodyLimit`. ``gthread`` and ``sync`` are the threaded and
the one-request-at-a-time workers: there a slow client holds a thread or the whole
worker until its body timeout.
"""

from __future__ import annotations

import uuid
from http import HTTPStatus
from typing import Any

from gunicorn import util
from gunicorn.http import errors as http_errors
from gunicorn.workers.gthread import ThreadWorker
from gunicorn.workers.sync import SyncWorker

from rpquery.api.errors import ApiError, render
from rpquery.api.limits import Limits

__all__ = ["ThreadedWorker", "SyncWorker_", "error_answer", "status_of"]

#: How much of the exception text (which may quote the request) an answer carries.
QUOTED = 200

_STATUSES: tuple[tuple[type[BaseException], int], ...] = (
    (http_errors.InvalidResponseHeader, 500),  # the application's fault
    (http_errors.InvalidResponseHeaderName, 500),
    (http_errors.LimitRequestLine, 414),
    (http_errors.LimitRequestHeaders, 431),
    (http_errors.ExpectationFailed, 417),
    (http_errors.UnsupportedTransferCoding, 501),
    (http_errors.ForbiddenProxyRequest, 403),
    (http_errors.ConfigurationProblem, 500),
    (http_errors.ParseException, 400),
)


def status_of(exc: BaseException) -> int:
    """The HTTP status gunicorn answers ``exc`` with (500 for anything not a parse error).

    >>> status_of(http_errors.LimitRequestLine(9000, 8190)), status_of(ValueError())
    (414, 500)
    """
    for kind, status in _STATUSES:
        if isinstance(exc, kind):
            return status
    return 500


def error_answer(exc: BaseException) -> bytes:
    """The whole HTTP/1.1 answer to ``exc``: Placement's JSON error, connection closed."""
    status = status_of(exc)
    text = "" if status == 500 else str(exc)
    message = text if len(text) <= QUOTED else f"{text[:QUOTED]}..."
    request_id = f"req-{uuid.uuid4()}"
    _, body = render(ApiError(status, message), {}, version=None, request_id=request_id)
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "connection: close\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nx-openstack-request-id: {request_id}\r\n\r\n"
    )
    return head.encode("latin-1") + body


class _JsonErrors:
    """Mixin for a gunicorn worker: :func:`error_answer` instead of gunicorn's HTML."""

    log: Any

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        status = status_of(exc)
        if status == 500:
            self.log.exception("Error handling request")
        else:
            peer = addr[0] if addr else ""
            self.log.warning("Invalid request from ip=%s: %s", peer, str(exc)[:QUOTED])
        try:
            util.write_nonblock(client, error_answer(exc))
        except Exception:  # the client is gone
            self.log.debug("Failed to send error message.")


def _limits(worker: Any) -> Limits:
    return getattr(worker.app, "limits", None) or Limits()


def _gevent_worker() -> type:
    """gunicorn's gevent worker with :class:`_JsonErrors` and the read timeout, built on
    first use: importing gevent is left to the processes that run it."""
    import gevent
    from gunicorn.workers.base_async import AsyncWorker
    from gunicorn.workers.ggevent import GeventWorker as Base

    class GeventWorker(_JsonErrors, Base):
        """gunicorn's gevent worker; reads of a request wait at most ``read_timeout``."""

        def handle(self, listener: Any, client: Any, addr: Any) -> None:
            client.settimeout(_limits(self).read_timeout)
            AsyncWorker.handle(self, listener, client, addr)  # not the base's setblocking(1)

        def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> Any:
            try:
                return Base.handle_request(self, listener_name, req, sock, addr)
            finally:
                # To the back of the line before the connection's next request: a client
                # that sends its next request at once would otherwise find it read
                # without a wait, and keep the worker while the others wait (32 clients
                # on 2 workers: some served 1 time, others 48 in 12 s).
                gevent.idle()

    GeventWorker.__module__ = __name__
    GeventWorker.__qualname__ = "GeventWorker"
    return GeventWorker


def __getattr__(name: str) -> Any:
    """``GeventWorker``, built on first access (how gunicorn loads a worker class)."""
    if name == "GeventWorker":
        cls = _gevent_worker()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ThreadedWorker(_JsonErrors, ThreadWorker):
    """gunicorn's threaded worker (``gthread``) with JSON error answers."""


class SyncWorker_(_JsonErrors, SyncWorker):  # noqa: N801 - gunicorn's name is taken
    """gunicorn's sync worker with JSON error answers."""


#: ``rpquery serve --worker-class`` → the class gunicorn loads.
WORKER_CLASSES = {
    "gevent": "rpquery.api.workers.GeventWorker",
    "gthread": "rpquery.api.workers.ThreadedWorker",
    "sync": "rpquery.api.workers.SyncWorker_",
}
