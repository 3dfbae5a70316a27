"""``limit`` walks the roots in id order, batch by batch (issue 18, item 2): the answer
must be the unlimited answer's first ``limit`` candidates, in the same order, with the
summaries of the trees they allocate from, whatever the batches.

The cloud puts full hosts first in id order (so the first batch finds few candidates
and later batches are sized from it), a sharing storage pool between them, NUMA hosts
giving several candidates each, a root trait, a forbidden aggregate and a resourceless
group under ``same_subtree``; every request is checked at every ``limit`` from 1 to one
past its answer's size, on every backend. A random-cloud property test checks the same
against the unlimited answer.
"""

from __future__ import annotations

import dataclasses
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpquery.db import Database
from rpquery.read.candidates import AllocationCandidates, allocation_candidates
from rpquery.read.candidates import _batches as bt
from rpquery.read.candidates import _execute as ex
from rpquery.read.candidates._spread import spread
from rpquery.read.request import CandidatesRequest, parse_candidates
from rpquery.store import runner
from rpquery.store.tables import resource_providers
from tests import test_candidates_property as prop
from tests.factories import Ref, allocate, provider


@pytest.fixture(autouse=True)
def walks(monkeypatch: pytest.MonkeyPatch) -> None:
    """These small clouds are walked batch by batch, as a big cloud is (not read in one
    batch: :attr:`~rpquery.read.candidates._execute.Batches.ONE_BATCH`), except in the
    tests of that rule."""
    monkeypatch.setattr(bt.Batches, "ONE_BATCH", 0)


AGG = "a1000000-0000-4000-8000-000000000001"
OTHER = "a1000000-0000-4000-8000-000000000002"
SHARING = "MISC_SHARES_VIA_AGGREGATE"
FLAT = {"VCPU": 4, "MEMORY_MB": 2048}


def _full_host(conn: Any, name: str, i: int, aggregates: list[str]) -> None:
    """A host with no room for ``VCPU:1``: reserved, or allocated to the last unit."""
    if i % 2:
        inv: dict[str, Any] = {"VCPU": {"total": 4, "reserved": 4}, "MEMORY_MB": 2048}
        provider(conn, name, inventory=inv, aggregates=aggregates)
        return
    host = provider(conn, name, inventory=FLAT, aggregates=aggregates)
    allocate(conn, f"c-{name}", host, "VCPU", 4)


def _numa_host(conn: Any, name: str, aggregates: list[str], traits: tuple[str, ...] = ()) -> None:
    root = provider(conn, name, inventory={"MEMORY_MB": 4096}, aggregates=aggregates)
    for n in range(2):
        provider(
            conn,
            f"{name}_numa{n}",
            parent=root,
            inventory={"VCPU": 2},
            traits=["CUSTOM_NUMA_TAG"] if n else list(traits),
        )


@pytest.fixture
def walk(db: Database) -> Database:
    """Full hosts first, the sharing pool among them, then hosts with room (flat and
    NUMA, some in the pool's aggregate), more full hosts, more hosts with room."""
    with db.begin() as conn:
        for i in range(24):
            _full_host(conn, f"full_a{i:02d}", i, [AGG] if i % 3 == 0 else [])
        provider(
            conn,
            "pool",
            inventory={"DISK_GB": 1000},
            traits=[SHARING],
            aggregates=[AGG],
        )
        for i in range(16):
            _full_host(conn, f"full_b{i:02d}", i, [AGG] if i % 4 == 0 else [])
        provider(conn, "flat_1", inventory=FLAT, aggregates=[AGG])
        _numa_host(conn, "numa_1", [AGG])
        provider(conn, "flat_2", inventory={**FLAT, "DISK_GB": 100}, traits=["CUSTOM_X"])
        _numa_host(conn, "numa_2", [OTHER], traits=("CUSTOM_Y",))
        for i in range(30):
            _full_host(conn, f"full_c{i:02d}", i, [AGG])
        provider(conn, "flat_3", inventory=FLAT, aggregates=[AGG, OTHER], traits=["CUSTOM_X"])
        _numa_host(conn, "numa_3", [])
        provider(conn, "flat_4", inventory={**FLAT, "DISK_GB": 100}, aggregates=[AGG])
    return db


def ordered(answer: AllocationCandidates) -> list[tuple[Any, ...]]:
    return [
        (ar.root_uuid, dict(ar.allocations), dict(ar.mappings))
        for ar in answer.allocation_requests
    ]


def assert_prefixes(db: Database, qs: str) -> int:
    """``qs&limit=k`` is the first ``k`` candidates of ``qs`` in the order of limited
    answers (round-robin over roots: :func:`~rpquery.read.candidates._spread.spread`)
    with the summaries of their trees, for every ``k`` up to one past the answer's
    size; returns how many roots statements the limited requests ran in all."""
    full = allocation_candidates(db, qs)
    everything = spread(ordered(full), root_of=lambda c: c[0])
    assert everything, qs
    roots_statements: list[str] = []

    def tracer(sql: str, params: Any) -> None:
        # the roots' ids as rows, or as one text of them (MySQL/MariaDB)
        if "root.id" in sql.split("FROM")[0] or "GROUP_CONCAT(r.id)" in sql:
            roots_statements.append(sql)

    db.add_tracer(tracer)
    try:
        for k in range(1, len(everything) + 2):
            got = allocation_candidates(db, f"{qs}&limit={k}")
            assert ordered(got) == everything[:k], (qs, k)
            trees = {
                full.provider_summaries[u].root_uuid
                for ar in got.allocation_requests
                for u in ar.allocations
            }
            summaries = {u: s for u, s in full.provider_summaries.items() if s.root_uuid in trees}
            assert got.provider_summaries == summaries, (qs, k)
            # the same body (parsed: a summary's classes come in the database's order)
            assert orjson.loads(got.to_placement_json()) == orjson.loads(
                got.__class__(got.allocation_requests, got.provider_summaries).to_placement_json()
            )
    finally:
        db.remove_tracer(tracer)
    return len(roots_statements)


REQUESTS = [
    "resources=VCPU:1,MEMORY_MB:512",
    # DISK_GB from the pool (for its aggregate's hosts) or the host itself
    "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10",
    # the pool alone: one candidate, reachable from every host of its aggregate
    "resources=DISK_GB:10",
    "resources=VCPU:1&root_required=CUSTOM_X",
    "resources=VCPU:1&root_required=!CUSTOM_X",
    "resources=VCPU:1,DISK_GB:10&member_of=!" + OTHER,
    "resources=VCPU:1,DISK_GB:10&member_of=" + AGG,
    "resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate",
    "resources1=VCPU:1&resources2=VCPU:1&group_policy=none",
    "resources_A=VCPU:1&required_B=CUSTOM_NUMA_TAG&same_subtree=_A,_B&group_policy=none",
    "resources=MEMORY_MB:512&resources_N=VCPU:1&required_N=!CUSTOM_NUMA_TAG&group_policy=isolate",
]


@pytest.mark.parametrize("qs", REQUESTS)
def test_limit_is_the_first_candidates_in_root_order(walk: Database, qs: str) -> None:
    assert_prefixes(walk, qs)


def test_full_hosts_first_take_several_batches(walk: Database) -> None:
    """The first batch (``limit + 10`` roots) holds only full hosts: later batches,
    sized four times the last while nothing is found, then from candidates per root,
    reach the hosts with room; the answer is still the unlimited one's first."""
    runs = assert_prefixes(walk, "resources=VCPU:1,MEMORY_MB:512")
    limits = len(ordered(allocation_candidates(walk, "resources=VCPU:1,MEMORY_MB:512"))) + 1
    assert runs > limits  # some requests took more than one batch


def test_a_learnt_first_batch_too_small_for_a_fuller_cloud(walk: Database) -> None:
    """The first batch of a request is sized from an earlier one's candidates per root
    (NUMA hosts give two each here); once those hosts are full, that batch is too small
    and the walk goes on: the answer is still the unlimited one's first."""
    qs = "resources=VCPU:1&required=!CUSTOM_NUMA_TAG"
    assert_prefixes(walk, qs)  # learns
    rps = resource_providers
    with walk.begin() as conn:
        for name in ("numa_1_numa0", "numa_2_numa0", "numa_3_numa0"):
            row = conn.execute(sa.select(rps).where(rps.c.name == name)).one()
            allocate(
                conn, f"c-{name}", Ref(row.id, row.uuid, name, row.root_provider_id), "VCPU", 2
            )
    assert_prefixes(walk, qs)


def test_batches_are_sized_from_candidates_per_root() -> None:
    """Nothing found: four times the last batch; else what the missing candidates need
    at the rate seen so far, plus 25 % and 10; a learnt rate sizes the first batch."""
    b = bt.Batches(5, randomize=False, key=("test", 1))
    first = b.first()
    assert first == bt.Batch(15, walk=True)
    nothing = bt.Roots(list(range(1, 16)), None, {}, exhausted=False)
    second = b.next(first, nothing, 0, 15)
    assert second == bt.Batch(60, walk=True, after=15)
    some = bt.Roots(list(range(16, 76)), None, {}, exhausted=False)
    assert b.next(second, some, 3, 60) == bt.Batch(
        10 + int(2 * 75 / 3 * 1.25), walk=True, after=75
    )
    done = bt.Roots([80, 81], None, {}, exhausted=False)
    assert b.next(bt.Batch(60, walk=True, after=75), done, 5, 2) is None
    # 5 candidates of 77 roots: 81 roots needed, at most four times the limit
    assert bt.Batches(5, randomize=False, key=("test", 1)).first() == bt.Batch(30, walk=True)
    assert bt.Batches(50, randomize=False, key=("test", 1)).first() == bt.Batch(210, walk=True)
    b = bt.Batches(100, randomize=False, key=("test", 2))
    assert b.next(b.first(), bt.Roots(list(range(110)), None, {}, False), 100, 40) is None
    # 100 candidates of 40 roots: 42 roots for 100 more, and 10
    assert bt.Batches(100, randomize=False, key=("test", 2)).first() == bt.Batch(52, walk=True)
    # an exhausted walk ends; random order keeps its could-serve batch, then the rest
    assert b.next(first, bt.Roots([1], None, {}, exhausted=True), 0, 1) is None
    r = bt.Batches(5, randomize=True)
    assert r.first() == bt.Batch(20)
    assert r.next(bt.Batch(20), bt.Roots([4, 2], None, {}, False), 1, 2) == bt.Batch(
        exclude=(4, 2)
    )


def test_a_walk_that_found_nothing_takes_the_roots_left_at_once() -> None:
    """Once a walk over every root has counted a database's roots, a walk there that
    found nothing takes every root left in one batch when they are at most four times
    its next batch (not that batch, then four times it); a walk with root filters
    counts nothing; a count below the roots (stale) never makes a batch smaller."""

    def walked(cloud: object, *sizes: int, filtered: bool = False) -> bt.Batches:
        b = bt.Batches(1, randomize=False, cloud=cloud)
        batch, start = b.first(), 1
        for n in sizes:
            roots = bt.Roots(list(range(start, start + n)), None, {}, n < batch.limit, filtered)
            batch, start = b.next(batch, roots, 0, n), start + n  # type: ignore[assignment]
        assert batch is None
        return b

    cloud = ("test", "cloud")
    walked(cloud, 11, 44, 30, filtered=True)
    assert bt._ROOT_COUNT.get(cloud) is None
    b = bt.Batches(1, randomize=False, cloud=cloud)
    nothing = bt.Roots(list(range(1, 12)), None, {}, exhausted=False, filtered=False)
    assert b.next(b.first(), nothing, 0, 11) == bt.Batch(44, walk=True, after=11)
    walked(cloud, 11, 44, 49)  # 104 roots
    assert bt._ROOT_COUNT.get(cloud) == 104
    b = bt.Batches(1, randomize=False, cloud=cloud)
    # 93 roots left and 10: one batch, not 44 then 176
    assert b.next(b.first(), nothing, 0, 11) == bt.Batch(103, walk=True, after=11)
    # one found: sized from the rate, whatever the count
    b = bt.Batches(2, randomize=False, cloud=cloud)
    twelve = bt.Roots(list(range(1, 13)), None, {}, exhausted=False, filtered=False)
    assert b.next(b.first(), twelve, 1, 12) == bt.Batch(25, walk=True, after=12)
    bt._ROOT_COUNT.put(cloud, 20)  # stale: fewer than there are
    b = bt.Batches(1, randomize=False, cloud=cloud)
    assert b.next(b.first(), nothing, 0, 11) == bt.Batch(44, walk=True, after=11)
    bt._ROOT_COUNT.put(cloud, 5000)  # many left: four times the last batch
    b = bt.Batches(1, randomize=False, cloud=cloud)
    assert b.next(b.first(), nothing, 0, 11) == bt.Batch(44, walk=True, after=11)


def test_a_walk_with_no_candidate_counts_the_roots_for_the_next(walk: Database) -> None:
    """A limited request nothing can serve walks every root (~80: batches of 11, 44,
    then the rest); the same request again takes the roots left after its first batch
    at once, from the count (one batch fewer); both answers are empty."""
    bt._ROOT_COUNT.put(walk.engine.url, 0)  # (counted by an earlier test: stale, unused)
    sent = []
    for _ in range(2):
        with walk.count_statements() as counter:
            assert not allocation_candidates(
                walk, "resources=VCPU:100000&limit=1"
            ).allocation_requests
        sent.append(counter.count)
    assert bt._ROOT_COUNT.get(walk.engine.url) == 78
    assert sent[1] == sent[0] - 2, sent  # a roots statement and a group statement fewer


def test_learnt_rates_are_bounded_and_only_the_oldest_goes() -> None:
    """The learnt candidates per root are a bounded map written from a server's threads:
    past its size only the least recently written kind of request loses its hint
    (before: every hint was dropped at once when 1,024 kinds had been seen), and
    threads writing at once never leave it past its size."""
    hints = bt._PER_ROOT
    for i in range(hints.size + 1):
        bt._remember(("bounded", i), 2.0)
    assert len(hints) == hints.size
    # 100 candidates at 2 per root: 53 roots and 10; the oldest is back to limit + 10
    assert bt.Batches(100, randomize=False, key=("bounded", 0)).first() == bt.Batch(110, walk=True)
    for i in (1, hints.size // 2, hints.size):
        assert bt.Batches(100, randomize=False, key=("bounded", i)).first() == bt.Batch(
            63, walk=True
        )

    def write(t: int) -> None:
        for i in range(2000):
            bt._remember(("threads", t, i), 1.0 + t)
            # (other threads' writes may have pushed it out already)
            assert hints.get(("threads", t, i)) in (None, 1.0 + t)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(write, range(8)))
    finally:
        sys.setswitchinterval(switch)
    assert len(hints) == hints.size


def test_the_largest_limit_is_a_limit_the_database_takes(walk: Database) -> None:
    """``limit=2147483647`` (the largest Placement takes): a batch's ``LIMIT`` is bound
    as a 32-bit integer on PostgreSQL, so it never goes past that (before: "integer out
    of range"); the answer is the unlimited one, in the order of limited answers."""
    for qs in ("resources=VCPU:1,MEMORY_MB:512", "resources=DISK_GB:10"):
        full = ordered(allocation_candidates(walk, qs))
        most = ordered(allocation_candidates(walk, f"{qs}&limit=2147483647"))
        assert most == spread(full, root_of=lambda c: c[0])
        random = CandidatesRequest(
            groups=parse_candidates(qs).groups, limit=2**31 - 1, randomize=True
        )
        # (a random anchor reaches a sharing-only candidate first: its root_uuid varies)
        assert sorted(repr(c[1:]) for c in ordered(allocation_candidates(walk, random))) == sorted(
            repr(c[1:]) for c in full
        )
    most = bt.Batches(2147483647, randomize=False, key=("test", 3))
    assert most.first().limit == 2**31 - 1
    nothing = bt.Roots([1, 2], None, {}, exhausted=False)
    assert most.next(bt.Batch(2**31 - 1, walk=True), nothing, 0, 2) == bt.Batch(
        2**31 - 1, walk=True, after=2
    )
    assert bt.Batches(2147483647, randomize=True).first().limit == 2**31 - 1


def test_roots_as_one_text_are_the_rows(walk: Database) -> None:
    """Where ids come as one text (MySQL/MariaDB: ``GROUP_CONCAT`` of the roots
    statement), a walk's batches and an unlimited answer's roots are the statement's
    rows, in id order: every batch of a walk in small steps, past the last root (no
    row: ``NULL``), a root filter."""
    from rpquery.read._names import resolve_names
    from rpquery.store import dialects

    with walk.engine.connect() as conn:
        for qs in ("resources=VCPU:1", "resources=VCPU:1&root_required=!CUSTOM_X"):
            req = parse_candidates(qs)
            names = resolve_names(conn, req.resource_class_names(), req.trait_names())
            for batch in (
                bt.Batch(),
                bt.Batch(7, walk=True),
                bt.Batch(7, walk=True, after=20),
                bt.Batch(1000, walk=True, after=10**6),
            ):
                stmt, params, _ = bt.roots_query(req, names, (), batch)
                assert stmt is not None or batch.limit is None
                if stmt is None:
                    continue
                rows = sorted(int(r) for (r,) in runner.driver_rows(conn, stmt, params))
                assert bt.select_roots(conn, req, names, (), batch).ids == rows
                if dialects.ids_as_text(conn):
                    ((count, total, text),) = runner.driver_rows(
                        conn, runner.ids_text(stmt), params
                    )
                    assert count == len(rows) and (text is None) == (rows == [])
                    assert int(total or 0) == sum(rows)
    assert {b: dialects.backend(b).ids_as_text for b in ("sqlite", "postgresql", "mysql")} == {
        "sqlite": False,
        "postgresql": False,
        "mysql": True,
    }


def test_whole_number_rows_as_one_text_are_the_rows(
    walk: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where rows of numbers come as one text per statement (MySQL/MariaDB), a batch's
    statements give the rows they give as rows, ``NULL`` cells included (parent
    links), capacities as the same doubles, and a text cut short
    (``group_concat_max_len`` made tiny) is read again as rows: limited answers stay
    the unlimited one's prefix."""
    from rpquery.read._names import resolve_names
    from rpquery.store import dialects

    qs = (
        "resources=VCPU:1,MEMORY_MB:512&required=CUSTOM_X&resources_A=VCPU:1"
        "&resources_B=MEMORY_MB:512&same_subtree=_A,_B&group_policy=none"
    )
    with walk.engine.connect() as conn:
        if not dialects.ids_as_text(conn):
            pytest.skip("rows stay rows on this backend")
        req = parse_candidates(qs)
        names = resolve_names(conn, req.resource_class_names(), req.trait_names())
        scope = {"roots_lo": 1, "roots_hi": 10**6, "sharing_ids": [], "sharing_exempt": []}
        stmts = []
        for g in req.groups:
            for room, grouped in ((False, False), (False, True), (True, False)):
                what, values = ex.group_statement(g, names, room, grouped)
                stmts.append((ex._stmt(what, ex.BatchRoots.RANGE), {**scope, **values}))
        stmts.append((ex._stmt(ex.TreeShape(), ex.BatchRoots.RANGE), scope))
        whole = [(stmt, bound) for stmt, bound in stmts if runner.numbers(stmt)]
        assert len(whole) == len(stmts)  # lean, grouped, room columns, parent links
        rows = [
            sorted(runner._fetch(conn, *runner._expanded(st, b, conn.dialect, "")))
            for st, b in whole
        ]
        assert any(None in row for got in rows for row in got)  # a root's parent
        assert [sorted(got) for got in runner._text_rows(conn, whole)] == rows
        monkeypatch.setattr(dialects._mysql, "GROUP_CONCAT_MAX_LEN", 16)
        assert [sorted(got) for got in runner._text_rows(conn, whole)] == rows
        monkeypatch.undo()
        # the roots' text cut short too (a fresh engine compiles it with the tiny length)
        plain = bt.select_roots(conn, req, names, (), bt.Batch(30, walk=True)).ids
        monkeypatch.setattr(dialects._mysql, "GROUP_CONCAT_MAX_LEN", 16)
        tiny = Database(walk.url)
        try:
            with tiny.engine.connect() as short:
                got = bt.select_roots(short, req, names, (), bt.Batch(30, walk=True)).ids
                assert got == plain and len(plain) == 30
                texts = runner.driver_rows(
                    short,
                    runner.ids_text(bt.roots_query(req, names, (), bt.Batch(30, walk=True))[0]),
                    {"batch_limit": 30},
                )
                assert len(texts[0][2]) < 30  # it was cut
        finally:
            tiny.dispose()
        monkeypatch.undo()
    assert_prefixes(walk, "resources=VCPU:1,MEMORY_MB:512")


@pytest.mark.parametrize("backend", ["sqlite"])
def test_random_clouds_limit_is_a_prefix(backend: str, request: pytest.FixtureRequest) -> None:
    """Random clouds and requests (``tests/test_candidates_property.py``'s): with
    ``limit`` the answer is the unlimited one's first candidates, ordered by root (the
    roots' uuids are in id order there) and round-robin over roots."""
    db = request.getfixturevalue("_migrated")(backend)

    @settings(
        max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(cloud=prop.clouds(child_sharing=True), req=prop.requests(), limit=st.integers(1, 4))
    def check(cloud: prop.Cloud, req: CandidatesRequest, limit: int) -> None:
        prop.insert(db, cloud)
        full = ordered(allocation_candidates(db, req))
        by_root = sorted(full, key=lambda c: c[0])  # stable: a tree's own order kept
        got = allocation_candidates(db, dataclasses.replace(req, limit=limit))
        expected = spread(by_root, root_of=lambda c: c[0])[:limit]
        if ordered(got) != expected:
            # a candidate of sharing providers alone, reachable from several anchors,
            # is the first anchor's to reach it in round-robin order: maybe another
            # anchor than in the unlimited answer, so the order differs from there on
            assert any(prop.SHARING in p.traits for p in cloud.p.values())
            mine = [repr(c[1:]) for c in ordered(got)]
            assert set(mine) <= {repr(c[1:]) for c in full}
            assert len(set(mine)) == len(mine) == len(expected)

    check()


def _sent_reading(walk: Database, autocommit: bool) -> tuple[list[str], Any, str]:
    """The statements of a ``limit=3`` request read on one connection of ``walk`` (in
    autocommit mode, or in a transaction), its answer, and that connection's
    ``enable_hashjoin`` afterwards (PostgreSQL; ``""`` elsewhere)."""
    sent: list[str] = []

    def tracer(sql: str, params: Any) -> None:
        sent.append(sql)

    walk.add_tracer(tracer)
    try:
        with walk.engine.connect() as conn:
            if autocommit:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            answer = allocation_candidates(conn, "resources=VCPU:1,MEMORY_MB:512&limit=3")
            after = ""
            if conn.dialect.name == "postgresql":
                after = conn.exec_driver_sql("SELECT current_setting('enable_hashjoin')").scalar()
    finally:
        walk.remove_tracer(tracer)
    return sent, answer, after


def test_a_walks_first_batch_alone_is_planned_without_hash_joins(
    walk: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL, a read in autocommit mode: the group statement of a walk's first batch
    (every root up to its last) is sent after ``SET LOCAL enable_hashjoin = off`` in the
    same message (:func:`rpquery.store.dialects.ordered_joins`), one implicit
    transaction: the setting ends with it, and the later batches' group statements, the
    summaries and the connection's next statements are planned as before. In a
    transaction (where it would last) and on the other backends, nothing is sent before
    a statement. The answer is the same either way."""
    # (the walks learn nothing other tests of this database and request would see)
    monkeypatch.setattr(bt, "_PER_ROOT", bt.Hints(512))
    sent, answer, after = _sent_reading(walk, True)
    in_transaction, same, after_transaction = _sent_reading(walk, False)
    groups = [s for s in sent if "rpq_provider_usages" in s]
    prefixed = [s for s in sent + in_transaction if s.startswith("SET LOCAL")]
    assert len(groups) > 1  # full hosts first: several batches, each its group statement
    assert ordered(same) == ordered(answer)
    assert same.provider_summaries == answer.provider_summaries
    if walk.engine.dialect.name != "postgresql":
        assert prefixed == [] and after == after_transaction == ""
        return
    assert prefixed == groups[:1]
    assert groups[0].startswith("SET LOCAL enable_hashjoin = off; SELECT ")
    assert after == after_transaction == "on"
