"""SQLite (pysqlite): ``ON CONFLICT``, triggers dropped and re-created inside the
transaction."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import Select, Table
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Engine

from rpquery.store.dialects._base import executemany_insert, nothing_deferred


class SQLite:
    name = "sqlite"
    #: The write transaction locks the whole database: a long read inside one stalls
    #: every writer (past its 30 s busy timeout, under a scheduler's picks).
    locks_rows = False

    def read_session_setup(self, conn: Connection) -> None:
        pass

    def one_snapshot(self, conn: Connection) -> None:
        pass  # reads see one snapshot

    def block_writers(self, conn: Connection, tables: Sequence[str]) -> None:
        pass  # writers queue behind this write transaction anyway

    def insert_ignore(self, conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
        conn.execute(sqlite_dialect.insert(table).on_conflict_do_nothing(), rows)

    def insert_ignore_explicit_ids(
        self, conn: Connection, table: Table, rows: list[dict[str, Any]]
    ) -> None:
        self.insert_ignore(conn, table, rows)

    def insert_select_adding(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[str],
        query: Select[Any],
        *,
        key: Sequence[str],
        add: Sequence[str],
    ) -> None:
        upsert = sqlite_dialect.insert(table).from_select(list(columns), query)
        conn.execute(
            upsert.on_conflict_do_update(
                index_elements=list(key),
                set_={c: table.c[c] + upsert.excluded[c] for c in add},
            )
        )

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

    def charset_problems(self, conn: Connection) -> list[tuple[str, str]]:
        return []

    def ratio_as_written(self, value: float) -> float:
        return value
