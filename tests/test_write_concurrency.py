"""Racing writers on PostgreSQL and MariaDB: generations and retries never let a
provider be over-allocated, and a consumer is created exactly once.

Threads start together behind a barrier; the assertions are about the final rows and
the kinds of errors, never about timing.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import RpqueryError
from rpquery.models import Inventory
from rpquery.store.tables import allocations, resource_providers
from rpquery.write import allocations as alloc_api
from rpquery.write import inventory as inv_api
from rpquery.write.allocations import ConsumerAllocations
from tests.factories import Ref, allocate, new_uuid, provider

THREADS = 8


def race(jobs: list[Callable[[], None]]) -> list[str]:
    """Run ``jobs`` in threads started together; each outcome is ``"ok"`` or the code of
    the rpquery error it raised (anything else fails the test)."""
    barrier = threading.Barrier(len(jobs))
    outcomes: list[str] = [""] * len(jobs)

    def run(i: int) -> None:
        barrier.wait()
        try:
            jobs[i]()
            outcomes[i] = "ok"
        except RpqueryError as error:
            outcomes[i] = f"{type(error).__name__}:{error.code}"
        except Exception as error:  # noqa: BLE001 - reported through the outcome
            outcomes[i] = f"unexpected {error!r}"

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return outcomes


def used_and_generation(db: Database, rp: Ref) -> tuple[int, int]:
    with db.connect() as conn:
        used = conn.execute(
            sa.select(sa.func.coalesce(sa.func.sum(allocations.c.used), 0)).where(
                allocations.c.resource_provider_id == rp.id
            )
        ).scalar_one()
        gen = conn.execute(
            sa.select(resource_providers.c.generation).where(resource_providers.c.id == rp.id)
        ).scalar_one()
    return int(used), int(gen)


def claim(db: Database, rp: Ref, amount: int, **retry: int) -> Callable[[], None]:
    request = ConsumerAllocations(
        new_uuid(), "proj", "user", "INSTANCE", None, {rp.uuid: {"VCPU": amount}}
    )
    if retry:
        return lambda: alloc_api.run_with_retry(
            db, lambda conn: alloc_api.write_consumer_allocations(conn, request), **retry
        )
    return lambda: alloc_api.replace_allocations(db, request)


@pytest.fixture
def nearly_full(server_db: Database) -> Ref:
    """16 VCPUs of which 12 are taken: 4 are left."""
    with server_db.begin() as conn:
        rp = provider(conn, "incl_last_units", inventory={"VCPU": 16})
        allocate(conn, new_uuid(), rp, "VCPU", 12)
    return rp


def test_eight_threads_race_for_the_last_units(server_db: Database, nearly_full: Ref) -> None:
    outcomes = race([claim(server_db, nearly_full, 1) for _ in range(THREADS)])
    tally = Counter(outcomes)
    assert tally["ok"] == 4, tally
    losers = {o for o in outcomes if o != "ok"}
    assert losers <= {
        "CapacityExceeded:rpquery.allocation.capacity_exceeded",
        "ConcurrentUpdate:rpquery.provider.generation_conflict",
        "ConcurrentUpdate:rpquery.concurrent_update",
    }, tally
    assert used_and_generation(server_db, nearly_full) == (16, 4)


def test_without_retry_losers_conflict_and_nothing_is_over_allocated(
    server_db: Database, nearly_full: Ref
) -> None:
    outcomes = race([claim(server_db, nearly_full, 2, attempts=1) for _ in range(THREADS)])
    winners = outcomes.count("ok")
    assert 1 <= winners <= 2, outcomes
    assert all(
        o == "ok" or o.startswith(("ConcurrentUpdate:", "CapacityExceeded:")) for o in outcomes
    ), outcomes
    assert used_and_generation(server_db, nearly_full) == (12 + 2 * winners, winners)


def test_a_new_consumer_is_created_once(server_db: Database, nearly_full: Ref) -> None:
    consumer = new_uuid()
    request = ConsumerAllocations(
        consumer, "proj", "user", "INSTANCE", None, {nearly_full.uuid: {"VCPU": 1}}
    )
    outcomes = race([lambda: alloc_api.replace_allocations(server_db, request)] * THREADS)
    assert outcomes.count("ok") == 1, outcomes
    assert all(o == "ok" or o.startswith("ConcurrentUpdate:") for o in outcomes), outcomes
    assert alloc_api.get_allocations(server_db, consumer) == {nearly_full.uuid: {"VCPU": 1}}


def test_inventory_shrink_racing_allocations(server_db: Database, nearly_full: Ref) -> None:
    """Shrinking to the current usage while others claim: either the shrink wins (and
    later claims fail) or a claim wins (and the stale shrink fails): never both."""

    def shrink() -> None:
        inv_api.set_inventory(server_db, nearly_full.uuid, "VCPU", Inventory(12), generation=0)

    outcomes = race([shrink] + [claim(server_db, nearly_full, 1) for _ in range(THREADS - 1)])
    used, _ = used_and_generation(server_db, nearly_full)
    capacity = inv_api.get_inventories(server_db, nearly_full.uuid)["VCPU"].capacity
    assert used <= capacity
    if outcomes[0] == "ok":
        assert capacity == 12 and used == 12
    else:
        assert outcomes[0].split(":")[1] in {
            "rpquery.provider.generation_conflict",
            "rpquery.inventory.capacity_below_usage",
            "rpquery.concurrent_update",
        }
        assert capacity == 16 and used > 12
    assert not any(o.startswith("unexpected") for o in outcomes), outcomes


def test_trigger_kept_usage_tables_stay_exact_under_racing_writers(server_db: Database) -> None:
    """Eight writers claim on two shared providers (one provider, the other, or both in
    either order), replace and delete their consumers at once: the usage tables kept by
    triggers (rpq0006 per project/user/type, rpq0007 per provider) still equal a
    recomputation from ``allocations``, and every failure is a clean rpquery error."""
    import random

    from rpquery.usage.provider_totals import verify_provider_usages
    from rpquery.usage.summary import verify_usage_summary

    with server_db.begin() as conn:
        a = provider(conn, "race_a", inventory={"VCPU": 64, "MEMORY_MB": 65536})
        b = provider(conn, "race_b", inventory={"VCPU": 64, "MEMORY_MB": 65536})

    def worker(seed: int) -> Callable[[], None]:
        def run() -> None:
            rnd = random.Random(seed)
            for _ in range(4):
                uuid = new_uuid()
                shape = rnd.choice([(a,), (b,), (a, b), (b, a)])
                allocs = {rp.uuid: {"VCPU": 1, "MEMORY_MB": 256} for rp in shape}
                ctype = rnd.choice(["INSTANCE", "MIGRATION"])
                request = ConsumerAllocations(
                    uuid, "proj-race", f"u{seed % 2}", ctype, None, allocs
                )
                alloc_api.replace_allocations(server_db, request)
                if rnd.random() < 0.5:
                    moved = {rnd.choice((a, b)).uuid: {"VCPU": 2}}
                    alloc_api.replace_allocations(
                        server_db,
                        ConsumerAllocations(uuid, "proj-race", f"u{seed % 2}", ctype, 1, moved),
                    )
                    alloc_api.delete_allocations(server_db, uuid, consumer_generation=2)

        return run

    outcomes = race([worker(i) for i in range(THREADS)])
    assert all(o == "ok" or o.startswith("ConcurrentUpdate:") for o in outcomes), outcomes
    assert outcomes.count("ok") >= 1, outcomes
    assert verify_provider_usages(server_db) == []
    assert verify_usage_summary(server_db) == []


def test_owner_created_by_another_writer_after_our_snapshot(server_db: Database) -> None:
    """A project created and committed by another writer after this transaction's first
    read: our insert is skipped (the row exists) and the re-read must still find it.
    Under MariaDB's repeatable read a plain re-read answered from the old snapshot and
    the write failed with a KeyError (the racing test above found it)."""
    from rpquery.store.tables import projects
    from rpquery.write.consumers import ensure_owner_ids

    with server_db.begin() as mine:
        mine.execute(sa.select(sa.func.count()).select_from(projects)).scalar()  # snapshot
        with server_db.begin() as other:
            created = ensure_owner_ids(other, projects=["proj-late"]).projects["proj-late"]
        found = ensure_owner_ids(mine, projects=["proj-late"], users=["user-late"])
        assert found.projects == {"proj-late": created}
        assert set(found.users) == {"user-late"}


def test_aggregate_created_by_another_writer_after_our_snapshot(server_db: Database) -> None:
    """The same for aggregates: another writer adds an aggregate after our snapshot."""
    from rpquery.store.tables import placement_aggregates
    from rpquery.write.associations import aggregate_ids

    agg = new_uuid()
    with server_db.begin() as mine:
        mine.execute(sa.select(sa.func.count()).select_from(placement_aggregates)).scalar()
        with server_db.begin() as other:
            created = aggregate_ids(other, {agg})[agg]
        assert aggregate_ids(mine, {agg}) == {agg: created}
