"""Placement's policy rules on oslo.policy: an :data:`rpquery.api.auth.Authorizer`.

The rules are OpenStack Placement 16.0's (``placement/policies/*.py``: names, check
strings, descriptions, operations and scope types), registered as oslo.policy
``RuleDefault`` / ``DocumentedRuleDefault`` objects, so that oslo.policy does all of
the work an operator expects from an OpenStack service:

- ``enforce_new_defaults`` off: each base rule with a deprecated rule (``role:admin``)
  accepts it too, ORed by oslo.policy;
- scope types: a system- or domain-scoped token is refused for the project-scoped
  rules (every ``placement:*`` rule). oslo.policy 6.0 always enforces them (it
  removed ``[oslo_policy] enforce_scope``; Placement 16.0 runs on it too);
- the operator's ``policy.yaml`` (``[oslo_policy] policy_file``, ``policy_dirs``)
  overrides any rule in oslo.policy's whole language (parentheses, ``not``,
  ``is_admin:``, ``system_scope:``, generic and HTTP checks ...);
- ``oslopolicy-sample-generator --namespace rpquery`` and
  ``oslopolicy-policy-generator --namespace rpquery`` list these rules (entry points
  ``oslo.policy.policies`` → :func:`list_rules`, ``oslo.policy.enforcer`` →
  :func:`get_enforcer`).

oslo.policy is an optional dependency (``pip install 'rpquery[openstack]'``); this
module needs it.

>>> from rpquery.api.auth import Identity
>>> policy = OsloPolicy(enforce_new_defaults=True)
>>> policy.allows(Identity("u", "p", frozenset({"service"})), "placement:reshaper:reshape", {})
True
>>> policy.allows(Identity("u", "p", frozenset({"admin"})), "placement:reshaper:reshape", {})
False
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oslo_config import cfg
from oslo_policy import opts as policy_opts
from oslo_policy import policy as oslo

from rpquery.api.auth import Identity, forbidden
from rpquery.api.policy_eval import Reloader, authorize

__all__ = [
    "POLICY_NAMES", "RELOAD_INTERVAL", "OsloPolicy", "get_enforcer", "list_rules", "named_policy"
]

_DEPRECATED_REASON = (
    "Placement's policies gained new default roles with scope types; the old ones are "
    "deprecated (Placement 5.0.0, Wallaby)."
)
_DEPRECATED_ADMIN = oslo.DeprecatedRule(
    name="rule:admin_api",
    check_str="role:admin",
    deprecated_reason=_DEPRECATED_REASON,
    deprecated_since="W",
)
#: Seconds between two looks for a changed policy file (oslo.policy looks on every call).
RELOAD_INTERVAL = 1.0
_PROJECT = ["project"]
_ADMIN_OR_SERVICE = "rule:admin_or_service_api"

#: (name, check string, description, deprecated rule?, scope types) of the base rules.
_BASE = (
    ("admin_api", "role:admin", "Default rule for most placement APIs.", False, _PROJECT),
    ("service_api", "role:service", "Default rule for service-to-service placement APIs.",
     True, _PROJECT),
    ("admin_or_service_api", "role:admin or role:service",
     "Default rule for most placement APIs.", True, _PROJECT),
    ("project_reader_api", "role:reader and project_id:%(project_id)s",
     "Default rule for Project level reader APIs.", True, None),
    ("admin_or_project_reader_or_service_api",
     "role:admin or rule:project_reader_api or role:service",
     "Default rule for project level reader APIs.", True, _PROJECT),
)

#: (rule, description, operations as "METHOD path") of every API rule; the check string
#: is ``rule:admin_or_service_api`` but where :data:`_CHECKS` says otherwise.
_API = (
    ("resource_providers:list", "List resource providers.", ["GET /resource_providers"]),
    ("resource_providers:create", "Create resource provider.", ["POST /resource_providers"]),
    ("resource_providers:show", "Show resource provider.", ["GET /resource_providers/{uuid}"]),
    ("resource_providers:update", "Update resource provider.",
     ["PUT /resource_providers/{uuid}"]),
    ("resource_providers:delete", "Delete resource provider.",
     ["DELETE /resource_providers/{uuid}"]),
    ("resource_classes:list", "List resource classes.", ["GET /resource_classes"]),
    ("resource_classes:create", "Create resource class.", ["POST /resource_classes"]),
    ("resource_classes:show", "Show resource class.", ["GET /resource_classes/{name}"]),
    ("resource_classes:update", "Update resource class.", ["PUT /resource_classes/{name}"]),
    ("resource_classes:delete", "Delete resource class.", ["DELETE /resource_classes/{name}"]),
    ("resource_providers:inventories:list", "List resource provider inventories.",
     ["GET /resource_providers/{uuid}/inventories"]),
    ("resource_providers:inventories:create", "Create one resource provider inventory.",
     ["POST /resource_providers/{uuid}/inventories"]),
    ("resource_providers:inventories:show", "Show resource provider inventory.",
     ["GET /resource_providers/{uuid}/inventories/{resource_class}"]),
    ("resource_providers:inventories:update", "Update resource provider inventory.",
     ["PUT /resource_providers/{uuid}/inventories",
      "PUT /resource_providers/{uuid}/inventories/{resource_class}"]),
    ("resource_providers:inventories:delete", "Delete resource provider inventory.",
     ["DELETE /resource_providers/{uuid}/inventories",
      "DELETE /resource_providers/{uuid}/inventories/{resource_class}"]),
    ("resource_providers:aggregates:list", "List resource provider aggregates.",
     ["GET /resource_providers/{uuid}/aggregates"]),
    ("resource_providers:aggregates:update", "Update resource provider aggregates.",
     ["PUT /resource_providers/{uuid}/aggregates"]),
    ("resource_providers:usages", "List resource provider usages.",
     ["GET /resource_providers/{uuid}/usages"]),
    ("usages", "List total resource usages for a given project.", ["GET /usages"]),
    ("traits:list", "List traits.", ["GET /traits"]),
    ("traits:show", "Show trait.", ["GET /traits/{name}"]),
    ("traits:update", "Update trait.", ["PUT /traits/{name}"]),
    ("traits:delete", "Delete trait.", ["DELETE /traits/{name}"]),
    ("resource_providers:traits:list", "List resource provider traits.",
     ["GET /resource_providers/{uuid}/traits"]),
    ("resource_providers:traits:update", "Update resource provider traits.",
     ["PUT /resource_providers/{uuid}/traits"]),
    ("resource_providers:traits:delete", "Delete resource provider traits.",
     ["DELETE /resource_providers/{uuid}/traits"]),
    ("allocations:manage", "Manage allocations.", ["POST /allocations"]),
    ("allocations:list", "List allocations.", ["GET /allocations/{consumer_uuid}"]),
    ("allocations:update", "Update allocations.", ["PUT /allocations/{consumer_uuid}"]),
    ("allocations:delete", "Delete allocations.", ["DELETE /allocations/{consumer_uuid}"]),
    ("resource_providers:allocations:list", "List resource provider allocations.",
     ["GET /resource_providers/{uuid}/allocations"]),
    ("allocation_candidates:list", "List allocation candidates.",
     ["GET /allocation_candidates"]),
    ("reshaper:reshape", "Reshape Inventory and Allocations.", ["POST /reshaper"]),
)
_CHECKS = {
    "usages": "rule:admin_or_project_reader_or_service_api",
    "reshaper:reshape": "rule:service_api",
}


def list_rules() -> list[oslo.RuleDefault]:
    """Placement's rules as oslo.policy defaults (the ``oslo.policy.policies`` entry
    point: ``oslopolicy-sample-generator --namespace rpquery``)."""
    rules: list[oslo.RuleDefault] = [
        oslo.RuleDefault(
            name,
            check,
            description=text,
            scope_types=scopes,
            deprecated_rule=_DEPRECATED_ADMIN if deprecated else None,
        )
        for name, check, text, deprecated, scopes in _BASE
    ]
    for short, text, operations in _API:
        rules.append(
            oslo.DocumentedRuleDefault(
                name=f"placement:{short}",
                check_str=_CHECKS.get(short, _ADMIN_OR_SERVICE),
                description=text,
                operations=[
                    {"method": op.split(" ", 1)[0], "path": op.split(" ", 1)[1]}
                    for op in operations
                ],
                scope_types=_PROJECT,
            )
        )
    return rules


def make_enforcer(conf: cfg.ConfigOpts, rules: Mapping[str, str] | None = None) -> oslo.Enforcer:
    """An ``Enforcer`` on ``conf`` (its ``[oslo_policy]`` options) with Placement's
    defaults registered; ``rules`` (name → check string) override them, as a policy
    file's entries would, before the operator's file (which wins over both)."""
    enforcer = oslo.Enforcer(conf)
    enforcer.suppress_default_change_warnings = True
    enforcer.register_defaults([_overridden(rule, rules or {}) for rule in list_rules()])
    enforcer.load_rules()
    return enforcer


def _overridden(rule: oslo.RuleDefault, rules: Mapping[str, str]) -> oslo.RuleDefault:
    """``rule`` with the check string ``rules`` gives it (and no deprecated rule to OR)."""
    if rule.name not in rules:
        return rule
    return oslo.RuleDefault(
        rule.name, rules[rule.name], description=rule.description, scope_types=rule.scope_types
    )


def get_enforcer() -> oslo.Enforcer:
    """The ``oslo.policy.enforcer`` entry point (``oslopolicy-policy-generator
    --namespace rpquery``): an enforcer on the global configuration the tool parsed."""
    cfg.CONF([], project="rpquery")
    policy_opts.set_defaults(cfg.CONF, "policy.yaml")
    return make_enforcer(cfg.CONF)


def policy_conf(*, enforce_new_defaults: bool, policy_file: str | None = None) -> cfg.ConfigOpts:
    """A configuration with only ``[oslo_policy]``, for apps built without a
    configuration file (``make_app(policy=...)``, tests)."""
    conf = cfg.ConfigOpts()
    conf([], project="rpquery", default_config_files=[], default_config_dirs=[])
    policy_opts.set_defaults(conf, policy_file or "policy.yaml")
    conf.set_override("enforce_new_defaults", enforce_new_defaults, "oslo_policy")
    return conf


class OsloPolicy:
    """An authorizer asking an oslo.policy ``Enforcer``. Built from ``conf`` (a parsed
    configuration: its ``[oslo_policy]`` group) or, without one, from the two switches
    and ``rules`` overrides.

    The answer is ``Enforcer.authorize``'s, on the rules it loaded, evaluated by
    :func:`rpquery.api.policy_eval.authorize` (without ``authorize``'s per-call
    ``load_rules`` and signature inspection); a changed policy file is reloaded by
    oslo.policy as before, but looked for at most every ``reload_interval`` seconds."""

    def __init__(
        self,
        conf: cfg.ConfigOpts | None = None,
        *,
        enforce_new_defaults: bool = False,
        rules: Mapping[str, str] | None = None,
        reload_interval: float = RELOAD_INTERVAL,
    ) -> None:
        if conf is None:
            conf = policy_conf(enforce_new_defaults=enforce_new_defaults)
        self.enforcer = make_enforcer(conf, rules)
        self.reloader = Reloader(self.enforcer, reload_interval)

    def __call__(self, identity: Identity, rule: str, target: Mapping[str, object]) -> None:
        if not self.allows(identity, rule, target):
            raise forbidden(rule)

    def allows(self, identity: Identity, rule: str, target: Mapping[str, object]) -> bool:
        self.reloader.refresh()
        return authorize(self.enforcer, rule, target, credentials(identity))


def credentials(identity: Identity) -> dict[str, Any]:
    """What oslo.policy checks against, as ``oslo_context``'s ``to_policy_values()``
    names it."""
    return {
        "user_id": identity.user_id,
        "project_id": identity.project_id,
        "roles": sorted(identity.roles),
        "system_scope": identity.system_scope,
        "domain_id": identity.domain_id,
        "service_roles": sorted(identity.service_roles),
        "is_admin_project": identity.is_admin_project,
        "user_domain_id": identity.user_domain_id,
        "project_domain_id": identity.project_domain_id,
        "service_user_id": identity.service_user_id,
        "service_user_domain_id": identity.service_user_domain_id,
        "service_project_id": identity.service_project_id,
        "service_project_domain_id": identity.service_project_domain_id,
    }


#: The named policies ``make_app(policy=...)`` and ``rpquery serve --policy`` take.
POLICY_NAMES = ("legacy-rbac", "secure-rbac", "open")


def named_policy(name: str, conf: cfg.ConfigOpts | None = None) -> OsloPolicy:
    """``legacy-rbac``: Placement's rules with the deprecated ``role:admin`` checks still
    accepted (``enforce_new_defaults=False``, how Placement's functional tests run);
    ``secure-rbac``: the new defaults only (Placement 16.0's default configuration);
    ``open``: every rule but ``admin_api`` is ``@`` (any authenticated caller). With
    ``conf`` (a configuration file's), the preset sets ``enforce_new_defaults`` and the
    file's other ``[oslo_policy]`` options and policy file still apply."""
    if name not in POLICY_NAMES:
        raise ValueError(f"unknown policy {name!r}: one of {', '.join(POLICY_NAMES)}")
    if conf is not None and name != "open":
        conf.set_override("enforce_new_defaults", name == "secure-rbac", "oslo_policy")
    if name == "open":
        names = [r.name for r in list_rules() if r.name != "admin_api"]
        return OsloPolicy(conf, rules={n: "@" for n in names})
    return OsloPolicy(conf, enforce_new_defaults=name == "secure-rbac")
