"""The invariants a run of concurrent writers must leave behind (benchmarks/contention.py,
tests/reliability/, ``make soak``).

:func:`check_invariants` reads the whole database once the writers have stopped:

- **capacity never exceeded**: for every inventory, the sum of its allocations is at
  most ``(total - reserved) * allocation_ratio``;
- **every acknowledged write present**: each consumer holds exactly the allocations
  (and generation) its writer was last told it has — ``{}`` for a deleted one;
- **no partial consumer**: no consumer row without allocations, no allocations without
  a consumer row; a scheduled instance has allocations exactly when it is a member;
- **hard group policies held**: an affinity group's members on one host, an
  anti-affinity group's at most its limit per host;
- **summaries exact**, as ``rpquery db check`` verifies them:
  :func:`~rpquery.usage.summary.verify_usage_summary` and
  :func:`~rpquery.usage.provider_totals.verify_provider_usages` find no difference.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import NotFound, RpqueryError
from rpquery.read import objects
from rpquery.server_groups import groups as sg
from rpquery.store.tables import (
    allocations,
    consumers,
    inventories,
    server_group_members,
    server_groups,
)
from rpquery.usage.provider_totals import verify_provider_usages
from rpquery.usage.summary import verify_usage_summary

Alloc = dict[str, dict[str, int]]


@dataclass
class Ack:
    """What its process was told about one consumer: allocations (``{}``: deleted) and
    the consumer generation that goes with them."""

    allocations: Alloc
    generation: int | None
    #: For scheduled instances: the group it must be a member of (``allocations``
    #: non-empty) or must have left; ``None`` for writers' consumers and for an
    #: instance whose release was interrupted between its two calls.
    group: str | None = None


@dataclass
class Findings:
    checked: int = 0
    violations: list[str] = field(default_factory=list)

    def check(self, ok: bool, problem: str) -> None:
        self.checked += 1
        if not ok:
            self.violations.append(problem)


def read_state(db: Database, consumer: str) -> Ack:
    """The consumer's stored allocations and generation, read again until a read
    succeeds (its connection may be killed too)."""
    for attempt in range(20):
        try:
            found = objects.get_allocations(db, consumer)
            try:
                generation: int | None = objects.get_consumer(db, consumer).generation
            except NotFound:
                generation = None
            return Ack(found, generation)
        except RpqueryError:
            time.sleep(0.05 * (attempt + 1))
    raise RuntimeError(f"cannot read consumer {consumer}")


def check_invariants(
    db: Database,
    acked: Mapping[str, Ack],
    groups: Mapping[str, str],
    anti_affinity_limit: int,
) -> Findings:
    """Every invariant of the module docstring; ``groups`` maps ``affinity`` /
    ``anti-affinity`` / other kinds to group uuids."""
    found = Findings()
    with db.connect() as conn:
        _capacity(conn, found)
        members = _consumer_rows(conn, found)
    for consumer, ack in acked.items():
        now = read_state(db, consumer)
        found.check(
            now.allocations == ack.allocations,
            f"acknowledged {consumer}: {ack.allocations}, stored {now.allocations}",
        )
        if ack.allocations and now.allocations == ack.allocations:
            found.check(
                now.generation == ack.generation,
                f"acknowledged {consumer} generation {ack.generation}, stored {now.generation}",
            )
        if ack.group is not None:
            found.check(
                bool(ack.allocations) == (members.get(consumer) == ack.group),
                f"instance {consumer}: allocations {ack.allocations}, "
                f"member of {members.get(consumer)}",
            )
    _groups(db, groups, anti_affinity_limit, found)
    for difference in verify_usage_summary(db)[:10] or [None]:
        found.check(difference is None, f"usage summary differs: {difference}")
    for drift in verify_provider_usages(db)[:10] or [None]:
        found.check(drift is None, f"provider usage differs: {drift}")
    return found


def _capacity(conn: sa.Connection, found: Findings) -> None:
    a, inv = allocations.c, inventories.c
    used = (
        sa.select(a.resource_provider_id, a.resource_class_id, sa.func.sum(a.used).label("n"))
        .group_by(a.resource_provider_id, a.resource_class_id)
        .subquery()
    )
    rows = conn.execute(
        sa.select(
            inv.resource_provider_id, inv.resource_class_id, inv.total, inv.reserved,
            inv.allocation_ratio, sa.func.coalesce(used.c.n, 0),
        ).outerjoin(
            used,
            sa.and_(
                used.c.resource_provider_id == inv.resource_provider_id,
                used.c.resource_class_id == inv.resource_class_id,
            ),
        )
    )  # fmt: skip
    for rp, rc, total, reserved, ratio, n in rows:
        found.check(
            int(n) <= (total - reserved) * ratio,
            f"capacity exceeded on provider {rp}, class {rc}: {n} used of {total}",
        )


def _consumer_rows(conn: sa.Connection, found: Findings) -> dict[str, str]:
    """Consumers and allocations match one to one; returns ``{member: group uuid}``."""
    holding = set(conn.execute(sa.select(allocations.c.consumer_id).distinct()).scalars())
    rows = set(conn.execute(sa.select(consumers.c.uuid)).scalars())
    for consumer in sorted(holding | rows):
        found.check(consumer in holding, f"consumer {consumer} has no allocations")
        found.check(consumer in rows, f"allocations of {consumer} have no consumer row")
    groups = server_groups
    members = conn.execute(
        sa.select(server_group_members.c.instance_uuid, groups.c.uuid).join(
            groups, groups.c.id == server_group_members.c.group_id
        )
    )
    return {instance: group for instance, group in members}


def _groups(db: Database, groups: Mapping[str, str], limit: int, found: Findings) -> None:
    for kind, group_uuid in groups.items():
        detail = sg.show_group(db, group_uuid)
        hosts: Counter[str] = Counter(h.uuid for m in detail.members for h in m.hosts)
        if kind == "affinity":
            found.check(len(hosts) <= 1, f"affinity group on {len(hosts)} hosts: {dict(hosts)}")
        if kind == "anti-affinity":
            found.check(
                all(n <= limit for n in hosts.values()),
                f"anti-affinity group over its limit {limit}: {dict(hosts)}",
            )
