"""Everything that differs between SQLite, PostgreSQL and MySQL/MariaDB, in one package.

Builders use the portable constructs defined here (``random_order()``, ``least()``,
``floor_int()``: ``@compiles`` hooks per dialect) and executors use the coercion and
error-classification helpers. Statements and session work that differ (upserts, bulk
loading, session setup, locks, EXPLAIN, trigger DDL, engine setup) are methods of one
object per backend (:mod:`._sqlite`, :mod:`._postgresql`, :mod:`._mysql`, each
implementing :class:`._base.Backend`), which :func:`backend` picks by dialect name; the
functions here call it. Nothing else in rpquery checks ``dialect.name``.

>>> from sqlalchemy.dialects import mysql, postgresql, sqlite
>>> str(random_order().compile(dialect=mysql.dialect()))
'rand()'
>>> str(random_order().compile(dialect=postgresql.dialect()))
'random()'
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import Select, Table, exc
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql import ColumnElement
from sqlalchemy.types import TypeDecorator, TypeEngine, Unicode

from rpquery.errors import InvalidRequest
from rpquery.store.dialects import _mysql, _postgresql, _sqlite  # noqa: F401 - their spellings
from rpquery.store.dialects._base import Backend
from rpquery.store.dialects._constructs import (
    by_backend,
    concat_agg,
    exact_eq,
    floor_int,
    in_id_list,
    in_name_list,
    json_quote,
    json_rows,
    least,
    long_concat_select,
    random_order,
    ratio_as_written_expr,
    text_concat,
    trunc_int,
)
from rpquery.store.dialects._mysql import (
    GROUP_CONCAT_MAX_LEN,
    NODE_NOT_READY,
    WHOLE_TABLES,
    is_charset_error,
    long_concat_sql,
    node_not_ready,
)
from rpquery.store.dialects._mysql import (
    SQL_MODE as MYSQL_SQL_MODE,
)

__all__ = [
    "BACKEND_NAMES",
    "NODE_NOT_READY",
    "Backend",
    "GROUP_CONCAT_MAX_LEN",
    "MYSQL_SQL_MODE",
    "WHOLE_TABLES",
    "ExactText",
    "backend",
    "block_writers",
    "bulk_insert",
    "capacity_expr",
    "by_backend",
    "concat_agg",
    "exact_eq",
    "explain_sql",
    "floor_int",
    "in_id_list",
    "in_name_list",
    "execute_prepared",
    "ids_as_text",
    "insert_ignore",
    "insert_ignore_explicit_ids",
    "insert_select_adding",
    "is_charset_error",
    "is_retryable",
    "node_not_ready",
    "json_quote",
    "least",
    "long_concat_select",
    "long_concat_sql",
    "missing_table",
    "one_snapshot",
    "ordered_joins",
    "random_order",
    "ratio_as_written_expr",
    "read_session_setup",
    "read_settings",
    "refresh_after_bulk_load",
    "refresh_statistics",
    "renders_summaries",
    "rows_as_json",
    "json_rows",
    "groups_offers",
    "sync_id_sequence",
    "text_concat",
    "to_int",
    "trunc_int",
    "unprepared",
]

# ---------------------------------------------------------------- the registry

#: SQLAlchemy's dialect (and URL backend) names, aliases included, to the module and
#: class of their backend: the only list of backends (``rpquery.db`` and the migrations
#: refuse any other). The backend modules are imported with this package (their
#: ``@compiles`` spellings); SQLAlchemy's dialect module a backend uses, when used.
_BACKENDS: dict[str, tuple[str, str]] = {
    "sqlite": ("_sqlite", "SQLite"),
    "postgresql": ("_postgresql", "PostgreSQL"),
    "postgres": ("_postgresql", "PostgreSQL"),
    "mysql": ("_mysql", "MySQL"),
    "mariadb": ("_mysql", "MySQL"),
}
_LOADED: dict[str, Backend] = {}
#: Every name :func:`backend` knows.
BACKEND_NAMES = tuple(_BACKENDS)


def backend(dialect_name: str) -> Backend:
    """The backend object for a dialect name (``conn.dialect.name``,
    ``url.get_backend_name()``).

    >>> backend("mariadb").name, backend("postgresql").explain_prefix()
    ('mysql', 'EXPLAIN ')
    >>> backend("oracle")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rpquery.errors.InvalidRequest: rpquery does not run on 'oracle': ...
    """
    found = _LOADED.get(dialect_name)
    if found is None:
        try:
            module, cls = _BACKENDS[dialect_name]
        except KeyError:
            raise InvalidRequest(
                "rpquery.db.unsupported_dialect",
                f"rpquery does not run on {dialect_name!r}: it runs on {', '.join(_BACKENDS)}",
                token=dialect_name,
            ) from None
        found = getattr(importlib.import_module(f"{__name__}.{module}"), cls)()
        _LOADED[dialect_name] = found
    return found


# ---------------------------------------------------------------- SQL constructs


def insert_ignore(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows``, silently skipping any that collide with a unique key.

    ``INSERT ... ON CONFLICT DO NOTHING`` on SQLite and PostgreSQL,
    ``INSERT IGNORE`` on MySQL/MariaDB.
    """
    if not rows:
        return
    backend(conn.dialect.name).insert_ignore(conn, table, rows)


def insert_ignore_explicit_ids(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """:func:`insert_ignore` for rows that carry their own primary key, zero included.

    MySQL treats an explicit ``0`` in an AUTO_INCREMENT column as "generate one"
    unless ``NO_AUTO_VALUE_ON_ZERO`` is in the session's ``sql_mode``; standard
    resource class ``VCPU`` has id 0.
    """
    if not rows:
        return
    backend(conn.dialect.name).insert_ignore_explicit_ids(conn, table, rows)


class ExactText(TypeDecorator[str]):
    """Unicode text compared byte for byte on every backend.

    PostgreSQL and SQLite compare strings exactly already. MySQL/MariaDB's default
    collations fold case and ignore trailing spaces, so ``Web``, ``web`` and ``web ``
    would collide in a unique key; there the column gets a binary NO PAD collation,
    whose name differs: ``utf8mb4_nopad_bin`` on MariaDB, ``utf8mb4_0900_bin`` on
    MySQL 8 (``dialect.is_mariadb`` tells them apart once connected).

    >>> from sqlalchemy.dialects import mysql
    >>> maria = mysql.dialect(); maria.is_mariadb = True
    >>> ExactText(60).compile(dialect=maria)
    'VARCHAR(60) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin'
    >>> ExactText(60).compile(dialect=mysql.dialect())
    'VARCHAR(60) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin'
    """

    impl = Unicode
    cache_ok = True

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length

    def load_dialect_impl(self, dialect: Any) -> TypeEngine[Any]:
        if dialect.name not in _BACKENDS:  # SQLAlchemy's default dialect (str(table))
            return dialect.type_descriptor(Unicode(self.length))
        return dialect.type_descriptor(backend(dialect.name).exact_text(self.length, dialect))


# ---------------------------------------------------------------- result coercion


def to_int(value: Any) -> int:
    """Coerce an aggregate result to ``int``: MySQL returns ``SUM`` as ``Decimal``,
    every backend returns ``NULL`` for an empty sum."""
    if value is None:
        return 0
    if isinstance(value, Decimal):
        return int(value)
    return int(value)


# ---------------------------------------------------------------- allocation ratio
#
# Placement's ``allocation_ratio`` column is a SQLAlchemy ``Float``: double precision on
# PostgreSQL and SQLite, but a 32-bit ``FLOAT`` on MySQL/MariaDB, where 0.7 is stored as
# 0.699999988. Capacity computed in SQL from the stored value is then 10 x 0.699999988
# = 6.99999988 (6 units, not 7), while the driver reads the column back as text, "0.7".
# rpquery computes capacity from the ratio as written on every backend, in SQL
# (:class:`ratio_as_written_expr`) and in Python (:func:`ratio_as_written`) alike.
# "As written" is the shortest decimal that round-trips the stored 32-bit value, exact
# for any ratio of up to 6 significant digits (0.7, 1.5, 16.0, 0.333333). With more
# digits the 32-bit column has already lost the written value; MariaDB's text form of a
# FLOAT then has 6 significant digits (MySQL 8's the shortest round-trip), and SQL and
# Python still agree because both read that same text.


def capacity_expr(
    total: ColumnElement[int], reserved: ColumnElement[int], ratio: ColumnElement[float]
) -> ColumnElement[float]:
    """``(total - reserved) * allocation_ratio``, the ratio as written
    (:class:`ratio_as_written_expr`): the same capacity on every backend, equal to
    :func:`ratio_as_written` in Python."""
    return cast(ColumnElement[float], (total - reserved) * ratio_as_written_expr(ratio))


# ---------------------------------------------------------------- error classification


def is_retryable(error: exc.DBAPIError) -> bool:
    """True when the driver error is a deadlock, serialization failure or lock timeout
    (each backend's codes: :data:`._postgresql.RETRYABLE`, :data:`._mysql.RETRYABLE`,
    SQLite's busy database), or a Galera node that refused the statement
    (:func:`node_not_ready`)."""
    orig = getattr(error, "orig", None)
    if getattr(orig, "sqlstate", None) in _postgresql.RETRYABLE:
        return True
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and args[0] in _mysql.RETRYABLE:
        return True
    return _sqlite.BUSY in str(orig)


_MISSING_TABLE = re.compile(
    r"no such table: (?P<a>[\w.]+)"  # SQLite
    r"|relation \"(?P<b>[^\"]+)\" does not exist"  # PostgreSQL 42P01
    r"|Table '(?P<c>[^']+)' doesn't exist"  # MySQL/MariaDB 1146
)


def missing_table(error: exc.DBAPIError) -> str | None:
    """The table a statement failed on because it does not exist (the schema was never
    created, or only partly), else ``None``."""
    orig = getattr(error, "orig", None)
    args: tuple[Any, ...] = tuple(getattr(orig, "args", ()))
    known = (
        getattr(orig, "sqlstate", None) == "42P01"
        or (bool(args) and args[0] == 1146)
        or isinstance(error, exc.OperationalError)
    )
    match = _MISSING_TABLE.search(str(orig)) if known else None
    if match is None:
        return None
    name = next(v for v in match.groupdict().values() if v)
    return name.rsplit(".", 1)[-1]


# ---------------------------------------------------------------- EXPLAIN


_SETTINGS = re.compile(r"\s*SET STATEMENT .*? FOR ", re.IGNORECASE | re.DOTALL)


def explain_sql(dialect_name: str, sql: str, *, analyze: bool = False) -> str:
    """``sql`` asking for its plan: the backend's ``explain_prefix`` in front, or after MariaDB's
    per-statement settings (``SET STATEMENT ... FOR``), which then apply to the plan.

    >>> explain_sql("mysql", "SET STATEMENT join_cache_level = 4 FOR SELECT 1")
    'SET STATEMENT join_cache_level = 4 FOR EXPLAIN SELECT 1'
    """
    settings = _SETTINGS.match(sql)
    head = settings.group(0) if settings else ""
    return head + backend(dialect_name).explain_prefix(analyze=analyze) + sql[len(head) :]


# ---------------------------------------------------------------- whole-cloud reports


# ---------------------------------------------------------------- bulk loading


def bulk_insert(
    conn: Connection, table: Table, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Write ``rows`` (tuples in ``columns`` order) in as few round trips as the driver
    allows: ``COPY ... FROM STDIN`` on PostgreSQL, executemany of one Core insert
    elsewhere (PyMySQL and sqlite3 batch it themselves). Used by the data generator."""
    if not rows:
        return
    backend(conn.dialect.name).bulk_insert(conn, table, columns, rows)


def sync_id_sequence(conn: Connection, table: Table) -> None:
    """After rows were written with explicit ids, move PostgreSQL's ``id`` sequence past
    them so later inserts without an id do not collide. MySQL/MariaDB and SQLite follow
    explicit ids by themselves."""
    backend(conn.dialect.name).sync_id_sequence(conn, table)


def refresh_statistics(conn: Connection, tables: Sequence[Table]) -> None:
    """Refresh the planner's statistics after a bulk load, as an operator would:
    ``ANALYZE t`` on PostgreSQL, ``ANALYZE TABLE t, ...`` on MySQL/MariaDB, ``ANALYZE``
    on SQLite. Without it PostgreSQL plans a freshly loaded table as if it were tiny."""
    backend(conn.dialect.name).refresh_statistics(conn, tables)


def insert_select_adding(
    conn: Connection,
    table: Table,
    columns: Sequence[str],
    query: Select[Any],
    *,
    key: Sequence[str],
    add: Sequence[str],
) -> None:
    """``INSERT INTO table (columns) <query>``; where a row with the same ``key``
    exists, its ``add`` columns are increased by the new values instead (``ON CONFLICT
    ... DO UPDATE`` on PostgreSQL and SQLite, ``ON DUPLICATE KEY UPDATE`` on
    MySQL/MariaDB). ``query`` must have a ``WHERE`` clause (SQLite's parser needs one
    before ``ON CONFLICT``)."""
    backend(conn.dialect.name).insert_select_adding(conn, table, columns, query, key=key, add=add)


def refresh_after_bulk_load(engine: Engine, tables: Sequence[Table]) -> None:
    """:func:`refresh_statistics`, plus ``VACUUM`` on PostgreSQL.

    PostgreSQL's index-only scans (the read path's usage sums, the usages query) only
    skip the table once the visibility map is set, which takes a ``VACUUM``; until
    autovacuum gets there, a freshly bulk-loaded table is read row by row. ``VACUUM``
    cannot run inside a transaction, so it gets an autocommit connection.
    """
    backend(engine.dialect.name).refresh_after_bulk_load(engine, tables)


def read_session_setup(conn: Connection) -> None:
    """Per-transaction settings for the read path's short, many-subplan queries.

    PostgreSQL, for this transaction, in one round trip:

    - ``jit = off``: the JIT triggers on these queries' (over-)estimated cost and then
      spends a second or more compiling a query that runs in milliseconds;
    - ``plan_cache_mode = force_custom_plan``: psycopg prepares a statement sent five
      times, and PostgreSQL may then switch to a generic plan, planned without the
      parameters' values. For ``= ANY(:ids)`` (:class:`in_id_list`) a generic plan
      guesses ten ids; reused for a whole-cloud answer's 5,000 trees it runs seconds
      instead of milliseconds. Custom plans cost a millisecond of planning.

    Nothing to do elsewhere.
    """
    backend(conn.dialect.name).read_session_setup(conn)


def renders_summaries(conn: Connection) -> bool:
    """Whether allocation candidates' provider summaries on ``conn`` have the database
    write each provider's resources as JSON text (one value per provider) when no group
    statement read the inventories already (a whole-cloud answer's one pass does, on
    every backend), rather than ship its inventory rows (four values each) for Python
    to write: MySQL/MariaDB, whose
    driver (PyMySQL) decodes every value in Python (~0.6-1 µs each: ~60 ms of the
    19,464 inventory rows of a whole-cloud answer at 5,000 hosts). PostgreSQL runs such
    a per-provider subquery as a subplan (~10 µs each, ~100 ms there) and decodes
    values in C; SQLite runs in this process either way."""
    return backend(conn.dialect.name).renders_summaries


def groups_offers(conn: Connection) -> bool:
    """Whether allocation candidates read a group of several classes (whose room the
    search does not track) as one row per provider, with a mask of the classes it can
    serve (``GROUP BY``: 3 values a provider), rather than one row per (provider,
    class) (3 values each): MySQL/MariaDB, whose driver decodes every value in Python
    (the whole cloud at 5,000 hosts: 12,772 rows, 29 -> 14 ms of CPU, the server's time
    unchanged within noise). PostgreSQL decodes in C (3 ms either way) and SQLite runs
    in this process: there the rows stay as they are."""
    return backend(conn.dialect.name).groups_offers


def ids_as_text(conn: Connection) -> bool:
    """Whether a statement's rows of whole numbers (allocation candidates' anchor roots,
    a batch's lean group rows and parent links) are read as one text, ``GROUP_CONCAT``
    of the statement, rather than one row each: MySQL/MariaDB, whose driver decodes
    each row in Python (a walk's batch of 523 roots at 5,000 hosts: 7.8 -> 2.4 ms; its
    702 grouped group rows 43.7 -> 27.3 ms; load ~7). PostgreSQL decodes rows in C and
    SQLite runs in this process: there the rows stay as they are."""
    return backend(conn.dialect.name).ids_as_text


def rows_as_json(conn: Connection) -> bool:
    """Whether a big statement's rows of mixed values (allocation candidates' provider
    summaries: ids, uuids, names, texts) are read as one JSON text, the statement's
    rows aggregated by :class:`json_rows` and parsed by orjson, rather than one row each:
    MySQL/MariaDB, whose driver decodes each value in Python (10,726 summaries × 7
    values at 5,000 hosts: ~44 ms of CPU as rows, ~5 as one text). PostgreSQL decodes
    rows in C and SQLite runs in this process: there the rows stay as they are."""
    return backend(conn.dialect.name).rows_as_json


def read_settings(dialect_name: str) -> str | None:
    """What :func:`read_session_setup` sets, as an SQL expression to fold into the
    first statement of a read (no round trip of its own), or ``None`` where there is
    nothing to set. PostgreSQL: ``set_config('jit', 'off', false)``, for the session (the
    read may run in autocommit mode, where ``SET LOCAL`` would last one statement): the
    pooled connection keeps ``jit`` off. Generic plans are kept away by
    :func:`unprepared` instead of ``plan_cache_mode``: an unprepared statement is planned
    for its values every time.
    """
    return backend(dialect_name).read_settings()


def ordered_joins(conn: Connection) -> tuple[Any, str] | None:
    """A driver cursor and the text to send before a statement, in the same round trip,
    so that the server plans that statement alone without hash joins; ``None`` where
    there is nothing to change (SQLite, MySQL/MariaDB) or it would outlast the
    statement (a connection in a transaction).

    For the group statements of a walk's first batch (every root up to the batch's
    last, ``rp.root_provider_id BETWEEN :roots_lo AND :roots_hi``): PostgreSQL,
    ``SET LOCAL enable_hashjoin = off; SELECT ...`` in one message on a connection in
    autocommit mode (one implicit transaction: the setting ends with the statement).
    Its planner otherwise hash-joins a seq scan of every inventory and every usage of
    the cloud to the batch's providers, pricing the merge join over the indexes as if
    it read them whole; read from their start, the indexes stop at the batch's last
    provider: the batch's rows only (5,000 hosts, 1,063 roots: 4,271 inventories and
    4,138 usages instead of 20,056 and 19,532, 3.8 -> 2.5 ms, idle). A later batch
    would read every row before its own as well: it keeps the planner's choice.
    """
    return backend(conn.dialect.name).ordered_joins(conn)


def unprepared(conn: Connection, *, repeats: bool = False) -> AbstractContextManager[None]:
    """No server-side prepared statement for what ``conn`` runs inside the block:
    PostgreSQL's psycopg prepares a statement sent five times, and PostgreSQL may then
    plan it once for any values (a generic plan: ``= ANY(:ids)`` guessed at ten ids and
    reused for five thousand). Client-side only (psycopg's ``prepare_threshold``), no
    round trip; nothing to do elsewhere. Statements run with
    :func:`execute_prepared` are prepared all the same.

    ``repeats`` (a small cloud, where no plan can go far wrong): the opposite, a
    statement text sent a third time on the connection is prepared (not a second:
    preparing costs a round trip, and evicting the oldest of psycopg's 100 another).
    PostgreSQL then skips parsing it, plans it for its values five times, and keeps a
    generic plan if it costs no more (no planning). Allocation candidates on a cloud of at most
    ``Batches.ONE_BATCH`` roots: a never-seen request's statements mostly repeat texts
    of earlier requests (79 % on ``make bench-shapes``)."""
    return backend(conn.dialect.name).unprepared(conn, repeats=repeats)


def execute_prepared(conn: Connection, cursor: Any, sql: str, params: dict[str, Any]) -> None:
    """``cursor.execute(sql, params)`` for a statement whose plan does not depend on its
    values (the same for any request and any cloud size: name look-ups): PostgreSQL
    prepares it on its first execution on the connection (psycopg's ``prepare=True``,
    even inside :func:`unprepared`; not when the operator set ``prepare_threshold`` to
    ``None``), plans it for its values five times, then keeps a generic plan if it
    costs no more: no parsing and no planning afterwards (the names statement of
    allocation candidates at 100 hosts: 0.59 -> 0.16 ms). Elsewhere a plain
    execution."""
    backend(conn.dialect.name).execute_prepared(conn, cursor, sql, params)


def one_snapshot(conn: Connection) -> None:
    """Make this read transaction see one snapshot for all its statements (checks that
    compare two tables). PostgreSQL: ``REPEATABLE READ`` (it must be the transaction's
    first statement); MariaDB's default already is; SQLite reads see one snapshot."""
    backend(conn.dialect.name).one_snapshot(conn)


def block_writers(conn: Connection, tables: Sequence[str]) -> None:
    """Hold off writers of ``tables`` until this transaction ends, readers not
    (rebuilding a summary of them). PostgreSQL: ``LOCK TABLE ... IN SHARE MODE``;
    MariaDB's ``INSERT ... SELECT`` share-locks the rows it reads; SQLite writers queue
    behind this write transaction anyway."""
    backend(conn.dialect.name).block_writers(conn, tables)
