"""Statements compiled by parts (:mod:`rpquery.store._texts`, issue 18 item 5).

Without a database: for the statements of random requests, every batch scope and all
three dialects, the text joined from parts, with values, is the text SQLAlchemy
writes for the whole statement (placeholders aside: the parts' constants have their
own names), its values in the same order, its result columns named alike. On every
backend: a request of a new shape made of clauses seen before compiles nothing (no
part, and no whole statement: MySQL/MariaDB's text rows name their columns from the
head), and its answer is right.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite

from benchmarks import shapes
from rpquery.db import Database
from rpquery.read.candidates import _batches as bt
from rpquery.read.candidates import _execute as ex
from rpquery.read.candidates import _sql as q
from rpquery.read.candidates import allocation_candidates
from rpquery.read.request import parse_candidates
from rpquery.store import _texts, dialects, runner
from tests.factories import provider
from tests.test_statement_shapes import AGGS, BATCHES, NAMES, batch_scope

#: dialects as their drivers set them up (PyMySQL's and psycopg's ``%(name)s``,
#: sqlite3's ``?``)
DIALECTS = {
    "postgresql": postgresql.psycopg.dialect(),
    "mysql": mysql.pymysql.dialect(paramstyle="pyformat"),
    "sqlite": sqlite.pysqlite.dialect(),
}
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|(?<![\w:]):(\w+)\b")


def canonical(sql: str, values: dict[str, Any]) -> tuple[str, list[Any]]:
    """``sql`` with each placeholder ``?`` and the values in the order they appear."""
    order: list[Any] = []

    def one(m: re.Match[str]) -> str:
        order.append(values[m.group(1) or m.group(2)])
        return "?"

    return _PLACEHOLDER.sub(one, sql), order


def _values(stmt: sa.Select, group_values: dict[str, Any]) -> dict[str, Any]:
    """The group's values and a batch's (empty sharing lists: their empty forms)."""
    return {
        **group_values,
        "root_ids": [5, 6],
        "roots_lo": 1,
        "roots_hi": 9,
        "sharing_ids": [],
        "sharing_exempt": [7],
        "exclude_ids": [3],
        "batch_limit": 10,
        "after_id": 2,
    }


@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize("batch", BATCHES)
def test_joined_text_is_the_whole_statements(dialect: str, batch: bt.Batch) -> None:
    d = DIALECTS[dialect]
    joined = 0
    for qs in shapes.requests(5, 30, AGGS):
        req = parse_candidates(qs)
        roots, roots_values, filtered = bt.roots_query(req, NAMES, (), batch)
        scope = batch_scope(batch, roots, filtered)
        stmts = [(roots, roots_values)] if roots is not None else []
        for g in req.groups:
            kinds = [{"room": True}, {"room": False, "grouped": True}]
            if ex.carries_summary(g):  # (the whole cloud's: its scope is every root)
                kinds.append({"room": False, "summary": True})
            for kind in kinds:
                what, values = ex.group_statement(g, NAMES, **kind)
                stmts.append((ex._stmt(what, scope), {**roots_values, **values}))
        for stmt, values in stmts:
            params = _values(stmt, values)
            whole = stmt.compile(dialect=_texts.text_dialect(d))
            state = whole.construct_expanded_state(params)
            template = _texts.template(stmt, d)
            assert template is not None
            joined += template.text.count(" AND ") > 0
            sql, bound = _texts.render(template, params)
            assert canonical(sql, bound) == canonical(state.statement, state.parameters), qs
            # the result columns' names (MySQL/MariaDB's text rows name them) as well
            assert template.columns == tuple(c[0] for c in whole._result_columns), qs
    assert joined > 30  # joined from parts, not only whole statements


@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize(
    "ids", [[1], [3, 1, 2], list(range(2000)), [], [True, 2], [2**63 - 1, -5]]
)
def test_a_literal_id_list_is_written_as_sqlalchemy_writes_it(
    dialect: str, ids: list[Any]
) -> None:
    """:func:`_texts.render` writes a list of plain ints inline itself (the summaries'
    trees): the same text as SQLAlchemy's, for every dialect, empty and odd lists too."""
    d = DIALECTS[dialect]
    rp = sa.table("resource_providers", sa.column("id", sa.Integer))
    param = sa.bindparam("ids", expanding=True, literal_execute=True)
    stmt = sa.select(rp.c.id).where(rp.c.id.in_(param), rp.c.id > sa.bindparam("low"))
    template = _texts.template(stmt, d)
    assert template is not None and template.expanding
    params = {"ids": ids, "low": 0}
    whole = stmt.compile(dialect=_texts.text_dialect(d)).construct_expanded_state(params)
    sql, bound = _texts.render(template, params)
    assert canonical(sql, bound) == canonical(whole.statement, whole.parameters)


def test_a_new_shape_of_known_clauses_compiles_nothing(db: Database) -> None:
    agg = "11111111-2222-4333-8444-555555555555"
    with db.begin() as conn:
        provider(
            conn, "a", inventory={"VCPU": 4}, traits=["CUSTOM_A", "CUSTOM_R"], aggregates=[agg]
        )
        provider(conn, "b", inventory={"VCPU": 4}, traits=["CUSTOM_R"], aggregates=[agg])
        provider(conn, "c", inventory={"VCPU": 4}, traits=["CUSTOM_R"])
    # (root_required: batches scoped by their roots' ids, so the group statement is
    # joined from parts. A whole-cloud answer's, or a walk's over a range of every
    # root, also reads the summaries' rows on SQLite and PostgreSQL: its filters are
    # in a column, fits, compiled with the head, once per combination of filters.)
    common = "limit=5&root_required=CUSTOM_R"
    allocation_candidates(db, f"resources=VCPU:1&required=!CUSTOM_A&{common}")
    allocation_candidates(db, f"resources=VCPU:1&member_of={agg}&{common}")
    compiled, keyed = _texts.PartStats.compiled, _texts.PartStats.keyed
    # a group statement of a shape not seen: forbidden traits and member_of together
    answer = allocation_candidates(
        db, f"resources=VCPU:2&required=!CUSTOM_A&member_of={agg}&{common}"
    )
    assert _texts.PartStats.compiled == compiled
    # its clauses found by the builders' objects, not by a cache key each (SQLAlchemy
    # groups a WHERE's clauses anew for every statement)
    assert _texts.PartStats.keyed == keyed
    names = {s.name for s in answer.provider_summaries.values()}
    assert names == {"b"}


def test_a_select_that_compiles_its_own_way_is_compiled_whole() -> None:
    """``long_concat_select`` writes ``group_concat_max_len`` for its statement on
    MySQL: joined from parts as a plain ``SELECT``, it would be lost."""
    rp = sa.table("resource_providers", sa.column("id"), sa.column("root_provider_id"))
    stmt = dialects.long_concat_select(dialects.concat_agg(rp.c.id)).where(
        rp.c.root_provider_id.in_(sa.bindparam("ids", expanding=True)), rp.c.id > 3
    )
    template = _texts.template(stmt, DIALECTS["mysql"])
    assert template is not None
    assert "group_concat_max_len" in _texts.render(template, {"ids": [1, 2]})[0]


def test_a_statement_with_its_values_written_in_runs_as_sqlalchemy_runs_it(
    db: Database,
) -> None:
    """The insight readers build statements with their values in (``Binds(values)``:
    lists as anonymous parameters, ``IN (1, 2)``): they are not joined from parts (which
    take every named value from the request's) and give SQLAlchemy's rows."""
    agg = "11111111-2222-4333-8444-555555555555"
    with db.begin() as conn:
        provider(conn, "a", inventory={"VCPU": 4}, traits=["CUSTOM_A"], aggregates=[agg])
        provider(conn, "b", inventory={"VCPU": 4}, aggregates=[agg])
    req = parse_candidates(f"resources=VCPU:1&required=!CUSTOM_A&member_of={agg}")
    with db.connect() as conn:
        names = ex.fetch_names(conn, req)
        stmt = q.group_rows_stmt(req.groups[0], names)
        assert _texts.template(stmt, conn.dialect) is None
        expected = [tuple(r) for r in conn.execute(stmt)]
        assert [tuple(r) for r in runner.driver_rows(conn, stmt, {})] == expected
        assert len(expected) == 1


def test_a_text_on_the_drivers_cursor_is_traced_and_its_errors_are_sqlalchemys(
    db: Database,
) -> None:
    """Once a read's connection has begun (through SQLAlchemy: SQLite's ``BEGIN``), the
    read path sends its texts on the driver's cursor: tracers and cursor events see
    them, and a driver error is SQLAlchemy's ``DBAPIError`` (rpquery's
    ``DatabaseError`` out of the read) with the ``handle_error`` hooks run."""
    with db.begin() as conn:
        provider(conn, "a", inventory={"VCPU": 4})
    events: list[str] = []
    errors: list[object] = []
    sa.event.listen(db.engine, "after_cursor_execute", lambda *a: events.append(a[2]))
    sa.event.listen(db.engine, "handle_error", lambda ctx: errors.append(ctx.statement))
    n = ":n" if db.dialect_name == "sqlite" else "%(n)s"
    count = f"SELECT COUNT(*) + {n} FROM resource_providers"
    bad = "SELECT no_such_column FROM resource_providers"
    with db.count_statements() as counter, db.connect() as conn:
        assert not runner._direct(conn)
        assert [tuple(r) for r in runner._fetch(conn, count, {"n": 1})] == [(2,)]  # begins
        assert runner._direct(conn)
        assert [tuple(r) for r in runner._fetch(conn, count, {"n": 2})] == [(3,)]
        with pytest.raises(sa.exc.DBAPIError):
            runner._on_cursor(conn, bad, {})
    assert counter.statements == [count, count, bad]
    assert events == [count, count] and errors == [bad]


def test_sqlite_keeps_more_prepared_statements_than_its_default() -> None:
    """sqlite3 keeps 128 prepared statements a connection by default: random requests'
    texts outgrow that, and SQLite parses and plans a text again when it is gone."""
    kw: dict[str, Any] = {}
    dialects.backend("sqlite").engine_options(kw)
    assert kw["connect_args"]["cached_statements"] == 512
    assert kw["connect_args"]["timeout"] == 30
