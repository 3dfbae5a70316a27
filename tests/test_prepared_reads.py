"""Plans the server keeps (issue 18, item 5): allocation candidates' names statement is
prepared on PostgreSQL whatever the request (one text for any number of names,
:class:`~rpquery.store.dialects.in_name_list`), and on a small cloud a statement text
sent a third time is prepared too (not a second: preparing costs a round trip); on a
bigger cloud nothing else is (a generic plan could guess ten ids where there are
thousands), and an operator who turned psycopg's prepared statements off (PgBouncer in
transaction mode) gets none at all.

Name lists of any length select exactly their names on every backend, run after run
(past psycopg's and PostgreSQL's thresholds, where a kept plan takes over)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.pool import NullPool

from rpquery.db import Database
from rpquery.read.candidates import _batches as bt
from rpquery.read.candidates import allocation_candidates
from rpquery.store import dialects
from rpquery.store.tables import traits
from tests.conftest import _ran
from tests.factories import provider

STMT = (
    sa.select(traits.c.name)
    .where(dialects.in_name_list(traits.c.name, "names"))
    .order_by(traits.c.name)
)
REQUESTS = [
    "resources=VCPU:1",
    "resources=VCPU:1&required=CUSTOM_A",
    "resources=VCPU:1&required=CUSTOM_A,!CUSTOM_B",
    "resources=VCPU:1,MEMORY_MB:64&required=in:CUSTOM_A,CUSTOM_B&required=!HW_CPU_X86_AVX",
]


def test_name_lists_of_any_length_select_exactly_their_names(db: Database) -> None:
    with db.connect() as conn:
        known = sorted(conn.execute(sa.select(traits.c.name)).scalars())
        assert len(known) > 100  # os-traits' standard traits
        cases = [[], [known[3]], known[::7], [*known, "CUSTOM_NOPE"], [known[1], known[1]]]
        for names in cases * 4:  # past psycopg's prepare threshold, lengths interleaved
            got = list(conn.execute(STMT, {"names": names}).scalars())
            assert got == sorted(set(known) & set(names)), names[:3]


def test_a_name_list_is_one_text_on_postgresql_and_expanded_elsewhere() -> None:
    pg = str(STMT.compile(dialect=postgresql.psycopg.dialect()))
    assert "traits.name = ANY (CAST(%(names)s AS VARCHAR[]))" in pg
    for dialect in (mysql.pymysql.dialect(), sqlite.pysqlite.dialect()):
        assert "IN (__[POSTCOMPILE_names])" in str(STMT.compile(dialect=dialect))


@pytest.fixture(scope="module")
def pg(database_url) -> Iterator[Database]:  # type: ignore[no-untyped-def]
    """A new PostgreSQL database with two hosts, opened without a pool: each connection
    is new, with no statement prepared by an earlier test."""
    db = Database(database_url("postgresql"), poolclass=NullPool)
    db.upgrade()
    with db.begin() as conn:
        provider(conn, "a", inventory={"VCPU": 8, "MEMORY_MB": 512}, traits=["CUSTOM_A"])
        provider(conn, "b", inventory={"VCPU": 8, "MEMORY_MB": 512}, traits=["CUSTOM_B"])
    yield db
    db.dispose()


@pytest.fixture
def conn(pg: Database) -> Iterator[sa.Connection]:
    """A new connection to :func:`pg`'s database (counted as a PostgreSQL test)."""
    _ran["postgresql"] += 1
    with pg.connect() as conn:
        yield conn


def _placeholders(sql: str) -> str:
    """``sql`` with its placeholders as ``?``: psycopg's ``%(name)s`` (and ``%%``) as
    sent, the server's ``$1`` (and ``%``) as prepared."""
    return re.sub(r"%\(\w+\)s|\$\d+", "?", sql).replace("%%", "%")


def _prepared(conn: sa.Connection) -> list[tuple[str, int]]:
    """The connection's prepared statements: (text, times run)."""
    rows = conn.exec_driver_sql(
        "SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements"
    )
    return [(text, int(runs)) for text, runs in rows]


def _ask(conn: sa.Connection, times: int = 2) -> None:
    for qs in REQUESTS * times:
        assert allocation_candidates(conn, qs).allocation_requests


def test_the_names_statement_is_one_prepared_text_for_any_request(conn: sa.Connection) -> None:
    _ask(conn)
    names = [(text, runs) for text, runs in _prepared(conn) if "set_config" in text]
    # one text, run by every request whatever its names (8 requests, 1 to 4 traits)
    assert len(names) == 1 and names[0][1] == 2 * len(REQUESTS), names


def test_a_small_cloud_prepares_statements_sent_a_third_time(conn: sa.Connection) -> None:
    sent: Counter[str] = Counter()

    def count(c: Any, cursor: Any, sql: str, params: Any, ctx: Any, many: bool) -> None:
        sent[_placeholders(sql)] += 1

    sa.event.listen(conn.engine, "before_cursor_execute", count)
    try:
        _ask(conn, times=2)
        assert bt.small_cloud(conn)
        twice = {t for t, n in sent.items() if n == 2}
        after_two = {_placeholders(t) for t, _ in _prepared(conn)}
        _ask(conn, times=1)
    finally:
        sa.event.remove(conn.engine, "before_cursor_execute", count)
    prepared = {_placeholders(t) for t, _ in _prepared(conn) if "set_config" not in t}
    # each request's group statement, prepared when sent a third time (not a second:
    # preparing costs a round trip)
    assert prepared and any("inventories" in text for text in prepared)
    assert twice and not twice & after_two  # sent twice: not prepared then
    assert twice & prepared  # the third time they were
    assert all(sent[t] >= 3 for t in prepared), [(t[:40], sent[t]) for t in prepared]


def test_a_bigger_cloud_prepares_only_the_names_statement(
    conn: sa.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bt.Batches, "ONE_BATCH", 0)  # as a cloud of more roots is
    _ask(conn, times=3)
    prepared = _prepared(conn)
    assert not bt.small_cloud(conn)
    assert [runs for text, runs in prepared if "set_config" in text] == [3 * len(REQUESTS)]
    assert len(prepared) == 1, prepared


def test_prepared_statements_turned_off_by_the_operator_stay_off(conn: sa.Connection) -> None:
    driver = conn.connection.driver_connection
    driver.prepare_threshold = None  # type: ignore[union-attr]
    _ask(conn, times=3)
    assert _prepared(conn) == []
    assert driver.prepare_threshold is None  # type: ignore[union-attr]
