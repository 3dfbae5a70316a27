"""The driver-level statement runner of the read paths (allocation candidates, insight):
``SELECT`` statements sent as texts joined from parts compiled once
(:mod:`rpquery.store._texts`), on the driver's cursor, rows kept as the driver's tuples.

- :func:`driver_rows`: one statement's rows.
- :func:`merged_rows`: several statements' rows from one round trip.
- :func:`json_rows`, :func:`ids_text`: rows, or a list of ids, as one text where the
  driver decodes values slowly (:func:`rpquery.store.dialects.rows_as_json`,
  :func:`rpquery.store.dialects.ids_as_text`).

Tracers, statement counts and SQLAlchemy's error handling see every statement sent here.

>>> _renamed("SELECT %(a)s, '%%'", "m0_")
"SELECT %(m0_a)s, '%%'"
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Executable

from rpquery.store import _texts, dialects

__all__ = ["column_kinds", "driver_rows", "ids_text", "json_rows", "merged_rows", "numbers"]


def driver_rows(
    conn: Connection, stmt: Executable, params: dict[str, Any], *, prepare: bool = False
) -> list[Any]:
    """Every row of ``stmt`` as the driver's own tuples, skipping SQLAlchemy's ``Row``
    objects (~0.5 µs a row: 15 ms of the ~30k trait rows of a whole-cloud answer).
    Only for the read path's statements, whose columns are ints, strings and numbers
    that need no result processing (callers convert with ``int()``/``float()``,
    which also takes MySQL's ``Decimal`` sums).

    A ``SELECT`` is sent as the text :mod:`~rpquery.store._texts` joins from
    parts compiled once each (a statement of a new shape made of known parts compiles
    nothing), with ``exec_driver_sql``: tracers and statement counts still see it.
    ``prepare``: a statement whose plan is the same for any values (:func:`_fetch`)."""
    if isinstance(stmt, (sa.Select, sa.CompoundSelect)):
        template = _texts.template(stmt, conn.dialect)
        if template is not None:
            return _fetch(conn, *_texts.render(template, params), prepare=prepare)
    result = conn.execute(stmt, params)
    try:
        return list(result.cursor.fetchall()) if result.returns_rows else []
    finally:
        result.close()


@functools.lru_cache(maxsize=256)
def ids_text(stmt: sa.Select) -> sa.Select:
    """``SELECT COUNT(*), SUM(r.id), GROUP_CONCAT(r.id) FROM (<stmt>) AS r``
    (:class:`~rpquery.store.dialects.long_concat_select`; the count and sum tell a text
    cut short), for :func:`~rpquery.store.dialects.ids_as_text`."""
    sub = stmt.subquery("r")
    text = dialects.concat_agg(sub.c.id)
    return dialects.long_concat_select(sa.func.count(), sa.func.sum(sub.c.id), text).select_from(
        sub
    )


def json_rows(
    conn: Connection, stmt: sa.Select | sa.CompoundSelect, params: dict[str, Any]
) -> list[Any]:
    """Every row of ``stmt`` as a list of its values, read as one JSON text
    (:func:`_json_text`, :func:`~rpquery.store.dialects.rows_as_json`: MySQL/MariaDB,
    whose driver decodes each value in Python) and parsed by orjson: numbers, text and
    ``None`` as the driver's rows hold them, for columns of ints and text only (a
    ``DECIMAL`` or a float would come back as JSON writes it).

    A text cut short is read again as rows (:func:`driver_rows`): past
    ``group_concat_max_len`` the text ends with ``]`` after the cut (no JSON: the
    outer array left open, or ``,]`` between rows); past
    ``max_allowed_packet`` it is ``NULL``; fewer rows than counted, or a last row
    short of values, are taken as cut too."""
    ((count, text),) = driver_rows(conn, _json_text(stmt), params)
    if not count:
        return []
    try:
        rows = orjson.loads(text) if text is not None else None
    except orjson.JSONDecodeError:
        rows = None
    width = len(stmt.selected_columns)
    if not isinstance(rows, list) or len(rows) != count or len(rows[-1]) != width:
        return driver_rows(conn, stmt, params)
    return rows


@functools.lru_cache(maxsize=64)
def _json_text(stmt: sa.Select | sa.CompoundSelect) -> sa.Select:
    """``SELECT COUNT(*), <the rows as JSON> FROM (<stmt>) AS r``
    (:class:`~rpquery.store.dialects.json_rows` in a
    :class:`~rpquery.store.dialects.long_concat_select`; the count tells a text cut
    short), for :func:`json_rows`."""
    sub = stmt.subquery("r")
    text = dialects.json_rows(*sub.c)
    return dialects.long_concat_select(sa.func.count(), text).select_from(sub)


def column_kinds(stmt: sa.Select) -> tuple[object, ...]:
    """The generic type of each column of ``stmt`` (integer, number, boolean...)."""
    return tuple(c.type._type_affinity for c in stmt.selected_columns)


_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)s")


def merged_rows(
    conn: Connection,
    stmts: Sequence[tuple[sa.Select, dict[str, Any]]],
    *,
    whole_tables: bool = False,
    ordered: bool = False,
) -> list[list[Any]]:
    """The rows of several ``SELECT`` statements from one statement (one round trip),
    each statement's rows in a list. For a driver whose placeholders are named
    ``%(name)s`` (psycopg, PyMySQL: :meth:`rpquery.read.candidates._execute._Run._merges`).

    Each statement's text is joined from its parts
    (:func:`~rpquery.store._texts.template`: its SQL is the same as when it runs alone,
    a statement alone is sent as it is; :func:`_compiled` for one that cannot be), then
    the statements become one text: ``SELECT 0, p.* FROM (<first>) AS p UNION ALL SELECT
    1, p.*, NULL, ... FROM (<second>) AS p ...``, each parameter renamed
    ``m<i>_<name>``, the widest statement first (PostgreSQL types a ``UNION`` from its
    first branch; the others are padded with ``NULL``). Merging costs a few string
    operations; compiling each part apart keeps SQLAlchemy's work once per part,
    whatever shapes a request combines.
    ``whole_tables``: the statements read every inventory of the cloud (a whole-cloud
    answer's one pass), where hash joins beat a lookup per row
    (:func:`~rpquery.store.dialects.long_concat_sql`). ``ordered``: the statements
    read a walk's first batch, planned without hash joins where the backend would
    otherwise read every row of the tables (:func:`~rpquery.store.dialects.ordered_joins`)."""
    dialect = conn.dialect
    if dialects.ids_as_text(conn) and all(numbers(stmt) for stmt, _ in stmts):
        return _text_rows(conn, stmts, whole_tables)
    if len(stmts) == 1:
        sql, values = _expanded(stmts[0][0], stmts[0][1], dialect, "")
        return [_fetch(conn, sql, values, ordered=ordered)]
    texts: list[tuple[int, int, str, dict[str, Any]]] = []
    for i, (stmt, bound) in enumerate(stmts):
        sql, values = _expanded(stmt, bound, dialect, f"m{i}_")
        texts.append((len(stmt.selected_columns), i, sql, values))
    width = max(w for w, *_ in texts)
    branches = []
    params: dict[str, Any] = {}
    for w, i, sql, values in sorted(texts, key=lambda t: -t[0]):
        pads = ", NULL" * (width - w)
        branches.append(f"SELECT {i}, p.*{pads} FROM ({sql}) AS p")
        params.update(values)
    out: list[list[Any]] = [[] for _ in stmts]
    widths = [len(stmt.selected_columns) for stmt, _ in stmts]
    for row in _fetch(conn, " UNION ALL ".join(branches), params, ordered=ordered):
        i = row[0]
        out[i].append(row[1 : 1 + widths[i]])
    return out


_WHOLE = (sa.Integer, sa.Boolean)
_NUMBERS = (*_WHOLE, sa.Float)


def numbers(stmt: sa.Select) -> bool:
    """Whether every column of ``stmt`` is a number: an integer or a boolean (a
    provider, a root, a class, a mask of classes, a trait flag) or a double (a
    capacity)."""
    return all(kind in _NUMBERS for kind in column_kinds(stmt))


def _text_rows(
    conn: Connection,
    stmts: Sequence[tuple[sa.Select, dict[str, Any]]],
    whole_tables: bool = False,
) -> list[list[Any]]:
    """:func:`merged_rows` of statements whose columns are numbers (:func:`numbers`),
    read as one text per statement, not a row per row (:func:`~rpquery.store.dialects.ids_as_text`:
    MySQL/MariaDB, whose driver decodes each row in Python; the text:
    :func:`rpquery.store.dialects._mysql.rows_as_text_sql`). A text cut
    short (past ``group_concat_max_len``, or ``NULL`` past ``max_allowed_packet``) does
    not end its last row or holds fewer rows than counted: that statement is read again
    as rows. nova's ``limit=1000`` at 5,000 hosts (702 rows of a lean group, one per
    provider): 43.7 -> 27.3 ms, load ~7."""
    from rpquery.store.dialects._mysql import rows_as_text_sql  # (only MySQL comes here)

    dialect = conn.dialect
    branches: list[tuple[str, Sequence[str]]] = []
    params: dict[str, Any] = {}
    for i, (stmt, bound) in enumerate(stmts):
        sql, values = _expanded(stmt, bound, dialect, f"m{i}_")
        branches.append((sql, _column_names(stmt, dialect)))
        params.update(values)
    sql = rows_as_text_sql(branches, dialect, whole_tables)
    out: list[list[Any]] = [[] for _ in stmts]
    for i, count, text in _fetch(conn, sql, params):
        if not count:
            continue
        if isinstance(text, bytes):  # a binary string where a column is (flags)
            text = text.decode()
        stmt, bound = stmts[i]
        found = _parsed(text, count, column_kinds(stmt))
        # cut short: read as rows
        out[i] = found if found is not None else _fetch(conn, *_expanded(stmt, bound, dialect, ""))
    return out


def _column_names(stmt: sa.Select, dialect: sa.Dialect) -> Sequence[str]:
    """The names of ``stmt``'s result columns as its SQL writes them: from its
    template's head (compiled once per set of columns and froms), not from compiling the
    whole statement (~0.5-1 ms of CPU for a group statement of a new shape on
    MySQL/MariaDB: every first ask's group statements)."""
    template = _texts.template(stmt, dialect)
    if template is not None and template.columns:
        return template.columns
    return [column[0] for column in _compiled(stmt, dialect)._result_columns]


def _parsed(text: str | None, count: int, kinds: Sequence[object]) -> list[Any] | None:
    """The ``count`` rows of a :func:`_text_rows` text (``a:b:c;`` per row, ``''`` for
    ``NULL``), or ``None`` when the text was cut short (it does not end a row, or holds
    fewer cells than counted). The cells are numbers: read by orjson as one JSON array
    (C, not an ``int()`` per cell: the one pass's 20k rows × 6 at 5,000 hosts, 19 ->
    7 ms), or, with a ``NULL`` among them, column by column; a column that may have a
    fraction (a capacity, which MySQL/MariaDB write as the shortest text that reads
    back as the same double, as on the wire) as ``float``.

    >>> _parsed("3:1:2.5;4:2:8;", 2, (sa.Integer, sa.Integer, sa.Float))
    [(3, 1, 2.5), (4, 2, 8.0)]
    >>> _parsed("3:1:2.5;4::8;", 2, (sa.Integer, sa.Integer, sa.Float))
    [(3, 1, 2.5), (4, None, 8.0)]
    >>> _parsed("3:1:2.5;4:", 2, (sa.Integer, sa.Integer, sa.Float)) is None
    True
    """
    width = len(kinds)
    if not text or text[-1] != ";":
        return None
    joined = text[:-1].replace(";", ":")
    try:
        cells = orjson.loads(f"[{joined.replace(':', ',')}]")
    except orjson.JSONDecodeError:  # a NULL cell (or a number JSON does not write)
        cells = joined.split(":")
        if len(cells) != count * width:
            return None
        reads = [int if kind in _WHOLE else float for kind in kinds]
        columns = [
            [read(cell) if cell else None for cell in cells[j::width]]
            for j, read in enumerate(reads)
        ]
        return list(zip(*columns, strict=True))
    if len(cells) != count * width:
        return None
    columns = [
        cells[j::width] if kind in _WHOLE else list(map(float, cells[j::width]))
        for j, kind in enumerate(kinds)
    ]
    return list(zip(*columns, strict=True))


def _expanded(
    stmt: sa.Select, params: dict[str, Any], dialect: sa.Dialect, prefix: str
) -> tuple[str, dict[str, Any]]:
    """``stmt``'s SQL for ``params`` (expanding lists rendered) and its parameters, each
    renamed ``<prefix><name>``."""
    template = _texts.template(stmt, dialect)
    if template is None:  # (values to process: none of the batch's statements has)
        state = _compiled(stmt, dialect).construct_expanded_state(params)
        sql, values = state.statement, state.parameters
        for name, processor in state.processors.items():
            values[name] = processor(values[name])
    else:
        sql, values = _texts.render(template, params)
    if not prefix:
        return sql, values
    return _renamed(sql, prefix), {prefix + name: value for name, value in values.items()}


def _fetch(
    conn: Connection,
    sql: str,
    params: dict[str, Any],
    *,
    prepare: bool = False,
    ordered: bool = False,
) -> list[Any]:
    """Every row of ``sql``, a text in the driver's own form, as the driver's tuples.

    Once the connection has begun (its first statement goes through SQLAlchemy's
    ``exec_driver_sql``, which begins: SQLite's ``BEGIN``), on the driver's cursor
    directly (:func:`_on_cursor`): SQLAlchemy's execution context and result, which
    these rows skip anyway, cost 20-40 µs a statement on SQLite and ~50 µs on the
    servers (5-6 statements a request).

    ``prepare``: ``sql``'s plan is the same for any values and any cloud (the names
    statement), so the server may keep it (:func:`rpquery.store.dialects.execute_prepared`:
    PostgreSQL); the connection is begun first if it has not (as ``exec_driver_sql``
    would begin it) and the statement goes on the driver's cursor.

    ``ordered``: planned without hash joins, where :func:`~rpquery.store.dialects.ordered_joins`
    has a way for this statement alone (on the driver's cursor only; the plan never
    changes the rows)."""
    if prepare and not conn.in_transaction():
        conn.begin()
    if _direct(conn):
        prefixed = dialects.ordered_joins(conn) if ordered and not prepare else None
        return _on_cursor(conn, sql, params, prepare=prepare, prefixed=prefixed)
    result = conn.exec_driver_sql(sql, params)
    try:
        return list(result.cursor.fetchall())
    finally:
        result.close()


def _direct(conn: Connection) -> bool:
    """Whether ``conn`` can take a statement on its driver's cursor: it has begun (no
    transaction to begin first), is not in a savepoint, logs no statements (a private
    flag: rpquery pins SQLAlchemy's version) and has no hook that would run the
    statement itself (``do_execute``; ``handle_error`` hooks are run)."""
    return (
        conn.in_transaction()
        and not conn.in_nested_transaction()
        and not conn._echo
        and not conn.dialect.dispatch.do_execute
    )


def _on_cursor(
    conn: Connection,
    sql: str,
    params: dict[str, Any],
    *,
    prepare: bool = False,
    prefixed: tuple[Any, str] | None = None,
) -> list[Any]:
    """:func:`_fetch` on a cursor of the driver, as ``exec_driver_sql`` would run it
    for what these statements need: the engine's cursor events fire (tracers, statement
    counts, batch timers; with no execution context), and a driver error goes through
    SQLAlchemy's handling (wrapped as ``DBAPIError``, a lost connection invalidated
    for :func:`rpquery.db.read_retrying`, the ``handle_error`` hooks). ``prefixed``: a
    cursor of the driver and the text sent before ``sql`` in the same message
    (:func:`~rpquery.store.dialects.ordered_joins`); the rows are the last result's."""
    cursor = conn.connection.cursor() if prefixed is None else prefixed[0]
    if prefixed is not None:
        sql = prefixed[1] + sql
    try:
        for before in conn.dispatch.before_cursor_execute:
            sql, params = before(conn, cursor, sql, params, None, False)
        if prepare:
            dialects.execute_prepared(conn, cursor, sql, params)
        else:
            cursor.execute(sql, params)
        conn.dispatch.after_cursor_execute(conn, cursor, sql, params, None, False)
        if prefixed is not None:
            cursor.nextset()  # past the prefix's result
        rows = cursor.fetchall()
    except BaseException as error:
        if isinstance(error, Exception) and not isinstance(error, conn.dialect.loaded_dbapi.Error):
            cursor.close()
            raise  # not the driver's (SQLAlchemy would not wrap it either)
        # (closes the cursor, or invalidates the connection it was lost with)
        conn._handle_dbapi_exception(error, sql, params, cursor, None)
    cursor.close()
    return list(rows)


def _renamed(sql: str, prefix: str) -> str:
    """Every ``%(name)s`` placeholder of ``sql`` renamed ``%(<prefix>name)s`` (``%%``,
    a percent sign, left alone)."""
    return _PLACEHOLDER.sub(
        lambda m: m.group(0) if m.group(1) is None else f"%({prefix}{m.group(1)})s", sql
    )


@functools.lru_cache(maxsize=1024)
def _compiled(stmt: sa.Select, dialect: sa.Dialect) -> Any:
    """``stmt`` compiled for ``dialect``, once (:func:`merged_rows`); counted with the
    parts (:class:`~._texts.PartStats`): a compilation all the same."""
    _texts.PartStats.compiled += 1
    return stmt.compile(dialect=dialect)
