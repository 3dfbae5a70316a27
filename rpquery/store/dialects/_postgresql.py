"""PostgreSQL (psycopg 3): ``ON CONFLICT``, ``COPY``, ``SET LOCAL``, ``LOCK TABLE``,
trigger and index DDL inside the transaction."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Table, bindparam, exc, func, select
from sqlalchemy.engine import URL, Connection, Engine

from rpquery.store.dialects import _constructs as portable
from rpquery.store.dialects._base import OnConflictWrites, StandardSQL
from rpquery.store.dialects._constructs import _IntListText, spell

#: ``Connection.info`` key: :meth:`PostgreSQL.unprepared` turned psycopg's prepared
#: statements off for the block (a statement prepared on purpose still is)
_PREPARES = "rpquery_prepares"


#: psycopg's ``prepare_threshold`` in :meth:`PostgreSQL.unprepared` with ``repeats``: a
#: text is prepared when sent a third time on the connection, not a second. Preparing
#: costs a round trip of its own (psycopg waits for the ``PREPARE`` before it executes),
#: and past psycopg's ``prepared_max`` (100 a connection) each new one costs another
#: (the ``DEALLOCATE`` of the oldest): a text seen twice and never again (a request
#: asked again at once) paid both. make bench-shapes (200 random requests, 100
#: hosts): round trips 4.25 -> 3.94 a first ask, 4.73 -> 3.72 a repeat (2026-11-29).
REPEATS_THRESHOLD = 2

#: What :meth:`PostgreSQL.ordered_joins` puts before a statement: no hash join for it
ORDERED_JOINS = "SET LOCAL enable_hashjoin = off; "

#: SQLSTATEs that mean "someone else got there first: retry": serialization failure,
#: deadlock, lock not available
RETRYABLE = {"40001", "40P01", "55P03"}


class PostgreSQL(OnConflictWrites, StandardSQL):
    name = "postgresql"
    locks_rows = True
    reads_autocommit = True
    on_server = True
    renders_summaries = False
    groups_offers = False
    fences_sharing = True
    ids_as_text = False
    rows_as_json = False

    def normalize_url(self, url: URL) -> URL:
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
        return url

    def database_file(self, url: URL) -> Path | None:
        return None

    def engine_options(self, engine_kw: dict[str, Any]) -> None:
        engine_kw.setdefault("pool_pre_ping", True)

    def engine_created(self, engine: Engine) -> None:
        pass

    def replica_lag(self, conn: Connection) -> float | None:
        # 0 when the standby has replayed all the WAL it received, else the age of the
        # last transaction it replayed; a server not in recovery has no lag.
        row = conn.exec_driver_sql(
            "SELECT pg_is_in_recovery(),"
            " CASE WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM"
            " pg_last_wal_replay_lsn() THEN 0 ELSE COALESCE(EXTRACT(EPOCH FROM"
            " now() - pg_last_xact_replay_timestamp()), 0) END"
        ).one()
        return float(row[1]) if row[0] else 0.0

    def read_session_setup(self, conn: Connection) -> None:
        conn.exec_driver_sql("SET LOCAL jit = off; SET LOCAL plan_cache_mode = force_custom_plan")

    def read_settings(self) -> str | None:
        # for the session, not the transaction: a read may run in autocommit mode
        return "set_config('jit', 'off', false)"

    def ordered_joins(self, conn: Connection) -> tuple[Any, str] | None:
        # one simple-protocol message (parameters bound by psycopg: a message with two
        # statements cannot have the server's), which the server runs as one implicit
        # transaction: SET LOCAL ends with the statement. Not in a transaction block,
        # where it would last until its end.
        import psycopg

        driver = conn.connection.driver_connection
        if not isinstance(driver, psycopg.Connection) or not driver.autocommit:
            return None
        if driver.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            return None
        return psycopg.ClientCursor(driver), ORDERED_JOINS

    @contextmanager
    def unprepared(self, conn: Connection, *, repeats: bool = False) -> Iterator[None]:
        # psycopg prepares a statement sent prepare_threshold times (5); unprepared,
        # every plan is made for the values sent (never a generic plan); with repeats,
        # a text sent a third time on this connection is prepared (REPEATS_THRESHOLD)
        driver = conn.connection.driver_connection
        before = getattr(driver, "prepare_threshold", None)
        if before is None:
            yield
            return
        driver.prepare_threshold = REPEATS_THRESHOLD if repeats else None  # type: ignore[union-attr]
        info = conn.info  # (taken now: an invalidated connection's would reconnect)
        info[_PREPARES] = True  # (statements asked for on purpose still are)
        try:
            yield
        finally:
            driver.prepare_threshold = before  # type: ignore[union-attr]
            info.pop(_PREPARES, None)

    def execute_prepared(
        self, conn: Connection, cursor: Any, sql: str, params: dict[str, Any]
    ) -> None:
        # prepared on its first execution on this connection, unless the operator turned
        # psycopg's prepared statements off (prepare_threshold=None: PgBouncer in
        # transaction mode); PostgreSQL plans it for its values five times, then keeps
        # a generic plan if it costs no more
        driver = conn.connection.driver_connection
        before = getattr(driver, "prepare_threshold", None)
        if before is None and not conn.info.get(_PREPARES):
            cursor.execute(sql, params)
            return
        driver.prepare_threshold = before if before is not None else sys.maxsize  # type: ignore[union-attr]
        try:
            cursor.execute(sql, params, prepare=True)
        finally:
            driver.prepare_threshold = before  # type: ignore[union-attr]

    def one_snapshot(self, conn: Connection) -> None:
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    def block_writers(self, conn: Connection, tables: Sequence[str]) -> None:
        conn.exec_driver_sql(f"LOCK TABLE {', '.join(tables)} IN SHARE MODE")

    def bulk_insert(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> None:
        import psycopg
        from psycopg import sql

        copy = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(table.name), sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        driver = conn.connection.driver_connection
        assert driver is not None
        try:
            with driver.cursor() as cur, cur.copy(copy) as out:
                for row in rows:
                    out.write_row(row)
        except psycopg.Error as error:  # same wrapping as a statement sent by SQLAlchemy
            raise exc.DBAPIError.instance(
                copy.as_string(driver), None, error, psycopg.Error
            ) from error

    def sync_id_sequence(self, conn: Connection, table: Table) -> None:
        seq = func.pg_get_serial_sequence(table.name, "id")
        top = select(func.max(table.c.id)).scalar_subquery()
        conn.execute(select(func.setval(seq, func.coalesce(top, 1), top.is_not(None))))

    def refresh_statistics(self, conn: Connection, tables: Sequence[Table]) -> None:
        quote = conn.dialect.identifier_preparer.quote
        for table in tables:
            conn.exec_driver_sql(f"ANALYZE {quote(table.name)}")

    def refresh_after_bulk_load(self, engine: Engine, tables: Sequence[Table]) -> None:
        # VACUUM sets the visibility map index-only scans need; not in a transaction.
        quote = engine.dialect.identifier_preparer.quote
        with engine.connect() as conn:
            auto = conn.execution_options(isolation_level="AUTOCOMMIT")
            for table in tables:
                auto.exec_driver_sql(f"VACUUM (ANALYZE) {quote(table.name)}")

    @contextmanager
    def triggers_suspended(
        self, conn: Connection, triggers: Mapping[str, Sequence[str]]
    ) -> Iterator[bool]:
        quote = conn.dialect.identifier_preparer.quote
        tables = ", ".join(quote(t) for t in triggers)
        try:
            with conn.begin_nested():
                conn.exec_driver_sql(f"LOCK TABLE {tables} IN SHARE ROW EXCLUSIVE MODE")
                _alter_triggers(conn, triggers, "DISABLE")
        except exc.DBAPIError as error:
            if getattr(error.orig, "sqlstate", None) != "42501":  # insufficient_privilege
                raise
            yield False
            return
        yield True
        _alter_triggers(conn, triggers, "ENABLE")

    @contextmanager
    def indexes_deferred(self, conn: Connection, tables: Sequence[str]) -> Iterator[list[str]]:
        if any(
            conn.exec_driver_sql(f"SELECT EXISTS (SELECT 1 FROM {t})").scalar() for t in tables
        ):
            yield []
            return
        defs = conn.exec_driver_sql(
            "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) "
            "FROM pg_index i WHERE i.indrelid = ANY (%(tables)s::regclass[]) "
            "AND NOT i.indisunique AND NOT i.indisprimary AND NOT EXISTS ("
            "SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) "
            "ORDER BY 1",
            {"tables": list(tables)},
        ).all()
        for name, _ in defs:
            conn.exec_driver_sql(f"DROP INDEX {name}")
        yield [name for name, _ in defs]
        conn.exec_driver_sql("SET LOCAL maintenance_work_mem = '256MB'")
        for _, ddl in defs:
            conn.exec_driver_sql(ddl)
        # planner statistics for what follows in this transaction (the tables were empty)
        conn.exec_driver_sql(f"ANALYZE {', '.join(tables)}")

    def explain_prefix(self, *, analyze: bool = False) -> str:
        return "EXPLAIN (ANALYZE, BUFFERS) " if analyze else "EXPLAIN "

    def column_collation(self, conn: Connection, table: str, column: str) -> str | None:
        return None


def _alter_triggers(conn: Connection, triggers: Mapping[str, Sequence[str]], action: str) -> None:
    quote = conn.dialect.identifier_preparer.quote
    for table, names in triggers.items():
        each = ", ".join(f"{action} TRIGGER {quote(n)}" for n in names)
        conn.exec_driver_sql(f"ALTER TABLE {quote(table)} {each}")


# ---------------------------------------------------------------- spellings


def _by_backend_postgresql(element: Any, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.postgresql, **kw))


def _in_id_list_postgresql(element: Any, compiler: Any, **kw: Any) -> str:
    # The text is sent untyped and cast by the server while planning, so the planner
    # sees the array's values (a CAST of a typed VARCHAR parameter would hide them
    # and the plan would guess ten elements: seconds instead of milliseconds).
    column = compiler.process(element.column, **kw)
    param = compiler.process(bindparam(element.name, type_=_IntListText("{}")), **kw)
    return f"{column} = ANY ({param}::INTEGER[])"


def _in_name_list_postgresql(element: Any, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    param = compiler.process(bindparam(element.name), **kw)
    return f"{column} = ANY (CAST({param} AS VARCHAR[]))"


spell(
    "postgresql",
    {
        portable.trunc_int: (
            "CASE WHEN abs({args}) < 9007199254740992 THEN CAST(trunc({args}) AS BIGINT) END"
        ),
        portable.json_quote: "CAST(to_json({args}) AS TEXT)",
        portable.concat_agg: "string_agg(CAST({args} AS TEXT), ',')",
        portable.json_rows: "json_agg(json_build_array({args}))",
        portable.by_backend: _by_backend_postgresql,
        portable.in_id_list: _in_id_list_postgresql,
        portable.in_name_list: _in_name_list_postgresql,
        portable.random_order: "random()",
        portable.least: "least({args})",
    },
)
