"""``make_app``: Placement's REST API as a WSGI application on an rpquery database.

>>> app = make_app("sqlite://")
>>> callable(app)
True

One Falcon app; per request, in order (as Placement's middleware stack does it):

1. request ids (``x-openstack-request-id``; an inbound valid one is kept as the global
   request id: :mod:`rpquery.api.request_id`), bound to every log line of the request;
2. authentication (``keystone``: the headers keystonemiddleware set; ``noauth2``; the
   root ``/`` and ``/healthcheck`` need none) → 401;
3. microversion negotiation (``OpenStack-API-Version``) → 400 / 406;
4. ``Content-Length`` without ``Content-Type`` → 400;
5. routing (404, 405 with ``allow``), the route's version range (404), its content
   checks (415, 406) and policy rule (403), then the handler.

Every response, errors included, carries ``openstack-api-version`` and ``vary`` once
the version is known, and the request id. Errors of any kind are rendered by
:func:`rpquery.api.errors.render`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import falcon

from rpquery.api import auth as auth_mod
from rpquery.api import request_id
from rpquery.api.context import RequestContext
from rpquery.api.errors import ApiError, from_rpquery, render
from rpquery.api.microversion import HEADER, SERVICE, parse_header
from rpquery.api.routing import Route, add_routes
from rpquery.api.util import ctx
from rpquery.db import Database
from rpquery.errors import RpqueryError

if TYPE_CHECKING:
    from rpquery.read.candidates import CandidateOptions

__all__ = ["make_app"]

LOG = logging.getLogger("rpquery.api")

#: Paths that need no authentication (Placement exempts only the root).
PUBLIC_PATHS = frozenset({"/", "", "/healthcheck"})


class _Request(falcon.Request):
    context_type = RequestContext

    def __init__(self, env: dict[str, Any], options: Any = None) -> None:
        path = env.get("PATH_INFO", "")
        try:
            path.encode("latin-1")
        except UnicodeEncodeError:  # a server that decoded the path as UTF-8 (httpx's WSGI
            env["PATH_INFO"] = path.encode().decode("latin-1")  # transport): PEP 3333 form
        super().__init__(env, options)


class _Negotiation:
    """Falcon middleware for steps 1–4 of the module docstring and the headers."""

    def __init__(
        self,
        db: Database,
        auth: str,
        authorizer: auth_mod.Authorizer,
        cors: _Cors | None,
        candidate_options: CandidateOptions | None = None,
    ) -> None:
        self.db = db
        self.candidate_options = candidate_options
        self.auth = auth
        self.authorizer = authorizer
        self.cors = cors

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        context = ctx(req)
        context.db = self.db
        context.authorizer = self.authorizer
        context.candidate_options = self.candidate_options
        env = req.env
        ids = request_id.ids_for(env)
        context.request_id = ids.request_id
        context.global_request_id = ids.global_request_id
        req.context.log_token = request_id.bind(ids)
        if self.cors is not None and self.cors.preflight(req, resp):
            return
        version_error = None
        try:
            context.version = parse_header(env.get("HTTP_OPENSTACK_API_VERSION"))
            context.version_set = True
        except ApiError as exc:
            version_error = exc
        context.identity = self._identity(env)
        if context.identity is not None:
            who = context.identity
            request_id.bind(
                request_id.RequestIds(
                    ids.request_id, ids.global_request_id, f"{who.user_id} {who.project_id}"
                )
            )
        if version_error is not None:
            raise version_error
        _check_content_length(env)

    def _identity(self, env: dict[str, Any]) -> auth_mod.Identity | None:
        if self.auth == "none":
            return auth_mod.Identity("admin", "admin", frozenset({"admin"}))
        if env.get("PATH_INFO", "") in PUBLIC_PATHS:
            return None
        if self.auth == "keystone":
            return auth_mod.from_keystone_headers(env)
        return auth_mod.noauth2(env)

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: Any, ok: bool
    ) -> None:
        context = ctx(req)
        token = getattr(req.context, "log_token", None)
        if token is not None:
            request_id.unbind(token)
        if context.version_set:
            resp.set_header(HEADER, f"{SERVICE} {context.version}")
            resp.append_header("vary", HEADER)
        if context.request_id:
            resp.set_header("x-openstack-request-id", context.request_id)
        if self.cors is not None:
            self.cors.allow(req, resp)


class _Cors:
    """Cross-origin requests for the configured origins (Placement's ``[cors]``): a
    preflight ``OPTIONS`` is answered 200 (with the allow headers only for an allowed
    origin); other responses to an allowed origin get ``access-control-allow-origin``."""

    def __init__(self, origins: Iterable[str], allow_headers: Iterable[str]) -> None:
        self.origins = frozenset(origins)
        self.allow_headers = ", ".join(allow_headers)

    def preflight(self, req: falcon.Request, resp: falcon.Response) -> bool:
        if req.method != "OPTIONS" or not req.get_header("access-control-request-method"):
            return False
        resp.status = 200
        resp.complete = True
        origin = req.get_header("origin")
        if origin in self.origins:
            method = req.get_header("access-control-request-method") or ""
            resp.set_header("access-control-allow-methods", method)
            if self.allow_headers:
                resp.set_header("access-control-allow-headers", self.allow_headers)
        return True

    def allow(self, req: falcon.Request, resp: falcon.Response) -> None:
        origin = req.get_header("origin")
        if origin in self.origins:
            resp.set_header("access-control-allow-origin", origin)
            resp.append_header("vary", "origin")


def _check_content_length(env: dict[str, Any]) -> None:
    length = env.get("CONTENT_LENGTH")
    if not length:
        return
    try:
        size = int(length)
    except ValueError:
        raise ApiError(400, "content-length header must be an integer") from None
    if size > 0 and not env.get("CONTENT_TYPE"):
        raise ApiError(400, "content-type header required when content-length > 0")


def _as_api_error(exc: BaseException) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, RpqueryError):
        error = from_rpquery(exc)
        if error.status >= 500:
            LOG.error("library error: %s", exc, exc_info=exc)
        return error
    if isinstance(exc, falcon.HTTPError):
        return ApiError(exc.status_code, exc.description or "")
    LOG.error("unexpected error: %s", exc, exc_info=exc)
    return ApiError(500, str(exc))


def _handle_error(req: falcon.Request, resp: falcon.Response, exc: Exception, params: Any) -> None:
    error = _as_api_error(exc)
    context = ctx(req)
    version = context.version if context.version_set else None
    content_type, body = render(error, req.env, version=version, request_id=context.request_id)
    resp.status = error.status
    resp.content_type = content_type
    resp.data = body
    for name, value in error.headers.items():
        resp.set_header(name, value)


def default_routes() -> list[Route]:
    """Every route of the API (:mod:`rpquery.api.routes`)."""
    from rpquery.api.routes import ROUTES

    return list(ROUTES)


def default_authorizer(policy: str) -> auth_mod.Authorizer:
    """Placement's rules on oslo.policy with the ``policy`` preset; a clear error when
    the optional OpenStack libraries are not installed."""
    try:
        from rpquery.api.policy import named_policy
    except ImportError as error:
        raise RuntimeError(
            f"Placement's policy rules need oslo.policy ({error}): "
            "pip install 'rpquery[openstack]', or pass authorizer= (e.g. "
            "rpquery.api.auth.admin_only) or auth='none'"
        ) from error
    return named_policy(policy)


def make_app(
    db: str | Database,
    *,
    auth: str = "noauth2",
    authorizer: auth_mod.Authorizer | None = None,
    policy: str = "legacy-rbac",
    routes: Iterable[Route] | None = None,
    cors_origins: Iterable[str] = (),
    cors_allow_headers: Iterable[str] = (),
    candidate_options: CandidateOptions | None = None,
) -> falcon.App:
    """The WSGI app serving Placement's API (microversions 1.0–1.39) on ``db``.

    ``db`` is a database URL or a :class:`rpquery.db.Database`. ``auth`` is
    ``"noauth2"`` (Placement's test strategy: ``X-Auth-Token: user[:project]``,
    ``admin`` is admin), ``"keystone"`` (the identity keystonemiddleware's auth_token
    sets: the app must be wrapped by :func:`rpquery.api.keystone.protect`, and answers
    401 to any request that did not pass it) or ``"none"`` (every caller is admin:
    behind a trusted proxy, benchmarks). ``authorizer`` decides policy rules (by
    default ``policy``: ``legacy-rbac``, ``secure-rbac`` or ``open``, Placement's rules
    on oslo.policy through :func:`rpquery.api.policy.named_policy`, which needs
    ``rpquery[openstack]``).
    ``cors_origins`` turns on CORS for those origins (Placement's ``[cors]
    allowed_origin``), ``cors_allow_headers`` is its ``allow_headers``.
    ``candidate_options``: Placement's ``[placement]`` options of ``GET
    /allocation_candidates`` (:class:`rpquery.read.candidates.CandidateOptions`;
    ``None``: their defaults).
    """
    if auth not in ("keystone", "noauth2", "none"):
        raise ValueError(f"unknown auth strategy {auth!r}: use 'keystone', 'noauth2' or 'none'")
    database = db if isinstance(db, Database) else Database(db)
    origins = list(cors_origins)
    cors = _Cors(origins, cors_allow_headers) if origins else None
    chosen = authorizer or (default_authorizer(policy) if auth != "none" else auth_mod.allow_all)
    app = falcon.App(
        request_type=_Request,
        middleware=[_Negotiation(database, auth, chosen, cors, candidate_options)],
    )
    app.req_options.strip_url_path_trailing_slash = False
    # Bodiless answers (201, 204) carry no content-type, as Placement's; every body sets one.
    app.resp_options.default_media_type = None  # type: ignore[assignment]
    app.add_error_handler(Exception, _handle_error)
    app.add_error_handler(falcon.HTTPError, _handle_error)
    add_routes(app, routes if routes is not None else default_routes())
    return app
