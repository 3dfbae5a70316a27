"""Statements compiled by parts (issue 18, item 5).

SQLAlchemy compiles a whole statement, never from compiled fragments, so a group
statement of a shape never seen costs a compilation (~1 ms of CPU on an idle machine,
~3 ms on a loaded one) even when every one of its clauses was compiled before in
another statement: a random request's group statements combine a few dozen clauses
(its columns, each filter, the capacity test of each class, the batch's scope) in
hundreds of ways.

:func:`template` compiles a plain ``SELECT <columns> FROM <froms> WHERE <c1> AND <c2>
... [GROUP BY ...] [ORDER BY ...]`` by parts instead: the statement without its
``WHERE`` clauses (the *head*), and each clause in a statement of the same ``FROM``
(so it correlates as in the whole), each part compiled once per SQLAlchemy cache key
and dialect, and joins their texts. The text is the one SQLAlchemy writes for the
whole statement (``tests/test_statement_texts.py``): the clauses are grouped as its
``AND`` list groups them, each part's own literal values (anonymous parameters:
``coalesce(used, 0)``) are renamed ``p<i>_<name>`` so two parts' do not collide.
:func:`render` binds a request's values: expanding lists as SQLAlchemy expands them
(its own code per parameter, empty lists included), the rest by name.

Placeholders are named (``%(name)s``, or ``:name`` on SQLite, whose driver takes both
forms): positional ones could not be joined from parts. Not for statements with
anything else (``LIMIT``, ``DISTINCT``, joins added by ``join()``...): those compile
whole (:func:`template` returns one part).
"""

from __future__ import annotations

import copy
import functools
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ColumnElement, operators
from sqlalchemy.sql.elements import BooleanClauseList, False_, True_, _anonymous_label

_TOKEN = re.compile(r"__\[POSTCOMPILE_(\w+)\]")
_MARK = "__rpq_where__"
_NAMED = {"pyformat": r"%\((\w+)\)s", "named": r"(?<![\w:]):(\w+)\b"}


@dataclass(frozen=True)
class Template:
    """A statement's SQL with named placeholders and SQLAlchemy's expanding tokens
    (``__[POSTCOMPILE_name]``), the parts' own values (``constants``), the names of
    the values a request gives (``names``), for each expanding parameter the
    compiled part and parameter that expand it, and the names of the statement's
    result columns as its text writes them (``columns``: the head's, which selects
    the same columns)."""

    text: str
    constants: dict[str, Any]
    names: tuple[str, ...]
    expanding: dict[str, tuple[Any, Any]]
    columns: tuple[str, ...] = ()


def text_dialect(dialect: Dialect) -> Dialect:
    """``dialect`` with named placeholders (a copy when its driver's are positional:
    PyMySQL's ``%s``, SQLite's ``?``; psycopg's ``%(name)s`` are already)."""
    return _text_dialect(dialect)


@functools.lru_cache(maxsize=16)
def _text_dialect(dialect: Dialect) -> Dialect:
    if dialect.paramstyle == "pyformat":
        return dialect
    named = copy.copy(dialect)
    named.paramstyle = "named" if dialect.paramstyle in ("qmark", "named") else "pyformat"
    named.positional = False
    return named


@dataclass(frozen=True)
class _Part:
    """One compiled part: its text, the values of its anonymous parameters (for the
    statement whose cache key compiled it), its named parameters, its expanding ones."""

    compiled: Any
    text: str
    anonymous: frozenset[str]
    names: tuple[str, ...]
    expanding: dict[str, Any]


#: compiled parts per (cache key, dialect): a few dozen for every request shape
_PARTS: OrderedDict[tuple[Any, ...], _Part] = OrderedDict()
_PARTS_SIZE = 2048


class PartStats:
    """How many parts were compiled, and how many SQLAlchemy cache keys were generated
    to find a part (a part not found by the identity of its objects), read by
    ``benchmarks.shapes`` and the tests."""

    compiled = 0
    keyed = 0


def _part(
    skeleton: sa.Select | sa.CompoundSelect, dialect: Dialect
) -> tuple[_Part, dict[str, Any]]:
    """``skeleton`` compiled (once per cache key and dialect) and the values of its
    anonymous parameters in this instance."""
    key = skeleton._generate_cache_key()
    PartStats.keyed += 1
    if key is None:
        raise _Unsupported(skeleton)
    cache_key = (key.key, dialect)
    part = _PARTS.get(cache_key)
    if part is None:
        compiled = skeleton.compile(dialect=dialect, cache_key=key)
        PartStats.compiled += 1
        binds = {name: b for b, name in compiled.bind_names.items()}  # as rendered
        anonymous = frozenset(n for n, b in binds.items() if isinstance(b.key, _anonymous_label))
        expanding = {n: b for n, b in binds.items() if b.expanding}
        if any(b.literal_execute for b in binds.values()) or compiled._bind_processors:
            raise _Unsupported(skeleton)
        if _embedded(binds, anonymous, expanding):
            raise _Unsupported(skeleton)
        names = tuple(n for n in binds if n not in anonymous and n not in expanding)
        part = _Part(compiled, compiled.string, anonymous, names, expanding)
        _PARTS[cache_key] = part
        if len(_PARTS) > _PARTS_SIZE:
            _PARTS.popitem(last=False)
    values = part.compiled.construct_params(extracted_parameters=key.bindparams, _check=False)
    return part, {n: values[n] for n in part.anonymous}


#: parts by the identity of what they are made of (the builders share clause objects
#: between shapes: a known object needs no skeleton and no cache key); the entry keeps
#: the objects, so their ids stay theirs
_BY_ID: OrderedDict[tuple[Any, ...], tuple[Any, _Part, dict[str, Any]]] = OrderedDict()


def _memo(
    objects: tuple[tuple[Any, ...], ...], dialect: Dialect, skeleton: Any
) -> tuple[_Part, dict[str, Any]]:
    """:func:`_part` of ``skeleton()``, the statement made of ``objects`` (columns,
    froms, ``GROUP BY``, ``ORDER BY``), once per those objects."""
    key = (*(tuple(map(id, group)) for group in objects), dialect)
    hit = _BY_ID.get(key)
    if hit is not None:
        return hit[1], hit[2]
    part, values = _part(skeleton(), dialect)
    _BY_ID[key] = (objects, part, values)
    if len(_BY_ID) > _PARTS_SIZE:
        _BY_ID.popitem(last=False)
    return part, values


def _whole(stmt: sa.Select | sa.CompoundSelect, dialect: Dialect) -> tuple[_Part, dict[str, Any]]:
    """``stmt`` compiled whole, as one part."""
    try:
        return _part(stmt, dialect)
    except _Unsupported:
        compiled = stmt.compile(dialect=dialect)
        PartStats.compiled += 1
        binds = {name: b for b, name in compiled.bind_names.items()}  # as rendered
        anonymous = frozenset(n for n, b in binds.items() if isinstance(b.key, _anonymous_label))
        expanding = {n: b for n, b in binds.items() if b.expanding}
        names = tuple(n for n in binds if n not in anonymous and n not in expanding)
        if compiled._bind_processors or any(
            b.literal_execute and not b.expanding for b in binds.values()
        ):
            raise _Unsupported(stmt) from None
        if _embedded(binds, anonymous, expanding):
            raise _Unsupported(stmt) from None
        values = compiled.construct_params(_check=False)
        part = _Part(compiled, compiled.string, anonymous, names, expanding)
        return part, {n: values[n] for n in anonymous}


def _embedded(binds: dict[str, Any], anonymous: frozenset[str], expanding: dict[str, Any]) -> bool:
    """Whether a statement carries values of its own besides scalar constants (a list
    written in, ``IN (1, 2)``, or a named parameter given a value, as the insight
    readers' statements built with ``Binds(values)`` do): :func:`render` takes every
    named value from the request's, so such a statement runs through SQLAlchemy."""
    if anonymous & expanding.keys():
        return True
    return any(
        b.value is not None or b.callable is not None
        for n, b in binds.items()
        if n not in anonymous
    )


class _Unsupported(Exception):
    """A part this module does not join (the statement compiles whole)."""


def _plain(stmt: sa.Select) -> bool:
    """Whether ``stmt`` is only columns, froms, ``WHERE``, ``GROUP BY``, ``ORDER BY``."""
    return not (
        stmt._limit_clause is not None
        or stmt._offset_clause is not None
        or stmt._fetch_clause is not None
        or stmt._distinct
        or stmt._having_criteria
        or stmt._setup_joins
        or stmt._correlate
        or stmt._correlate_except
        or stmt._prefixes
        or stmt._suffixes
        or stmt._hints
        or stmt._statement_hints
        or stmt._for_update_arg is not None
        or stmt._independent_ctes
    )


def template(stmt: sa.Select | sa.CompoundSelect, dialect: Dialect) -> Template | None:
    """``stmt``'s SQL for ``dialect`` (:func:`text_dialect`), joined from parts
    compiled once each (once per statement object: LRU of 1,024); ``None`` for a
    statement that this module cannot send (its values need processing)."""
    return _template(stmt, text_dialect(dialect))


@functools.lru_cache(maxsize=1024)
def _template(stmt: sa.Select | sa.CompoundSelect, dialect: Dialect) -> Template | None:
    start = 0  # where a WHERE clause's text starts in its part's
    try:
        parts, start = _split(stmt, dialect)
    except _Unsupported:
        try:
            parts = [_whole(stmt, dialect)]
        except _Unsupported:
            return None
    # each part's anonymous values renamed p<i>_<name> in its own text
    pattern = _NAMED["named" if dialect.paramstyle == "named" else "pyformat"]
    constants: dict[str, Any] = {}
    names: dict[str, None] = {}
    expanding: dict[str, tuple[Any, Any]] = {}
    texts: list[str] = []
    for i, (part, values) in enumerate(parts):
        text = part.text
        if part.anonymous:
            text = re.sub(pattern, functools.partial(_rename, part.anonymous, f"p{i}_"), text)
            constants.update({f"p{i}_{n}": v for n, v in values.items()})
        texts.append(text)
        names.update(dict.fromkeys(part.names))
        expanding.update({n: (part.compiled, b) for n, b in part.expanding.items()})
    if len(texts) > 1:  # the head, then its WHERE clauses
        where = " AND ".join(t[start:] for t in texts[1:])
        text = texts[0].replace(_MARK, where)
    else:
        text = texts[0]
    tokens = _TOKEN.findall(text)
    if text.count("__[POSTCOMPILE_") != len(tokens) or not expanding.keys() >= set(tokens):
        return None  # a token this module does not expand
    columns = tuple(column[0] for column in parts[0][0].compiled._result_columns)
    return Template(text, constants, tuple(names), expanding, columns)


def _rename(anonymous: frozenset[str], prefix: str, m: re.Match[str]) -> str:
    name = m.group(1)
    return m.group(0).replace(name, prefix + name, 1) if name in anonymous else m.group(0)


def _split(
    stmt: sa.Select | sa.CompoundSelect, dialect: Dialect
) -> tuple[list[tuple[_Part, dict[str, Any]]], int]:
    """The head of ``stmt`` (``WHERE`` and a mark) and each of its ``WHERE`` clauses,
    compiled in a ``SELECT 1 FROM <the same froms> WHERE <clause>`` whose text, past
    ``WHERE``, is the clause's."""
    # (a subclass may compile its own way: long_concat_select's SET STATEMENT)
    if type(stmt) is not sa.Select or not _plain(stmt) or not stmt._where_criteria:
        raise _Unsupported(stmt)
    # (not get_final_froms(): it compiles the statement)
    froms = tuple(stmt._from_obj or stmt.columns_clause_froms)
    mark: ColumnElement[Any] = sa.literal_column(_MARK)
    columns = tuple(stmt._raw_columns)
    group_by, order_by = tuple(stmt._group_by_clauses), tuple(stmt._order_by_clauses)
    out = [
        _memo(
            (columns, froms, group_by, order_by),
            dialect,
            lambda: (
                sa.select(*columns)
                .select_from(*froms)
                .where(mark)
                .group_by(*group_by)
                .order_by(*order_by)
            ),
        )
    ]
    if out[0][0].text.count(_MARK) != 1:
        raise _Unsupported(stmt)
    empty = _memo(
        ((), froms, (), ()),
        dialect,
        lambda: sa.select(sa.literal_column("1")).select_from(*froms).where(mark),
    )
    prefix = empty[0].text.partition(_MARK)[0]
    if empty[0].compiled.bind_names:  # (its text is cut off each clause's)
        raise _Unsupported(stmt)
    # grouped as SQLAlchemy groups a WHERE's clauses (an OR among several in parentheses)
    raw = stmt._where_criteria
    count, clauses = BooleanClauseList._process_clauses_for_boolean(
        operators.and_, True_._singleton, False_._singleton, raw
    )
    for key, clause in zip(_clause_keys(raw, clauses, count, froms), clauses, strict=True):
        part, values = _memo(
            key,
            dialect,
            lambda c=clause: sa.select(sa.literal_column("1")).select_from(*froms).where(c),
        )
        if not part.text.startswith(prefix):
            raise _Unsupported(stmt)
        out.append((part, values))
    return out, len(prefix)


def _clause_keys(
    raw: tuple[Any, ...], clauses: list[Any], count: int, froms: tuple[Any, ...]
) -> list[tuple[tuple[Any, ...], ...]]:
    """The :func:`_memo` key of each grouped ``WHERE`` clause of :func:`_split`: the
    clause the statement was built with, and whether it stands among others (grouped
    against ``AND``) or alone. The grouping is a new object for every statement (an
    ``OR`` or ``EXISTS`` in parentheses), the clause under it is the builders' shared
    one: a statement of a new shape made of known clauses finds their parts by
    identity, not by a cache key of each (~1.1 a never-seen request of make
    bench-shapes, the larger part of its Python time). With ``TRUE``/``FALSE`` among
    them (not one grouping per clause) the grouped clause itself."""
    true, false = True_._singleton, False_._singleton
    if len(raw) != len(clauses) or any(c is true or c is false for c in raw):
        return [((c,), froms, (), ()) for c in clauses]
    against = operators.and_ if count > 1 else operators._asbool
    return [((c,), froms, (), (), (against,)) for c in raw]


def render(t: Template, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The SQL of ``t`` for ``params`` (expanding lists rendered as SQLAlchemy renders
    them) and the driver's values."""
    values = dict(t.constants)
    for name in t.names:
        values[name] = params[name]
    if not t.expanding:
        return t.text, values
    taken = set(values)
    expressions = {}
    for name, (compiled, bind) in t.expanding.items():
        value = params[name]
        if bind.literal_execute and value and _plain_ints(value):
            # what SQLAlchemy writes for them (Integer's literal is str()), ~0.4 µs an
            # id instead of ~2: the summaries' trees of nova's limit=1000 on MariaDB
            expressions[name] = ", ".join(map(str, value))
            continue
        to_update, expression = compiled._literal_execute_expanding_parameter(
            name, bind, value, taken_names=taken
        )
        values.update(to_update)
        expressions[name] = expression
    return _TOKEN.sub(lambda m: expressions[m.group(1)], t.text), values


def _plain_ints(values: Any) -> bool:
    """Whether every one of ``values`` is an ``int`` itself (not a ``bool`` or another
    subclass, whose literal SQLAlchemy may write otherwise)."""
    return all(type(v) is int for v in values)
