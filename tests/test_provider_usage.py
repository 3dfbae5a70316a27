"""``rpq_provider_usages`` (migration rpq0007) stays equal to ``SUM(allocations.used)``
per (provider, class) on every backend, whoever writes: rpquery's write path, raw SQL
with multi-row statements, updates moving rows, deletes; and it can be verified and
rebuilt. The read path trusts it, so candidates must see every change at once."""

from __future__ import annotations

import random

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.models import ConsumerAllocations
from rpquery.read.candidates import allocation_candidates
from rpquery.store.tables import allocations, provider_usages
from rpquery.usage.provider_totals import (
    UsageDrift,
    rebuild_provider_usages,
    verify_provider_usages,
)
from rpquery.write import allocations as alloc_api
from tests.factories import Ref, consumer, new_uuid, provider, resource_class_id

PROJECT, USER = "p-usage", "u-usage"


def stored(db: Database) -> dict[tuple[int, int], int]:
    pu = provider_usages
    with db.connect() as conn:
        query = sa.select(pu.c.resource_provider_id, pu.c.resource_class_id, pu.c.used)
        rows = conn.execute(query)
        return {(int(rp), int(rc)): int(used) for rp, rc, used in rows if int(used)}


@pytest.fixture
def hosts(db: Database) -> list[Ref]:
    with db.begin() as conn:
        return [
            provider(conn, f"cn{i}", inventory={"VCPU": 64, "MEMORY_MB": 65536, "DISK_GB": 2000})
            for i in range(4)
        ]


def test_write_path_sequence_keeps_usage_exact(db: Database, hosts: list[Ref]) -> None:
    """Random claims, replacements, moves and deletions through the public write path:
    after every step the stored usage equals the recomputation, and candidates see it."""
    rnd = random.Random(7)
    live: dict[str, int] = {}  # consumer -> generation
    for step in range(24):
        action = rnd.choice(["new", "new", "replace", "delete"]) if live else "new"
        if action == "new":
            uuid = new_uuid()
            allocs = {
                h.uuid: {"VCPU": rnd.randint(1, 4), "MEMORY_MB": 512 * rnd.randint(1, 4)}
                for h in rnd.sample(hosts, rnd.randint(1, 2))
            }
            alloc_api.replace_allocations(
                db, ConsumerAllocations(uuid, PROJECT, USER, "INSTANCE", None, allocs)
            )
            live[uuid] = 1
        elif action == "replace":
            uuid = rnd.choice(sorted(live))
            host = rnd.choice(hosts)
            allocs = {host.uuid: {"VCPU": rnd.randint(1, 8), "DISK_GB": 10 * rnd.randint(1, 5)}}
            alloc_api.replace_allocations(
                db, ConsumerAllocations(uuid, PROJECT, USER, "MIGRATION", live[uuid], allocs)
            )
            live[uuid] += 1
        else:
            uuid = rnd.choice(sorted(live))
            alloc_api.delete_allocations(db, uuid, consumer_generation=live.pop(uuid))
        assert verify_provider_usages(db) == [], (step, action)
    # the read path reports exactly what allocations hold
    summaries = allocation_candidates(db, "resources=VCPU:1").provider_summaries
    with db.connect() as conn:
        vcpu = resource_class_id(conn, "VCPU")
        for h in hosts:
            used = conn.execute(
                sa.select(sa.func.coalesce(sa.func.sum(allocations.c.used), 0)).where(
                    allocations.c.resource_provider_id == h.id,
                    allocations.c.resource_class_id == vcpu,
                )
            ).scalar_one()
            assert summaries[h.uuid].resources["VCPU"].used == int(used)


def test_raw_multi_row_statements(db: Database, hosts: list[Ref]) -> None:
    """Writers that bypass rpquery (Placement, scripts): multi-row INSERT, executemany,
    multi-row DELETE and UPDATE moving rows between providers and classes."""
    a = allocations
    c1, c2 = new_uuid(), new_uuid()
    with db.begin() as conn:
        consumer(conn, c1, project=PROJECT, user=USER)
        consumer(conn, c2, project=PROJECT, user=USER)
        vcpu, mem = resource_class_id(conn, "VCPU"), resource_class_id(conn, "MEMORY_MB")
        h0, h1, h2 = hosts[0].id, hosts[1].id, hosts[2].id
        def row(rp: int, who: str, rc: int, used: int) -> dict[str, object]:
            return {
                "resource_provider_id": rp,
                "consumer_id": who,
                "resource_class_id": rc,
                "used": used,
            }

        # one INSERT statement with several rows (PostgreSQL: one statement trigger)
        conn.execute(
            a.insert().values(
                [row(h0, c1, vcpu, 2), row(h0, c2, vcpu, 3), row(h1, c1, mem, 1024)]
            )
        )
        # executemany
        conn.execute(a.insert(), [row(h2, c2, vcpu, 4), row(h2, c2, mem, 256)])
    assert stored(db) == {(h0, vcpu): 5, (h1, mem): 1024, (h2, vcpu): 4, (h2, mem): 256}
    with db.begin() as conn:
        # move a row to another provider and class, change an amount, no-op update
        conn.execute(
            a.update()
            .where(a.c.resource_provider_id == h1)
            .values(resource_provider_id=h0, resource_class_id=vcpu, used=1)
        )
        conn.execute(a.update().where(a.c.resource_provider_id == h2).values(used=a.c.used * 2))
        conn.execute(a.update().where(a.c.consumer_id == c1).values(used=a.c.used))
    assert stored(db) == {(h0, vcpu): 6, (h2, vcpu): 8, (h2, mem): 512}
    assert verify_provider_usages(db) == []
    with db.begin() as conn:
        conn.execute(a.delete().where(a.c.consumer_id == c2))  # rows on two providers
    assert stored(db) == {(h0, vcpu): 3}
    assert verify_provider_usages(db) == []


def test_drift_is_found_and_rebuilt(db: Database, hosts: list[Ref]) -> None:
    uuid = new_uuid()
    alloc_api.replace_allocations(
        db,
        ConsumerAllocations(uuid, PROJECT, USER, "INSTANCE", None, {hosts[0].uuid: {"VCPU": 3}}),
    )
    with db.begin() as conn:
        vcpu = resource_class_id(conn, "VCPU")
        conn.execute(provider_usages.update().values(used=99))
    assert verify_provider_usages(db) == [UsageDrift(hosts[0].id, vcpu, 99, 3)]
    assert rebuild_provider_usages(db) == 1
    assert verify_provider_usages(db) == []
    # a row removed by hand is never stored negative when its allocations go
    with db.begin() as conn:
        conn.execute(provider_usages.delete())
    alloc_api.delete_allocations(db, uuid, consumer_generation=1)
    assert stored(db) == {} and verify_provider_usages(db) == []


def test_clearing_allocations_wholesale(db: Database, hosts: list[Ref]) -> None:
    """PostgreSQL: ``TRUNCATE`` fires a statement trigger that empties the table.
    MySQL/MariaDB: ``TRUNCATE`` fires no trigger: the drift is found and rebuilt.
    SQLite (no ``TRUNCATE``): ``DELETE`` without ``WHERE`` still fires row triggers."""
    allocs = {hosts[1].uuid: {"VCPU": 2}}
    alloc_api.replace_allocations(
        db, ConsumerAllocations(new_uuid(), PROJECT, USER, "INSTANCE", None, allocs)
    )
    assert stored(db)
    dialect = db.engine.dialect.name
    with db.begin() as conn:
        conn.exec_driver_sql(
            "DELETE FROM allocations" if dialect == "sqlite" else "TRUNCATE TABLE allocations"
        )
    if dialect == "mysql":
        assert [d.actual for d in verify_provider_usages(db)] == [0]
        rebuild_provider_usages(db)
    assert stored(db) == {} and verify_provider_usages(db) == []
