"""Placement's policy rules (rpquery.api.policy) and their wiring through make_app:
legacy (deprecated role:admin still accepted), secure RBAC (new defaults, scope
enforced), open; the usages rule's project target; X-Project-Id and system scope."""

from __future__ import annotations

import pytest

from rpquery.api import make_app
from rpquery.api.auth import Identity, noauth2
from rpquery.api.errors import ApiError
from rpquery.api.policy import PlacementPolicy, named_policy
from tests.api_client import WsgiClient


def who(*roles: str, project: str | None = "p1", system: str | None = None) -> Identity:
    return Identity("u", project, frozenset(roles), system)


def test_legacy_and_secure_defaults_differ_on_the_service_rule() -> None:
    legacy, secure = named_policy("legacy-rbac"), named_policy("secure-rbac")
    reshape = "placement:reshaper:reshape"
    assert legacy.allows(who("admin"), reshape, {})
    assert not secure.allows(who("admin"), reshape, {})
    assert secure.allows(who("service"), reshape, {})
    for policy in (legacy, secure):
        assert policy.allows(who("service"), "placement:traits:list", {})
        assert not policy.allows(who("member", "reader"), "placement:traits:list", {})


def test_usages_are_open_to_a_reader_of_the_same_project() -> None:
    secure = named_policy("secure-rbac")
    assert secure.allows(who("reader"), "placement:usages", {"project_id": "p1"})
    assert not secure.allows(who("reader"), "placement:usages", {"project_id": "p2"})
    assert not secure.allows(who("member"), "placement:usages", {"project_id": "p1"})


def test_system_scope_is_refused_for_project_scoped_rules() -> None:
    system_admin = who("admin", project=None, system="all")
    assert not named_policy("secure-rbac").allows(system_admin, "placement:traits:list", {})
    lax = PlacementPolicy(enforce_scope=False)
    assert lax.allows(system_admin, "placement:traits:list", {})


def test_open_policy_and_overrides() -> None:
    nobody = who()
    assert named_policy("open").allows(nobody, "placement:resource_providers:create", {})
    custom = PlacementPolicy(rules={"placement:traits:list": "role:reader and not role:member"})
    assert custom.allows(who("reader"), "placement:traits:list", {})
    assert not custom.allows(who("reader", "member"), "placement:traits:list", {})
    with pytest.raises(ApiError) as info:
        custom(who("admin"), "placement:traits:list", {})
    assert info.value.status == 403 and "placement:traits:list" in info.value.message
    with pytest.raises(ValueError):
        named_policy("nope")


def test_noauth2_reads_roles_project_and_scope() -> None:
    env = {"HTTP_X_AUTH_TOKEN": "user", "HTTP_X_ROLES": "reader", "HTTP_X_PROJECT_ID": "p9"}
    assert noauth2(env) == Identity("user", "p9", frozenset({"reader"}))
    system = noauth2({"HTTP_X_AUTH_TOKEN": "user", "HTTP_OPENSTACK_SYSTEM_SCOPE": "all"})
    assert (system.project_id, system.system_scope) == (None, "all")


def test_make_app_policy_names(db) -> None:  # type: ignore[no-untyped-def]
    headers = {
        "x-auth-token": "user",
        "x-roles": "service",
        "accept": "application/json",
        "openstack-api-version": "placement latest",
    }
    for policy, status in (("legacy-rbac", 200), ("secure-rbac", 200), ("open", 200)):
        client = WsgiClient(make_app(db, policy=policy))
        assert client.simulate_get("/traits", headers=headers).status_code == status
    member = {**headers, "x-roles": "member"}
    assert WsgiClient(make_app(db)).simulate_get("/traits", headers=member).status_code == 403
    open_app = WsgiClient(make_app(db, policy="open"))
    assert open_app.simulate_get("/traits", headers=member).status_code == 200
