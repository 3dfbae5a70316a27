"""The route table: which handler answers a path and method at which microversions.

Like Placement's handler table, each :class:`Route` names a path (Falcon URI template,
``{uuid}`` matches any one segment, so a bad uuid reaches the handler and gets a
specific error), a method, the handler, the microversion range it serves, the
Placement policy rule checked before it runs, and the content checks:

- ``body=True``: the request must be ``Content-Type: application/json`` (else 415);
- ``accept=True``: an explicit ``Accept`` must allow ``application/json`` (else 406).

Several routes may share a path and method with different version ranges (Placement's
``PUT /resource_classes/{name}`` changes at 1.7); a request whose version no route
serves gets 404, and a method the path does not have gets 405 with ``allow``.

A handler is ``handler(req, resp, **uri_fields) -> None``; it reads
``req.context`` (:class:`rpquery.api.context.RequestContext`) and writes the response
with the helpers in :mod:`rpquery.api.util`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import falcon
from falcon.constants import COMBINED_METHODS

from rpquery.api.errors import ApiError, accept_ranges, q_of
from rpquery.api.microversion import MAX_VERSION, MIN_VERSION, Version
from rpquery.api.util import JSON, ctx

__all__ = ["Handler", "Route", "add_routes", "route"]

Handler = Callable[..., None]


@dataclass(frozen=True)
class Route:
    """One (path, method, version range) → handler entry."""

    path: str
    method: str
    handler: Handler
    policy: str | None = None
    min_version: Version = MIN_VERSION
    max_version: Version = MAX_VERSION
    body: bool = False
    accept: bool = False
    status_below: int = 404


def route(
    path: str,
    method: str,
    handler: Handler,
    policy: str | None = None,
    *,
    since: str = "1.0",
    until: str | None = None,
    body: bool = False,
    accept: bool = False,
    status_below: int = 404,
) -> Route:
    """Shorthand: ``route("/traits", "GET", list_traits, "placement:traits:list",
    since="1.6", accept=True)``. ``status_below`` is the status for a request older
    than ``since`` (404; Placement answers 405 for one route)."""
    return Route(
        path,
        method,
        handler,
        policy,
        Version.of(since),
        Version.of(until) if until else MAX_VERSION,
        body,
        accept,
        status_below,
    )


def _accepts_json(accept: str) -> bool:
    """Does ``accept`` allow JSON? (kept for headers of up to 256 characters: clients
    send a few values)"""
    if len(accept) <= 256:
        return _json_accepted(accept)
    return q_of(JSON, accept_ranges(accept)) > 0


@functools.lru_cache(maxsize=128)
def _json_accepted(accept: str) -> bool:
    return q_of(JSON, accept_ranges(accept)) > 0


def _content_type(req: falcon.Request) -> str:
    return (req.content_type or "").split(";")[0].strip().lower()


class _Path:
    """The Falcon resource of one path: an ``on_<method>`` per HTTP method."""

    def __init__(self, routes: list[Route]) -> None:
        self.routes: dict[str, list[Route]] = {}
        for r in routes:
            self.routes.setdefault(r.method, []).append(r)
        self.allow = ", ".join(self.routes)
        for method in COMBINED_METHODS:
            setattr(self, f"on_{method.lower()}", self._responder(method))

    def _responder(self, method: str) -> Callable[..., None]:
        candidates = self.routes.get(method)
        if candidates is None:

            def not_allowed(req: falcon.Request, resp: falcon.Response, **_: Any) -> None:
                raise ApiError(
                    405,
                    "The method specified is not allowed for this resource.",
                    headers={"allow": self.allow},
                )

            return not_allowed

        def respond(req: falcon.Request, resp: falcon.Response, **fields: Any) -> None:
            context = ctx(req)
            for r in candidates:
                if r.min_version <= context.version <= r.max_version:
                    break
            else:
                raise ApiError(candidates[0].status_below, "")
            if r.body and _content_type(req) != JSON:
                bad = _content_type(req) or "None"
                raise ApiError(415, f"The media type {bad} is not supported, use {JSON}")
            if r.accept and req.get_header("accept") and not _accepts_json(req.accept):
                raise ApiError(406, f"Only {JSON} is provided")
            if r.policy is not None:
                context.authorize(r.policy)
            r.handler(req, resp, **fields)

        return respond


def add_routes(app: falcon.App, routes: Iterable[Route]) -> None:
    """Mount ``routes`` on ``app``, one Falcon resource per path."""
    by_path: dict[str, list[Route]] = {}
    for r in routes:
        by_path.setdefault(r.path, []).append(r)
    for path, entries in by_path.items():
        app.add_route(path, _Path(entries))
