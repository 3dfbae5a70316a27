"""Short versions of the reliability probes of issue 15 (``make soak`` runs them for
minutes): 16 writer processes with claims, deletes and moves and 8 racing schedulers on
20 hosts, on every backend; the same with connections killed mid-write on PostgreSQL
and MariaDB. After each run every invariant of :mod:`benchmarks.invariants` is checked:
capacity never exceeded, every acknowledged write present, no partial consumer, group
policies held, usage summaries exact.

Outcomes, not timings, are asserted: conflicts that outlive the retries are allowed
(their rate is reported by ``make bench``'s ``contention`` scenario), any other error
crashes its process and is a violation.
"""

from __future__ import annotations

from benchmarks.contention import GROUP_KINDS, Workload, run_workload
from rpquery.db import Database

SECONDS = 1.0
CALLS = 4  # per process, however long it takes
SCHEDULE_OUTCOMES = {"ok", "gave_up", "no_valid_host", "lost"}


def _outcomes(calls: dict[str, int], prefix: str) -> set[str]:
    return {k.rsplit(".", 1)[1] for k in calls if k.startswith(prefix)}


def test_sixteen_writers_leave_every_invariant(db: Database) -> None:
    workload = Workload(writers=16, schedulers=0, seconds=SECONDS, min_calls=CALLS)
    run = run_workload(db, db.dialect_name, workload)
    assert run.violations == []
    for action in ("claim", "delete", "move"):
        assert run.count(".ok", action) > 0, dict(run.calls)
    assert _outcomes(run.calls, "claim") <= {"ok", "full", "gave_up"}
    # 40 inventories, the acknowledged consumers, the consumer rows, 3 groups, 2 summaries
    assert run.checked > 40 + run.count(".ok", "claim")


def test_racing_schedulers_keep_the_group_policies(db: Database) -> None:
    workload = Workload(writers=0, schedulers=8, seconds=SECONDS, min_calls=CALLS)
    run = run_workload(db, db.dialect_name, workload)
    assert run.violations == []
    for kind in GROUP_KINDS:
        assert _outcomes(run.calls, f"schedule.{kind}") <= SCHEDULE_OUTCOMES
    assert run.count(".ok", "schedule") > 0, dict(run.calls)


def test_connections_killed_mid_write_lose_nothing_acknowledged(server_db: Database) -> None:
    workload = Workload(seconds=SECONDS + 1, kill_every=0.2, min_calls=CALLS)
    run = run_workload(server_db, server_db.dialect_name, workload)
    assert run.kills > 0
    assert run.violations == []
    assert run.count(".ok") > 0
