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
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import Select, Table, bindparam, exc
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement, FromClause
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.expression import FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import (
    Boolean,
    Float,
    Integer,
    NullType,
    String,
    TypeDecorator,
    TypeEngine,
    Unicode,
)

from rpquery.store.dialects._base import Backend

__all__ = [
    "Backend",
    "ExactText",
    "backend",
    "block_writers",
    "bulk_insert",
    "capacity_expr",
    "charset_problems",
    "by_backend",
    "concat_agg",
    "column_collation",
    "exact_eq",
    "explain_prefix",
    "explain_sql",
    "floor_int",
    "in_id_list",
    "in_name_list",
    "execute_prepared",
    "indexes_deferred",
    "ids_as_text",
    "insert_ignore",
    "insert_ignore_explicit_ids",
    "insert_select_adding",
    "is_charset_error",
    "is_retryable",
    "node_not_ready",
    "json_quote",
    "least",
    "locks_rows",
    "long_concat_select",
    "long_concat_sql",
    "missing_table",
    "one_snapshot",
    "random_order",
    "ratio_as_written",
    "ratio_as_written_expr",
    "read_session_setup",
    "read_settings",
    "reads_autocommit",
    "refresh_after_bulk_load",
    "refresh_statistics",
    "renders_summaries",
    "rows_as_json",
    "json_rows",
    "groups_offers",
    "sync_id_sequence",
    "tally",
    "text_concat",
    "to_int",
    "triggers_suspended",
    "trunc_int",
    "unprepared",
]

# ---------------------------------------------------------------- the registry

#: SQLAlchemy's dialect (and URL backend) names, aliases included, to the module and
#: class of their backend. A backend module (and SQLAlchemy's dialect module it uses) is
#: imported when its backend is first asked for: the backend in use only (start-up time).
_BACKENDS: dict[str, tuple[str, str]] = {
    "sqlite": ("_sqlite", "SQLite"),
    "postgresql": ("_postgresql", "PostgreSQL"),
    "postgres": ("_postgresql", "PostgreSQL"),
    "mysql": ("_mysql", "MySQL"),
    "mariadb": ("_mysql", "MySQL"),
}
_LOADED: dict[str, Backend] = {}


def backend(dialect_name: str) -> Backend:
    """The backend object for a dialect name (``conn.dialect.name``,
    ``url.get_backend_name()``).

    >>> backend("mariadb").name, backend("postgresql").explain_prefix()
    ('mysql', 'EXPLAIN ')
    """
    found = _LOADED.get(dialect_name)
    if found is None:
        try:
            module, cls = _BACKENDS[dialect_name]
        except KeyError:  # pragma: no cover - rpquery.db refuses other URLs first
            raise NotImplementedError(dialect_name) from None
        found = getattr(importlib.import_module(f"{__name__}.{module}"), cls)()
        _LOADED[dialect_name] = found
    return found


# ---------------------------------------------------------------- SQL constructs


class random_order(FunctionElement[float]):  # noqa: N801 - reads like a SQL function
    """``ORDER BY`` key for random sampling: ``random()`` or MySQL's ``rand()``."""

    inherit_cache = True
    name = "random"


@compiles(random_order)
def _random_default(element: random_order, compiler: Any, **kw: Any) -> str:
    return "random()"


@compiles(random_order, "mysql")
def _random_mysql(element: random_order, compiler: Any, **kw: Any) -> str:
    return "rand()"


class floor_int(FunctionElement[int]):  # noqa: N801
    """``FLOOR(x)`` as an integer of a non-negative number: ``CAST(x AS INTEGER)`` on
    SQLite (whose ``floor()`` is optional; its cast truncates), ``FLOOR(x)`` elsewhere
    (where a cast rounds)."""

    inherit_cache = True
    type = Integer()
    name = "floor"


@compiles(floor_int)
def _floor_default(element: floor_int, compiler: Any, **kw: Any) -> str:
    return f"floor({compiler.process(element.clauses, **kw)})"


@compiles(floor_int, "sqlite")
def _floor_sqlite(element: floor_int, compiler: Any, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS INTEGER)"


class least(FunctionElement[int]):  # noqa: N801
    """``LEAST(a, b, ...)``; SQLite spells it as multi-argument ``min()``."""

    inherit_cache = True
    type = Integer()
    name = "least"


@compiles(least)
def _least_default(element: least, compiler: Any, **kw: Any) -> str:
    return f"least({compiler.process(element.clauses, **kw)})"


@compiles(least, "sqlite")
def _least_sqlite(element: least, compiler: Any, **kw: Any) -> str:
    return f"min({compiler.process(element.clauses, **kw)})"


class trunc_int(FunctionElement[int]):  # noqa: N801 - reads like a SQL function
    """A number truncated toward zero as an integer, as Python's ``int()`` of a float:
    ``CAST(x AS INTEGER)`` on SQLite (its cast truncates), ``CAST(TRUNCATE(x, 0) AS
    SIGNED)`` on MySQL/MariaDB and ``CAST(trunc(x) AS BIGINT)`` on PostgreSQL (where a
    cast alone rounds). Exact for ``|x| < 2**53``; beyond, a value (SQLite and MySQL
    saturate) or ``NULL`` (PostgreSQL, whose cast would fail) the caller must not use.

    >>> from sqlalchemy import column
    >>> from sqlalchemy.dialects import mysql, sqlite
    >>> str(trunc_int(column("x")).compile(dialect=mysql.dialect()))
    'CAST(TRUNCATE(x, 0) AS SIGNED)'
    >>> str(trunc_int(column("x")).compile(dialect=sqlite.dialect()))
    'CAST(x AS INTEGER)'
    """

    inherit_cache = True
    type = Integer()
    name = "trunc_int"


@compiles(trunc_int)
def _trunc_int_default(element: trunc_int, compiler: Any, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS INTEGER)"


@compiles(trunc_int, "postgresql")
def _trunc_int_postgresql(element: trunc_int, compiler: Any, **kw: Any) -> str:
    x = compiler.process(element.clauses, **kw)
    return f"CASE WHEN abs({x}) < 9007199254740992 THEN CAST(trunc({x}) AS BIGINT) END"


@compiles(trunc_int, "mysql")
def _trunc_int_mysql(element: trunc_int, compiler: Any, **kw: Any) -> str:
    return f"CAST(TRUNCATE({compiler.process(element.clauses, **kw)}, 0) AS SIGNED)"


class json_quote(FunctionElement[str]):  # noqa: N801
    """A string as a JSON string literal (quoted, escaped): ``json_quote(x)`` on SQLite,
    ``JSON_QUOTE(x)`` on MySQL/MariaDB, ``CAST(to_json(x) AS TEXT)`` on PostgreSQL.

    >>> from sqlalchemy import column
    >>> from sqlalchemy.dialects import postgresql
    >>> str(json_quote(column("name")).compile(dialect=postgresql.dialect()))
    'CAST(to_json(name) AS TEXT)'
    """

    inherit_cache = True
    type = String()
    name = "json_quote"


@compiles(json_quote)
def _json_quote_default(element: json_quote, compiler: Any, **kw: Any) -> str:
    return f"json_quote({compiler.process(element.clauses, **kw)})"


@compiles(json_quote, "postgresql")
def _json_quote_postgresql(element: json_quote, compiler: Any, **kw: Any) -> str:
    return f"CAST(to_json({compiler.process(element.clauses, **kw)}) AS TEXT)"


@compiles(json_quote, "mysql")
def _json_quote_mysql(element: json_quote, compiler: Any, **kw: Any) -> str:
    return f"JSON_QUOTE({compiler.process(element.clauses, **kw)})"


class text_concat(FunctionElement[str]):  # noqa: N801
    """Strings and integers written one after the other: ``(a || b || ...)``, or
    ``CONCAT(a, b, ...)`` on MySQL/MariaDB (whose ``||`` is ``OR``). ``NULL`` if any
    part is.

    >>> from sqlalchemy import column, literal_column
    >>> from sqlalchemy.dialects import mysql, sqlite
    >>> parts = (literal_column("'{'"), column("x"), literal_column("'}'"))
    >>> str(text_concat(*parts).compile(dialect=mysql.dialect()))
    "CONCAT('{', x, '}')"
    >>> str(text_concat(*parts).compile(dialect=sqlite.dialect()))
    "('{' || x || '}')"
    """

    inherit_cache = True
    type = String()
    name = "text_concat"


@compiles(text_concat)
def _text_concat_default(element: text_concat, compiler: Any, **kw: Any) -> str:
    return "(" + " || ".join(compiler.process(c, **kw) for c in element.clauses) + ")"


@compiles(text_concat, "mysql")
def _text_concat_mysql(element: text_concat, compiler: Any, **kw: Any) -> str:
    return "CONCAT(" + ", ".join(compiler.process(c, **kw) for c in element.clauses) + ")"


class concat_agg(FunctionElement[str]):  # noqa: N801
    """Aggregate: a group's values as text joined by commas, in no particular order
    (``NULL`` for no row, as other aggregates; ``NULL`` values are skipped):
    ``group_concat(x)`` on SQLite, ``GROUP_CONCAT(x)`` on MySQL/MariaDB (its length is
    capped by ``group_concat_max_len``: see :class:`long_concat_select`),
    ``string_agg(CAST(x AS TEXT), ',')`` on PostgreSQL.

    >>> from sqlalchemy import column
    >>> from sqlalchemy.dialects import postgresql
    >>> str(concat_agg(column("id")).compile(dialect=postgresql.dialect()))
    "string_agg(CAST(id AS TEXT), ',')"
    """

    inherit_cache = True
    type = String()
    name = "concat_agg"


@compiles(concat_agg)
def _concat_agg_default(element: concat_agg, compiler: Any, **kw: Any) -> str:
    return f"group_concat({compiler.process(element.clauses, **kw)})"


@compiles(concat_agg, "postgresql")
def _concat_agg_postgresql(element: concat_agg, compiler: Any, **kw: Any) -> str:
    return f"string_agg(CAST({compiler.process(element.clauses, **kw)} AS TEXT), ',')"


@compiles(concat_agg, "mysql")
def _concat_agg_mysql(element: concat_agg, compiler: Any, **kw: Any) -> str:
    return f"GROUP_CONCAT({compiler.process(element.clauses, **kw)})"


class json_rows(FunctionElement[str]):  # noqa: N801
    """Aggregate: a group's rows as one JSON array of arrays, one per row, its values
    as JSON (numbers, text, ``null``), in no particular order; ``NULL`` for no row:
    on MySQL/MariaDB a ``GROUP_CONCAT`` of rows written by hand for columns of integers
    and text, else ``JSON_ARRAYAGG(JSON_ARRAY(a, b))`` (either way its length is capped
    by ``group_concat_max_len``: see :class:`long_concat_select`),
    ``json_group_array(json_array(a, b))`` on SQLite, ``json_agg(json_build_array(a,
    b))`` on PostgreSQL.

    >>> from sqlalchemy import column
    >>> from sqlalchemy.dialects import mysql
    >>> str(json_rows(column("a"), column("b")).compile(dialect=mysql.dialect()))
    'JSON_ARRAYAGG(JSON_ARRAY(a, b))'
    >>> print(json_rows(column("a", Integer())).compile(dialect=mysql.dialect()))
    CONCAT('[', GROUP_CONCAT(CONCAT('[', IFNULL(a, 'null'), ']')), ']')
    >>> print(json_rows(column("b", String())).compile(dialect=mysql.dialect()))
    CONCAT('[', GROUP_CONCAT(CONCAT('[', IFNULL(JSON_QUOTE(b), 'null'), ']')), ']')
    """

    inherit_cache = True
    type = String()
    name = "json_rows"


@compiles(json_rows)
def _json_rows_default(element: json_rows, compiler: Any, **kw: Any) -> str:
    return f"json_group_array(json_array({compiler.process(element.clauses, **kw)}))"


@compiles(json_rows, "postgresql")
def _json_rows_postgresql(element: json_rows, compiler: Any, **kw: Any) -> str:
    return f"json_agg(json_build_array({compiler.process(element.clauses, **kw)}))"


def _json_kind(type_: TypeEngine[Any]) -> str | None:
    """``"int"`` or ``"text"`` for a column of integers or of text (through any
    :class:`TypeDecorator`), else ``None``."""
    while isinstance(type_, TypeDecorator):
        type_ = type_.impl_instance
    if isinstance(type_, Integer):
        return "int"
    return "text" if isinstance(type_, String) else None


@compiles(json_rows, "mysql")
def _json_rows_mysql(element: json_rows, compiler: Any, **kw: Any) -> str:
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


#: MySQL/MariaDB's ``group_concat_max_len`` for a :class:`long_concat_select`: 16 MiB,
#: far beyond one provider's traits or resources (the default is 1 MiB on MariaDB, 1 KiB
#: on MySQL 8; strict MariaDB refuses more than 1 GiB).
GROUP_CONCAT_MAX_LEN = 16777216


class long_concat_select(Select[Any]):  # noqa: N801
    """A ``SELECT`` whose :class:`concat_agg` texts are never cut short: on MariaDB
    ``SET STATEMENT group_concat_max_len = ... FOR SELECT ...``, on MySQL 8 the
    ``SET_VAR`` optimizer hint, for this statement only (a provider's traits as ids can
    pass MySQL 8's default of 1,024 bytes, and ``GROUP_CONCAT`` cuts silently). Plain
    elsewhere."""

    inherit_cache = True


@compiles(long_concat_select, "mysql")
def _long_concat_select_mysql(element: long_concat_select, compiler: Any, **kw: Any) -> str:
    toplevel = not compiler.stack
    sql = str(compiler.visit_select(element, **kw))
    return long_concat_sql(sql, compiler.dialect) if toplevel else sql


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


class exact_eq(ColumnElement[bool]):  # noqa: N801 - reads like a SQL operator
    """``column = value`` compared byte for byte on every backend (owner ids, provider
    names: columns whose definitions are Placement's).

    PostgreSQL and SQLite compare strings exactly already. On MySQL/MariaDB the
    column's collation (``utf8mb4_general_ci`` by default) folds case and accents and
    ignores trailing spaces, so ``PROJ``, ``Proj``, ``proj `` and ``prój`` would all
    find ``proj``. There the comparison becomes ``column = value AND CAST(column AS
    BINARY) = CAST(value AS BINARY)``: the first term still uses the column's index,
    the second drops the rows the collation matched but the bytes do not.

    >>> from sqlalchemy import column, literal
    >>> from sqlalchemy.dialects import mysql
    >>> print(exact_eq(column("name"), literal("x")).compile(dialect=mysql.dialect()))
    (name = %s AND CAST(name AS BINARY) = CAST(%s AS BINARY))
    """

    inherit_cache = True
    type = Boolean()
    _is_implicitly_boolean = True  # a comparison: no "= 1" where booleans are ints

    def __init__(self, column: ColumnElement[Any], value: ColumnElement[Any]) -> None:
        self.column = column
        self.value = value

    @property
    def _from_objects(self) -> list[Any]:
        return self.column._from_objects

    def get_children(self, **kw: Any) -> tuple[ColumnElement[Any], ...]:
        return (self.column, self.value)

    _traverse_internals = [
        ("column", InternalTraversal.dp_clauseelement),
        ("value", InternalTraversal.dp_clauseelement),
    ]


@compiles(exact_eq)
def _exact_eq_default(element: exact_eq, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.column == element.value, **kw))


@compiles(exact_eq, "mysql")
def _exact_eq_mysql(element: exact_eq, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    value = compiler.process(element.value, **kw)
    return f"({column} = {value} AND CAST({column} AS BINARY) = CAST({value} AS BINARY))"


def column_collation(conn: Connection, table: str, column: str) -> str | None:
    """The collation of ``table.column`` on MySQL/MariaDB (``None`` elsewhere: their
    comparisons are exact)."""
    return backend(conn.dialect.name).column_collation(conn, table, column)


def charset_problems(conn: Connection) -> list[tuple[str, str]]:
    """Where a MySQL/MariaDB database cannot hold every character rpquery may be given
    (a 4-byte one such as an emoji in a project id or provider name), as ``(problem,
    fix)`` pairs: the connection's character set, the database's default (new tables
    inherit it) and every text column not in ``utf8mb4`` (``utf8mb3``, ``latin1``,
    ...: common in older Placement deployments). Empty elsewhere: PostgreSQL and
    SQLite store any text."""
    return backend(conn.dialect.name).charset_problems(conn)


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


class ratio_as_written_expr(FunctionElement[float]):  # noqa: N801 - reads like SQL
    """An ``allocation_ratio`` column as it was written: the column itself where it is
    a double, ``CAST(CAST(col AS CHAR) AS DOUBLE)`` on MySQL/MariaDB, whose text form
    of a 32-bit ``FLOAT`` is the short decimal a client reads (``0.7``, not
    ``0.699999988``).

    >>> from sqlalchemy import column
    >>> from sqlalchemy.dialects import mysql, postgresql
    >>> str(ratio_as_written_expr(column("r")).compile(dialect=mysql.dialect()))
    'CAST(CAST(r AS CHAR) AS DOUBLE)'
    >>> str(ratio_as_written_expr(column("r")).compile(dialect=postgresql.dialect()))
    'r'
    """

    inherit_cache = True
    type = Float()
    name = "ratio_as_written"


@compiles(ratio_as_written_expr)
def _ratio_default(element: ratio_as_written_expr, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.clauses, **kw))


@compiles(ratio_as_written_expr, "mysql")
def _ratio_mysql(element: ratio_as_written_expr, compiler: Any, **kw: Any) -> str:
    return f"CAST(CAST({compiler.process(element.clauses, **kw)} AS CHAR) AS DOUBLE)"


def ratio_as_written(conn: Connection, value: Any) -> float:
    """An ``allocation_ratio`` read from the database on ``conn``, as it was written: on
    MySQL/MariaDB the shortest decimal that round-trips the stored 32-bit value, the
    value itself elsewhere. Equal to :class:`ratio_as_written_expr` in SQL: PyMySQL
    reads the server's text form of the ``FLOAT`` (``"0.7"``), which this leaves as it
    is, and a driver handing over the raw 32-bit value (0.699999988) gets it corrected.

    >>> maria = backend("mysql")
    >>> maria.ratio_as_written(0.699999988079071), maria.ratio_as_written(0.7)
    (0.7, 0.7)
    >>> backend("postgresql").ratio_as_written(0.699999988079071)
    0.699999988079071
    """
    return backend(conn.dialect.name).ratio_as_written(float(value))


def capacity_expr(
    total: ColumnElement[int], reserved: ColumnElement[int], ratio: ColumnElement[float]
) -> ColumnElement[float]:
    """``(total - reserved) * allocation_ratio``, the ratio as written
    (:class:`ratio_as_written_expr`): the same capacity on every backend, equal to
    :func:`ratio_as_written` in Python."""
    return cast(ColumnElement[float], (total - reserved) * ratio_as_written_expr(ratio))


# ---------------------------------------------------------------- error classification

#: MySQL/MariaDB 1047, "WSREP has not yet prepared node for application use": a Galera
#: node outside the primary component (cut off from the others, e.g. stalled for longer
#: than ``evs.suspect_timeout`` on a loaded machine) refuses every statement, ``COMMIT``
#: and ``ROLLBACK`` included, until it rejoins. Nothing the refused statement asked for
#: ran and the transaction cannot commit; SQLSTATE 08S01, a communication failure (as
#: oslo.db counts it too): the connection is discarded (:func:`_mysql.discard_refusing_node`)
#: and the work may be retried on another one.
NODE_NOT_READY = 1047
#: Server error codes that mean "someone else got there first: retry".
_MYSQL_RETRYABLE = {1213, 1205, 1180, NODE_NOT_READY}  # deadlock (Galera: certification),
# lock wait (Galera: also a wsrep_sync_wait that failed), COMMIT, node outside the cluster
_PG_RETRYABLE = {"40001", "40P01", "55P03"}  # serialization, deadlock, lock not available


def is_retryable(error: exc.DBAPIError) -> bool:
    """True when the driver error is a deadlock, serialization failure or lock timeout,
    or a Galera node that refused the statement (:func:`node_not_ready`)."""
    orig = getattr(error, "orig", None)
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate in _PG_RETRYABLE:
        return True
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and args[0] in _MYSQL_RETRYABLE:
        return True
    return "database is locked" in str(orig)


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
_MYSQL_CHARSET_ERRORS = frozenset({1366, 1267, 1270, 1271})


def is_charset_error(error: exc.DBAPIError) -> bool:
    """True when the server refused text its column's character set cannot hold."""
    args: tuple[Any, ...] = tuple(getattr(getattr(error, "orig", None), "args", ()))
    return bool(args) and args[0] in _MYSQL_CHARSET_ERRORS


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


def explain_prefix(dialect_name: str, *, analyze: bool = False) -> str:
    """The statement prefix that asks each backend for its plan."""
    return backend(dialect_name).explain_prefix(analyze=analyze)


_SETTINGS = re.compile(r"\s*SET STATEMENT .*? FOR ", re.IGNORECASE | re.DOTALL)


def explain_sql(dialect_name: str, sql: str, *, analyze: bool = False) -> str:
    """``sql`` asking for its plan: :func:`explain_prefix` in front, or after MariaDB's
    per-statement settings (``SET STATEMENT ... FOR``), which then apply to the plan.

    >>> explain_sql("mysql", "SET STATEMENT join_cache_level = 4 FOR SELECT 1")
    'SET STATEMENT join_cache_level = 4 FOR EXPLAIN SELECT 1'
    """
    settings = _SETTINGS.match(sql)
    head = settings.group(0) if settings else ""
    return head + explain_prefix(dialect_name, analyze=analyze) + sql[len(head) :]


# ---------------------------------------------------------------- whole-cloud reports


def tally(
    dialect_name: str,
    rows: FromClause,
    by: str,
    item: str,
    largest: str,
    *,
    examples: int,
    every: Any,
) -> Select[Any]:
    """Per value of ``rows.c[by]``: its row count, the largest ``rows.c[largest]`` and
    the first ``examples`` values of ``rows.c[item]``; every row whose ``by`` is
    ``every`` listed. Rows ``(by, item, count, largest)``: one per example (window
    functions), or on MySQL/MariaDB one per value with the examples as text
    (``"3,8,12"``; each row of ``every`` its own), run there with hash joins."""
    return backend(dialect_name).tally(rows, by, item, largest, examples=examples, every=every)


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


def triggers_suspended(
    conn: Connection, triggers: Mapping[str, Sequence[str]]
) -> AbstractContextManager[bool]:
    """Inside this write transaction, the named triggers (``{table: names}``) do not
    fire and no other session writes those tables; yields whether that holds.

    For a bulk load that does the triggers' work itself in one grouped pass. Nobody
    else can see the triggers off: the change is part of the transaction, other
    writers of the tables wait until it ends, and a rollback (any exception: the
    transaction must not commit after one) puts everything back.

    - PostgreSQL: ``LOCK TABLE ... IN SHARE ROW EXCLUSIVE MODE`` (writers wait, readers
      do not) and ``ALTER TABLE ... DISABLE TRIGGER``, re-enabled before the block
      ends. Altering a table needs its owner: without the privilege (or the lock),
      yields ``False`` and the triggers stay on.
    - SQLite: the write transaction holds the database's only write lock already; the
      triggers are dropped and re-created from their stored SQL (DDL is
      transactional there).
    - MySQL/MariaDB: yields ``False``. Trigger DDL commits the transaction there, so
      the triggers cannot be turned off atomically, and stay on.
    """
    return backend(conn.dialect.name).triggers_suspended(conn, triggers)


def indexes_deferred(conn: Connection, tables: Sequence[str]) -> AbstractContextManager[list[str]]:
    """PostgreSQL, when every one of ``tables`` is empty: drop their plain indexes (not
    unique, not backing a constraint) for this transaction and build them again when
    the block ends: one sort per index instead of a B-tree insert per row, which at
    millions of rows keyed on random uuids thrashes the buffer cache. Then ``ANALYZE``
    the tables, so the rest of the transaction is planned for their new size. Yields
    the names of the deferred indexes (none elsewhere, or when a table has rows).

    Dropping an index locks its table (``ACCESS EXCLUSIVE``): readers of ``tables``
    wait until the transaction ends (they would have found them empty). A rollback
    (any exception) restores the indexes."""
    return backend(conn.dialect.name).indexes_deferred(conn, tables)


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


def unprepared(conn: Connection, *, repeats: bool = False) -> AbstractContextManager[None]:
    """No server-side prepared statement for what ``conn`` runs inside the block:
    PostgreSQL's psycopg prepares a statement sent five times, and PostgreSQL may then
    plan it once for any values (a generic plan: ``= ANY(:ids)`` guessed at ten ids and
    reused for five thousand). Client-side only (psycopg's ``prepare_threshold``), no
    round trip; nothing to do elsewhere. Statements run with
    :func:`execute_prepared` are prepared all the same.

    ``repeats`` (a small cloud, where no plan can go far wrong): the opposite, a
    statement text sent a second time on the connection is prepared. PostgreSQL then
    skips parsing it, plans it for its values five times, and keeps a generic plan if it
    costs no more (no planning). Allocation candidates on a cloud of at most
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


def reads_autocommit(dialect_name: str) -> bool:
    """Whether a read that needs no snapshot shared by its statements should run in
    autocommit mode: PostgreSQL (psycopg switches without a round trip, and ``BEGIN``
    and ``ROLLBACK`` are two round trips of a read's seven; at ``READ COMMITTED`` each
    statement of a transaction takes its own snapshot anyway). Not MySQL/MariaDB
    (PyMySQL's switch is a round trip each way) nor SQLite (in the process)."""
    return backend(dialect_name).reads_autocommit


def locks_rows(dialect_name: str) -> bool:
    """Whether a write transaction can lock single rows (``SELECT ... FOR UPDATE``) and
    leave other writers running: PostgreSQL and MariaDB/MySQL. SQLite's write
    transaction locks the whole database, so a long read inside one stalls every
    writer (past its 30 s busy timeout, under a scheduler's picks)."""
    return backend(dialect_name).locks_rows


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


class _IntListText(TypeDecorator[Any]):
    """A list of ints sent as one text parameter: ``{1,2}`` (a PostgreSQL array
    literal) or ``[1,2]`` (JSON, for SQLite's ``json_each``). One string is much
    cheaper for the driver than a list adapted element by element."""

    impl = NullType  # no bind cast: PostgreSQL must see an untyped literal
    cache_ok = True

    def __init__(self, brackets: str = "[]") -> None:
        super().__init__()
        self.brackets = brackets

    def process_bind_param(self, value: Any, dialect: Any) -> str:
        return self.brackets[0] + ",".join(map(str, map(int, value))) + self.brackets[1]


class by_backend(ColumnElement[bool]):  # noqa: N801 - reads like a SQL operator
    """One test written two ways: ``default`` on every backend but PostgreSQL, which
    gets ``postgresql``. Both must mean the same; the statement is built once and each
    backend compiles its own form (e.g. :func:`rpquery.read._clauses.forbidden_once`).

    >>> from sqlalchemy import column, literal_column
    >>> from sqlalchemy.dialects import postgresql, sqlite
    >>> test = by_backend(column("a") == 1, postgresql=column("b") == 2)
    >>> str(test.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    'a = 1'
    >>> str(test.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    'b = 2'
    """

    inherit_cache = True
    type = Boolean()
    _is_implicitly_boolean = True

    def __init__(self, default: ColumnElement[bool], *, postgresql: ColumnElement[bool]) -> None:
        self.default = default
        self.postgresql = postgresql

    @property
    def _from_objects(self) -> list[Any]:
        return [*self.default._from_objects, *self.postgresql._from_objects]

    def get_children(self, **kw: Any) -> tuple[ColumnElement[Any], ...]:
        return (self.default, self.postgresql)

    _traverse_internals = [
        ("default", InternalTraversal.dp_clauseelement),
        ("postgresql", InternalTraversal.dp_clauseelement),
    ]


@compiles(by_backend)
def _by_backend_default(element: by_backend, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.default, **kw))


@compiles(by_backend, "postgresql")
def _by_backend_postgresql(element: by_backend, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.postgresql, **kw))


class in_id_list(ColumnElement[bool]):  # noqa: N801 - reads like a SQL operator
    """``column IN <the ints bound to name>``, for id lists of any length (thousands of
    trees in a whole-cloud answer), sent the cheapest way each backend has:

    - PostgreSQL: ``column = ANY(CAST(%(name)s AS INTEGER[]))``, one array literal (one
      small statement text, one plan, whatever the list's length);
    - SQLite: ``column IN (SELECT value FROM json_each(?))``, one text parameter;
    - MySQL/MariaDB: ``column IN (1, 2, ...)`` rendered inline at execution (no array
      type; thousands of driver placeholders would cost more).

    Execute with ``{name: [ids...]}``. Rendering 5,000 ids inline cost ~8 ms of Python
    per statement on PostgreSQL, plus ~5 ms of parsing and planning on the server.
    """

    inherit_cache = True
    type = Boolean()
    _is_implicitly_boolean = True  # a comparison: no "= 1" where booleans are ints

    def __init__(self, column: ColumnElement[Any], name: str) -> None:
        self.column = column
        self.name = name

    @property
    def _from_objects(self) -> list[Any]:
        return self.column._from_objects

    def get_children(self, **kw: Any) -> tuple[ColumnElement[Any], ...]:
        return (self.column,)

    _traverse_internals = [
        ("column", InternalTraversal.dp_clauseelement),
        ("name", InternalTraversal.dp_string),
    ]


@compiles(in_id_list)
def _in_id_list_default(element: in_id_list, compiler: Any, **kw: Any) -> str:
    param: BindParameter[Any] = bindparam(element.name, expanding=True, literal_execute=True)
    return str(compiler.process(element.column.in_(param), **kw))


@compiles(in_id_list, "postgresql")
def _in_id_list_postgresql(element: in_id_list, compiler: Any, **kw: Any) -> str:
    # The text is sent untyped and cast by the server while planning, so the planner
    # sees the array's values (a CAST of a typed VARCHAR parameter would hide them
    # and the plan would guess ten elements: seconds instead of milliseconds).
    column = compiler.process(element.column, **kw)
    param = compiler.process(bindparam(element.name, type_=_IntListText("{}")), **kw)
    return f"{column} = ANY ({param}::INTEGER[])"


@compiles(in_id_list, "sqlite")
def _in_id_list_sqlite(element: in_id_list, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    param = compiler.process(bindparam(element.name, type_=_IntListText("[]")), **kw)
    return f"{column} IN (SELECT value FROM json_each({param}))"


class in_name_list(in_id_list):  # noqa: N801 - reads like a SQL operator
    """``column IN <the names bound to name>`` (a few trait or class names), written
    the same whatever their number where that lets the server keep the statement's
    plan (:func:`execute_prepared`):

    - PostgreSQL: ``column = ANY(CAST(%(name)s AS VARCHAR[]))``, the list sent as one
      array (psycopg adapts it);
    - elsewhere: ``column IN (:name_1, :name_2, ...)``, expanded at execution (the
      drivers send the text anyway).
    """

    inherit_cache = True


@compiles(in_name_list)
def _in_name_list_default(element: in_name_list, compiler: Any, **kw: Any) -> str:
    param: BindParameter[Any] = bindparam(element.name, expanding=True)
    return str(compiler.process(element.column.in_(param), **kw))


@compiles(in_name_list, "postgresql")
def _in_name_list_postgresql(element: in_name_list, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    param = compiler.process(bindparam(element.name), **kw)
    return f"{column} = ANY (CAST({param} AS VARCHAR[]))"
