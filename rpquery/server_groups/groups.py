"""Server groups (docs/server-groups.md): storage, validation, member hosts and the host policy.

A server group has exactly one policy. ``affinity`` and ``anti-affinity`` are hard:
they filter candidate hosts (anti-affinity allows up to ``max_server_per_host``
members per host, default 1). ``soft-affinity`` and ``soft-anti-affinity`` only order
hosts, through the weighers of :mod:`rpquery.server_groups.weighers`.

A member's *host* is the root provider of the providers its allocations use (sharing
providers are not hosts). Member counts per host come from one grouped statement
(:func:`~rpquery.server_groups._group_hosts.member_counts_stmt`, re-exported here).

>>> validate_group("web", ["soft-anti-affinity"], "p", "u").policy
'soft-anti-affinity'
>>> validate_group("db", ["anti-affinity"], "p", "u").max_server_per_host
1
"""

from __future__ import annotations

import re
import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement

from rpquery import _validation as validation
from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate, Conflict, NotFound, invalid
from rpquery.retry import LOCKED_WRITES, retrying
from rpquery.server_groups import _group_hosts as gh
from rpquery.server_groups import weighers as w
from rpquery.server_groups._group_hosts import SHARING_TRAIT as SHARING_TRAIT  # re-exported
from rpquery.server_groups._group_hosts import member_counts as member_counts
from rpquery.server_groups._group_hosts import member_counts_stmt as member_counts_stmt
from rpquery.server_groups._group_hosts import member_hosts_stmt as member_hosts_stmt
from rpquery.store.tables import (
    resource_providers,
    server_group_members,
    server_groups,
)

__all__ = [
    "AFFINITY",
    "ANTI_AFFINITY",
    "BAD_UUID",
    "GENERATION_CONFLICT",
    "MAX_SERVER_PER_HOST",
    "POLICIES",
    "POLICY_RULES",
    "POLICY_WEIGHER",
    "SHARING_TRAIT",
    "SOFT_AFFINITY",
    "SOFT_ANTI_AFFINITY",
    "GroupSpec",
    "Host",
    "Member",
    "ServerGroup",
    "ServerGroupDetail",
    "ServerGroupPolicy",
    "add_members",
    "add_members_conn",
    "bump_generation",
    "create_group",
    "delete_group",
    "get_group",
    "load_group",
    "member_counts",
    "member_counts_stmt",
    "member_hosts_stmt",
    "policy_for_group",
    "remove_members",
    "show_group",
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


# ---------------------------------------------------------------- storage


def _row_to_group(row: Any) -> ServerGroup:
    return ServerGroup(
        id=row.id,
        uuid=row.uuid,
        name=row.name,
        project_id=row.project_id,
        user_id=row.user_id,
        policy=row.policy,
        max_server_per_host=row.max_server_per_host,
        generation=row.generation,
    )


def load_group(conn: Connection, group_uuid: str) -> ServerGroup:
    """The group named by ``group_uuid``; ``NotFound`` (``rpquery.server_group.not_found``)."""
    row = conn.execute(
        sa.select(server_groups).where(
            server_groups.c.uuid == validation.check_uuid(group_uuid, BAD_UUID, "server group")
        )
    ).first()
    if row is None:
        raise NotFound(
            "rpquery.server_group.not_found", f"no server group {group_uuid}", token=group_uuid
        )
    return _row_to_group(row)


def create_group(
    db: Database,
    name: str,
    policies: str | Sequence[str],
    project_id: str,
    user_id: str,
    rules: Mapping[str, Any] | None = None,
    *,
    group_uuid: str | None = None,
) -> ServerGroup:
    """Validate and store a group; ``Conflict`` (``rpquery.server_group.exists``) when
    ``group_uuid`` is taken.

    >>> db = Database("sqlite://"); db.upgrade()
    >>> create_group(db, "web", ["soft-affinity"], "proj", "user").policy
    'soft-affinity'
    """
    spec = validate_group(name, policies, project_id, user_id, rules)
    new_uuid = (
        validation.check_uuid(group_uuid, BAD_UUID, "server group")
        if group_uuid
        else str(uuidlib.uuid4())
    )
    with db.begin() as conn:
        taken = conn.execute(
            sa.select(server_groups.c.id).where(server_groups.c.uuid == new_uuid)
        ).first()
        if taken is not None:
            raise Conflict(
                "rpquery.server_group.exists", f"server group {new_uuid} exists", token=new_uuid
            )
        conn.execute(
            server_groups.insert().values(
                uuid=new_uuid,
                name=spec.name,
                project_id=spec.project_id,
                user_id=spec.user_id,
                policy=spec.policy,
                max_server_per_host=spec.max_server_per_host,
                generation=0,
            )
        )
        return load_group(conn, new_uuid)


def get_group(db: Database, group_uuid: str) -> ServerGroup:
    with db.connect() as conn:
        return load_group(conn, group_uuid)


def delete_group(db: Database, group_uuid: str) -> None:
    """Delete a group and its memberships (allocations are not touched)."""
    with db.begin() as conn:
        group = load_group(conn, group_uuid)
        conn.execute(
            server_group_members.delete().where(server_group_members.c.group_id == group.id)
        )
        conn.execute(server_groups.delete().where(server_groups.c.id == group.id))


def bump_generation(conn: Connection, group: ServerGroup) -> ServerGroup:
    """Conditional ``generation + 1``; ``ConcurrentUpdate`` when someone changed the group
    since ``group`` was read."""
    done = conn.execute(
        server_groups.update()
        .where(server_groups.c.id == group.id, server_groups.c.generation == group.generation)
        .values(generation=group.generation + 1)
    )
    if done.rowcount != 1:
        raise ConcurrentUpdate(
            GENERATION_CONFLICT,
            f"server group {group.uuid} changed concurrently; re-read and retry",
            token=group.uuid,
        )
    return replace(group, generation=group.generation + 1)


def add_members_conn(
    conn: Connection, group: ServerGroup, instance_uuids: Iterable[str]
) -> ServerGroup:
    """Add members inside the caller's transaction, checking ``group.generation``.

    Instances already in this group are skipped; an instance of another group is a
    ``Conflict`` (``rpquery.server_group.member_conflict``).
    """
    wanted = sorted({validation.check_uuid(u, BAD_UUID, "instance") for u in instance_uuids})
    group = bump_generation(conn, group)
    if not wanted:
        return group
    rows = conn.execute(
        sa.select(server_group_members.c.instance_uuid, server_group_members.c.group_id).where(
            server_group_members.c.instance_uuid.in_(wanted)
        )
    ).all()
    for instance, group_id in rows:
        if group_id != group.id:
            raise Conflict(
                "rpquery.server_group.member_conflict",
                f"instance {instance} is a member of another server group",
                token=instance,
            )
    have = {instance for instance, _ in rows}
    new = [{"group_id": group.id, "instance_uuid": u} for u in wanted if u not in have]
    if new:
        conn.execute(server_group_members.insert(), new)
    return group


def add_members(db: Database, group_uuid: str, instance_uuids: Iterable[str]) -> ServerGroup:
    """Add instances to a group (idempotent for existing members). The caller gives no
    generation, so a concurrent change of the group is retried (:func:`_unguarded`)."""
    uuids = [validation.check_uuid(u, BAD_UUID, "instance") for u in instance_uuids]

    def once() -> ServerGroup:
        with db.begin() as conn:
            return add_members_conn(conn, load_group(conn, group_uuid), uuids)

    return _unguarded(once, f"add members to server group {group_uuid}")


def remove_members(db: Database, group_uuid: str, instance_uuids: Iterable[str]) -> ServerGroup:
    """Remove instances from a group; instances that are not members are ignored. The
    caller gives no generation, so a concurrent change of the group is retried."""
    uuids = sorted({validation.check_uuid(u, BAD_UUID, "instance") for u in instance_uuids})

    def once() -> ServerGroup:
        with db.begin() as conn:
            group = bump_generation(conn, load_group(conn, group_uuid))
            if uuids:
                conn.execute(
                    server_group_members.delete().where(
                        server_group_members.c.group_id == group.id,
                        server_group_members.c.instance_uuid.in_(uuids),
                    )
                )
            return group

    return _unguarded(once, f"remove members from server group {group_uuid}")


def _unguarded(work: Callable[[], ServerGroup], what: str) -> ServerGroup:
    """Run a membership change the caller gave no generation for: the generation it
    read in its own transaction went stale (another writer committed in between), or
    the server broke a deadlock — read again and retry, with the jittered backoff of
    :data:`rpquery.retry.LOCKED_WRITES`, logged on ``rpquery.server_group``."""
    return retrying(
        work,
        LOCKED_WRITES,
        retry_if=lambda e: (
            isinstance(e, ConcurrentUpdate)
            and e.code in (GENERATION_CONFLICT, "rpquery.concurrent_update")
        ),
        logger="rpquery.server_groups",
        what=what,
    )


def show_group(db: Database, group_uuid: str) -> ServerGroupDetail:
    """The group with its members and their hosts (two statements, one connection)."""
    with db.connect() as conn:
        group = load_group(conn, group_uuid)
        names = conn.execute(
            sa.select(server_group_members.c.instance_uuid)
            .where(server_group_members.c.group_id == group.id)
            .order_by(server_group_members.c.instance_uuid)
        ).scalars()
        hosts: dict[str, list[Host]] = {name: [] for name in names}
        for instance, host_id, host_uuid, host_name in conn.execute(
            gh.member_hosts_stmt(group.id)
        ):
            hosts[instance].append(Host(host_id, host_uuid, host_name))
    members = tuple(Member(i, tuple(h)) for i, h in hosts.items())
    return ServerGroupDetail(group, members)


# ---------------------------------------------------------------- host policy


@dataclass(frozen=True)
class ServerGroupPolicy:
    """The :class:`~rpquery.policies.base.HostPolicy` of one server group.

    Hard policies become SQL in :meth:`where`; soft policies weigh the candidate hosts
    in :meth:`weigh` (one grouped statement). ``moving_instance`` is a member being
    moved: its own allocations do not count. ``exclude_hosts`` are root provider
    uuids that must not be chosen (a migrating member's current host).

    >>> g = ServerGroup(1, "u", "n", "p", "u", "soft-affinity", None, 0)
    >>> ServerGroupPolicy(g, w.WeigherConfig(frozenset()))
    Traceback (most recent call last):
    ...
    rpquery.errors.InvalidRequest: ... (rpquery.weigher.not_enabled)
    """

    group: ServerGroup
    weighers: w.WeigherConfig = w.DEFAULT_WEIGHERS
    moving_instance: str | None = None
    exclude_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        weigher = POLICY_WEIGHER.get(self.group.policy)
        if weigher is not None:
            self.weighers.require(weigher)
        object.__setattr__(self, "exclude_hosts", tuple(self.exclude_hosts))

    @property
    def multiplier(self) -> float:
        weigher = POLICY_WEIGHER.get(self.group.policy)
        return self.weighers.multiplier(weigher) if weigher else 0.0

    @property
    def needs_all_candidates(self) -> bool:
        return self.group.is_soft and self.multiplier > 0

    def where(self, root_id: ColumnElement[int]) -> ColumnElement[bool] | None:
        terms: list[ColumnElement[bool]] = []
        if self.exclude_hosts:
            excluded = (
                sa.select(resource_providers.c.id)
                .where(resource_providers.c.uuid.in_(self.exclude_hosts))
                .correlate(None)
            )
            terms.append(root_id.not_in(excluded))
        if self.group.policy == AFFINITY:
            terms.append(self._affinity_clause(root_id))
        elif self.group.policy == ANTI_AFFINITY:
            limit = self.group.max_server_per_host or 1
            terms.append(
                root_id.not_in(gh.hosts_at_or_over(self.group.id, limit, self.moving_instance))
            )
        return sa.and_(*terms) if terms else None

    def _affinity_clause(self, root_id: ColumnElement[int]) -> ColumnElement[bool]:
        # Hosts holding a member, or any host while no member has a host yet.
        held = gh.hosts_at_or_over(self.group.id, 1, self.moving_instance)
        return sa.or_(root_id.in_(held), ~sa.exists(held))

    def keep(self, conn: Connection, root_ids: Sequence[int]) -> set[int] | None:
        return None

    def weigh(self, conn: Connection, root_ids: Sequence[int]) -> Mapping[int, float] | None:
        if not self.needs_all_candidates or not root_ids:
            return None
        counts = gh.member_counts(
            conn, self.group.id, root_ids, exclude_instance=self.moving_instance
        )
        return w.group_weights(
            counts,
            root_ids,
            negate=self.group.policy == SOFT_ANTI_AFFINITY,
            multiplier=self.multiplier,
        )


def policy_for_group(
    db: Database,
    group_uuid: str,
    weighers: w.WeigherConfig = w.DEFAULT_WEIGHERS,
    *,
    moving_instance: str | None = None,
    exclude_hosts: Iterable[str] = (),
) -> ServerGroupPolicy:
    """Load a group and return its host policy, ready for ``allocation_candidates``.

    Raises ``NotFound`` for an unknown group and ``InvalidRequest``
    (``rpquery.weigher.not_enabled``) when a soft policy's weigher is not enabled.
    """
    group = get_group(db, group_uuid)
    return ServerGroupPolicy(group, weighers, moving_instance, tuple(exclude_hosts))
