"""Contention: many writer and scheduler processes on a few hosts, then the invariants.

One workload serves the ``contention`` scenario of ``make bench`` (throughput and
give-up rate per backend), the reliability tests (``tests/reliability/``) and ``make
soak`` (the same for minutes, with connections killed mid-write):

- ``writers`` processes (default 16) each claim new consumers on random hosts (one or two
  classes), delete them, and move them to another host (a generation-guarded
  replace touching two providers);
- ``schedulers`` processes (default 8) run :func:`rpquery.server_groups.scheduling.schedule` into
  three shared server groups — ``plain`` (soft-anti-affinity: weighs only), ``affinity``
  and ``anti-affinity`` — and release their instances again;
- optionally a killer thread terminates a random connection of the database every
  ``kill_every`` seconds (``pg_terminate_backend`` / ``KILL``), mid-write or not.

Every process keeps what it was told succeeded (the *acknowledged* state of each of its
consumers) and counts the retries and give-ups rpquery logged (:mod:`rpquery.retry`).
A write whose connection was killed has an unknown outcome: the process re-reads the
consumer and requires the old or the new state, nothing in between.

:func:`check_invariants` then checks the database: capacity never exceeded, every
acknowledged write present (allocations and consumer generation), no partial consumer
(no consumer row without allocations or the reverse; a scheduled instance is a member
with allocations, or neither), hard group policies held, and the usage summaries exact
(``rpquery db check``: :func:`~rpquery.usage.summary.verify_usage_summary`,
:func:`~rpquery.usage.provider_totals.verify_provider_usages`).

    python -m benchmarks.contention --seconds 20 --backends postgresql,mysql
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import random
import threading
import time
import traceback
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from benchmarks.config import available_backends, scratch_database
from benchmarks.invariants import Ack, check_invariants, read_state
from benchmarks.markdown import table
from rpquery.db import Database
from rpquery.errors import CapacityExceeded, ConcurrentUpdate, Conflict, RpqueryError
from rpquery.models import ConsumerAllocations, Inventory
from rpquery.server_groups import groups as sg
from rpquery.server_groups import scheduling
from rpquery.write import allocations as alloc
from rpquery.write import inventory, providers

PROJECT, USER, TYPE = "bench-project", "bench-user", "INSTANCE"
#: Writers spread over this many projects (writer i: project i mod 4), so the usage
#: summary rows of one project are shared by several writers, as in a busy cloud.
WRITER_PROJECTS = 4
GROUP_KINDS = {
    "plain": "soft-anti-affinity",
    "affinity": "affinity",
    "anti-affinity": "anti-affinity",
}
ANTI_AFFINITY_LIMIT = 2
#: What a scheduler asks for; writers ask for 1–4 VCPU and 256–2048 MB.
SCHEDULE_REQUEST = "resources=VCPU:1,MEMORY_MB:256"
#: Consumers one writer / instances one scheduler keeps at most.
WRITER_KEEPS, SCHEDULER_KEEPS = 12, 6

Alloc = dict[str, dict[str, int]]


@dataclass(frozen=True)
class Workload:
    writers: int = 16
    schedulers: int = 8
    hosts: int = 20
    seconds: float = 10.0
    kill_every: float | None = None
    seed: int = 42
    #: Calls each process makes at least, however long they take (short test runs on
    #: a busy machine still exercise every kind of call).
    min_calls: int = 0


@dataclass
class ProcessResult:
    calls: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    acked: dict[str, Ack] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    #: every call whose outcome was ``lost``: :func:`lost_error`'s line
    lost: list[str] = field(default_factory=list)


@dataclass
class RunResult:
    """One backend's run: counters summed over the processes, invariants checked."""

    backend: str
    workload: Workload
    seconds: float
    calls: Counter[str]
    retries: Counter[str]
    kills: int
    checked: int
    violations: list[str]
    #: what each ``lost`` call failed with (:func:`lost_error`), in every process
    lost: list[str] = field(default_factory=list)

    def count(self, suffix: str, prefix: str = "") -> int:
        return sum(n for k, n in self.calls.items() if k.startswith(prefix) and k.endswith(suffix))

    def summary(self) -> dict[str, Any]:
        ok = self.count(".ok")
        gave_up = self.count(".gave_up")
        schedules = {
            kind: _rate(
                self.count(".gave_up", f"schedule.{kind}"), self.count("", f"schedule.{kind}")
            )
            for kind in GROUP_KINDS
        }
        writes = ("claim", "move", "delete")
        return {
            "backend": self.backend,
            "writers": self.workload.writers,
            "schedulers": self.workload.schedulers,
            "hosts": self.workload.hosts,
            "seconds": round(self.seconds, 1),
            "acknowledged_writes": ok,
            "writes_per_s": round(ok / self.seconds, 1) if self.seconds else 0.0,
            "calls": sum(self.calls.values()),
            "conflicts": sum(self.retries.values()),
            "retries": sum(n for k, n in self.retries.items() if not k.startswith("gave_up")),
            "deadlocks": self.retries.get("deadlock", 0) + self.retries.get("gave_up.deadlock", 0),
            "give_ups": gave_up,
            "give_up_rate_writes": _rate(
                sum(self.count(".gave_up", w) for w in writes),
                sum(self.count("", w) for w in writes),
            ),
            "give_up_rate_schedule": schedules,
            "schedule_calls": {k: self.count("", f"schedule.{k}") for k in GROUP_KINDS},
            "no_valid_host": self.count(".no_valid_host"),
            "capacity_refusals": self.count(".full"),
            "lost_to_kills": self.count(".lost"),
            "lost_errors": self.lost[:20],
            "kills": self.kills,
            "invariants_checked": self.checked,
            "violations": self.violations[:20],
        }


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 5) if whole else 0.0


# ---------------------------------------------------------------- setup


@dataclass(frozen=True)
class Layout:
    hosts: tuple[str, ...]
    groups: dict[str, str]


def setup(db: Database, hosts: int) -> Layout:
    """``hosts`` compute nodes (32 VCPU, 32 GB) and the three groups, through the
    public write path."""
    uuids = []
    for i in range(hosts):
        rp = providers.create_provider(db, f"cn{i:03d}")
        inventory.set_inventories(
            db,
            rp.uuid,
            {"VCPU": Inventory(total=32), "MEMORY_MB": Inventory(total=32768)},
            generation=rp.generation,
        )
        uuids.append(rp.uuid)
    groups = {}
    for kind, policy in GROUP_KINDS.items():
        rules = {"max_server_per_host": ANTI_AFFINITY_LIMIT} if policy == "anti-affinity" else None
        groups[kind] = sg.create_group(db, kind, policy, PROJECT, USER, rules).uuid
    return Layout(tuple(uuids), groups)


# ---------------------------------------------------------------- process side


class _RetryCounter(logging.Handler):
    """Counts rpquery's retry log records: by error code, deadlocks apart."""

    def __init__(self, into: Counter[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "rpquery_retry", None)
        if event is None:
            return
        message = record.getMessage().lower()
        kind = "deadlock" if "deadlock" in message else event.code
        self.into[f"gave_up.{kind}" if event.gave_up else kind] += 1


def _counting(result: ProcessResult) -> None:
    # A killed connection makes the pool log its failed reset; that is expected here.
    logging.getLogger("sqlalchemy.pool").setLevel(logging.CRITICAL)
    log = logging.getLogger("rpquery")
    log.setLevel(logging.WARNING)
    log.addHandler(_RetryCounter(result.retries))


def _settle_lost(db: Database, result: ProcessResult, consumer: str, old: Ack, new: Ack) -> None:
    """A write whose outcome is unknown (its connection was killed): the stored state
    must be exactly the old or the new one."""
    now = read_state(db, consumer)
    if now.allocations not in (old.allocations, new.allocations):
        result.violations.append(
            f"partial write of {consumer}: {now.allocations} is neither {old.allocations} "
            f"nor {new.allocations}"
        )
    now.group = old.group
    result.acked[consumer] = now


def _attempt(
    result: ProcessResult, name: str, run: Callable[[], None], on_lost: Callable[[], None]
) -> None:
    """Run one public call and count its outcome as ``name.<outcome>``."""
    try:
        run()
        outcome = "ok"
    except CapacityExceeded:
        outcome = "full"
    except ConcurrentUpdate as error:
        outcome = "gave_up" if error.code in _GIVE_UP else f"conflict:{error.code}"
    except Conflict as error:
        outcome = "no_valid_host" if error.code == scheduling.NO_VALID_HOST else error.code
    except RpqueryError as error:
        if error.code != "rpquery.db.error":
            raise
        outcome = "lost"
        result.lost.append(f"{name}: {lost_error(error)}")
        on_lost()
    result.calls[f"{name}.{outcome}"] += 1


def lost_error(error: RpqueryError) -> str:
    """What a ``lost`` call failed with, kept for the report and the tests' failure
    messages: rpquery's code and message, SQLAlchemy's exception (and whether it saw a
    closed connection: ``connection_invalidated``) and the driver's own exception class
    and ``args`` (PyMySQL: ``(errno, message)``; psycopg: its SQLSTATE).

    >>> from rpquery.errors import DatabaseError
    >>> lost_error(DatabaseError("rpquery.db.error", "database error: gone"))
    'rpquery.db.error: database error: gone'
    """
    line = f"{error.code}: {error.detail}"
    cause = error.__cause__
    if cause is None:
        return line
    line += f" [{type(cause).__module__}.{type(cause).__name__}"
    if getattr(cause, "connection_invalidated", False):
        line += ", connection invalidated"
    orig = getattr(cause, "orig", None)
    if orig is not None:
        sqlstate = getattr(orig, "sqlstate", None)
        state = f" sqlstate={sqlstate}" if sqlstate else ""
        line += f"; driver {type(orig).__module__}.{type(orig).__name__}{orig.args!r}{state}"
    elif cause.__cause__ is not None:
        inner = cause.__cause__
        line += f"; from {type(inner).__module__}.{type(inner).__name__}{inner.args!r}"
    return line + "]"


_GIVE_UP = frozenset(
    {alloc.PROVIDER_GENERATION_CONFLICT, sg.GENERATION_CONFLICT, "rpquery.concurrent_update"}
)


def child(target: Callable[..., None], *args: Any) -> None:
    """Run a process body; a crash is reported as a violation, never a hang."""
    out = args[-1]
    try:
        target(*args)
    except BaseException:  # noqa: BLE001 - reported to the parent
        out.put(ProcessResult(violations=[f"process crashed: {traceback.format_exc()}"]))
        raise


def _writer(
    url: str, layout: Layout, index: int, deadline: float, seed: int, min_calls: int, out: Any
) -> None:
    rng = random.Random(seed * 1000 + index)
    db = Database(url)
    result = ProcessResult()
    _counting(result)
    live: list[str] = []
    while time.time() < deadline or sum(result.calls.values()) < min_calls:
        roll = rng.random()
        if not live or (len(live) < WRITER_KEEPS and roll < 0.5):
            _write(db, result, rng, layout, live, index, "claim", str(uuidlib.uuid4()))
        elif roll < 0.75:
            _write(db, result, rng, layout, live, index, "delete", rng.choice(live))
        else:
            _write(db, result, rng, layout, live, index, "move", rng.choice(live))
    db.dispose()
    out.put(result)


def _write(
    db: Database,
    result: ProcessResult,
    rng: random.Random,
    layout: Layout,
    live: list[str],
    index: int,
    action: str,
    consumer: str,
) -> None:
    old = result.acked.get(consumer, Ack({}, None))
    if action == "delete":
        wanted: Alloc = {}
    else:
        host = rng.choice([h for h in layout.hosts if h not in old.allocations])
        amounts = {"VCPU": rng.randint(1, 4)}
        if rng.random() < 0.5:
            amounts["MEMORY_MB"] = 256 * rng.randint(1, 8)
        wanted = {host: amounts}
    project = f"{PROJECT}-{index % WRITER_PROJECTS}"
    request = ConsumerAllocations(consumer, project, USER, TYPE, old.generation, wanted)
    new = Ack(wanted, None if not wanted else (old.generation or 0) + 1)

    def run() -> None:
        alloc.replace_allocations(db, request)
        result.acked[consumer] = new

    _attempt(result, action, run, lambda: _settle_lost(db, result, consumer, old, new))
    state = result.acked.get(consumer)
    if state is not None and state.allocations and consumer not in live:
        live.append(consumer)
    elif (state is None or not state.allocations) and consumer in live:
        live.remove(consumer)


def _scheduler(
    url: str, layout: Layout, index: int, deadline: float, seed: int, min_calls: int, out: Any
) -> None:
    rng = random.Random(seed * 1000 + 500 + index)
    kind = list(GROUP_KINDS)[index % len(GROUP_KINDS)]
    group = layout.groups[kind]
    db = Database(url)
    result = ProcessResult()
    _counting(result)
    mine: list[str] = []
    while time.time() < deadline or sum(result.calls.values()) < min_calls:
        if mine and (len(mine) >= SCHEDULER_KEEPS or rng.random() < 0.3):
            _release(db, result, group, mine)
        else:
            _schedule(db, result, kind, group, mine)
    db.dispose()
    out.put(result)


def _schedule(db: Database, result: ProcessResult, kind: str, group: str, mine: list[str]) -> None:
    instance = str(uuidlib.uuid4())
    old = Ack({}, None, group)

    def run() -> None:
        placed = scheduling.schedule(
            db, SCHEDULE_REQUEST, group, project_id=PROJECT, user_id=USER,
            consumer_type=TYPE, instance_uuids=[instance],
        )  # fmt: skip
        result.acked[instance] = Ack(
            {rp: dict(rcs) for rp, rcs in placed[0].allocations.items()}, 1, group
        )

    def lost() -> None:
        now = read_state(db, instance)
        now.group = group
        result.acked[instance] = now

    _attempt(result, f"schedule.{kind}", run, lost)
    if result.acked.get(instance, old).allocations:
        mine.append(instance)


def _release(db: Database, result: ProcessResult, group: str, mine: list[str]) -> None:
    """Delete the oldest instance's allocations, then its membership."""
    instance = mine[0]
    old = result.acked[instance]

    def run() -> None:
        if old.allocations:
            generation = old.generation if old.generation is not None else 1
            alloc.delete_allocations(db, instance, consumer_generation=generation)
            result.acked[instance] = Ack({}, None, None)  # membership not checked
        sg.remove_members(db, group, [instance])
        result.acked[instance] = Ack({}, None, group)  # allocations and membership gone
        mine.remove(instance)

    def lost() -> None:
        now = read_state(db, instance)
        # still a member unless both calls had been acknowledged
        result.acked[instance] = Ack(
            now.allocations, now.generation, group if now.allocations else None
        )

    _attempt(result, "release", run, lost)


# ---------------------------------------------------------------- killer


def _killer(url: str, backend: str, every: float, stop: threading.Event, kills: list[int]) -> None:
    """Terminate one random client connection of the database every ``every`` seconds."""
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    if backend == "postgresql":
        find = (
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        kill = "SELECT pg_terminate_backend({})"
    else:
        find = (
            "SELECT id FROM information_schema.processlist "
            "WHERE db = DATABASE() AND id <> CONNECTION_ID()"
        )
        kill = "KILL CONNECTION {}"
    rng = random.Random(7)
    try:
        with engine.connect() as conn:
            while not stop.wait(every * rng.uniform(0.5, 1.5)):
                ids = [int(i) for i in conn.exec_driver_sql(find).scalars()]
                if not ids:
                    continue
                try:
                    conn.exec_driver_sql(kill.format(rng.choice(ids)))
                    kills[0] += 1
                except sa.exc.DBAPIError:
                    pass  # gone meanwhile
    finally:
        engine.dispose()


# ---------------------------------------------------------------- driver


def run_workload(
    db: Database,
    backend: str,
    workload: Workload,
    *,
    during: Callable[[], None] | None = None,
) -> RunResult:
    """Set up ``db`` (migrated and empty), run the processes, check the invariants.
    ``during``, a fault to inject (a Galera node stalled...), runs in a thread of its
    own once the processes have started; it is waited for before the check."""
    layout = setup(db, workload.hosts)
    url = db.url.render_as_string(hide_password=False)
    db.dispose()
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    deadline = time.time() + workload.seconds
    common = (deadline, workload.seed, workload.min_calls, out)
    procs = [
        ctx.Process(target=child, args=(_writer, url, layout, i, *common))
        for i in range(workload.writers)
    ] + [
        ctx.Process(target=child, args=(_scheduler, url, layout, i, *common))
        for i in range(workload.schedulers)
    ]
    started = time.time()
    for p in procs:
        p.start()
    stop, kills = threading.Event(), [0]
    killer = None
    if workload.kill_every and backend != "sqlite":
        killer = threading.Thread(
            target=_killer, args=(url, backend, workload.kill_every, stop, kills)
        )
        killer.start()
    fault = threading.Thread(target=during) if during is not None else None
    if fault is not None:
        fault.start()
    results = [out.get(timeout=workload.seconds + 600) for _ in procs]
    stop.set()
    if killer is not None:
        killer.join()
    if fault is not None:
        fault.join()
    for p in procs:
        p.join(timeout=60)
    seconds = time.time() - started
    calls: Counter[str] = Counter()
    retries: Counter[str] = Counter()
    acked: dict[str, Ack] = {}
    violations: list[str] = []
    lost: list[str] = []
    for r in results:
        calls.update(r.calls)
        retries.update(r.retries)
        acked.update(r.acked)
        violations += r.violations
        lost += r.lost
    found = check_invariants(db, acked, layout.groups, ANTI_AFFINITY_LIMIT)
    return RunResult(
        backend,
        workload,
        seconds,
        calls,
        retries,
        kills[0],
        found.checked,
        violations + found.violations,
        lost,
    )


def run_backends(
    backends: tuple[str, ...], workload: Workload
) -> tuple[list[RunResult], dict[str, str]]:
    """The workload on each backend that answers, each in a scratch database."""
    urls, missing = available_backends(backends)
    runs = []
    for backend in backends:
        if backend not in urls:
            continue
        with scratch_database(backend, urls[backend]) as db:
            db.upgrade()
            runs.append(run_workload(db, backend, workload))
    return runs, missing


#: Seconds of contention per backend at each ``make bench`` scale.
SECONDS_AT_SCALE = {"tiny": 2.0, "small": 10.0, "medium": 20.0, "large": 30.0}


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The report's table (from :meth:`RunResult.summary` rows): throughput, conflicts
    and give-up rates per backend."""
    headers = [
        "backend", "writes/s", "acknowledged writes", "conflicts", "retries", "deadlocks",
        "give-ups", "give-up rate (claims, moves, deletes)",
        "give-up rate schedule (plain / affinity / anti-affinity)",
        "killed connections (writes lost)", "invariants checked", "violations",
    ]  # fmt: skip
    return table(headers, map(_cells, rows))


def _cells(s: dict[str, Any]) -> list[Any]:
    sched = " / ".join(f"{100 * v:.2f} %" for v in s["give_up_rate_schedule"].values())
    return [
        s["backend"], s["writes_per_s"], s["acknowledged_writes"], s["conflicts"],
        s["retries"], s["deadlocks"], s["give_ups"], f"{100 * s['give_up_rate_writes']:.2f} %",
        sched, f"{s['kills']} ({s['lost_to_kills']})", s["invariants_checked"],
        len(s["violations"]),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql,mysql")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--schedulers", type=int, default=8)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--kill-every", type=float, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    workload = Workload(args.writers, args.schedulers, args.hosts, args.seconds, args.kill_every)
    runs, missing = run_backends(tuple(args.backends.split(",")), workload)
    for backend, reason in missing.items():
        print(f"{backend}: skipped ({reason})")
    if args.json:
        print(json.dumps([r.summary() for r in runs], indent=1))
    else:
        print("\n".join(markdown([r.summary() for r in runs])))
    return 1 if any(r.violations for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
