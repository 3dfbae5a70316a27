"""Statements built per request *shape*, values bound at execution (issue 18, item 5).

Without a database: every value of a request is a named bind parameter of its cached
statement (the names a shape's builder uses are exactly those its values carry), and
requests differing only in values share one statement. On every backend: the second
of two such requests compiles nothing and both answers are right.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BinaryExpression, BindParameter

from benchmarks import shapes
from rpquery.db import Database
from rpquery.read.candidates import _batches as bt
from rpquery.read.candidates import _execute as ex
from rpquery.read.candidates import _sharing as sh
from rpquery.read.candidates import _sql as q
from rpquery.read.candidates import _summaries as sm
from rpquery.read.candidates import allocation_candidates
from rpquery.read.request import parse_candidates
from rpquery.store import _texts, dialects, runner
from tests.factories import provider

TRAITS = [*shapes.HOST_TRAITS, *shapes.NIC_TRAITS, *shapes.PHYSNETS, q.SHARING_TRAIT]
NAMES = q.Names(
    rc_ids={"VCPU": 10, "MEMORY_MB": 11, "DISK_GB": 12, "SRIOV_NET_VF": 13},
    trait_ids={t: 100 + i for i, t in enumerate(TRAITS)},
)
AGGS = [f"11111111-2222-4333-8444-55555555555{i}" for i in range(3)]
#: Bound per batch, not by the group (the roots, the sharing providers).
BATCH = {"root_ids", "roots_lo", "roots_hi", "sharing_ids", "sharing_exempt", "exclude_ids"}


def bind_names(stmt: sa.ClauseElement) -> set[str]:
    """The named parameters of ``stmt``; the anonymous ones must be constants of the
    SQL (``COALESCE(used, 0)``, ``step_size = 1``), not a request's values."""
    binds = stmt.compile(dialect=postgresql.dialect()).binds.values()
    anonymous = [b for b in binds if b.key.startswith("%(")]
    assert {b.value for b in anonymous} <= {0, 1}, anonymous
    return {b.key for b in binds if not b.key.startswith("%(")}


#: A request's batches: every root; the first of a walk in id order (scoped by a range
#: of ids, or by the ids when root filters leave some roots out); a later one (after
#: a root); random roots that could serve (scoped by their ids); every root left.
BATCHES = [
    bt.Batch(),
    bt.Batch(10, walk=True),
    bt.Batch(10, walk=True, after=7),
    bt.Batch(10),
    bt.Batch(exclude=(3, 5)),
]


def batch_scope(batch: bt.Batch, roots: sa.Select | None, filtered: bool) -> ex.ScopeKey:
    """The scope :func:`rpquery.read.candidates._execute.select_roots` gives the batch's
    other statements."""
    if batch.limit is None:
        return ex.scope_key(roots)
    return ex.scope_key(bt.ROOT_RANGE if batch.walk and not filtered else bt.ROOT_IDS)


@pytest.mark.parametrize("batch", BATCHES)
def test_every_value_of_a_random_request_is_a_named_parameter(batch: bt.Batch) -> None:
    """No value is written into a statement: each named parameter gets its value from
    the request (values the statement does not use are ignored at execution), and the
    anonymous ones are constants (:func:`bind_names`)."""
    for qs in shapes.requests(3, 150, AGGS):
        req = parse_candidates(qs)
        roots, roots_values, filtered = bt.roots_query(req, NAMES, (), batch)
        if roots is not None:
            assert bind_names(roots) - BATCH <= set(roots_values), qs
        scope = batch_scope(batch, roots, filtered)
        for g in req.groups:
            what, values = ex.group_statement(g, NAMES)
            names = bind_names(ex._stmt(what, scope))
            assert names - BATCH <= set(values) | (
                set(roots_values) if batch.limit is None else set()
            )
        stmt, values = sh._sharing_query(req, NAMES)
        assert bind_names(stmt) <= set(values)


def expanding_ops(stmt: sa.ClauseElement) -> dict[str, set[str]]:
    """Each expanding parameter's name → the operators it stands under (``in_op``,
    ``not_in_op``)."""
    seen: dict[str, set[str]] = {}
    for node in visitors.iterate(stmt):
        right = getattr(node, "right", None)
        expanding = isinstance(right, BindParameter) and right.expanding
        if isinstance(node, BinaryExpression) and expanding:
            seen.setdefault(right.key, set()).add(node.operator.__name__)
    return seen


@pytest.mark.parametrize("batch", BATCHES)
def test_no_expanding_parameter_is_used_both_in_and_not_in(batch: bt.Batch) -> None:
    """SQLAlchemy renders an *empty* expanding parameter once per name, as ``IN`` or as
    ``NOT IN``: a name under both renders one of them wrong on PostgreSQL and MySQL
    (``x NOT IN (NULL) AND (1 != 1)``, always false). It happened: the unsuffixed
    group's forbidden-aggregate exemption reused ``sharing_ids``, so with no sharing
    provider a root in a forbidden aggregate no longer excluded its children (found
    by the differential test, PostgreSQL and MariaDB, cloud seeds 23, 65, 67)."""
    checked = 0
    for qs in shapes.requests(5, 150, AGGS):
        req = parse_candidates(qs)
        roots, _, filtered = bt.roots_query(req, NAMES, (), batch)
        stmts = [] if roots is None else [roots]
        scope = batch_scope(batch, roots, filtered)
        stmts += [ex._stmt(ex.group_statement(g, NAMES)[0], scope) for g in req.groups]
        for stmt in stmts:
            for key, ops in expanding_ops(stmt).items():
                assert len(ops) == 1, (qs, key, ops)
                checked += 1
    assert checked > 100


def test_requests_differing_only_in_values_share_their_statements() -> None:
    one = parse_candidates(
        f"resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU&member_of={AGGS[0]}&limit=5"
    )
    two = parse_candidates(
        f"resources=VCPU:4,MEMORY_MB:2048&required=!CUSTOM_RACK_3"
        f"&member_of=in:{AGGS[1]},{AGGS[2]}&limit=50"
    )
    for randomize in (False, True):
        roots = [
            bt.roots_query(r, NAMES, (), bt.Batches(r.limit, randomize=randomize).first())
            for r in (one, two)
        ]
        assert roots[0][0] is roots[1][0] and roots[0][1] != roots[1][1]
    groups = [ex.group_statement(r.groups[0], NAMES) for r in (one, two)]
    assert groups[0][0] == groups[1][0] and groups[0][1] != groups[1][1]
    # a new structure (one more forbidden trait set, another class) is another statement
    three = parse_candidates("resources=VCPU:1&limit=5")
    assert ex.group_statement(three.groups[0], NAMES)[0] != groups[0][0]


class _Compiles:
    """Statements SQLAlchemy compiled (a compiled-cache miss) and parts the read path
    compiled (:mod:`rpquery.store._texts`)."""

    def __init__(self, db: Database) -> None:
        self.missed: list[str] = []
        self.parts = _texts.PartStats.compiled
        sa.event.listen(db.engine, "after_cursor_execute", self.seen)

    @property
    def misses(self) -> list[str]:
        parts = _texts.PartStats.compiled - self.parts
        return self.missed + [f"{parts} parts"] * bool(parts)

    def seen(self, conn: Any, cursor: Any, sql: str, params: Any, ctx: Any, many: bool) -> None:
        if ctx is not None and ctx.cache_hit == ctx.dialect.CACHE_MISS:
            self.missed.append(sql)


def test_a_request_of_a_known_shape_compiles_nothing(db: Database) -> None:
    with db.begin() as conn:
        provider(conn, "small", inventory={"VCPU": 4, "MEMORY_MB": 2048})
        provider(conn, "big_a", inventory={"VCPU": 16, "MEMORY_MB": 8192}, traits=["CUSTOM_A"])
        provider(conn, "big_b", inventory={"VCPU": 16, "MEMORY_MB": 8192}, traits=["CUSTOM_B"])
    first = allocation_candidates(db, "resources=VCPU:2,MEMORY_MB:1024&required=!CUSTOM_B&limit=3")
    compiles = _Compiles(db)
    second = allocation_candidates(
        db, "resources=VCPU:8,MEMORY_MB:4096&required=!CUSTOM_A&limit=7"
    )
    assert compiles.misses == []

    def names(answer: Any) -> set[str]:
        by_uuid = {u: s.name for u, s in answer.provider_summaries.items()}
        return {by_uuid[u] for ar in answer.allocation_requests for u in ar.allocations}

    assert names(first) == {"small", "big_a"}
    assert names(second) == {"big_b"}


@pytest.mark.parametrize("any_class", [False, True])
def test_fenced_sharing_pairs_are_the_same_rows(db: Database, any_class: bool) -> None:
    """The names statement with its sharing providers in a fenced subquery (as
    PostgreSQL reads it) gives the rows of the plain join, on every backend."""
    agg, other = "11111111-2222-4333-8444-555555555555", "11111111-2222-4333-8444-555555555556"
    with db.begin() as conn:
        provider(conn, "host", inventory={"VCPU": 4}, aggregates=[agg])
        provider(conn, "host2", inventory={"VCPU": 4}, aggregates=[agg, other])
        provider(
            conn, "disk", inventory={"DISK_GB": 100}, traits=[q.SHARING_TRAIT], aggregates=[agg]
        )
        provider(
            conn, "ip", inventory={"IPV4_ADDRESS": 8}, traits=[q.SHARING_TRAIT], aggregates=[other]
        )
        provider(conn, "bare", traits=[q.SHARING_TRAIT], aggregates=[agg])
    params = {
        "trait_names": ["CUSTOM_GPU", q.SHARING_TRAIT],
        "sharing_trait_name": q.SHARING_TRAIT,
        "sharing_rc_names": ["DISK_GB", "VCPU"],
        "count_roots": 1,
    }
    rows = []
    with db.connect() as conn:
        for fenced in (False, True):
            stmt = q.names_sharing_of(any_class=any_class, fenced=fenced)
            rows.append(sorted(map(tuple, runner.driver_rows(conn, stmt, params)), key=repr))
    assert rows[0] == rows[1]
    # the roots' count: 5 providers, none with a parent
    assert [r for r in rows[0] if r[0] is None and r[2] is None] == [(None, 5, None, None)]
    pairs = [r for r in rows[0] if r[0] is None and r[2] is not None]
    # disk shares with the 4 trees of agg; with any class ip (2 trees) and bare (4) too
    assert len(pairs) == (10 if any_class else 4), pairs


#: the head of the summaries' providers statement, as rows (``SELECT rp.id, rp.uuid``) or
#: inside the JSON text read on MySQL/MariaDB (``(SELECT rp.id AS id, rp.uuid AS uuid``)
_SUMMARY_HEAD = re.compile(r"SELECT rp\.id(?: AS id)?, rp\.uuid")


def _summarises(sql: str) -> bool:
    """Whether ``sql`` is the summaries' providers statement."""
    return _SUMMARY_HEAD.search(sql) is not None


@pytest.mark.parametrize("walk", [False, True], ids=["small", "walked"])
def test_a_request_sends_few_statements(
    db: Database, walk: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round trips, not only statements, are what a small request waits for: names and
    sharing pairs are one statement (with PostgreSQL's session settings folded in, and
    the roots' count), then the anchor roots (with ``limit``, on a cloud walked batch by
    batch: not on a small one, read in one batch), on SQLite the walked batch's own
    sharing pairs, one statement per group (a walk's batch merged on a server) and the
    summaries' one statement (a small answer); on PostgreSQL the read runs in
    autocommit mode (no ``BEGIN`` and ``ROLLBACK`` around it, which the
    statement count does not see)."""
    if walk:  # as a cloud of more than ONE_BATCH roots is
        monkeypatch.setattr(bt.Batches, "ONE_BATCH", 0)
    agg = "11111111-2222-4333-8444-555555555555"
    with db.begin() as conn:
        provider(conn, "host", inventory={"VCPU": 4, "MEMORY_MB": 2048}, aggregates=[agg])
        provider(
            conn, "disk", inventory={"DISK_GB": 100}, traits=[q.SHARING_TRAIT], aggregates=[agg]
        )
    levels: list[object] = []

    def seen(conn: Any, cursor: Any, sql: str, params: Any, ctx: Any, many: bool) -> None:
        levels.append(conn.get_execution_options().get("isolation_level"))

    sa.event.listen(db.engine, "before_cursor_execute", seen)
    bt._ROOT_COUNT.put(db.engine.url, 2)  # counted (by an earlier request, within a minute)
    # SQLite: a walk's small batch reads its own sharing pairs, one statement more (a round
    # trip in the process costs ~nothing; a walk on 5,000 hosts then reads ~6 pairs instead
    # of the cloud's 1,009: DISK_GB limit=10 2.9 -> 1.4 ms); servers read every pair with
    # the names (a round trip more costs what the pairs save)
    per_batch = int(walk and db.dialect_name == "sqlite")
    expected = {
        # names and sharing (or the sharing classes), anchor roots (walked), the batch's
        # sharing pairs (SQLite, walked), the group (then the summaries')
        "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10&limit=2": 3 + per_batch if walk else 2,
        "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10": 2,
        # two groups over every root: one statement each (the first may end the batch)
        "resources=VCPU:1&resources1=MEMORY_MB:512&group_policy=none": 3,
        "resources=VCPU:8": 2,  # no candidate: no summaries
    }
    for qs, count in expected.items():
        levels.clear()
        with db.count_statements() as counter:
            answer = allocation_candidates(db, qs)
        # the summaries' statements (their own business) start with the providers' uuids,
        # or on MySQL/MariaDB with every provider's trait ids as one text when the
        # summaries take (nearly) every tree
        summaries = [
            i
            for i, s in enumerate(counter.statements)
            if _summarises(s) or sm.EVERY_TRAIT_TEXT_SQL in s
        ]
        assert bool(summaries) == bool(answer.allocation_requests), counter.statements
        mine = counter.statements[: summaries[0]] if summaries else counter.statements
        assert len(mine) == count, (qs, counter.statements)
        # a small answer's summaries: one statement (providers, inventories, traits)
        assert len(counter.statements) - len(mine) == (1 if summaries else 0), qs
        assert "AS sinv" in counter.statements[0] and "FROM traits" in counter.statements[0]
        roots = counter.statements[1]
        # the roots as rows, or as one text of them (MySQL/MariaDB)
        as_rows = roots.lstrip().startswith("SELECT root.id")
        as_text = "GROUP_CONCAT(r.id) AS" in roots and "FROM (SELECT root.id" in roots
        walked = walk and "limit" in qs
        assert walked == (as_text if db.dialect_name == "mysql" else as_rows), roots
        # the batch's own sharing pairs (``_sql.batch_sharing_of``) after its roots
        pairs_at = [i for i, sql in enumerate(mine) if "aggregate_id + 0" in sql]
        assert pairs_at == ([2] if walked and per_batch else []), mine
        if "DISK_GB" in qs:
            assert len(answer.allocation_requests) == 1
            (ar,) = answer.allocation_requests
            names = {answer.provider_summaries[u].name for u in ar.allocations}
            assert names == {"host", "disk"}
        autocommit = dialects.backend(db.dialect_name).reads_autocommit
        assert set(levels) == ({"AUTOCOMMIT"} if autocommit else {None}), qs


def test_a_group_nobody_serves_ends_the_batch(db: Database) -> None:
    """Once a group leaves a slot no provider fills, the batch gives no candidate: the
    groups after it, the unsuffixed group's blocked anchors and local sharing
    providers, and the parent links of ``same_subtree`` are not read (most random
    requests have no candidate). The suffixed groups run first: here the one asking
    for more than any provider has; the answers are empty on every backend."""
    agg = "11111111-2222-4333-8444-555555555555"
    with db.begin() as conn:
        host = provider(conn, "host", inventory={"VCPU": 4, "MEMORY_MB": 2048})
        provider(conn, "numa", parent=host, inventory={"VCPU": 2}, aggregates=[agg])
        provider(
            conn, "disk", inventory={"DISK_GB": 100}, traits=[q.SHARING_TRAIT], aggregates=[agg]
        )
    hopeless = [
        # names and sharing, the suffixed group (every root: no roots statement)
        ("resources=VCPU:1&resources1=VCPU:64&resources2=MEMORY_MB:1&group_policy=none", 2),
        ("resources1=VCPU:64&resources2=MEMORY_MB:1&same_subtree=1,2&group_policy=none", 2),
        # the unsuffixed group's class no provider has room for: no blocked anchors
        ("resources=VCPU:1,DISK_GB:500&member_of=!" + agg, 2),
        ("resources=VCPU:1,DISK_GB:500&member_of=" + agg, 2),
    ]
    for qs, count in hopeless:
        with db.count_statements() as counter:
            answer = allocation_candidates(db, qs)
        assert not answer.allocation_requests, qs
        assert len(counter.statements) == count, (qs, counter.statements)
    # the same with room: every statement, and a candidate
    with db.count_statements() as counter:
        answer = allocation_candidates(
            db,
            "resources=VCPU:1&resources1=VCPU:2&resources2"
            "=MEMORY_MB:1&same_subtree=1,2&group_policy=none",
        )
    assert answer.allocation_requests
    assert len(counter.statements) > 5, counter.statements  # 3 groups, parent links, ...


def test_a_batch_of_several_groups_is_one_statement_on_a_server(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its roots restricted (``limit``, a cloud walked batch by batch), a batch's
    group statements and parent links go to a database server as one statement (each
    compiled once, whatever shapes a request combines); SQLite, in the process, runs
    them apart. The same answers."""
    monkeypatch.setattr(bt.Batches, "ONE_BATCH", 0)  # as a cloud of more roots is
    with db.begin() as conn:
        for name, numa in (("one", 1), ("two", 2)):
            host = provider(conn, name, inventory={"MEMORY_MB": 4096})
            for n in range(numa):
                node = provider(conn, f"{name}_numa{n}", parent=host, inventory={"VCPU": 4})
                provider(
                    conn,
                    f"{name}_nic{n}",
                    parent=node,
                    inventory={"SRIOV_NET_VF": 4},
                    traits=["CUSTOM_PHYSNET_A"] if n == 0 else ["CUSTOM_PHYSNET_B"],
                )
    qs = (
        "resources=MEMORY_MB:512&resources_CPU=VCPU:2&resources_NIC=SRIOV_NET_VF:1"
        "&required_NIC=CUSTOM_PHYSNET_{}&same_subtree=_CPU,_NIC&group_policy=none&limit=5"
    )
    server = dialects.backend(db.dialect_name).on_server
    compiled = _texts.PartStats.compiled
    for physnet, hosts in (("A", {"one", "two"}), ("B", {"two"})):
        with db.count_statements() as counter:
            answer = allocation_candidates(db, qs.format(physnet))
        # names and sharing, roots, 3 group statements and parent links (1 merged on a
        # server), then the summaries' (one: a small answer)
        first = next(i for i, s in enumerate(counter.statements) if _summarises(s))
        assert first == (3 if server else 6), counter.statements
        assert len(counter.statements) == first + 1  # a small answer's summaries
        by_uuid = {u: s.name for u, s in answer.provider_summaries.items()}
        got = [sorted(by_uuid[u] for u in ar.allocations) for ar in answer.allocation_requests]
        host = {"one", "two"}
        assert {n for names in got for n in names if n in host} == hosts
        for names in got:  # the VF under the NUMA node that gives the VCPU
            (numa,) = (n for n in names if "numa" in n)
            (nic,) = (n for n in names if "nic" in n)
            assert numa[-1] == nic[-1]
        if physnet == "A":
            compiled = _texts.PartStats.compiled
    assert _texts.PartStats.compiled == compiled  # the second compiled nothing


def _kill_pooled(db: Database) -> None:
    """Close every session of the test database but this one from the server's side, as
    a restart or an idle timeout does: each pooled connection is dead."""
    killer = sa.create_engine(db.engine.url, poolclass=sa.pool.NullPool)
    with killer.connect() as conn:
        if db.dialect_name == "postgresql":
            conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        else:
            ids = conn.exec_driver_sql(
                "SELECT id FROM information_schema.processlist"
                " WHERE db = DATABASE() AND id <> CONNECTION_ID()"
            ).scalars()
            for ident in list(ids):
                conn.exec_driver_sql(f"KILL {int(ident)}")
    killer.dispose()


def test_a_connection_lost_mid_read_is_invalidated(server_db: Database) -> None:
    """A connection the server closes after the read's first statement fails the next
    one, sent on the driver's cursor (``_execute._on_cursor``), as SQLAlchemy would
    fail it: ``DBAPIError`` with ``connection_invalidated`` (what
    :func:`rpquery.db.read_retrying` retries on), the connection discarded."""
    db = server_db
    with db.begin() as conn:
        provider(conn, "host", inventory={"VCPU": 4})
    with db.connect() as conn:
        runner._fetch(conn, "SELECT 1", {})  # through SQLAlchemy: the connection begins
        assert runner._direct(conn)
        _kill_pooled(db)
        with pytest.raises(sa.exc.DBAPIError) as lost:
            runner._fetch(conn, "SELECT 2", {})
        assert lost.value.connection_invalidated
        assert conn.invalidated
    assert len(allocation_candidates(db, "resources=VCPU:1").allocation_requests) == 1


def test_a_read_without_ping_survives_a_closed_connection(server_db: Database) -> None:
    """A candidates read checks its connection out without the pre-ping (one round trip
    of five or six): a connection the server closed fails its first statement, and the
    read runs again on a fresh one. Other work still pings at checkout."""
    db = server_db
    with db.begin() as conn:
        provider(conn, "host", inventory={"VCPU": 4})
    assert len(allocation_candidates(db, "resources=VCPU:1").allocation_requests) == 1
    with db.count_statements() as counter:
        allocation_candidates(db, "resources=VCPU:1")
    assert not any(s.strip().upper() in ("SELECT 1", ";") for s in counter.statements)
    disconnects: list[bool] = []
    sa.event.listen(db.engine, "handle_error", lambda ctx: disconnects.append(ctx.is_disconnect))
    _kill_pooled(db)
    assert len(allocation_candidates(db, "resources=VCPU:2").allocation_requests) == 1
    assert disconnects and all(disconnects)  # found by the first statement, no ping
    _kill_pooled(db)
    with db.begin() as conn:  # a write: pinged at checkout, another connection
        provider(conn, "other", inventory={"VCPU": 4})
    assert len(allocation_candidates(db, "resources=VCPU:3").allocation_requests) == 2
