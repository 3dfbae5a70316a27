"""Who is calling (authentication) and may they (authorization).

Authentication is one of Placement's two strategies (``[api] auth_strategy``):

- ``keystone``: ``keystonemiddleware.auth_token`` in front of the app
  (:mod:`rpquery.api.keystone`) validates the token and sets the identity headers
  (``X-User-Id``, ``X-Project-Id``, ``X-Roles``, ``OpenStack-System-Scope``,
  ``X-Service-Roles``, ``X-Identity-Status`` ...) after removing any the caller sent;
  :func:`from_keystone_headers` reads them. The app trusts them only when the
  middleware marked the request (:data:`KEYSTONE_MARK`), never on its own.
- ``noauth2`` (tests, development): every request but the root ``/`` carries
  ``X-Auth-Token``; a token ``user[:project]`` names the user and project (project =
  user when omitted); the user ``admin`` gets the ``admin`` role, and an ``X-Roles``
  header replaces the roles. No token → 401. Anyone who can reach it is whoever they
  claim to be.

Authorization is a hook: :data:`Authorizer` is any callable
``(identity, rule, target) -> None`` that raises :class:`ApiError` 403 to refuse.
Routes name Placement's policy rule (``placement:resource_providers:list``, ...);
the app calls the authorizer with it before the handler runs, so a policy engine
with Placement's rules (oslo.policy or another) plugs in through ``make_app(...,
authorizer=...)`` without touching any handler. The default is
:class:`rpquery.api.policy.OsloPolicy` (Placement's rules on oslo.policy);
:func:`admin_only` and :func:`allow_all` are the two simplest authorizers.

>>> noauth2({"HTTP_X_AUTH_TOKEN": "alice:proj1"}).project_id
'proj1'
>>> noauth2({"HTTP_X_AUTH_TOKEN": "admin"}).is_admin
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rpquery.api.errors import ApiError

__all__ = [
    "KEYSTONE_MARK",
    "Authorizer",
    "Identity",
    "admin_only",
    "allow_all",
    "forbidden",
    "from_keystone_headers",
    "noauth2",
]

#: The WSGI environ key :mod:`rpquery.api.keystone` sets once auth_token has run (a
#: caller cannot set it: HTTP headers arrive as ``HTTP_*`` keys).
KEYSTONE_MARK = "rpquery.keystone_authenticated"


@dataclass(frozen=True)
class Identity:
    """The caller: user, project (``None`` when system scoped), roles, and the system
    scope (``"all"``) when the token is system scoped; the rest as Keystone tells it
    (the roles of a service token, a domain scope)."""

    user_id: str
    project_id: str | None
    roles: frozenset[str]
    system_scope: str | None = None
    service_roles: frozenset[str] = frozenset()
    domain_id: str | None = None
    user_domain_id: str | None = None
    project_domain_id: str | None = None
    is_admin_project: bool = True
    service_user_id: str | None = None
    service_user_domain_id: str | None = None
    service_project_id: str | None = None
    service_project_domain_id: str | None = None

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


Authorizer = Callable[[Identity, str, Mapping[str, object]], None]


def noauth2(environ: Mapping[str, str]) -> Identity:
    """The caller named by ``X-Auth-Token`` (401 without one)."""
    token = environ.get("HTTP_X_AUTH_TOKEN")
    if token is None:
        raise ApiError(401, "")
    user_id, _, project_id = token.partition(":")
    roles_header = environ.get("HTTP_X_ROLES")
    if roles_header is not None:
        roles = frozenset(r.strip() for r in roles_header.split(",") if r.strip())
    else:
        roles = frozenset({"admin"}) if user_id == "admin" else frozenset()
    system = environ.get("HTTP_OPENSTACK_SYSTEM_SCOPE") or None
    # keystonemiddleware's X-Project-Id wins over the token's project (as oslo.context reads it)
    project = None if system else environ.get("HTTP_X_PROJECT_ID") or project_id or user_id
    return Identity(user_id, project, roles, system)


def _csv(value: str | None) -> frozenset[str]:
    return frozenset(r.strip() for r in (value or "").split(",") if r.strip())


def from_keystone_headers(environ: Mapping[str, Any]) -> Identity:
    """The caller as auth_token described it; 401 unless it marked the request and
    confirmed the token (``X-Identity-Status: Confirmed``; with ``delay_auth_decision``
    an invalid token arrives as ``Invalid``)."""
    if not environ.get(KEYSTONE_MARK):
        raise ApiError(401, "The request you have made requires authentication.")
    user = environ.get("HTTP_X_USER_ID")
    if environ.get("HTTP_X_IDENTITY_STATUS") != "Confirmed" or not user:
        raise ApiError(401, "The request you have made requires authentication.")
    system = environ.get("HTTP_OPENSTACK_SYSTEM_SCOPE") or None
    return Identity(
        user_id=user,
        project_id=None if system else environ.get("HTTP_X_PROJECT_ID") or None,
        roles=_csv(environ.get("HTTP_X_ROLES")),
        system_scope=system,
        service_roles=_csv(environ.get("HTTP_X_SERVICE_ROLES")),
        domain_id=environ.get("HTTP_X_DOMAIN_ID") or None,
        user_domain_id=environ.get("HTTP_X_USER_DOMAIN_ID") or None,
        project_domain_id=environ.get("HTTP_X_PROJECT_DOMAIN_ID") or None,
        is_admin_project=environ.get("HTTP_X_IS_ADMIN_PROJECT", "True").lower() == "true",
        **{f"service_{n}": environ.get(f"HTTP_X_SERVICE_{n.upper()}") or None for n in _SERVICE},
    )


#: The service token's attributes auth_token sets as ``X-Service-<Name>``.
_SERVICE = ("user_id", "user_domain_id", "project_id", "project_domain_id")


def forbidden(rule: str) -> ApiError:
    return ApiError(403, f"Policy does not allow {rule} to be performed.")


def admin_only(identity: Identity, rule: str, target: Mapping[str, object]) -> None:
    """Placement's legacy default policy: every rule needs the ``admin`` role."""
    if not identity.is_admin:
        raise forbidden(rule)


def allow_all(identity: Identity, rule: str, target: Mapping[str, object]) -> None:
    """No authorization (``auth="none"`` deployments and benchmarks)."""
