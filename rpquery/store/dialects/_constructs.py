"""The portable SQL constructs of rpquery's builders (``random_order()``, ``least()``,
``concat_agg()``, ``in_id_list()``...): each class here with its shared default
(:func:`default_sql`), standard SQL, or a loud :class:`~sqlalchemy.exc.CompileError`
where no standard spelling exists; each backend module (:mod:`._sqlite`,
:mod:`._postgresql`, :mod:`._mysql`) spells them for its dialect in one table
(:func:`spell`: ``@compiles(<construct>, "<dialect>")`` for each), as alembic's ``ddl/``
modules do. :mod:`rpquery.store.dialects` imports the three (their spellings must be
registered before any statement compiles) and re-exports the constructs.

>>> from sqlalchemy.dialects import oracle
>>> random_order().compile(dialect=oracle.dialect())  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sqlalchemy.exc.CompileError: random_order has no spelling for the 'oracle' dialect ...
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sqlalchemy import Select, bindparam, exc
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.expression import FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import Boolean, Float, Integer, NullType, String, TypeDecorator


def unspelled(element: Any, compiler: Any) -> exc.CompileError:
    """The error of a construct compiled for a dialect no backend module spells it for."""
    return exc.CompileError(
        f"{type(element).__name__} has no spelling for the {compiler.dialect.name!r} dialect"
        " (rpquery supports sqlite, postgresql and mysql)"
    )


#: How a construct is written: a template of SQL where ``{args}`` stands for the
#: construct's arguments, compiled and comma-separated (``"least({args})"``); a function
#: ``(element, compiler, **kw) -> str`` for anything else; ``None``: not at all (a loud
#: :func:`unspelled` error).
Spelling = str | Callable[..., str] | None

_Construct = TypeVar("_Construct", bound=type)


def _compiler_of(spelling: Spelling) -> Callable[..., str]:
    def compile_construct(element: Any, compiler: Any, **kw: Any) -> str:
        if spelling is None:
            raise unspelled(element, compiler)
        if isinstance(spelling, str):
            return spelling.format(args=compiler.process(element.clauses, **kw))
        return str(spelling(element, compiler, **kw))

    return compile_construct


def default_sql(spelling: Spelling = None) -> Callable[[_Construct], _Construct]:
    """Class decorator: the construct's shared default, what a dialect no backend
    module spells it for gets: standard SQL (a :data:`Spelling`), or with no spelling
    a loud :class:`~sqlalchemy.exc.CompileError` (never another backend's SQL)."""

    def register(construct: _Construct) -> _Construct:
        compiles(construct)(_compiler_of(spelling))
        return construct

    return register


def spell(dialect: str, spellings: Mapping[type, Spelling]) -> None:
    """A backend module's spellings of constructs for its ``dialect``
    (``@compiles(<construct>, "<dialect>")`` for each), e.g. ``spell("sqlite",
    {least: "min({args})"})``."""
    for construct, spelling in spellings.items():
        compiles(construct, dialect)(_compiler_of(spelling))


@default_sql()
class random_order(FunctionElement[float]):  # noqa: N801 - reads like a SQL function
    """``ORDER BY`` key for random sampling: ``random()`` or MySQL's ``rand()``."""

    inherit_cache = True
    name = "random"


@default_sql("floor({args})")
class floor_int(FunctionElement[int]):  # noqa: N801
    """``FLOOR(x)`` as an integer of a non-negative number: ``CAST(x AS INTEGER)`` on
    SQLite (whose ``floor()`` is optional; its cast truncates), ``FLOOR(x)`` elsewhere
    (where a cast rounds)."""

    inherit_cache = True
    type = Integer()
    name = "floor"


@default_sql()
class least(FunctionElement[int]):  # noqa: N801
    """``LEAST(a, b, ...)``; SQLite spells it as multi-argument ``min()``."""

    inherit_cache = True
    type = Integer()
    name = "least"


@default_sql("CAST({args} AS INTEGER)")
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


@default_sql()
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


def _text_concat_default(element: text_concat, compiler: Any, **kw: Any) -> str:
    return "(" + " || ".join(compiler.process(c, **kw) for c in element.clauses) + ")"


@default_sql(_text_concat_default)
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


@default_sql()
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


@default_sql()
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


class long_concat_select(Select[Any]):  # noqa: N801
    """A ``SELECT`` whose :class:`concat_agg` texts are never cut short: on MariaDB
    ``SET STATEMENT group_concat_max_len = ... FOR SELECT ...``, on MySQL 8 the
    ``SET_VAR`` optimizer hint, for this statement only (a provider's traits as ids can
    pass MySQL 8's default of 1,024 bytes, and ``GROUP_CONCAT`` cuts silently). Plain
    elsewhere."""

    inherit_cache = True


def _exact_eq_default(element: exact_eq, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.column == element.value, **kw))


@default_sql(_exact_eq_default)
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


@default_sql("{args}")
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


def _by_backend_default(element: by_backend, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.default, **kw))


@default_sql(_by_backend_default)
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


def _in_id_list_default(element: in_id_list, compiler: Any, **kw: Any) -> str:
    param: BindParameter[Any] = bindparam(element.name, expanding=True, literal_execute=True)
    return str(compiler.process(element.column.in_(param), **kw))


@default_sql(_in_id_list_default)
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


def _in_name_list_default(element: in_name_list, compiler: Any, **kw: Any) -> str:
    param: BindParameter[Any] = bindparam(element.name, expanding=True)
    return str(compiler.process(element.column.in_(param), **kw))


@default_sql(_in_name_list_default)
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
