"""SQLite (pysqlite): ``ON CONFLICT``, pragmas on connect, ``BEGIN IMMEDIATE`` for
writes, triggers dropped and re-created inside the transaction."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Table, bindparam, event, exc
from sqlalchemy.engine import URL, Connection, Engine

from rpquery.store.dialects import _constructs as portable
from rpquery.store.dialects._base import (
    NoKeptPlans,
    OnConflictWrites,
    StandardSQL,
    executemany_insert,
    nothing_deferred,
)
from rpquery.store.dialects._constructs import _IntListText, spell

#: The text of SQLite's error when another connection holds the write lock past the
#: busy timeout: retry
BUSY = "database is locked"


class SQLite(NoKeptPlans, OnConflictWrites, StandardSQL):
    name = "sqlite"
    #: The write transaction locks the whole database: a long read inside one stalls
    #: every writer (past its 30 s busy timeout, under a scheduler's picks).
    locks_rows = False
    reads_autocommit = False
    on_server = False
    renders_summaries = False
    groups_offers = False
    fences_sharing = False
    ids_as_text = False
    rows_as_json = False

    def normalize_url(self, url: URL) -> URL:
        return url

    def database_file(self, url: URL) -> Path | None:
        name = url.database or ""
        if url.query.get("uri") or name in ("", ":memory:") or name.startswith("file:"):
            return None  # in memory, or a URI the driver resolves
        return Path(name)

    def engine_options(self, engine_kw: dict[str, Any]) -> None:
        # sqlite3 keeps a connection's prepared statements by text, 128 by default: the
        # read path's texts (a few per request shape and list length) outgrow that, and
        # a text prepared again is parsed and planned again (~15 KB a statement)
        engine_kw.setdefault("connect_args", {"timeout": 30, "cached_statements": 512})

    def engine_created(self, engine: Engine) -> None:
        event.listen(engine, "connect", _on_connect)
        event.listen(engine, "begin", _on_begin)

    def replica_lag(self, conn: Connection) -> float | None:
        conn.exec_driver_sql("SELECT 1")
        return 0.0

    def read_session_setup(self, conn: Connection) -> None:
        pass

    def read_settings(self) -> str | None:
        return None

    def ordered_joins(self, conn: Connection) -> tuple[Any, str] | None:
        return None  # (SQLite has no hash joins)

    def one_snapshot(self, conn: Connection) -> None:
        pass  # reads see one snapshot

    def block_writers(self, conn: Connection, tables: Sequence[str]) -> None:
        pass  # writers queue behind this write transaction anyway

    def bulk_insert(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> None:
        executemany_insert(conn, table, columns, rows)

    def sync_id_sequence(self, conn: Connection, table: Table) -> None:
        pass  # follows explicit ids by itself

    def refresh_statistics(self, conn: Connection, tables: Sequence[Table]) -> None:
        conn.exec_driver_sql("ANALYZE")

    def refresh_after_bulk_load(self, engine: Engine, tables: Sequence[Table]) -> None:
        with engine.begin() as conn:
            self.refresh_statistics(conn, tables)

    @contextmanager
    def triggers_suspended(
        self, conn: Connection, triggers: Mapping[str, Sequence[str]]
    ) -> Iterator[bool]:
        # the write transaction holds the only write lock; DDL is transactional here
        quote = conn.dialect.identifier_preparer.quote
        names = [n for group in triggers.values() for n in group]
        marks = ", ".join("?" for _ in names)
        stored = conn.exec_driver_sql(
            f"SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN ({marks})",
            tuple(names),
        ).all()
        for name, _ in stored:
            conn.exec_driver_sql(f"DROP TRIGGER {quote(name)}")
        yield True
        for _, sql in stored:
            conn.exec_driver_sql(sql)

    def indexes_deferred(
        self, conn: Connection, tables: Sequence[str]
    ) -> AbstractContextManager[list[str]]:
        return nothing_deferred()

    def explain_prefix(self, *, analyze: bool = False) -> str:
        return "EXPLAIN QUERY PLAN "

    def column_collation(self, conn: Connection, table: str, column: str) -> str | None:
        return None


def _on_connect(dbapi_conn: Any, record: Any) -> None:
    # Let SQLAlchemy (not pysqlite) emit BEGIN, so a transaction really starts
    # with the first statement; turn on foreign keys and WAL for file databases.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    if cur.execute("PRAGMA database_list").fetchone()[2]:
        cur.execute("PRAGMA journal_mode=WAL")
    cur.close()


def _on_begin(conn: Connection) -> None:
    # A write transaction takes the lock up front (IMMEDIATE): two writers queue
    # instead of failing on a lock upgrade. Reads stay deferred.
    # Sent on the raw connection so tracers count only rpquery's own statements.
    immediate = conn.get_execution_options().get("rpquery_write")
    raw = conn.connection.driver_connection
    assert raw is not None
    statement = "BEGIN IMMEDIATE" if immediate else "BEGIN"
    try:
        raw.execute(statement)
    except raw.OperationalError as error:  # "database is locked" after busy_timeout
        # as a driver error, so begin() maps it like any other (a lock timeout: retryable)
        raise exc.OperationalError(statement, None, error) from error


# ---------------------------------------------------------------- spellings


def _in_id_list_sqlite(element: Any, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    param = compiler.process(bindparam(element.name, type_=_IntListText("[]")), **kw)
    return f"{column} IN (SELECT value FROM json_each({param}))"


spell(
    "sqlite",
    {
        portable.floor_int: "CAST({args} AS INTEGER)",
        portable.least: "min({args})",
        portable.in_id_list: _in_id_list_sqlite,
        portable.random_order: "random()",
        portable.json_quote: "json_quote({args})",
        portable.concat_agg: "group_concat({args})",
        portable.json_rows: "json_group_array(json_array({args}))",
    },
)
