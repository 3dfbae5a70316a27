"""Placement's policy rules as an :data:`rpquery.api.auth.Authorizer`.

The rule names and check strings are those of OpenStack Placement 16.0's
``placement/policies/*.py`` (Apache-2.0, © OpenStack Foundation): every
``placement:*`` rule is ``rule:admin_or_service_api`` except ``placement:usages``
(``rule:admin_or_project_reader_or_service_api``, target ``project_id``) and
``placement:reshaper:reshape`` (``rule:service_api``). With
``enforce_new_defaults=False`` each base rule also accepts its deprecated check
(``role:admin``), as oslo.policy ORs them; with ``enforce_scope`` a system-scoped token is
refused for these project-scoped rules.

Check strings are a subset of oslo.policy's language, the one Placement uses: ``@``,
``!``, ``role:NAME``, ``rule:NAME``, ``FIELD:%(target_key)s`` and ``FIELD:literal``
(``project_id``, ``user_id``), joined by ``and`` / ``or`` (``and`` binds tighter), and
``not``. Parentheses are not supported.

>>> from rpquery.api.auth import Identity
>>> policy = PlacementPolicy(enforce_new_defaults=True)
>>> policy.allows(Identity("u", "p", frozenset({"service"})), "placement:reshaper:reshape", {})
True
>>> policy.allows(Identity("u", "p", frozenset({"admin"})), "placement:reshaper:reshape", {})
False
"""

from __future__ import annotations

from collections.abc import Mapping

from rpquery.api.auth import Identity, forbidden

__all__ = ["PLACEMENT_RULES", "PlacementPolicy", "named_policy"]

BASE_RULES: Mapping[str, str] = {
    "admin_api": "role:admin",
    "service_api": "role:service",
    "admin_or_service_api": "role:admin or role:service",
    "project_reader_api": "role:reader and project_id:%(project_id)s",
    "admin_or_project_reader_or_service_api": (
        "role:admin or rule:project_reader_api or role:service"
    ),
}
#: The deprecated checks oslo.policy ORs in while ``enforce_new_defaults`` is off.
DEPRECATED: Mapping[str, str] = {
    "service_api": "role:admin",
    "admin_or_service_api": "role:admin",
    "project_reader_api": "role:admin",
    "admin_or_project_reader_or_service_api": "role:admin",
}

_ADMIN_OR_SERVICE = "rule:admin_or_service_api"
_ACTIONS = {
    "resource_providers": ("list", "create", "show", "update", "delete"),
    "resource_classes": ("list", "create", "show", "update", "delete"),
    "resource_providers:inventories": ("list", "create", "show", "update", "delete"),
    "resource_providers:aggregates": ("list", "update"),
    "traits": ("list", "show", "update", "delete"),
    "resource_providers:traits": ("list", "update", "delete"),
    "allocations": ("manage", "list", "update", "delete"),
    "resource_providers:allocations": ("list",),
    "allocation_candidates": ("list",),
}
PLACEMENT_RULES: Mapping[str, str] = {
    **{
        f"placement:{area}:{a}": _ADMIN_OR_SERVICE for area, acts in _ACTIONS.items() for a in acts
    },
    "placement:resource_providers:usages": _ADMIN_OR_SERVICE,
    "placement:usages": "rule:admin_or_project_reader_or_service_api",
    "placement:reshaper:reshape": "rule:service_api",
}
#: Rules whose scope_types are ``["project"]`` (every API rule and most base rules).
PROJECT_SCOPED = frozenset(PLACEMENT_RULES) | (set(BASE_RULES) - {"project_reader_api"})


class PlacementPolicy:
    """An authorizer with Placement's rules; ``rules`` overrides any of them (an
    operator's policy file: ``{"placement:traits:list": "@"}``)."""

    def __init__(
        self,
        *,
        enforce_new_defaults: bool = False,
        enforce_scope: bool = True,
        rules: Mapping[str, str] | None = None,
    ) -> None:
        merged = {**BASE_RULES, **PLACEMENT_RULES}
        if not enforce_new_defaults:
            for name, old in DEPRECATED.items():
                merged[name] = f"{merged[name]} or {old}"
        merged.update(rules or {})
        self.rules = merged
        self.enforce_scope = enforce_scope

    def __call__(self, identity: Identity, rule: str, target: Mapping[str, object]) -> None:
        if not self.allows(identity, rule, target):
            raise forbidden(rule)

    def allows(self, identity: Identity, rule: str, target: Mapping[str, object]) -> bool:
        if self.enforce_scope and identity.system_scope and rule in PROJECT_SCOPED:
            return False
        return self._check(self.rules.get(rule, "rule:admin_api"), identity, target, 0)

    def _check(self, text: str, who: Identity, target: Mapping[str, object], depth: int) -> bool:
        if depth > 20:
            raise ValueError(f"policy rules refer to each other in a loop: {text!r}")
        return any(
            all(self._atom(term, who, target, depth) for term in clause.split(" and "))
            for clause in text.split(" or ")
        )

    def _atom(self, term: str, who: Identity, target: Mapping[str, object], depth: int) -> bool:
        term = term.strip()
        if term.startswith("not "):
            return not self._atom(term[4:], who, target, depth)
        if term in ("@", ""):
            return True
        if term == "!":
            return False
        kind, _, value = term.partition(":")
        if kind == "rule":
            return value in self.rules and self._check(self.rules[value], who, target, depth + 1)
        if kind == "role":
            return value.lower() in {r.lower() for r in who.roles}
        mine = {"project_id": who.project_id, "user_id": who.user_id}.get(kind)
        if value.startswith("%(") and value.endswith(")s"):
            wanted = target.get(value[2:-2])
            return mine is not None and wanted is not None and str(wanted) == mine
        return mine is not None and value == mine


#: The named policies ``make_app(policy=...)`` and ``rpquery serve --policy`` take.
POLICY_NAMES = ("legacy-rbac", "secure-rbac", "open")


def named_policy(name: str) -> PlacementPolicy:
    """``legacy-rbac``: Placement's rules with the deprecated ``role:admin`` checks still
    accepted (``enforce_new_defaults=False``, how Placement's functional tests run);
    ``secure-rbac``: the new defaults only (Placement 16.0's default configuration);
    ``open``: every rule but ``admin_api`` is ``@`` (any authenticated caller)."""
    if name == "legacy-rbac":
        return PlacementPolicy(enforce_new_defaults=False)
    if name == "secure-rbac":
        return PlacementPolicy(enforce_new_defaults=True)
    if name == "open":
        everything = {**BASE_RULES, **PLACEMENT_RULES}
        return PlacementPolicy(rules={n: "@" for n in everything if n != "admin_api"})
    raise ValueError(f"unknown policy {name!r}: one of {', '.join(POLICY_NAMES)}")
