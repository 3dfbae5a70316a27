"""Seeded, parametrised test clouds, bulk-loaded into a Placement-compatible database.

Benchmarks, tests and ``rpquery load`` need realistic clouds of a chosen size: flat
compute nodes; nested hosts (NUMA children carrying VCPU/MEMORY_MB, each NUMA node with
an SR-IOV PF child carrying SRIOV_NET_VF); sharing storage providers (DISK_GB +
``MISC_SHARES_VIA_AGGREGATE``) shared with the hosts of their aggregate; standard and
custom traits; and existing allocations from INSTANCE, MIGRATION and untyped consumers
of several projects and users, filling each host to about ``fill`` of its memory.

The same :class:`CloudSpec` always produces the same rows (names, uuids, amounts), so
two databases loaded from one spec can be compared answer for answer.

Loading is set-based: ids are computed up front, every table is written with
executemany of a Core insert (PostgreSQL: ``COPY``) in chunks, never one statement
per row, all in one transaction; planner statistics are refreshed afterwards.

>>> from rpquery.db import Database
>>> db = Database("sqlite://")
>>> summary = load_cloud(db, CloudSpec(hosts=20, seed=7))
>>> summary.hosts, summary.providers >= 20, summary.allocations > 0
(20, True, True)
"""

from __future__ import annotations

import math
import queue
import random
import threading
import time
import uuid as uuidlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.store import catalog, dialects, migrations
from rpquery.store.tables import (
    allocations,
    consumer_counts,
    consumer_types,
    consumers,
    inventories,
    placement_aggregates,
    projects,
    provider_usages,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
    traits,
    usage_totals,
    users,
    utcnow,
)
from rpquery.usage import provider_totals, summary

__all__ = [
    "ALLOCATION_COLS",
    "BULK_TABLES",
    "CHUNK",
    "CONSUMER_COLS",
    "CONSUMER_TYPES",
    "CUSTOM_TRAITS",
    "FLAVORS",
    "GROUPED",
    "INVENTORY_COLS",
    "PROVIDER_COLS",
    "RACKS",
    "SUMMARY_INSERT_TRIGGERS",
    "TRIGGERS",
    "CloudSpec",
    "CloudSummary",
    "Progress",
    "load_cloud",
]

#: ``progress(stage, done, total)`` is called after every chunk written.
Progress = Callable[[str, int, int], None]

CHUNK = 10_000
#: Tables whose planner statistics are refreshed after a load.
BULK_TABLES = (
    resource_providers,
    inventories,
    allocations,
    consumers,
    resource_provider_traits,
    resource_provider_aggregates,
    placement_aggregates,
    # filled by rpq0006's and rpq0007's triggers as allocations are written
    usage_totals,
    consumer_counts,
    provider_usages,
)
#: The insert triggers of the usage summaries (migrations rpq0006 and rpq0007) that a
#: grouped load suspends and does the work of (``load_cloud(summaries="grouped")``).
SUMMARY_INSERT_TRIGGERS = {
    "allocations": ("rpq_usage_alloc_insert", "rpq_provider_usage_insert"),
    "consumers": ("rpq_usage_consumer_insert",),
}
GROUPED = "grouped"
TRIGGERS = "triggers"
CONSUMER_TYPES = ("INSTANCE", "MIGRATION")
CUSTOM_TRAITS = ("CUSTOM_GPU", "CUSTOM_LICENSED_WINDOWS", "CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B")
RACKS = 8
#: (vcpu, memory_mb, disk_gb, weight): a flavor mix skewed to small instances.
FLAVORS = (
    (1, 2048, 20, 3),
    (2, 4096, 40, 4),
    (4, 8192, 80, 3),
    (8, 16384, 160, 2),
    (16, 32768, 320, 1),
)
_FLAVOR_WEIGHTS = [f[3] for f in FLAVORS]


@dataclass(frozen=True)
class CloudSpec:
    """What to generate. Every field has a sensible default except ``hosts``.

    >>> CloudSpec(hosts=1000, nested=False).sharing
    2
    """

    hosts: int
    nested: bool = True
    #: Number of sharing storage providers (each with its own aggregate).
    sharing: int = 2
    seed: int = 42
    #: Fraction of each host's memory (and the shared disk) already allocated.
    fill: float = 0.5
    projects: int = 20
    users_per_project: int = 3
    #: With ``nested``, the fraction of hosts that have NUMA and SR-IOV PF children.
    nested_ratio: float = 0.35
    #: Fraction of hosts with trait ``CUSTOM_GPU``.
    gpu_ratio: float = 0.1
    #: With ``sharing``, the fraction of hosts without local disk that use shared disk.
    shared_disk_ratio: float = 0.2
    hosts_per_aggregate: int = 50
    #: Prefix of provider names; names must be unique in a database.
    name_prefix: str = "cn"

    def __post_init__(self) -> None:
        checks: list[tuple[str, bool]] = [
            ("hosts", self.hosts >= 1),
            ("sharing", self.sharing >= 0),
            ("fill", 0.0 <= self.fill <= 1.0),
            ("projects", self.projects >= 1),
            ("users_per_project", self.users_per_project >= 1),
            ("nested_ratio", 0.0 <= self.nested_ratio <= 1.0),
            ("gpu_ratio", 0.0 <= self.gpu_ratio <= 1.0),
            ("shared_disk_ratio", 0.0 <= self.shared_disk_ratio <= 1.0),
            ("hosts_per_aggregate", self.hosts_per_aggregate >= 1),
        ]
        for name, ok in checks:
            if not ok:
                raise InvalidRequest(
                    "rpquery.generator.bad_spec",
                    f"CloudSpec.{name}={getattr(self, name)!r} is out of range",
                    token=name,
                )


@dataclass(frozen=True)
class CloudSummary:
    """What :func:`load_cloud` wrote, plus handles that scenarios need.

    ``rows`` counts rows per table; ``seconds`` is the wall time of the load.
    """

    spec: CloudSpec
    hosts: int
    providers: int
    allocations: int
    consumers: int
    seconds: float
    rows: dict[str, int]
    host_aggregates: tuple[str, ...]
    sharing_aggregates: tuple[str, ...]
    project_ids: tuple[str, ...]
    user_ids: tuple[str, ...]
    #: A few root provider uuids (for ``in_tree`` and write scenarios).
    sample_hosts: tuple[str, ...] = field(default=())
    #: How the usage summaries learnt the loaded rows: ``"grouped"`` (one grouped pass,
    #: triggers suspended) or ``"triggers"`` (MySQL/MariaDB, or asked for).
    summaries: str = "triggers"


# ---------------------------------------------------------------- planning (no database)


@dataclass
class _Host:
    """One planned host: where each class lives and how much is left to fill."""

    root: int
    compute: list[int]  # providers holding VCPU + MEMORY_MB (the root or its NUMA nodes)
    pfs: list[int]
    disk: int | None  # provider holding this host's DISK_GB (root or sharing provider)


@dataclass
class _Plan:
    providers: list[tuple[Any, ...]] = field(default_factory=list)
    inventories: list[tuple[Any, ...]] = field(default_factory=list)
    traits: list[tuple[int, int]] = field(default_factory=list)
    aggregates: list[tuple[int, int]] = field(default_factory=list)
    aggregate_rows: list[tuple[int, str]] = field(default_factory=list)
    hosts: list[_Host] = field(default_factory=list)
    #: provider id -> {class name: capacity to fill}
    capacity: dict[int, dict[str, int]] = field(default_factory=dict)
    host_aggregates: list[str] = field(default_factory=list)
    sharing_aggregates: list[str] = field(default_factory=list)


@dataclass
class _Ids:
    """Next free id per table plus the name → id maps of the catalog tables."""

    next: dict[str, int]
    rc: dict[str, int]
    trait: dict[str, int]

    def take(self, table: str) -> int:
        value = self.next[table]
        self.next[table] = value + 1
        return value


def _uuid(rng: random.Random) -> str:
    return str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


class _Planner:
    """Turns a spec into rows; all randomness comes from one seeded ``Random``."""

    def __init__(self, spec: CloudSpec, ids: _Ids) -> None:
        self.spec = spec
        self.ids = ids
        self.rng = random.Random(spec.seed)
        self.plan = _Plan()

    def provider(self, name: str, parent: int | None, root: int | None) -> int:
        rp_id = self.ids.take("resource_providers")
        self.plan.providers.append((rp_id, _uuid(self.rng), name, 1, root or rp_id, parent))
        return rp_id

    def inventory(
        self,
        rp_id: int,
        rc: str,
        total: int,
        *,
        reserved: int = 0,
        ratio: float = 1.0,
        max_unit: int | None = None,
    ) -> None:
        self.plan.inventories.append(
            (
                self.ids.take("inventories"),
                rp_id,
                self.ids.rc[rc],
                total,
                reserved,
                1,
                max_unit or total,
                1,
                ratio,
            )
        )
        capacity = int((total - reserved) * ratio * self.spec.fill)
        self.plan.capacity.setdefault(rp_id, {})[rc] = capacity

    def tag(self, rp_id: int, *names: str) -> None:
        self.plan.traits.extend((self.ids.trait[n], rp_id) for n in names)

    def aggregate(self, kind: list[str]) -> int:
        agg_id = self.ids.take("placement_aggregates")
        agg_uuid = _uuid(self.rng)
        self.plan.aggregate_rows.append((agg_id, agg_uuid))
        kind.append(agg_uuid)
        return agg_id

    def build(self) -> _Plan:
        spec = self.spec
        sharing = [self._sharing_provider(k) for k in range(spec.sharing)]
        host_agg = 0
        for i in range(spec.hosts):
            if i % spec.hosts_per_aggregate == 0:
                host_agg = self.aggregate(self.plan.host_aggregates)
            self._host(i, host_agg, sharing)
        return self.plan

    def _sharing_provider(self, k: int) -> tuple[int, int]:
        agg_id = self.aggregate(self.plan.sharing_aggregates)
        served = max(
            1, math.ceil(self.spec.hosts * self.spec.shared_disk_ratio / self.spec.sharing)
        )
        rp_id = self.provider(f"{self.spec.name_prefix}-ss{k:03d}", None, None)
        self.inventory(rp_id, "DISK_GB", 4000 * served, max_unit=2000)
        self.tag(rp_id, "MISC_SHARES_VIA_AGGREGATE", *(["STORAGE_DISK_SSD"] if k % 2 else []))
        self.plan.aggregates.append((rp_id, agg_id))
        return rp_id, agg_id

    def _host(self, i: int, host_agg: int, sharing: Sequence[tuple[int, int]]) -> None:
        spec, rng = self.spec, self.rng
        root = self.provider(f"{spec.name_prefix}{i:06d}", None, None)
        self.plan.aggregates.append((root, host_agg))
        vcpus = rng.choice((32, 48, 64, 96, 128))
        memory = vcpus * rng.choice((2048, 4096, 8192))
        shared = bool(sharing) and rng.random() < spec.shared_disk_ratio
        disk: int | None = root
        if shared:
            ss_id, agg_id = sharing[i % len(sharing)]
            self.plan.aggregates.append((root, agg_id))
            disk = ss_id
        else:
            self.inventory(root, "DISK_GB", rng.choice((1000, 2000, 4000)))
        self.tag(root, *self._root_traits(shared))
        host = _Host(root, [root], [], disk)
        if spec.nested and rng.random() < spec.nested_ratio:
            host.compute = [self._numa(root, i, n, vcpus // 2, memory // 2) for n in range(2)]
            # A NIC hangs off one NUMA node, so same_subtree requests have something to find.
            host.pfs = [self._pf(host.compute[n], root, i, n) for n in range(rng.choice((1, 2)))]
        else:
            self.inventory(root, "VCPU", vcpus, ratio=4.0)
            self.inventory(root, "MEMORY_MB", memory, reserved=4096)
        self.plan.hosts.append(host)

    def _root_traits(self, shared: bool) -> list[str]:
        rng = self.rng
        names = ["HW_CPU_X86_SSE42", f"CUSTOM_RACK_{rng.randrange(RACKS)}"]
        optional = (
            ("HW_CPU_X86_AVX2", 0.7),
            ("HW_CPU_X86_AVX512F", 0.2),
            ("COMPUTE_VOLUME_MULTI_ATTACH", 0.5),
            ("CUSTOM_LICENSED_WINDOWS", 0.15),
            ("CUSTOM_GPU", self.spec.gpu_ratio),
        )
        names += [name for name, p in optional if rng.random() < p]
        if not shared and rng.random() < 0.4:
            names.append("STORAGE_DISK_SSD")
        return names

    def _numa(self, root: int, i: int, n: int, vcpus: int, memory: int) -> int:
        rp_id = self.provider(f"{self.spec.name_prefix}{i:06d}_numa{n}", root, root)
        self.inventory(rp_id, "VCPU", vcpus, ratio=4.0)
        self.inventory(rp_id, "MEMORY_MB", memory, reserved=2048)
        self.tag(rp_id, "HW_NUMA_ROOT")
        return rp_id

    def _pf(self, numa: int, root: int, i: int, n: int) -> int:
        rp_id = self.provider(f"{self.spec.name_prefix}{i:06d}_numa{n}_pf", numa, root)
        self.inventory(rp_id, "SRIOV_NET_VF", 16)
        physnet = "CUSTOM_PHYSNET_A" if n == 0 else "CUSTOM_PHYSNET_B"
        extra = ["HW_NIC_OFFLOAD_TSO"] if self.rng.random() < 0.5 else []
        self.tag(rp_id, "HW_NIC_SRIOV", physnet, *extra)
        return rp_id


# ---------------------------------------------------------------- existing allocations


@dataclass(frozen=True)
class _People:
    projects: list[tuple[int, str]]  # (id, external_id)
    users: list[list[tuple[int, str]]]  # per project
    types: dict[str | None, int | None]


def _consumer_type(rng: random.Random) -> str | None:
    roll = rng.random()
    return "INSTANCE" if roll < 0.85 else "MIGRATION" if roll < 0.95 else None


def _instances(
    plan: _Plan, spec: CloudSpec, ids: _Ids, people: _People
) -> Iterator[tuple[tuple[Any, ...], list[tuple[Any, ...]]]]:
    """Yield ``(consumer row, allocation rows)`` until every host reaches ``fill``."""
    rng = random.Random(spec.seed * 7919 + 1)
    left = {rp: dict(caps) for rp, caps in plan.capacity.items()}
    for host in plan.hosts:
        misses = 0
        while misses < 3:
            vcpu, mem, disk, _ = rng.choices(FLAVORS, weights=_FLAVOR_WEIGHTS)[0]
            compute = rng.choice(host.compute)
            want = [(compute, "VCPU", vcpu), (compute, "MEMORY_MB", mem)]
            if host.disk is not None:
                want.append((host.disk, "DISK_GB", disk))
            if host.pfs and rng.random() < 0.3:
                want.append((rng.choice(host.pfs), "SRIOV_NET_VF", 1))
            if any(left[rp].get(rc, 0) < amount for rp, rc, amount in want):
                misses += 1
                continue
            for rp, rc, amount in want:
                left[rp][rc] -= amount
            yield _consumer_rows(rng, ids, people, want)


def _consumer_rows(
    rng: random.Random, ids: _Ids, people: _People, want: list[tuple[int, str, int]]
) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    p = rng.randrange(len(people.projects))
    project_id = people.projects[p][0]
    user_id = rng.choice(people.users[p])[0]
    consumer_uuid = _uuid(rng)
    type_id = people.types[_consumer_type(rng)]
    consumer = (ids.take("consumers"), consumer_uuid, project_id, user_id, 1, type_id)
    rows = [
        (ids.take("allocations"), rp, consumer_uuid, ids.rc[rc], amount) for rp, rc, amount in want
    ]
    return consumer, rows


# ---------------------------------------------------------------- loading


PROVIDER_COLS = ("id", "uuid", "name", "generation", "root_provider_id", "parent_provider_id")
INVENTORY_COLS = (
    "id",
    "resource_provider_id",
    "resource_class_id",
    "total",
    "reserved",
    "min_unit",
    "max_unit",
    "step_size",
    "allocation_ratio",
)
CONSUMER_COLS = ("id", "uuid", "project_id", "user_id", "generation", "consumer_type_id")
ALLOCATION_COLS = ("id", "resource_provider_id", "consumer_id", "resource_class_id", "used")


def _chunks(rows: Iterator[Any] | Sequence[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    it = iter(rows)
    while chunk := list(islice(it, size)):
        yield chunk


class _Writer:
    """Writes chunks of tuples through :func:`dialects.bulk_insert`, reporting progress."""

    def __init__(self, conn: Connection, progress: Progress | None) -> None:
        self.conn = conn
        self.progress = progress
        self.now = utcnow()
        self.rows: dict[str, int] = {}

    def write(
        self,
        table: sa.Table,
        cols: Sequence[str],
        rows: Sequence[tuple[Any, ...]],
        total: int | None = None,
    ) -> None:
        if not rows:
            return
        stamped = [(*row, self.now) for row in rows]
        dialects.bulk_insert(self.conn, table, (*cols, "created_at"), stamped)
        done = self.rows.get(table.name, 0) + len(rows)
        self.rows[table.name] = done
        if self.progress is not None:
            self.progress(table.name, done, total if total is not None else done)

    def finish(self, table: sa.Table) -> None:
        """Report ``table`` complete: its total becomes the rows written (the estimate
        it was shown against may have been larger)."""
        done = self.rows.get(table.name, 0)
        if self.progress is not None and done:
            self.progress(table.name, done, done)

    def write_all(
        self, table: sa.Table, cols: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        for chunk in _chunks(rows):
            self.write(table, cols, chunk, len(rows))


def load_cloud(
    db: Database,
    spec: CloudSpec,
    *,
    progress: Progress | None = None,
    summaries: str = GROUPED,
) -> CloudSummary:
    """Upgrade the schema, then write the cloud described by ``spec`` in one transaction.

    ``progress(stage, done, total)`` is called after each chunk (stage = table name;
    for allocations ``total`` is an estimate). Provider names must not collide with
    existing ones (change ``name_prefix`` to load a second cloud): a collision raises
    :class:`~rpquery.errors.Conflict` and nothing is written.

    ``summaries``: ``"grouped"`` (default) suspends the usage summaries' insert
    triggers for the load's transaction, holding off other writers of ``allocations``
    and ``consumers`` (readers go on), and adds the loaded rows to the summaries in one
    grouped pass per table before committing (PostgreSQL, SQLite; on MySQL/MariaDB,
    where trigger DDL would commit, and on PostgreSQL without the tables' ownership,
    the triggers do the work). ``"triggers"`` lets the triggers do it as rows are
    written. Both leave the same summaries; ``CloudSummary.summaries`` says which ran.
    """
    if summaries not in (GROUPED, TRIGGERS):
        raise InvalidRequest(
            "rpquery.generator.bad_option",
            f"summaries={summaries!r}: expected {GROUPED!r} or {TRIGGERS!r}",
            token="summaries",
        )
    started = time.perf_counter()
    migrations.upgrade(db)
    with db.begin() as conn, _summaries_mode(conn, summaries) as grouped:
        # No trigger reads the tables meanwhile: with them suspended, their plain
        # indexes can wait too (built again, and the tables analysed, when it ends).
        tables = tuple(SUMMARY_INSERT_TRIGGERS)
        backend = dialects.backend(conn.dialect.name)
        with backend.indexes_deferred(conn, tables) if grouped else nullcontext():
            ids = _prepare_ids(conn)
            first = dict(ids.next)
            plan = _Planner(spec, ids).build()
            people = _people(conn, spec)
            writer = _Writer(conn, progress)
            _write_topology(writer, plan)
            n_consumers = _write_allocations(writer, plan, spec, ids, people)
        if grouped:
            last = {table: ids.next[table] - 1 for table in first}
            summary.add_new_consumers(conn, first["consumers"], last["consumers"])
            provider_totals.add_new_allocations(conn, first["allocations"], last["allocations"])
            if progress is not None:
                progress("usage summaries", 1, 1)
        for table in (
            resource_providers,
            inventories,
            placement_aggregates,
            consumers,
            allocations,
        ):
            dialects.sync_id_sequence(conn, table)
    dialects.refresh_after_bulk_load(db.engine, BULK_TABLES)
    return _summary_of(spec, plan, writer, people, n_consumers, started, grouped)


def _summary_of(
    spec: CloudSpec,
    plan: _Plan,
    writer: _Writer,
    people: _People,
    n_consumers: int,
    started: float,
    grouped: bool,
) -> CloudSummary:
    """What :func:`load_cloud` wrote."""
    uuid_of = {p[0]: p[1] for p in plan.providers}
    step = max(1, len(plan.hosts) // 10)
    return CloudSummary(
        spec=spec,
        hosts=len(plan.hosts),
        providers=len(plan.providers),
        allocations=writer.rows.get("allocations", 0),
        consumers=n_consumers,
        seconds=time.perf_counter() - started,
        rows=dict(writer.rows),
        host_aggregates=tuple(plan.host_aggregates),
        sharing_aggregates=tuple(plan.sharing_aggregates),
        project_ids=tuple(ext for _, ext in people.projects),
        user_ids=tuple(ext for group in people.users for _, ext in group),
        sample_hosts=tuple(uuid_of[h.root] for h in plan.hosts[::step][:10]),
        summaries=GROUPED if grouped else TRIGGERS,
    )


@contextmanager
def _summaries_mode(conn: Connection, summaries: str) -> Iterator[bool]:
    """Yields whether the load does the summaries' work itself (triggers suspended)."""
    if summaries == TRIGGERS:
        yield False
        return
    with dialects.backend(conn.dialect.name).triggers_suspended(
        conn, SUMMARY_INSERT_TRIGGERS
    ) as suspended:
        yield suspended


def _write_topology(writer: _Writer, plan: _Plan) -> None:
    # Roots first: a child's parent and root must exist when the child is checked.
    ordered = sorted(plan.providers, key=lambda p: p[5] is not None)
    writer.write_all(resource_providers, PROVIDER_COLS, ordered)
    writer.write_all(inventories, INVENTORY_COLS, plan.inventories)
    writer.write_all(resource_provider_traits, ("trait_id", "resource_provider_id"), plan.traits)
    writer.write_all(placement_aggregates, ("id", "uuid"), plan.aggregate_rows)
    writer.write_all(
        resource_provider_aggregates, ("resource_provider_id", "aggregate_id"), plan.aggregates
    )


def _write_allocations(
    writer: _Writer, plan: _Plan, spec: CloudSpec, ids: _Ids, people: _People
) -> int:
    # About 86 allocation rows (28 consumers) per host at fill=1 with the default mix.
    estimate = int(len(plan.hosts) * 86 * spec.fill)
    n_consumers = 0
    for chunk in _built_ahead(_chunks(_instances(plan, spec, ids, people), CHUNK // 3)):
        done = writer.rows.get("consumers", 0) + len(chunk)
        writer.write(consumers, CONSUMER_COLS, [c for c, _ in chunk], max(estimate // 3, done))
        rows = [row for _, allocs in chunk for row in allocs]
        done = writer.rows.get("allocations", 0) + len(rows)
        writer.write(allocations, ALLOCATION_COLS, rows, max(estimate, done))
        n_consumers += len(chunk)
    writer.finish(consumers)
    writer.finish(allocations)
    return n_consumers


@dataclass(frozen=True)
class _Failed:
    error: BaseException


def _built_ahead(items: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """``items``, computed by a background thread up to ``depth`` ahead: the next
    chunk of consumers and allocations is generated (Python) while the database
    ingests this one (the driver waits for it without holding the GIL), so on two
    cores the load takes about the longer of the two instead of their sum. Same items,
    same order; an exception in the thread is raised here, and the thread stops when
    the caller does."""
    ready: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def hand_over(item: Any) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not hand_over(item):
                    return
            hand_over(done)
        except BaseException as error:  # handed to the caller's thread
            hand_over(_Failed(error))

    thread = threading.Thread(target=produce, name="rpquery-generator", daemon=True)
    thread.start()
    try:
        while (item := ready.get()) is not done:
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join()


def _prepare_ids(conn: Connection) -> _Ids:
    """Next free ids of the bulk tables; custom traits created, catalog ids looked up."""
    next_ids = {}
    for table in (resource_providers, inventories, placement_aggregates, consumers, allocations):
        top = conn.execute(sa.select(sa.func.max(table.c.id))).scalar()
        next_ids[table.name] = int(top or 0) + 1
    have = set(conn.execute(sa.select(traits.c.name)).scalars())
    wanted = set(CUSTOM_TRAITS) | {f"CUSTOM_RACK_{r}" for r in range(RACKS)}
    dialects.insert_ignore(conn, traits, [{"name": n} for n in sorted(wanted - have)])
    trait_names = wanted | {
        "HW_CPU_X86_SSE42",
        "HW_CPU_X86_AVX2",
        "HW_CPU_X86_AVX512F",
        "STORAGE_DISK_SSD",
        "COMPUTE_VOLUME_MULTI_ATTACH",
        "MISC_SHARES_VIA_AGGREGATE",
        "HW_NUMA_ROOT",
        "HW_NIC_SRIOV",
        "HW_NIC_OFFLOAD_TSO",
    }
    return _Ids(
        next=next_ids,
        rc=catalog.require_resource_class_ids(
            conn, ("VCPU", "MEMORY_MB", "DISK_GB", "SRIOV_NET_VF")
        ),
        trait=catalog.require_trait_ids(conn, trait_names),
    )


def _people(conn: Connection, spec: CloudSpec) -> _People:
    """Projects, users and consumer types, reusing rows that already exist."""
    project_names = [f"project-{spec.seed}-{p:04d}" for p in range(spec.projects)]
    user_names = [
        [f"user-{spec.seed}-{p:04d}-{u}" for u in range(spec.users_per_project)]
        for p in range(spec.projects)
    ]
    project_ids = _get_or_create(conn, projects, "external_id", project_names)
    user_ids = _get_or_create(
        conn, users, "external_id", [n for group in user_names for n in group]
    )
    type_ids: dict[str | None, int | None] = {
        name: type_id
        for name, type_id in _get_or_create(
            conn, consumer_types, "name", list(CONSUMER_TYPES)
        ).items()
    }
    type_ids[None] = None
    return _People(
        projects=[(project_ids[n], n) for n in project_names],
        users=[[(user_ids[n], n) for n in group] for group in user_names],
        types=type_ids,
    )


def _get_or_create(
    conn: Connection, table: sa.Table, col: str, names: list[str]
) -> dict[str, int]:
    """Two statements whatever the count: insert the missing names, read all ids back."""
    dialects.insert_ignore(conn, table, [{col: n, "created_at": utcnow()} for n in names])
    rows = conn.execute(sa.select(table.c[col], table.c.id).where(table.c[col].in_(names)))
    return {name: int(row_id) for name, row_id in rows}
