"""Server-group writes and reshapes under contention, on every backend: threads started
together behind a barrier, each with its own connections.

- ``add_members`` / ``remove_members`` racing eight schedulers of the same group never
  give up (they lock the group row first, as ``schedule`` does);
- racing schedulers never give up, SQLite included (a pick that lost the race is made
  again holding the write lock);
- a reshape racing six claimers of its providers goes through every time.

Outcomes and final rows are asserted, never timings.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable

from rpquery.db import Database
from rpquery.errors import RpqueryError
from rpquery.models import ConsumerAllocations, Inventory
from rpquery.server_groups import groups as sg
from rpquery.server_groups import scheduling
from rpquery.write import allocations as alloc
from rpquery.write import reshaper
from rpquery.write.reshaper import ProviderInventories
from tests.factories import Ref, new_uuid, provider

PROVIDER_CONFLICT = alloc.PROVIDER_GENERATION_CONFLICT
OWNER = {"project_id": "proj", "user_id": "user", "consumer_type": "INSTANCE"}
#: Every racing thread stops after this long, however far it got.
SECONDS = 3.0


def race(jobs: list[Callable[[], None]], seconds: float = SECONDS) -> Counter[str]:
    """Run each job in a loop in its own thread (all started together) for ``seconds``;
    count outcomes as ``<job name>.ok`` or ``<job name>.<error code>``."""
    barrier = threading.Barrier(len(jobs))
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def run(job: Callable[[], None]) -> None:
        name = getattr(job, "__name__", "job")
        barrier.wait()
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            try:
                job()
                outcome = "ok"
            except RpqueryError as error:
                outcome = error.code
            except Exception as error:  # noqa: BLE001 - reported through the outcome
                outcome = f"unexpected {error!r}"
            with lock:
                outcomes[f"{name}.{outcome}"] += 1

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 120)
    return outcomes


def _hosts(db: Database, count: int, vcpus: int) -> list[Ref]:
    with db.begin() as conn:
        return [provider(conn, f"cn{i}", inventory={"VCPU": vcpus}) for i in range(count)]


def _scheduler(db: Database, group: str) -> Callable[[], None]:
    def schedule() -> None:
        scheduling.schedule(db, "resources=VCPU:1", group, count=1, **OWNER)  # type: ignore[arg-type]

    return schedule


def test_membership_changes_do_not_give_up_while_schedulers_run(db: Database) -> None:
    _hosts(db, 8, 1000)
    group = sg.create_group(db, "web", ["soft-anti-affinity"], "proj", "user").uuid
    outside = [new_uuid() for _ in range(2000)]
    # the first 50 are the ones remove_members takes out; fresh ones once these run out
    # (an idle machine adds 1,000 pairs in the race's 3 seconds)
    taken = itertools.chain(outside, iter(new_uuid, None))

    def add_members() -> None:
        sg.add_members(db, group, [next(taken), next(taken)])

    def remove_members() -> None:
        sg.remove_members(db, group, outside[:50])

    jobs = [_scheduler(db, group) for _ in range(8)] + [add_members, remove_members]
    outcomes = race(jobs)
    print(dict(outcomes))
    assert set(outcomes) <= {"schedule.ok", "add_members.ok", "remove_members.ok"}, outcomes
    assert outcomes["add_members.ok"] > 0 and outcomes["remove_members.ok"] > 0
    assert outcomes["schedule.ok"] > 0


def test_racing_schedulers_do_not_give_up(db: Database) -> None:
    _hosts(db, 20, 1000)
    groups = [
        sg.create_group(db, f"g{i}", [policy], "proj", "user").uuid
        for i, policy in enumerate(["soft-affinity", "soft-anti-affinity"])
    ]
    outcomes = race([_scheduler(db, groups[i % 2]) for i in range(8)])
    print(dict(outcomes))
    assert set(outcomes) == {"schedule.ok"}, outcomes
    placed = sum(len(sg.show_group(db, g).members) for g in groups)
    assert placed == outcomes["schedule.ok"]


def test_a_reshape_racing_six_claimers_goes_through(db: Database) -> None:
    """Six threads claim VCPU on a host while a seventh reshapes the host and its child
    over and over (the host's VCPU total changes, the child's DISK_GB comes and goes),
    each time through :func:`reshaper.reshape_current`, which holds the providers'
    rows from reading their generations to the reshape. (Through :func:`reshaper.reshape`
    with generations read just before, 0 reshapes of the run went through on every
    backend.)"""
    with db.begin() as conn:
        host = provider(conn, "cn0", inventory={"VCPU": 100_000})
        child = provider(conn, "cn0-numa0", parent=host)

    def claim() -> None:
        request = ConsumerAllocations(
            new_uuid(), "proj", "user", "INSTANCE", None, {host.uuid: {"VCPU": 1}}
        )
        alloc.replace_allocations(db, request)

    rounds = Counter[str]()

    def reshape() -> None:
        rounds["n"] += 1
        disk = {"DISK_GB": Inventory(100)} if rounds["n"] % 2 else {}
        vcpu = {"VCPU": Inventory(100_000 + rounds["n"])}

        def build(conn: object, generations: dict[str, int]) -> tuple[dict, list]:
            return {
                host.uuid: ProviderInventories(generations[host.uuid], vcpu),
                child.uuid: ProviderInventories(generations[child.uuid], disk),
            }, []

        reshaper.reshape_current(db, [host.uuid, child.uuid], build)
        time.sleep(0.05)  # a reshape is rare: 20 a second is already far more than real

    outcomes = race([claim] * 6 + [reshape])
    print(dict(outcomes))
    assert outcomes["reshape.ok"] > 0 and outcomes["claim.ok"] > 0, outcomes
    assert {k for k in outcomes if k.startswith("reshape.")} == {"reshape.ok"}, outcomes
    # six claimers of one provider may still outlast the write path's ten attempts
    assert set(outcomes) <= {"reshape.ok", "claim.ok", f"claim.{PROVIDER_CONFLICT}"}
