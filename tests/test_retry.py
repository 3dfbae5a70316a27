"""The shared retry policy (rpquery.retry) and the writes that use it.

Conflicts are produced for real: a second connection commits a change to the very row
a write is about to update conditionally, from a statement tracer that runs just before
that ``UPDATE`` is sent. That needs a server (SQLite's write transaction holds the
database lock, so no second writer can get in), hence ``server_db``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate
from rpquery.models import ConsumerAllocations
from rpquery.retry import ALLOCATION_WRITES, RetryEvent, RetryPolicy, retrying
from rpquery.server_groups import groups as sg
from rpquery.server_groups import scheduling
from rpquery.store.tables import resource_providers, server_groups
from rpquery.write import allocations as alloc
from tests.factories import Ref, new_uuid, provider

# ---------------------------------------------------------------- the policy itself


def test_backoff_doubles_up_to_the_cap_and_is_jittered() -> None:
    policy = RetryPolicy(attempts=10, base=0.01, cap=0.1)
    assert [policy.ceiling(n) for n in range(1, 7)] == [0.01, 0.02, 0.04, 0.08, 0.1, 0.1]
    delays = {policy.delay(3) for _ in range(200)}
    assert all(0.0 <= d <= 0.04 for d in delays)
    assert len(delays) > 100  # random, not a fixed step


def test_retries_log_a_warning_each_and_the_give_up_reraises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slept: list[float] = []
    calls: list[int] = []

    def always_conflicts() -> None:
        calls.append(1)
        raise ConcurrentUpdate("rpquery.concurrent_update", "deadlock detected")

    caplog.set_level(logging.WARNING, logger="rpquery")
    policy = RetryPolicy(attempts=4, base=0.01, cap=0.02)
    with pytest.raises(ConcurrentUpdate):
        retrying(
            always_conflicts,
            policy,
            retry_if=lambda e: isinstance(e, ConcurrentUpdate),
            logger="rpquery.write",
            what="test write",
            sleep=slept.append,
        )
    assert len(calls) == 4
    assert len(slept) == 3 and all(0 <= s <= policy.ceiling(i + 1) for i, s in enumerate(slept))
    events: list[RetryEvent] = [r.rpquery_retry for r in caplog.records]  # type: ignore[attr-defined]
    assert [r.name for r in caplog.records] == ["rpquery.write"] * 4
    assert [r.levelno for r in caplog.records] == [logging.WARNING] * 4
    assert [(e.attempt, e.gave_up) for e in events] == [
        (1, False),
        (2, False),
        (3, False),
        (4, True),
    ]
    assert {e.code for e in events} == {"rpquery.concurrent_update"}
    assert "giving up after 4 attempts" in caplog.records[-1].getMessage()


def test_other_errors_are_neither_retried_nor_logged(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise ValueError("not a conflict")

    caplog.set_level(logging.DEBUG, logger="rpquery")
    with pytest.raises(ValueError):
        retrying(broken, ALLOCATION_WRITES, retry_if=lambda e: False, logger="rpquery.x", what="x")
    assert calls == [1] and caplog.records == []


def test_library_logging_is_silent_unless_configured() -> None:
    handlers = logging.getLogger("rpquery").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


# ---------------------------------------------------------------- real conflicts


@contextmanager
def interfering(
    db: Database, before: str, meddle: Callable[[sa.Connection], None], times: int = 1
) -> Iterator[list[int]]:
    """Run ``meddle`` in another committed transaction just before each of the first
    ``times`` statements starting with ``before`` (upper-cased SQL prefix)."""
    done: list[int] = []
    busy = [False]

    def tracer(sql: str, params: object) -> None:
        if busy[0] or len(done) >= times or not sql.lstrip().upper().startswith(before):
            return
        busy[0] = True
        try:
            with db.begin() as other:
                meddle(other)
            done.append(1)
        finally:
            busy[0] = False

    db.add_tracer(tracer)
    try:
        yield done
    finally:
        db.remove_tracer(tracer)


def bump(table: sa.Table, key: str, value: object) -> Callable[[sa.Connection], None]:
    """Another writer's change: the generation of ``table``'s row whose ``key`` is
    ``value`` goes up by one."""

    def meddle(conn: sa.Connection) -> None:
        conn.execute(
            table.update().where(table.c[key] == value).values(generation=table.c.generation + 1)
        )

    return meddle


def retry_events(caplog: pytest.LogCaptureFixture, logger: str) -> list[RetryEvent]:
    return [r.rpquery_retry for r in caplog.records if r.name == logger]  # type: ignore[attr-defined]


@pytest.mark.parametrize("change", ["remove", "add"])
def test_membership_change_without_generation_retries_a_concurrent_group_change(
    server_db: Database, caplog: pytest.LogCaptureFixture, change: str
) -> None:
    """Issue 15: ``remove_members`` raised ``server_group.generation_conflict`` though the
    caller gave no generation. Issue 33: it locks the group row before reading it, so a
    group change committed just before is read, and one that comes later waits: no
    conflict, no retry."""
    group = sg.create_group(server_db, "g", "anti-affinity", "p", "u")
    a, b = new_uuid(), new_uuid()
    sg.add_members(server_db, group.uuid, [a, b])
    caplog.set_level(logging.WARNING, logger="rpquery")
    lock = "SELECT RPQ_SERVER_GROUPS.ID, RPQ_SERVER_GROUPS.UUID"  # the locking read
    with interfering(server_db, lock, bump(server_groups, "uuid", group.uuid)) as done:
        if change == "remove":
            after = sg.remove_members(server_db, group.uuid, [a])
        else:
            after = sg.add_members(server_db, group.uuid, [new_uuid()])
    assert done == [1]
    # created 0, add_members 1, the concurrent bump 2, this change 3
    assert after.generation == 3
    members = {m.instance_uuid for m in sg.show_group(server_db, group.uuid).members}
    assert (a in members) == (change == "add") and b in members
    assert retry_events(caplog, "rpquery.server_groups") == []


def _claim(db: Database, caplog: pytest.LogCaptureFixture) -> tuple[Ref, ConsumerAllocations]:
    """A provider with 8 VCPU and a new consumer's claim of one; rpquery's warnings
    captured."""
    with db.begin() as conn:
        rp = provider(conn, "cn1", inventory={"VCPU": 8})
    caplog.set_level(logging.WARNING, logger="rpquery")
    return rp, ConsumerAllocations(
        new_uuid(), "proj", "user", "INSTANCE", None, {rp.uuid: {"VCPU": 1}}
    )


def test_allocation_write_retries_a_provider_conflict_and_logs_it(
    server_db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    rp, request = _claim(server_db, caplog)
    meddle = bump(resource_providers, "id", rp.id)
    with interfering(server_db, "UPDATE RESOURCE_PROVIDERS", meddle, times=2) as done:
        alloc.replace_allocations(server_db, request)
    assert done == [1, 1]
    assert alloc.get_allocations(server_db, request.consumer_uuid) == {rp.uuid: {"VCPU": 1}}
    events = retry_events(caplog, "rpquery.write")
    assert [(e.attempt, e.code, e.gave_up) for e in events] == [
        (1, alloc.PROVIDER_GENERATION_CONFLICT, False),
        (2, alloc.PROVIDER_GENERATION_CONFLICT, False),
    ]


def test_allocation_write_gives_up_after_its_attempts_and_logs_it(
    server_db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    rp, request = _claim(server_db, caplog)
    with (
        interfering(
            server_db, "UPDATE RESOURCE_PROVIDERS", bump(resource_providers, "id", rp.id), times=99
        ),
        pytest.raises(ConcurrentUpdate) as caught,
    ):
        alloc.run_with_retry(
            server_db, lambda conn: alloc.write_consumer_allocations(conn, request), attempts=3
        )
    assert caught.value.code == alloc.PROVIDER_GENERATION_CONFLICT
    assert alloc.get_allocations(server_db, request.consumer_uuid) == {}
    events = retry_events(caplog, "rpquery.write")
    assert [(e.attempt, e.gave_up) for e in events] == [(1, False), (2, False), (3, True)]


def test_schedulers_of_one_group_queue_instead_of_conflicting(
    server_db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 15: concurrent schedulers of one group picked on the same member counts and
    all but one failed the group generation check (up to ~40 % gave up for affinity).
    Now a pick and its claim hold the group's row lock: a second scheduler started while
    the first is claiming waits, then picks with the first one's member counted. (SQLite
    has no row locks: its schedulers pick outside the write transaction and retry.)"""
    with server_db.begin() as conn:
        hosts = {provider(conn, f"cn{i}", inventory={"VCPU": 8}).uuid for i in range(2)}
    group = sg.create_group(server_db, "g", "anti-affinity", "p", "u")
    owner = {"project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"}
    second: list[scheduling.Scheduled] = []
    other = threading.Thread(
        target=lambda: second.extend(
            scheduling.schedule(server_db, "resources=VCPU:1", group.uuid, **owner)
        )
    )
    main = threading.current_thread()

    def tracer(sql: str, params: object) -> None:
        claiming = sql.lstrip().upper().startswith("UPDATE RPQ_SERVER_GROUPS")
        if claiming and threading.current_thread() is main and not other.is_alive():
            other.start()
            time.sleep(0.5)  # room for the second scheduler to pick, had it not to wait

    caplog.set_level(logging.WARNING, logger="rpquery")
    server_db.add_tracer(tracer)
    try:
        first = scheduling.schedule(server_db, "resources=VCPU:1", group.uuid, **owner)
    finally:
        server_db.remove_tracer(tracer)
    other.join(timeout=60)
    assert len(second) == 1
    assert {first[0].host.uuid, second[0].host.uuid} == hosts  # anti-affinity held
    assert retry_events(caplog, "rpquery.server_groups") == []  # nobody picked on stale counts


def test_sqlite_lock_timeout_is_a_retryable_conflict(sqlite_db: Database) -> None:
    """A SQLite writer that waited out its busy timeout got a bare
    ``sqlite3.OperationalError`` from ``begin()`` (seen by the contention benchmark);
    it is ``rpquery.concurrent_update``, which the write paths retry."""
    holder = Database(sqlite_db.url)
    waiter = Database(sqlite_db.url, pool_size=1, max_overflow=0)
    try:
        with waiter.connect() as conn:
            conn.exec_driver_sql("PRAGMA busy_timeout=50")
        with holder.begin(), pytest.raises(ConcurrentUpdate) as caught, waiter.begin():
            pass
        assert caught.value.code == "rpquery.concurrent_update"
        assert "database is locked" in str(caught.value)
    finally:
        holder.dispose()
        waiter.dispose()
