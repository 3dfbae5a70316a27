"""MySQL/MariaDB (PyMySQL): ``INSERT IGNORE``, ``ON DUPLICATE KEY UPDATE``, a strict
``sql_mode`` per session, ``utf8mb4``, 32-bit ``FLOAT`` ratios. Trigger DDL commits
the transaction here, so triggers are never suspended."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Select, Table, event, exc
from sqlalchemy.engine import URL, Connection, Dialect, Engine, ExceptionContext
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import FromClause
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import Integer, String, TypeDecorator, TypeEngine

from rpquery.store.dialects import _constructs as portable
from rpquery.store.dialects._base import (
    NoKeptPlans,
    executemany_insert,
    nothing_deferred,
    nothing_suspended,
)
from rpquery.store.dialects._constructs import spell

#: The ``sql_mode`` of rpquery's MySQL/MariaDB sessions, whatever the server's default:
#: oslo.db's default for Placement (``mysql_sql_mode = TRADITIONAL``). Strict: a value
#: a column cannot hold is an error, never silently clamped, truncated or stored as ``?``.
SQL_MODE = "TRADITIONAL"


class MySQL(NoKeptPlans):
    name = "mysql"
    locks_rows = True
    reads_autocommit = False
    on_server = True
    renders_summaries = True
    groups_offers = True
    fences_sharing = False
    ids_as_text = True
    rows_as_json = True

    def normalize_url(self, url: URL) -> URL:
        if url.drivername in ("mysql", "mariadb"):
            url = url.set(drivername="mysql+pymysql")
        if "charset" not in url.query:
            url = url.update_query_dict({"charset": "utf8mb4"})
        return url

    def database_file(self, url: URL) -> Path | None:
        return None

    def engine_options(self, engine_kw: dict[str, Any]) -> None:
        engine_kw.setdefault("pool_pre_ping", True)

    def engine_created(self, engine: Engine) -> None:
        event.listen(engine, "connect", _on_connect)
        event.listen(engine, "handle_error", discard_refusing_node)

    def replica_lag(self, conn: Connection) -> float | None:
        status = conn.exec_driver_sql("SHOW SLAVE STATUS").mappings().first()
        if status is None:  # not a replica (a Galera node, a primary)
            return None
        behind = status.get("Seconds_Behind_Master")
        return float(behind) if behind is not None else float("inf")

    def read_session_setup(self, conn: Connection) -> None:
        pass

    def read_settings(self) -> str | None:
        return None

    def ordered_joins(self, conn: Connection) -> tuple[Any, str] | None:
        return None  # (a batch's rows are looked up by their indexes already)

    def one_snapshot(self, conn: Connection) -> None:
        pass  # REPEATABLE READ is the default

    def block_writers(self, conn: Connection, tables: Sequence[str]) -> None:
        pass  # INSERT ... SELECT share-locks the rows it reads

    def insert_ignore(self, conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
        from sqlalchemy.dialects import mysql as mysql_dialect  # when used (start-up time)

        conn.execute(mysql_dialect.insert(table).prefix_with("IGNORE"), rows)

    def insert_ignore_explicit_ids(
        self, conn: Connection, table: Table, rows: list[dict[str, Any]]
    ) -> None:
        # an explicit 0 in an AUTO_INCREMENT column means "generate one" unless
        # NO_AUTO_VALUE_ON_ZERO is in the session's sql_mode
        mode = conn.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar()
        conn.exec_driver_sql(
            "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_AUTO_VALUE_ON_ZERO')"
        )
        try:
            self.insert_ignore(conn, table, rows)
        finally:
            conn.exec_driver_sql("SET SESSION sql_mode = %s", (mode,))

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
        from sqlalchemy.dialects import mysql as mysql_dialect

        my = mysql_dialect.insert(table).from_select(list(columns), query)
        conn.execute(my.on_duplicate_key_update({c: table.c[c] + my.inserted[c] for c in add}))

    def bulk_insert(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> None:
        executemany_insert(conn, table, columns, rows)

    def sync_id_sequence(self, conn: Connection, table: Table) -> None:
        pass  # AUTO_INCREMENT follows explicit ids by itself

    def refresh_statistics(self, conn: Connection, tables: Sequence[Table]) -> None:
        quote = conn.dialect.identifier_preparer.quote
        conn.exec_driver_sql(f"ANALYZE TABLE {', '.join(quote(t.name) for t in tables)}").all()

    def refresh_after_bulk_load(self, engine: Engine, tables: Sequence[Table]) -> None:
        with engine.begin() as conn:
            self.refresh_statistics(conn, tables)

    def triggers_suspended(
        self, conn: Connection, triggers: Mapping[str, Sequence[str]]
    ) -> AbstractContextManager[bool]:
        return nothing_suspended()

    def indexes_deferred(
        self, conn: Connection, tables: Sequence[str]
    ) -> AbstractContextManager[list[str]]:
        return nothing_deferred()

    def explain_prefix(self, *, analyze: bool = False) -> str:
        return "ANALYZE FORMAT=JSON " if analyze else "EXPLAIN "

    def column_collation(self, conn: Connection, table: str, column: str) -> str | None:
        return conn.exec_driver_sql(
            "SELECT collation_name FROM information_schema.columns WHERE table_schema = "
            "DATABASE() AND table_name = %s AND column_name = %s",
            (table, column),
        ).scalar()

    def charset_problems(self, conn: Connection) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        connection_cs = conn.exec_driver_sql("SELECT @@character_set_connection").scalar()
        if connection_cs != "utf8mb4":
            found.append(
                (
                    f"the connection's character set is {connection_cs}",
                    "remove charset= from the database URL (rpquery then asks for utf8mb4) or "
                    "set charset=utf8mb4",
                )
            )
        name, default_cs = conn.exec_driver_sql(
            "SELECT schema_name, default_character_set_name FROM information_schema.schemata "
            "WHERE schema_name = DATABASE()"
        ).one()
        quote = conn.dialect.identifier_preparer.quote
        if default_cs != "utf8mb4":
            found.append(
                (
                    f"database {name} has default character set {default_cs}",
                    f"ALTER DATABASE {quote(name)} CHARACTER SET utf8mb4 "
                    "COLLATE utf8mb4_general_ci;",
                )
            )
        columns = conn.exec_driver_sql(
            "SELECT table_name, column_name, column_type, character_set_name, collation_name, "
            "is_nullable, column_default FROM information_schema.columns "
            "WHERE table_schema = DATABASE() AND character_set_name IS NOT NULL "
            "AND character_set_name <> 'utf8mb4' ORDER BY table_name, ordinal_position"
        ).all()
        for table, column, type_, charset, collation, nullable, default in columns:
            suffix = collation.split("_", 1)[1] if "_" in collation else "general_ci"
            target = f"utf8mb4_{suffix}" if charset.startswith("utf8") else "utf8mb4_general_ci"
            fix = (
                f"ALTER TABLE {quote(table)} MODIFY {quote(column)} {type_} CHARACTER SET "
                f"utf8mb4 COLLATE {target}{'' if nullable == 'YES' else ' NOT NULL'}"
            )
            if default is not None and default != "NULL":
                fix += f" DEFAULT {default}"
            found.append((f"column {table}.{column} has character set {charset}", fix + ";"))
        return found

    def ratio_as_written(self, value: float) -> float:
        # the shortest decimal that round-trips the stored 32-bit value
        try:
            stored = _float32(value)
        except OverflowError:  # beyond a 32-bit float: cannot have come from one
            return value
        for digits in range(1, 10):  # 9 significant digits always round-trip a float32
            text = f"{stored:.{digits}g}"
            if _float32(float(text)) == stored:
                return float(text)
        return stored  # pragma: no cover - the loop always returns

    def exact_text(self, length: int, dialect: Dialect) -> TypeEngine[str]:
        # the default collations fold case and ignore trailing spaces: a binary NO PAD
        # one, named differently by MariaDB and MySQL 8
        from sqlalchemy.dialects import mysql as mysql_dialect  # when used (start-up time)

        mariadb = getattr(dialect, "is_mariadb", False)
        collation = "utf8mb4_nopad_bin" if mariadb else "utf8mb4_0900_bin"
        return mysql_dialect.VARCHAR(length, charset="utf8mb4", collation=collation)

    def tally(
        self, rows: FromClause, by: str, item: str, largest: str, *, examples: int, every: Any
    ) -> Select[Any]:
        # MariaDB's window functions cost several times the rest of such a statement
        # (~350 ms of server CPU against ~65 at 5,000 hosts): one row per value instead,
        # the examples as text ("3,8,12"), every row of `every` a group of its own
        b, i = rows.c[by], rows.c[item]
        return _HashJoined(
            b,
            # the limit as text, so that SQLAlchemy's compiled cache keys on it
            first_ids(i, sa.literal_column(str(int(examples)))),
            sa.func.count(),
            sa.func.max(rows.c[largest]),
        ).group_by(b, sa.case((b == every, i)))


def rows_as_text_sql(
    statements: Sequence[tuple[str, Sequence[str]]], dialect: Dialect, whole_tables: bool
) -> str:
    """One ``SELECT`` giving each statement's rows as one text, for statements (their
    SQL, their result columns' names) whose columns are numbers: ``SELECT <i>, COUNT(*),
    GROUP_CONCAT(CONCAT(CONCAT_WS(':', IFNULL(p.a, ''), ...), ';') SEPARATOR '') FROM
    (<statement>) AS p``, one row per statement, joined by ``UNION ALL`` (one round
    trip), ``group_concat_max_len`` lifted
    (:func:`long_concat_sql`); ``''`` reads back as ``NULL``
    (:func:`rpquery.store.runner.merged_rows`).

    >>> from sqlalchemy.dialects import mysql
    >>> sql = rows_as_text_sql([("SELECT 1 AS a", ["a"])], mysql.dialect(), False)
    >>> sql.removeprefix("SELECT /*+ SET_VAR(group_concat_max_len = 16777216) */ ")
    "0, COUNT(*), GROUP_CONCAT(CONCAT(CONCAT_WS(':', IFNULL(p.`a`, '')), ';') SEPARATOR '') \
FROM (SELECT 1 AS a) AS p"
    """
    branches = []
    for i, (sql, names) in enumerate(statements):
        cells = ", ".join(f"IFNULL(p.`{name}`, '')" for name in names)
        branches.append(
            f"SELECT {i}, COUNT(*), GROUP_CONCAT(CONCAT(CONCAT_WS(':', {cells}), ';') "
            f"SEPARATOR '') FROM ({sql}) AS p"
        )
    return long_concat_sql(" UNION ALL ".join(branches), dialect, whole_tables)


class first_ids(FunctionElement[str]):  # noqa: N801 - reads like SQL
    """``GROUP_CONCAT(col ORDER BY col SEPARATOR ',' LIMIT n)``: a group's first ``n``
    values as text (MariaDB 10.3+)."""

    inherit_cache = True
    type = sa.String()
    name = "first_ids"


@compiles(first_ids)
def _first_ids(element: first_ids, compiler: Any, **kw: Any) -> str:
    col, limit = (compiler.process(c, **kw) for c in element.clauses)
    return f"GROUP_CONCAT({col} ORDER BY {col} SEPARATOR ',' LIMIT {limit})"


#: Per-statement settings of a whole-cloud read on MariaDB: hash joins (``BNLH``; the
#: default level 2 looks every provider and usage row up by primary key, ~10 ms more at
#: 5,000 hosts) with a join buffer that holds them (the default 256 KiB is filled
#: several times over; only what is needed is allocated).
WHOLE_SCAN_SETTINGS = "join_cache_level = 4, join_buffer_size = 8388608"


class _HashJoined(Select[Any]):
    """A ``SELECT`` that MariaDB runs with :data:`WHOLE_SCAN_SETTINGS`
    (``SET STATEMENT ... FOR SELECT ...``, for this statement only); plain elsewhere
    (MySQL has hash joins of its own, and no ``SET STATEMENT``)."""

    inherit_cache = True


@compiles(_HashJoined, "mysql")
def _hash_joined(element: _HashJoined, compiler: Any, **kw: Any) -> str:
    toplevel = not compiler.stack
    sql = str(compiler.visit_select(element, **kw))
    if toplevel and compiler.dialect.is_mariadb:
        return f"SET STATEMENT {WHOLE_SCAN_SETTINGS} FOR {sql}"
    return sql


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def discard_refusing_node(ctx: ExceptionContext) -> None:
    """A Galera node outside the primary component (1047, ``dialects.NODE_NOT_READY``)
    refuses every statement on every connection until it rejoins, but answers pings:
    SQLAlchemy is told to treat its connection as closed, so it is invalidated (closed
    on check-in) and the pool opens a new one for the next checkout, which a load
    balancer sends to a node that answers (on the pool's other connections the same
    error discards each in turn: ``invalidate_pool_on_disconnect`` off)."""
    if node_not_ready(ctx.original_exception):
        ctx.is_disconnect = True
        ctx.invalidate_pool_on_disconnect = False


def _on_connect(dbapi_conn: Any, record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("SET SESSION sql_mode = %s", (SQL_MODE,))
    cur.close()


# ---------------------------------------------------------------- errors


#: MySQL/MariaDB 1047, "WSREP has not yet prepared node for application use": a Galera
#: node outside the primary component (cut off from the others, e.g. stalled for longer
#: than ``evs.suspect_timeout`` on a loaded machine) refuses every statement, ``COMMIT``
#: and ``ROLLBACK`` included, until it rejoins. Nothing the refused statement asked for
#: ran and the transaction cannot commit; SQLSTATE 08S01, a communication failure (as
#: oslo.db counts it too): the connection is discarded (:func:`discard_refusing_node`)
#: and the work may be retried on another one.
NODE_NOT_READY = 1047
#: Server error codes that mean "someone else got there first: retry".
RETRYABLE = {1213, 1205, 1180, NODE_NOT_READY}  # deadlock (Galera: certification),
# lock wait (Galera: also a wsrep_sync_wait that failed), COMMIT, node outside the cluster


def node_not_ready(error: BaseException) -> bool:
    """True when ``error`` (a driver error, or SQLAlchemy's wrapping one) is a Galera
    node refusing statements (:data:`NODE_NOT_READY`).

    >>> import pymysql
    >>> node_not_ready(pymysql.err.OperationalError(1047, "WSREP has not yet prepared node"))
    True
    >>> node_not_ready(pymysql.err.OperationalError(1213, "Deadlock found"))
    False
    """
    args: tuple[Any, ...] = tuple(getattr(getattr(error, "orig", error), "args", ()))
    return bool(args) and args[0] == NODE_NOT_READY


#: MySQL/MariaDB: "Incorrect string value" (1366), "Illegal mix of collations" (1267,
#: 1270, 1271): text a column's character set cannot hold or compare (utf8mb3, latin1).
CHARSET_ERRORS = frozenset({1366, 1267, 1270, 1271})


def is_charset_error(error: exc.DBAPIError) -> bool:
    """True when the server refused text its column's character set cannot hold."""
    args: tuple[Any, ...] = tuple(getattr(getattr(error, "orig", None), "args", ()))
    return bool(args) and args[0] in CHARSET_ERRORS


# ---------------------------------------------------------------- spellings


def _json_kind(type_: TypeEngine[Any]) -> str | None:
    """``"int"`` or ``"text"`` for a column of integers or of text (through any
    :class:`TypeDecorator`), else ``None``."""
    while isinstance(type_, TypeDecorator):
        type_ = type_.impl_instance
    if isinstance(type_, Integer):
        return "int"
    return "text" if isinstance(type_, String) else None


#: MySQL/MariaDB's ``group_concat_max_len`` for a :class:`long_concat_select`: 16 MiB,
#: far beyond one provider's traits or resources (the default is 1 MiB on MariaDB, 1 KiB
#: on MySQL 8; strict MariaDB refuses more than 1 GiB).
GROUP_CONCAT_MAX_LEN = 16777216


#: MariaDB's settings for a statement that reads whole tables (:func:`long_concat_sql`):
#: hash joins (``join_cache_level`` 4: ``BNLH``), their buffer sized by the rows the
#: optimizer expects (``optimize_join_buffer_size``, on by default) up to 32 MiB
WHOLE_TABLES = (
    "join_cache_level = 4, join_buffer_size = 33554432, join_buffer_space_limit = 67108864"
)


def long_concat_sql(sql: str, dialect: Any, whole_tables: bool = False) -> str:
    """MySQL/MariaDB's ``SELECT`` text ``sql`` with ``group_concat_max_len`` lifted for
    itself (:class:`long_concat_select`): ``SET STATEMENT ... FOR`` on MariaDB, the
    ``SET_VAR`` hint in its first query block on MySQL 8. ``whole_tables``: the
    statement reads every row of its tables (a whole-cloud answer's one pass over the
    inventories), so MariaDB joins them by hash (:data:`WHOLE_TABLES`) instead of one
    index lookup per row: at 5,000 hosts 20k inventories and their usage rows, ~20 %
    less time (paired runs, load ~4: 130 -> 108 ms). MySQL 8 hash-joins by itself.

    >>> from sqlalchemy.dialects import mysql
    >>> long_concat_sql("SELECT 1", mysql.dialect(is_mariadb=True))
    'SET STATEMENT group_concat_max_len = 16777216 FOR SELECT 1'
    >>> long_concat_sql("SELECT 1", mysql.dialect())
    'SELECT /*+ SET_VAR(group_concat_max_len = 16777216) */ 1'
    """
    if getattr(dialect, "is_mariadb", False):
        extra = f", {WHOLE_TABLES}" if whole_tables else ""
        return f"SET STATEMENT group_concat_max_len = {GROUP_CONCAT_MAX_LEN}{extra} FOR {sql}"
    hint = f"SELECT /*+ SET_VAR(group_concat_max_len = {GROUP_CONCAT_MAX_LEN}) */ "
    return hint + sql.removeprefix("SELECT ")


def _json_rows_mysql(element: Any, compiler: Any, **kw: Any) -> str:
    """Columns of integers and text are written by hand, ``CONCAT('[', GROUP_CONCAT(
    CONCAT('[', IFNULL(id, 'null'), ',', IFNULL(JSON_QUOTE(name), 'null'), ']')),
    ']')``: MariaDB's ``JSON_ARRAY`` costs ~0.4 µs a row more (the 11k providers of
    5,000 hosts: 15.3 -> 11.3 ms, statement and fetch). Other columns take
    ``JSON_ARRAYAGG(JSON_ARRAY(...))``. Both are ``NULL`` for no row and cut at
    ``group_concat_max_len``."""
    clauses = list(element.clauses)
    kinds = [_json_kind(c.type) for c in clauses]
    if None in kinds:
        return f"JSON_ARRAYAGG(JSON_ARRAY({compiler.process(element.clauses, **kw)}))"
    values = []
    for clause, kind in zip(clauses, kinds, strict=True):
        sql = compiler.process(clause, **kw)
        values.append(
            f"IFNULL({sql}, 'null')" if kind == "int" else f"IFNULL(JSON_QUOTE({sql}), 'null')"
        )
    row = "CONCAT('[', " + ", ',', ".join(values) + ", ']')"
    return f"CONCAT('[', GROUP_CONCAT({row}), ']')"


def _long_concat_select_mysql(element: Any, compiler: Any, **kw: Any) -> str:
    toplevel = not compiler.stack
    sql = str(compiler.visit_select(element, **kw))
    return long_concat_sql(sql, compiler.dialect) if toplevel else sql


def _exact_eq_mysql(element: Any, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    value = compiler.process(element.value, **kw)
    return f"({column} = {value} AND CAST({column} AS BINARY) = CAST({value} AS BINARY))"


spell(
    "mysql",
    {
        portable.random_order: "rand()",
        portable.trunc_int: "CAST(TRUNCATE({args}, 0) AS SIGNED)",
        portable.json_quote: "JSON_QUOTE({args})",
        portable.text_concat: "CONCAT({args})",
        portable.concat_agg: "GROUP_CONCAT({args})",
        portable.json_rows: _json_rows_mysql,
        portable.long_concat_select: _long_concat_select_mysql,
        portable.exact_eq: _exact_eq_mysql,
        portable.ratio_as_written_expr: "CAST(CAST({args} AS CHAR) AS DOUBLE)",
        portable.least: "least({args})",
    },
)
