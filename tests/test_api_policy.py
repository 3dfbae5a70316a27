"""Placement's policy rules on oslo.policy (rpquery.api.policy) and their wiring through
make_app: legacy (deprecated role:admin ORed by oslo.policy), secure RBAC (new defaults),
scope types, open; the usages rule's project target; an operator's policy file in
oslo.policy's whole language; the oslopolicy-* tools' entry points."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rpquery.api import make_app
from rpquery.api.auth import Identity, noauth2
from rpquery.api.errors import ApiError
from rpquery.api.policy import OsloPolicy, list_rules, named_policy, policy_conf
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
    for name in ("legacy-rbac", "secure-rbac", "open"):
        assert not named_policy(name).allows(system_admin, "placement:traits:list", {})
    domain_admin = Identity("u", None, frozenset({"admin"}), domain_id="default")
    assert not named_policy("legacy-rbac").allows(domain_admin, "placement:traits:list", {})
    assert named_policy("legacy-rbac").allows(who("admin"), "placement:traits:list", {})


def test_open_policy_and_overrides() -> None:
    nobody = who()
    assert named_policy("open").allows(nobody, "placement:resource_providers:create", {})
    custom = OsloPolicy(rules={"placement:traits:list": "role:reader and not role:member"})
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


def test_an_operator_policy_file_in_oslo_policy_language(tmp_path: Path) -> None:
    """Parentheses, a custom role, ``not``, a generic check on the target: what the
    hand-written engine of before could not parse, oslo.policy reads."""
    path = tmp_path / "policy.yaml"
    path.write_text(
        '"placement:traits:list": "(role:auditor or role:reader) and not role:member"\n'
        '"placement:usages": "role:auditor and project_id:%(project_id)s"\n'
        '"placement:resource_providers:list": "rule:admin_or_service_api or '
        '(role:auditor and user_id:u)"\n'
    )
    policy = OsloPolicy(policy_conf(enforce_new_defaults=True, policy_file=str(path)))
    assert policy.allows(who("auditor"), "placement:traits:list", {})
    assert policy.allows(who("reader"), "placement:traits:list", {})
    assert not policy.allows(who("reader", "member"), "placement:traits:list", {})
    assert policy.allows(who("auditor"), "placement:usages", {"project_id": "p1"})
    assert not policy.allows(who("auditor"), "placement:usages", {"project_id": "p2"})
    assert not policy.allows(who("reader"), "placement:usages", {"project_id": "p1"})
    assert policy.allows(who("auditor"), "placement:resource_providers:list", {})
    assert not policy.allows(
        Identity("v", "p1", frozenset({"auditor"})), "placement:resource_providers:list", {}
    )
    # a rule the file leaves alone keeps Placement's default
    assert not policy.allows(who("auditor"), "placement:traits:update", {})
    assert policy.allows(who("service"), "placement:traits:update", {})


def test_the_rules_are_placements() -> None:
    """Every rule name a route checks is registered, with Placement's check strings."""
    from rpquery.api.routes import ROUTES

    rules = {r.name: r for r in list_rules()}
    assert len(rules) == 38
    assert {r.policy for r in ROUTES if r.policy} <= set(rules)
    assert rules["placement:usages"].check_str == "rule:admin_or_project_reader_or_service_api"
    assert rules["service_api"].deprecated_rule.check_str == "role:admin"
    assert rules["placement:reshaper:reshape"].scope_types == ["project"]


def test_oslopolicy_tools_list_rpquerys_rules(tmp_path: Path) -> None:
    """The entry points: oslopolicy-sample-generator and oslopolicy-policy-generator
    (oslo.policy's own tools) find rpquery's rules by namespace."""
    bin_dir = Path(sys.executable).parent
    sample = subprocess.run(
        [str(bin_dir / "oslopolicy-sample-generator"), "--namespace", "rpquery"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert '#"placement:reshaper:reshape": "rule:service_api"' in sample
    assert "# GET  /usages" in sample
    effective = subprocess.run(
        [str(bin_dir / "oslopolicy-policy-generator"), "--namespace", "rpquery"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout
    assert '"placement:traits:list": "rule:admin_or_service_api"' in effective


def test_without_the_openstack_extra(sqlite_db) -> None:  # type: ignore[no-untyped-def]
    """The library and make_app(auth="none") / an own authorizer work without
    oslo.policy & co; the policy presets say what to install."""
    probe = (
        "import sys\n"
        "for name in ('oslo_policy', 'oslo_config', 'keystonemiddleware', 'oslo_middleware',"
        " 'oslo_log'):\n"
        "    sys.modules[name] = None\n"
        "from rpquery.api import make_app\n"
        "from rpquery.api.auth import admin_only\n"
        "from tests.api_client import WsgiClient\n"
        f"url = {sqlite_db.url.render_as_string(hide_password=False)!r}\n"
        "h = {'x-auth-token': 'admin', 'accept': 'application/json'}\n"
        "none = WsgiClient(make_app(url, auth='none'))\n"
        "print(none.simulate_get('/resource_providers').status_code)\n"
        "app = make_app(url, authorizer=admin_only)\n"
        "print(WsgiClient(app).simulate_get('/resource_providers', headers=h).status_code)\n"
        "try:\n"
        "    make_app(url)\n"
        "except RuntimeError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parent.parent).stdout.splitlines()
    assert out[:2] == ["200", "200"]
    assert "pip install 'rpquery[openstack]'" in out[2]


def test_keystone_headers_are_read_only_behind_the_middleware() -> None:
    """The identity headers count only on a request auth_token marked, and only with a
    confirmed token (``delay_auth_decision`` lets an invalid one through as
    ``X-Identity-Status: Invalid``)."""
    from rpquery.api.auth import KEYSTONE_MARK, from_keystone_headers

    env = {"HTTP_X_USER_ID": "u1", "HTTP_X_PROJECT_ID": "p1", "HTTP_X_ROLES": "reader,member",
           "HTTP_X_IDENTITY_STATUS": "Confirmed", "HTTP_X_SERVICE_ROLES": "service"}
    for unsure in (env, {**env, KEYSTONE_MARK: True, "HTTP_X_IDENTITY_STATUS": "Invalid"}):
        with pytest.raises(ApiError) as info:
            from_keystone_headers(unsure)
        assert info.value.status == 401
    caller = from_keystone_headers({**env, KEYSTONE_MARK: True})
    assert (caller.user_id, caller.project_id) == ("u1", "p1")
    assert caller.roles == {"reader", "member"} and caller.service_roles == {"service"}
    system = from_keystone_headers({**env, KEYSTONE_MARK: True,
                                    "HTTP_OPENSTACK_SYSTEM_SCOPE": "all"})
    assert (system.project_id, system.system_scope) == (None, "all")


def test_a_service_token_rule(tmp_path: Path) -> None:
    """``service_roles:`` (the roles of an ``X-Service-Token``) reach oslo.policy."""
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:traits:list": "role:reader and service_roles:service"\n')
    policy = OsloPolicy(policy_conf(enforce_new_defaults=True, policy_file=str(path)))
    with_service = Identity("u", "p1", frozenset({"reader"}), service_roles=frozenset({"service"}))
    assert policy.allows(with_service, "placement:traits:list", {})
    assert not policy.allows(who("reader"), "placement:traits:list", {})


def test_credentials_are_oslo_contexts_policy_values() -> None:
    """What oslo.policy sees of a keystone caller is what oslo.context's
    ``RequestContext.from_environ(...).to_policy_values()`` gives (Placement's path)."""
    from oslo_context.context import RequestContext

    from rpquery.api.auth import KEYSTONE_MARK, from_keystone_headers
    from rpquery.api.policy import credentials

    base = {"HTTP_X_USER_ID": "u1", "HTTP_X_PROJECT_ID": "p1", "HTTP_X_ROLES": "reader,member",
            "HTTP_X_IDENTITY_STATUS": "Confirmed", "HTTP_X_USER_DOMAIN_ID": "default",
            "HTTP_X_PROJECT_DOMAIN_ID": "default", "HTTP_X_IS_ADMIN_PROJECT": "False",
            "HTTP_X_SERVICE_ROLES": "service", "HTTP_X_SERVICE_USER_ID": "nova",
            "HTTP_X_SERVICE_PROJECT_ID": "svc", "HTTP_X_SERVICE_USER_DOMAIN_ID": "default",
            "HTTP_X_SERVICE_PROJECT_DOMAIN_ID": "default"}
    system = {**base, "HTTP_OPENSTACK_SYSTEM_SCOPE": "all"}
    del system["HTTP_X_PROJECT_ID"]
    domain = {**base, "HTTP_X_DOMAIN_ID": "d1"}
    del domain["HTTP_X_PROJECT_ID"]
    for env in (base, system, domain):
        theirs = dict(RequestContext.from_environ(env).to_policy_values())
        mine = credentials(from_keystone_headers({**env, KEYSTONE_MARK: True}))
        theirs["roles"], theirs["service_roles"] = (
            sorted(theirs["roles"]), sorted(theirs["service_roles"])
        )
        assert mine == theirs


#: Callers for the fast path's comparison with oslo.policy: each default role, a
#: system- and a domain-scoped admin, a custom role, no role, a service token's roles.
CALLERS = (
    who("admin"), who("member"), who("reader"), who("service"), who("admin", "service"),
    who("member", "reader"), who("auditor"), who(), who("reader", project="p2"),
    who("admin", project=None, system="all"),
    Identity("u", None, frozenset({"admin"}), domain_id="d1"),
    Identity("v", "p1", frozenset({"reader"}), service_roles=frozenset({"service"})),
)
TARGETS = ({}, {"project_id": "p1"}, {"project_id": "p2"})
OPERATOR_FILE = (
    '"placement:traits:list": "(role:auditor or role:reader) and not role:member"\n'
    '"placement:usages": "(role:auditor and project_id:%(project_id)s) or rule:admin_api"\n'
    '"placement:resource_providers:list": "rule:admin_or_service_api or '
    '(role:auditor and (user_id:u or not project_id:p1))"\n'
    '"placement:traits:show": "rule:no_such_rule or role:service"\n'
    '"placement:traits:update": "not (role:reader or role:member) and @"\n'
    '"placement:allocations:list": "!"\n'
    '"placement:resource_classes:list": "role:reader and service_roles:service"\n'
    '"placement:usages_alias": "rule:placement:usages"\n'
)


@pytest.mark.parametrize("new_defaults", [False, True], ids=["legacy", "new-defaults"])
@pytest.mark.parametrize("operator_file", [False, True], ids=["defaults", "policy-file"])
def test_the_fast_path_answers_as_oslo_policys_authorize(
    tmp_path: Path, new_defaults: bool, operator_file: bool
) -> None:
    """OsloPolicy.allows (rules loaded once, evaluated without ``enforce``'s per-call
    work) equals a plain ``Enforcer.authorize`` for every registered rule, caller and
    target, with the defaults (legacy and new) and an operator file using parentheses,
    ``not``, ``@``/``!``, a missing rule, generic and service-role checks."""
    from rpquery.api.policy import credentials, make_enforcer

    path = tmp_path / "policy.yaml"
    path.write_text(OPERATOR_FILE if operator_file else "{}\n")
    conf = policy_conf(enforce_new_defaults=new_defaults, policy_file=str(path))
    mine, oslo_enforcer = OsloPolicy(conf), make_enforcer(conf)
    answers = set()
    for rule in oslo_enforcer.registered_rules:
        for caller in CALLERS:
            for target in TARGETS:
                theirs = bool(oslo_enforcer.authorize(rule, dict(target), credentials(caller)))
                assert mine.allows(caller, rule, target) is theirs, (rule, caller, target)
                answers.add(theirs)
    assert answers == {True, False}


def test_a_changed_policy_file_is_reloaded_after_the_interval(tmp_path: Path) -> None:
    """oslo.policy's reload of a changed policy file is kept, looked for at most every
    ``reload_interval`` seconds: with a long interval the change is not seen yet."""
    import os

    path = tmp_path / "policy.yaml"
    path.write_text('"placement:traits:list": "role:auditor"\n')
    conf = policy_conf(enforce_new_defaults=True, policy_file=str(path))
    eager, lazy = OsloPolicy(conf, reload_interval=0), OsloPolicy(conf, reload_interval=3600)
    for policy in (eager, lazy):
        assert policy.allows(who("auditor"), "placement:traits:list", {})
    path.write_text('"placement:traits:list": "role:reader"\n')
    later = path.stat().st_mtime + 10
    os.utime(path, (later, later))
    assert not eager.allows(who("auditor"), "placement:traits:list", {})
    assert eager.allows(who("reader"), "placement:traits:list", {})
    assert lazy.allows(who("auditor"), "placement:traits:list", {})
    with pytest.raises(Exception, match="placement:nope"):
        eager.allows(who("admin"), "placement:nope", {})
