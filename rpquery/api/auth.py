"""Who is calling (authentication) and may they (authorization).

Authentication is Placement's ``noauth2`` strategy: every request but the root ``/``
carries ``X-Auth-Token``; a token ``user[:project]`` names the user and project
(project = user when omitted); the user ``admin`` gets the ``admin`` role, and an
``X-Roles`` header replaces the roles. No token → 401.

Authorization is a hook: :data:`Authorizer` is any callable
``(identity, rule, target) -> None`` that raises :class:`ApiError` 403 to refuse.
Routes name Placement's policy rule (``placement:resource_providers:list``, ...);
the app calls the authorizer with it before the handler runs, so a policy engine
with Placement's rules (oslo.policy or another) plugs in through ``make_app(...,
authorizer=...)`` without touching any handler. The default is
:class:`rpquery.api.policy.PlacementPolicy` (Placement's rules, legacy defaults);
:func:`admin_only` and :func:`allow_all` are the two simplest authorizers.

>>> noauth2({"HTTP_X_AUTH_TOKEN": "alice:proj1"}).project_id
'proj1'
>>> noauth2({"HTTP_X_AUTH_TOKEN": "admin"}).is_admin
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rpquery.api.errors import ApiError

__all__ = ["Authorizer", "Identity", "admin_only", "allow_all", "forbidden", "noauth2"]


@dataclass(frozen=True)
class Identity:
    """The caller: user, project (``None`` when system scoped), roles, and the system
    scope (``"all"``) when the token is system scoped."""

    user_id: str
    project_id: str | None
    roles: frozenset[str]
    system_scope: str | None = None

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


def forbidden(rule: str) -> ApiError:
    return ApiError(403, f"Policy does not allow {rule} to be performed.")


def admin_only(identity: Identity, rule: str, target: Mapping[str, object]) -> None:
    """Placement's legacy default policy: every rule needs the ``admin`` role."""
    if not identity.is_admin:
        raise forbidden(rule)


def allow_all(identity: Identity, rule: str, target: Mapping[str, object]) -> None:
    """No authorization (``auth="none"`` deployments and benchmarks)."""
