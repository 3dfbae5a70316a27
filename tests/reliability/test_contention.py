"""Short versions of the reliability probes of issue 15 (``make soak`` runs them for
minutes): 16 writer processes with claims, deletes and moves and 8 racing schedulers on
20 hosts, on every backend; the same with connections killed mid-write on PostgreSQL
and MariaDB. After each run every invariant of :mod:`benchmarks.invariants` is checked:
capacity never exceeded, every acknowledged write present, no partial consumer, group
policies held, usage summaries exact.

Outcomes, not timings, are asserted: conflicts that outlive the retries are allowed
(their rate is reported by ``make bench``'s ``contention`` scenario), any other error
crashes its process and is a violation. A failure message gives every call's outcome
and what each ``lost`` call (a database error, outcome unknown) failed with: rpquery's
code and message, SQLAlchemy's exception and the driver's (class and ``args``).
"""

from __future__ import annotations

from benchmarks.contention import GROUP_KINDS, RunResult, Workload, run_workload
from rpquery.db import Database

SECONDS = 1.0
CALLS = 4  # per process, however long it takes
SCHEDULE_OUTCOMES = {"ok", "gave_up", "no_valid_host", "lost"}


def _outcomes(calls: dict[str, int], prefix: str) -> set[str]:
    return {k.rsplit(".", 1)[1] for k in calls if k.startswith(prefix)}


def _told(run: RunResult) -> str:
    """The failure message: the calls' outcomes, and what each lost call failed with."""
    lost = "".join(f"\n  lost {line}" for line in run.lost)
    return f"calls {dict(run.calls)}; retries {dict(run.retries)}{lost}"


def test_sixteen_writers_leave_every_invariant(db: Database) -> None:
    workload = Workload(writers=16, schedulers=0, seconds=SECONDS, min_calls=CALLS)
    run = run_workload(db, db.dialect_name, workload)
    assert run.violations == [], _told(run)
    for action in ("claim", "delete", "move"):
        assert run.count(".ok", action) > 0, _told(run)
    assert _outcomes(run.calls, "claim") <= {"ok", "full", "gave_up"}, _told(run)
    # 40 inventories, the acknowledged consumers, the consumer rows, 3 groups, 2 summaries
    assert run.checked > 40 + run.count(".ok", "claim")


def test_racing_schedulers_keep_the_group_policies(db: Database) -> None:
    workload = Workload(writers=0, schedulers=8, seconds=SECONDS, min_calls=CALLS)
    run = run_workload(db, db.dialect_name, workload)
    assert run.violations == [], _told(run)
    for kind in GROUP_KINDS:
        assert _outcomes(run.calls, f"schedule.{kind}") <= SCHEDULE_OUTCOMES, _told(run)
    assert run.count(".ok", "schedule") > 0, _told(run)


def test_connections_killed_mid_write_lose_nothing_acknowledged(server_db: Database) -> None:
    workload = Workload(seconds=SECONDS + 1, kill_every=0.2, min_calls=CALLS)
    run = run_workload(server_db, server_db.dialect_name, workload)
    assert run.kills > 0
    assert run.violations == [], _told(run)
    assert run.count(".ok") > 0, _told(run)
    # each lost call says what it failed with, down to the driver's error
    assert len(run.lost) == run.count(".lost"), _told(run)
    assert all("; driver " in line for line in run.lost), _told(run)
