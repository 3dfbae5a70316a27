"""Server groups' values and their validation (docs/server-groups.md): the policies and
their rules, the frozen group / member / host values, and :func:`validate_group`, which
checks a create request without touching the database.

>>> validate_group("web", ["soft-anti-affinity"], "p", "u").policy
'soft-anti-affinity'
>>> validate_group("db", ["anti-affinity"], "p", "u").max_server_per_host
1
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rpquery import _validation as validation
from rpquery.errors import invalid
from rpquery.server_groups import weighers as w

__all__ = [
    "AFFINITY",
    "ANTI_AFFINITY",
    "BAD_UUID",
    "GENERATION_CONFLICT",
    "MAX_SERVER_PER_HOST",
    "POLICIES",
    "POLICY_RULES",
    "POLICY_WEIGHER",
    "SOFT_AFFINITY",
    "SOFT_ANTI_AFFINITY",
    "GroupSpec",
    "Host",
    "Member",
    "ServerGroup",
    "ServerGroupDetail",
    "validate_group",
]

AFFINITY = "affinity"
ANTI_AFFINITY = "anti-affinity"
SOFT_AFFINITY = "soft-affinity"
SOFT_ANTI_AFFINITY = "soft-anti-affinity"
POLICIES: tuple[str, ...] = (AFFINITY, ANTI_AFFINITY, SOFT_AFFINITY, SOFT_ANTI_AFFINITY)

#: The weigher each soft policy needs.
POLICY_WEIGHER = {SOFT_AFFINITY: w.SOFT_AFFINITY, SOFT_ANTI_AFFINITY: w.SOFT_ANTI_AFFINITY}

MAX_SERVER_PER_HOST = "max_server_per_host"
#: The rules each policy takes.
POLICY_RULES: dict[str, frozenset[str]] = {
    AFFINITY: frozenset(),
    ANTI_AFFINITY: frozenset({MAX_SERVER_PER_HOST}),
    SOFT_AFFINITY: frozenset(),
    SOFT_ANTI_AFFINITY: frozenset(),
}
#: Code of the conflict raised when a group changed since it was read. Not retried by
#: the allocation write path: a scheduler must pick again with fresh member counts.
#: :func:`add_members` / :func:`remove_members` (no generation from the caller) retry it.
GENERATION_CONFLICT = "rpquery.server_group.generation_conflict"
#: Code of a group or instance uuid that is not a uuid.
BAD_UUID = "rpquery.server_group.bad_uuid"

# ---------------------------------------------------------------- values


@dataclass(frozen=True)
class GroupSpec:
    """A validated request to create a group (see :func:`validate_group`)."""

    name: str
    policy: str
    project_id: str
    user_id: str
    max_server_per_host: int | None


@dataclass(frozen=True)
class ServerGroup:
    """A stored group. ``generation`` changes with every membership change."""

    id: int
    uuid: str
    name: str
    project_id: str
    user_id: str
    policy: str
    max_server_per_host: int | None
    generation: int

    @property
    def is_soft(self) -> bool:
        return self.policy in POLICY_WEIGHER

    @property
    def rules(self) -> dict[str, int]:
        """Nova's ``rules`` dict: ``{"max_server_per_host": 1}`` for anti-affinity."""
        if self.max_server_per_host is None:
            return {}
        return {MAX_SERVER_PER_HOST: self.max_server_per_host}


@dataclass(frozen=True)
class Host:
    """A root provider: what "host" means for server groups."""

    id: int
    uuid: str
    name: str | None


@dataclass(frozen=True)
class Member:
    """A member instance and the hosts its allocations use (empty: no allocations)."""

    instance_uuid: str
    hosts: tuple[Host, ...]


@dataclass(frozen=True)
class ServerGroupDetail:
    """A group with its members, ordered by instance uuid."""

    group: ServerGroup
    members: tuple[Member, ...]

    def as_dict(self) -> dict[str, Any]:
        g = self.group
        return {
            "uuid": g.uuid,
            "name": g.name,
            "policy": g.policy,
            "rules": g.rules,
            "project_id": g.project_id,
            "user_id": g.user_id,
            "members": [
                {
                    "instance_uuid": m.instance_uuid,
                    "hosts": [{"uuid": h.uuid, "name": h.name} for h in m.hosts],
                }
                for m in self.members
            ],
        }


# ---------------------------------------------------------------- validation


def _check_policies(policies: object) -> str:
    given = validation.check_str_list(policies, "rpquery.server_group.unknown_policy", "policies")
    for policy in given:
        if policy not in POLICIES:
            raise invalid(
                "rpquery.server_group.unknown_policy",
                f"unknown policy {policy!r}; expected one of {', '.join(POLICIES)}",
                str(policy),
            )
    if not given:
        raise invalid(
            "rpquery.server_group.no_policy",
            "a server group needs exactly one policy, got none",
            "",
        )
    if len(given) > 1:
        raise invalid(
            "rpquery.server_group.multiple_policies",
            f"a server group takes exactly one policy, got {', '.join(given)}",
            given[1],
        )
    return given[0]


def _check_rules(policy: str, given: object) -> int | None:
    rules = validation.check_mapping(given, "rpquery.server_group.unknown_rule", "rules")
    for key in rules:
        if key != MAX_SERVER_PER_HOST:
            raise invalid("rpquery.server_group.unknown_rule", f"unknown rule {key!r}", str(key))
        if key not in POLICY_RULES[policy]:
            raise invalid(
                "rpquery.server_group.rule_not_allowed",
                f"policy {policy} takes no rule {key!r}",
                key,
            )
    if policy != ANTI_AFFINITY:
        return None
    value = rules.get(MAX_SERVER_PER_HOST, 1)
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]{1,10}\s*", value):
        value = int(value)
    return validation.check_int(
        value, "rpquery.server_group.bad_rule_value", MAX_SERVER_PER_HOST, minimum=1
    )


def _external_id(value: object, code: str, what: str) -> str:
    """A project or user id, stored without surrounding whitespace."""
    return validation.check_external_id(value, code, what).strip()


def validate_group(
    name: str,
    policies: str | Sequence[str],
    project_id: str,
    user_id: str,
    rules: Mapping[str, Any] | None = None,
) -> GroupSpec:
    """Check a create request without touching the database.

    >>> validate_group("g", ["affinity", "anti-affinity"], "p", "u")
    Traceback (most recent call last):
    ...
    rpquery.errors.InvalidRequest: ... (rpquery.server_group.multiple_policies)
    """
    policy = _check_policies(policies)
    return GroupSpec(
        # stored without surrounding whitespace
        name=validation.check_name(name, "rpquery.server_group.bad_name", "name").strip(),
        policy=policy,
        project_id=_external_id(project_id, "rpquery.server_group.bad_project", "project"),
        user_id=_external_id(user_id, "rpquery.server_group.bad_user", "user"),
        max_server_per_host=_check_rules(policy, {} if rules is None else rules),
    )
