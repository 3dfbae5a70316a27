"""What a client may send ``rpquery serve``, and the WSGI middleware that holds the body
to it before the app sees a byte.

The middleware reads the whole request body first (at most ``max_body_size`` bytes,
within ``body_timeout`` seconds), then hands the app an in-memory copy, so no handler
ever waits on a client and no body larger than the limit is ever held:

- a declared ``Content-Length`` over the limit: 413 at once, nothing read (oslo.middleware's
  ``sizelimit`` wording, ``[oslo_middleware] max_request_body_size``; Placement 16.0 does
  not put that filter in its own pipeline, so Placement itself has no limit);
- a chunked body that grows over the limit: 413;
- a body that stops coming: 408 once ``body_timeout`` has passed since the headers;
- a body shorter than declared (the client closed): 400.

Refusals are Placement's JSON error shape and stop reading the connection (so the
server does not drain the rest of a 10**20-byte body to keep the connection alive).

>>> Limits().max_body_size, Limits().body_timeout
(1048576, 20.0)
"""

from __future__ import annotations

import contextlib
import io
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from rpquery.api.errors import ApiError, render
from rpquery.api.microversion import HEADER, SERVICE, parse_header

__all__ = ["BodyLimit", "Limits", "with_limits"]

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


@dataclass(frozen=True)
class Limits:
    """The limits of ``rpquery serve`` (see docs/api.md, "Limits"). Each field's
    ``metadata`` holds the help of its ``rpquery serve`` option (``--max-body-size`` ...,
    made from the fields by :mod:`rpquery.cli.serve`) and, where there is one, its
    ``max``; every limit is above 0."""

    #: Largest request body, in bytes (1 MiB: 9x oslo.middleware's 112 KiB default).
    max_body_size: int = field(
        default=1_048_576, metadata={"help": "Largest request body in bytes; larger: 413."}
    )
    #: Seconds a request body may take to arrive, from the end of its headers.
    body_timeout: float = field(
        default=20.0, metadata={"help": "Seconds a request body may take to arrive; slower: 408."}
    )
    #: Seconds any one read of a client's request line or headers may wait.
    read_timeout: float = field(
        default=20.0,
        metadata={
            "help": "Seconds one read of a request line or header may wait (gevent workers)."
        },
    )
    #: Longest request line (method, path and query string), in bytes.
    limit_request_line: int = field(
        default=1_048_576,
        metadata={"help": "Longest request line in bytes (path and query string); longer: 414."},
    )
    #: Most header fields in a request (gunicorn takes at most 32768).
    limit_request_fields: int = field(
        default=100, metadata={"help": "Most header fields; more: 431.", "max": 32768}
    )
    #: Longest header field (name and value), in bytes.
    limit_request_field_size: int = field(
        default=8190, metadata={"help": "Longest header field in bytes; longer: 431."}
    )


class BodyLimit:
    """WSGI middleware: the body held to :class:`Limits` before ``app`` runs."""

    def __init__(self, app: WsgiApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Any:
        try:
            body = self._read_body(environ)
        except ApiError as exc:
            _stop_reading(environ)
            return _refuse(exc, environ, start_response)
        if body is not None:
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            environ.pop("HTTP_TRANSFER_ENCODING", None)
        return self.app(environ, start_response)

    def _read_body(self, environ: dict[str, Any]) -> bytes | None:
        """The whole body, or ``None`` when the request declares none (or declares a
        length that is not a number: the app's 400)."""
        declared = environ.get("CONTENT_LENGTH")
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        limit = self.limits.max_body_size
        size: int | None = None
        if declared:
            try:
                size = int(declared)
            except ValueError:
                return None
            if size > limit:
                raise _too_large(limit)
        elif not chunked:
            return None
        if size == 0:
            return b""
        return _read(environ, size, limit, self.limits.body_timeout)


def _read(environ: dict[str, Any], size: int | None, limit: int, timeout: float) -> bytes:
    """Read ``size`` bytes (or to the end of a chunked body, at most ``limit``) within
    ``timeout`` seconds; each socket read waits only for the time left."""
    stream = environ["wsgi.input"]
    sock = environ.get("gunicorn.socket")
    before = sock.gettimeout() if sock is not None else None
    deadline = time.monotonic() + timeout
    parts, got = [], 0
    try:
        while size is None or got < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _too_slow(timeout)
            if sock is not None:
                sock.settimeout(left)
            want = 65536 if size is None else min(65536, size - got)
            try:
                chunk = stream.read(want)
            except TimeoutError:  # socket.timeout is one
                raise _too_slow(timeout) from None
            if not chunk:
                break
            got += len(chunk)
            if got > limit:
                raise _too_large(limit)
            parts.append(chunk)
    finally:
        if sock is not None:
            _quietly(sock.settimeout, before)
    if size is not None and got < size:
        raise ApiError(400, f"Request body ended after {got} of {size} bytes")
    return b"".join(parts)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"Request is too large. Larger than max_request_body_size ({limit}).")


def _too_slow(timeout: float) -> ApiError:
    return ApiError(408, f"Request body not received within {timeout:g} seconds")


def _quietly(call: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(OSError):  # the client is gone: nothing to restore
        call(*args)


def _stop_reading(environ: dict[str, Any]) -> None:
    """No more reads on this connection: the server then closes it after the answer
    instead of draining an unread body to keep it alive."""
    sock = environ.get("gunicorn.socket")
    if sock is not None:
        _quietly(sock.shutdown, socket.SHUT_RD)


def _refuse(exc: ApiError, environ: dict[str, Any], start_response: StartResponse) -> Any:
    """``exc`` in Placement's error shape, with the version headers the app would add."""
    try:
        version = parse_header(environ.get("HTTP_OPENSTACK_API_VERSION"))
    except ApiError:
        version = None
    request_id = f"req-{uuid.uuid4()}"
    content_type, body = render(exc, environ, version=version, request_id=request_id)
    headers = [
        ("content-type", content_type),
        ("content-length", str(len(body))),
        ("x-openstack-request-id", request_id),
    ]
    if version is not None:
        headers += [(HEADER, f"{SERVICE} {version}"), ("vary", HEADER)]
    start_response(f"{exc.status} {_phrase(exc.status)}", headers)
    return [body]


def _phrase(status: int) -> str:
    return HTTPStatus(status).phrase


def with_limits(app: WsgiApp, limits: Limits | None = None) -> WsgiApp:
    """``app`` behind :class:`BodyLimit` (``limits`` or the defaults)."""
    return BodyLimit(app, limits or Limits())
