"""Schedule instances of a server group, and move its members (docs/server-groups.md).

:func:`schedule` places ``count`` new instances of one group, one at a time. Each pick
and its claim are one transaction:

1. lock the group's row (``SELECT ... FOR UPDATE``) and read it: schedulers of one group
   queue here, so each one picks on the member counts left by the one before;
2. ask the candidate query (on a read connection of its own) with the group's
   :class:`~rpquery.server_groups.groups.ServerGroupPolicy`, take the best candidate;
3. raise the group's ``generation`` (conditional ``UPDATE``, for writers that do not lock);
4. write the instance's allocations (:func:`rpquery.write.allocations.write_consumer_allocations`,
   provider generations and capacity checked);
5. add the instance to the group.

Each pick therefore counts the previous picks (they are members with allocations). A
concurrent claim of the same room by a writer outside the group makes step 4 fail; the
pick is then made again on fresh data, after a jittered backoff, up to :data:`MAX_PICKS`
times (:data:`rpquery.retry.SCHEDULER_PICKS`). Without the lock of step 1, concurrent
schedulers of one group failed at step 3 most of the time (issue 15: 12–38 % of calls
gave up after eight picks, ~40 % for affinity). If an instance cannot be placed, the
instances already placed by the call are released again and the error goes to the
caller (nova's all-or-nothing multi-create).

On SQLite, where a write transaction locks the whole database, the pick comes before
the transaction (steps 2, then 1 without a row lock, 3–5): holding the database through
a pick would stall every writer. Schedulers of one group may then pick on the same
counts; the loser's step 3 fails, and it picks again inside the write transaction
(``BEGIN IMMEDIATE``: nobody can change the group or a provider meanwhile), so it
cannot lose twice (8–23 of ~120–145 racing calls gave up after ten optimistic picks).

:func:`move` handles a member: ``migrate`` and ``evacuate`` exclude its current host and
do not count its own allocations; ``rebuild`` keeps it where it is.

    placed = schedule(db, "resources=VCPU:1,MEMORY_MB:512", group_uuid,
                      project_id="p", user_id="u", consumer_type="INSTANCE", count=2)
    [(p.instance_uuid, p.host.name) for p in placed]
"""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery import _validation as validation
from rpquery.db import Database
from rpquery.errors import CapacityExceeded, ConcurrentUpdate, Conflict, InvalidRequest, NotFound
from rpquery.models import ConsumerAllocations
from rpquery.policies.base import HostPolicy
from rpquery.read import candidates as cand
from rpquery.read import objects
from rpquery.read.request import CandidatesRequest, Params, as_candidates_request
from rpquery.retry import ALLOCATION_WRITES, SCHEDULER_PICKS, retrying
from rpquery.server_groups import groups as sg
from rpquery.server_groups import weighers as w
from rpquery.server_groups._group_hosts import not_sharing
from rpquery.store import dialects
from rpquery.store.tables import (
    consumers,
    resource_providers,
    server_group_members,
    server_groups,
)
from rpquery.write import allocations as alloc

__all__ = [
    "MAX_COUNT",
    "MAX_PICKS",
    "MOVE_ACTIONS",
    "NO_VALID_HOST",
    "Allocations",
    "MoveAction",
    "Scheduled",
    "move",
    "schedule",
]

#: Picks per instance before a run of conflicts is given to the caller.
MAX_PICKS = SCHEDULER_PICKS.attempts
#: Most instances one call schedules.
MAX_COUNT = 1000
NO_VALID_HOST = "rpquery.schedule.no_valid_host"

MoveAction = Literal["migrate", "evacuate", "rebuild"]
MOVE_ACTIONS: tuple[str, ...] = ("migrate", "evacuate", "rebuild")

Allocations = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class Scheduled:
    """Where one instance went: its host (root provider) and its allocations."""

    instance_uuid: str
    host: sg.Host
    allocations: Allocations

    def as_dict(self) -> dict[str, Any]:
        return {
            "instance_uuid": self.instance_uuid,
            "host": {"uuid": self.host.uuid, "name": self.host.name},
            "allocations": {rp: dict(rcs) for rp, rcs in self.allocations.items()},
        }


@dataclass(frozen=True)
class _Owner:
    project_id: str
    user_id: str
    consumer_type: str
    generation: int | None  # None: a new consumer


# ---------------------------------------------------------------- picking


def _pick(
    conn: Connection,
    request: CandidatesRequest,
    policy: sg.ServerGroupPolicy,
    extra: Sequence[HostPolicy],
) -> Allocations:
    """The best candidate's allocations; ``Conflict`` (no valid host) when there is none."""
    found = cand.allocation_candidates(conn, request, policies=[policy, *extra])
    if not found.allocation_requests:
        # Blame the group's policy only when it is what excluded the hosts: without it,
        # would some host hold the request? (One more query, on the failure path only.)
        alone = cand.allocation_candidates(conn, request, policies=list(extra))
        if not alone.allocation_requests:
            raise Conflict(
                NO_VALID_HOST,
                "no host can hold the request, whatever the server group's policy",
                token=policy.group.uuid,
            )
        raise Conflict(
            NO_VALID_HOST,
            f"no host satisfies the request and the {policy.group.policy} policy of "
            f"server group {policy.group.uuid}",
            token=policy.group.uuid,
        )
    return _allocations_of(found.allocation_requests[0])


def _allocations_of(allocation_request: Any) -> Allocations:
    return {rp: dict(rcs) for rp, rcs in allocation_request.allocations.items()}


def _host_of(conn: Connection, picked: Allocations) -> sg.Host:
    """The root provider of the providers of ``picked``, preferring non-sharing ones
    (a request served by a sharing provider alone has the sharing provider's root)."""
    root = resource_providers.alias("root")
    sharing = sa.case((not_sharing(resource_providers.c.id), 0), else_=1)
    row = conn.execute(
        sa.select(root.c.id, root.c.uuid, root.c.name)
        .select_from(resource_providers)
        .join(root, root.c.id == resource_providers.c.root_provider_id)
        .where(resource_providers.c.uuid.in_(sorted(picked)))
        .order_by(sharing, root.c.id)
        .limit(1)
    ).one()
    return sg.Host(row.id, row.uuid, row.name)


def _claim(
    conn: Connection,
    group: sg.ServerGroup,
    instance_uuid: str,
    owner: _Owner,
    picked: Allocations,
) -> sg.Host:
    """Steps 1–3 of the module docstring, in the caller's transaction."""
    group = sg.bump_generation(conn, group)
    alloc.write_consumer_allocations(
        conn,
        ConsumerAllocations(
            instance_uuid,
            owner.project_id,
            owner.user_id,
            owner.consumer_type,
            owner.generation,
            picked,
        ),
    )
    if owner.generation is None:
        conn.execute(
            server_group_members.insert().values(group_id=group.id, instance_uuid=instance_uuid)
        )
    return _host_of(conn, picked)


def _locked_group(conn: Connection, group_uuid: str) -> sg.ServerGroup:
    """The group after its row lock (:func:`rpquery.server_groups.groups.locked_group`)."""
    return sg.locked_group(conn, group_uuid)


def _retryable(error: Exception) -> bool:
    """A pick made on data that changed before its claim: pick again."""
    if isinstance(error, CapacityExceeded):
        return True
    return isinstance(error, ConcurrentUpdate) and error.code in _CONFLICTS


#: Conflicts that mean "someone else changed the group or a provider first".
_CONFLICTS = frozenset(
    {sg.GENERATION_CONFLICT, alloc.PROVIDER_GENERATION_CONFLICT, "rpquery.concurrent_update"}
)


def _place_one(
    db: Database,
    request: CandidatesRequest,
    make_policy: Callable[[sg.ServerGroup], sg.ServerGroupPolicy],
    group_uuid: str,
    instance_uuid: str,
    owner: _Owner,
    extra: Sequence[HostPolicy],
) -> Scheduled:
    """Pick and claim; pick again on fresh data after a conflict, with the jittered
    backoff of :data:`rpquery.retry.SCHEDULER_PICKS` (``MAX_PICKS`` picks in all)."""

    def pick(policy: sg.ServerGroupPolicy) -> Allocations:
        # On a read connection of its own: on MariaDB a long read inside the claim's
        # transaction would fix its REPEATABLE READ snapshot before the state read.
        with db.connect() as reader:
            return _pick(reader, request, policy, extra)

    lost: list[Exception] = []

    def attempt() -> Scheduled:
        if dialects.backend(db.dialect_name).locks_rows:
            with db.begin() as conn:
                policy = make_policy(_locked_group(conn, group_uuid))
                picked = pick(policy)
                host = _claim(conn, policy.group, instance_uuid, owner, picked)
        elif lost:  # SQLite after a lost race: pick holding the write lock, cannot lose
            with db.begin() as conn:
                policy = make_policy(sg.load_group(conn, group_uuid))
                picked = _pick(conn, request, policy, extra)
                host = _claim(conn, policy.group, instance_uuid, owner, picked)
        else:  # SQLite: a write transaction locks everything; pick before it
            policy = make_policy(sg.get_group(db, group_uuid))
            picked = pick(policy)
            with db.begin() as conn:
                try:
                    host = _claim(conn, policy.group, instance_uuid, owner, picked)
                except Exception as error:
                    lost.append(error)
                    raise
        return Scheduled(instance_uuid, host, picked)

    return retrying(
        attempt,
        SCHEDULER_PICKS,
        retry_if=_retryable,
        logger="rpquery.server_groups",
        what=f"schedule {instance_uuid}",
    )


# ---------------------------------------------------------------- schedule


def _check_count(count: int, instance_uuids: Sequence[str] | None) -> list[str]:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise InvalidRequest(
            "rpquery.schedule.bad_count",
            f"count must be an integer from 1 to {MAX_COUNT}, got {count!r}",
            token=str(count),
        )
    if instance_uuids is None:
        return [str(uuidlib.uuid4()) for _ in range(count)]
    uuids = [validation.check_uuid(u, sg.BAD_UUID, "instance") for u in instance_uuids]
    if len(uuids) != count or len(set(uuids)) != count:
        raise InvalidRequest(
            "rpquery.schedule.bad_instances",
            f"expected {count} distinct instance uuids, got {len(uuids)}",
            token=",".join(uuids),
        )
    return uuids


def schedule(
    db: Database,
    request: CandidatesRequest | Params,
    group_uuid: str,
    *,
    project_id: str,
    user_id: str,
    consumer_type: str,
    count: int = 1,
    weighers: w.WeigherConfig = w.DEFAULT_WEIGHERS,
    instance_uuids: Sequence[str] | None = None,
    policies: Sequence[HostPolicy] = (),
) -> tuple[Scheduled, ...]:
    """Place ``count`` new instances of the group, each claimed before the next is picked.

    ``policies`` are further host policies (e.g. the aggregate metadata filter). Raises
    ``Conflict`` (``rpquery.schedule.no_valid_host``) when an instance finds no host; the
    instances this call had placed are released first.
    """
    req = dataclasses.replace(as_candidates_request(request), limit=1)
    uuids = _check_count(count, instance_uuids)
    owner = _Owner(project_id, user_id, consumer_type, None)
    alloc.validate_requests(  # owner and type checked before anything reaches the database
        [ConsumerAllocations(u, project_id, user_id, consumer_type, None) for u in uuids]
    )
    group = sg.get_group(db, group_uuid)
    sg.ServerGroupPolicy(group, weighers)  # weigher enabled? before any write

    def make_policy(fresh: sg.ServerGroup) -> sg.ServerGroupPolicy:
        return sg.ServerGroupPolicy(fresh, weighers)

    placed: list[Scheduled] = []
    try:
        for instance_uuid in uuids:
            placed.append(
                _place_one(db, req, make_policy, group.uuid, instance_uuid, owner, policies)
            )
    except Exception:
        _release(db, group.uuid, owner, [p.instance_uuid for p in placed])
        raise
    return tuple(placed)


def _release(db: Database, group_uuid: str, owner: _Owner, instance_uuids: Sequence[str]) -> None:
    """Undo claims of this call: delete the instances' allocations, consumers and
    memberships in one transaction."""
    if not instance_uuids:
        return

    def work(conn: Connection) -> None:
        group = _locked_group(conn, group_uuid)
        rows = conn.execute(
            sa.select(consumers.c.uuid, consumers.c.generation).where(
                consumers.c.uuid.in_(instance_uuids)
            )
        ).all()
        empty = [
            ConsumerAllocations(u, owner.project_id, owner.user_id, owner.consumer_type, g, {})
            for u, g in rows
        ]
        alloc.write_consumer_allocations(conn, empty)
        conn.execute(
            server_group_members.delete().where(
                server_group_members.c.group_id == group.id,
                server_group_members.c.instance_uuid.in_(instance_uuids),
            )
        )
        sg.bump_generation(conn, group)

    def once() -> None:
        with db.begin() as conn:
            work(conn)

    retrying(
        once,
        ALLOCATION_WRITES,
        retry_if=lambda e: isinstance(e, ConcurrentUpdate) and e.code in _CONFLICTS,
        logger="rpquery.server_groups",
        what=f"release of {len(instance_uuids)} instance(s) of group {group_uuid}",
    )


# ---------------------------------------------------------------- moves


def _membership(db: Database, instance_uuid: str) -> tuple[sg.ServerGroup, _Owner, sg.Member]:
    """The instance's group, owner and current hosts; ``NotFound`` if it is no member."""
    instance_uuid = validation.check_uuid(instance_uuid, sg.BAD_UUID, "instance")
    with db.connect() as conn:
        group_uuid = conn.execute(
            sa.select(server_groups.c.uuid)
            .join(server_group_members, server_group_members.c.group_id == server_groups.c.id)
            .where(server_group_members.c.instance_uuid == instance_uuid)
        ).scalar()
    if group_uuid is None:
        raise NotFound(
            "rpquery.server_group.not_a_member",
            f"instance {instance_uuid} is in no server group",
            token=instance_uuid,
        )
    detail = sg.show_group(db, group_uuid)
    member = next(m for m in detail.members if m.instance_uuid == instance_uuid)
    consumer = objects.get_consumer(db, instance_uuid)
    owner = _Owner(
        consumer.project_id,
        consumer.user_id,
        consumer.consumer_type or "INSTANCE",
        consumer.generation,
    )
    return detail.group, owner, member


def move(
    db: Database,
    request: CandidatesRequest | Params,
    instance_uuid: str,
    action: MoveAction,
    *,
    weighers: w.WeigherConfig = w.DEFAULT_WEIGHERS,
    policies: Sequence[HostPolicy] = (),
) -> Scheduled:
    """Move a member: ``migrate``/``evacuate`` pick another host (its own allocations
    not counted) and replace its allocations there; ``rebuild`` keeps its host.

    ``Conflict`` (``rpquery.schedule.no_valid_host``) when no other host qualifies.
    """
    if action not in MOVE_ACTIONS:
        raise InvalidRequest(
            "rpquery.schedule.bad_action",
            f"unknown move {action!r}; expected one of {', '.join(MOVE_ACTIONS)}",
            token=str(action),
        )
    req = dataclasses.replace(as_candidates_request(request), limit=1)
    group, owner, member = _membership(db, instance_uuid)
    if action == "rebuild":
        return _rebuild(db, group, member, weighers)
    current = tuple(h.uuid for h in member.hosts)

    def make_policy(fresh: sg.ServerGroup) -> sg.ServerGroupPolicy:
        return sg.ServerGroupPolicy(fresh, weighers, member.instance_uuid, current)

    make_policy(group)
    return _place_one(db, req, make_policy, group.uuid, member.instance_uuid, owner, policies)


def _rebuild(
    db: Database, group: sg.ServerGroup, member: sg.Member, weighers: w.WeigherConfig
) -> Scheduled:
    """A rebuild stays on its host; a hard policy must still hold there (its own
    allocations not counted), as nova re-checks the group filters for a rebuild."""
    policy = sg.ServerGroupPolicy(group, weighers, member.instance_uuid)
    if not member.hosts:
        raise Conflict(
            "rpquery.schedule.not_placed",
            f"instance {member.instance_uuid} has no allocations to rebuild on",
            token=member.instance_uuid,
        )
    host = member.hosts[0]
    clause = policy.where(resource_providers.c.id)
    if clause is not None:
        with db.connect() as conn:
            ok = conn.execute(
                sa.select(resource_providers.c.id).where(
                    resource_providers.c.id == host.id, clause
                )
            ).first()
        if ok is None:
            raise Conflict(
                NO_VALID_HOST,
                f"host {host.name or host.uuid} no longer satisfies the {group.policy} policy",
                token=host.uuid,
            )
    return Scheduled(member.instance_uuid, host, objects.get_allocations(db, member.instance_uuid))
