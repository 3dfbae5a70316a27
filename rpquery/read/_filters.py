"""The per-provider filters of a request group, declared once (:data:`GROUP_FILTERS`)
and shared by allocation candidates (:mod:`rpquery.read.candidates`), provider lists
(:mod:`rpquery.read.providers`) and the insight readers (through
:mod:`rpquery.read.engine`).

Each filter is one :class:`GroupFilter`: the :class:`~rpquery.read.request.RequestGroup`
field it reads, how its values are bound, the clauses it adds, its rejection reason and
its sharing-provider rule. Everything that walks a group's filters iterates the table.

A group's filters have a *shape* (:class:`FilterShape`: how many values of each filter)
and *values* (trait ids, aggregate uuids, a tree's uuid), named after the shape's
``prefix``. :func:`shape_filters` builds the clauses of a shape with the values in
(``Binds(values)``) or as bind parameters (``Binds()``), so a statement built once
serves every group of the same shape:

>>> from rpquery.read.request import RequestGroup
>>> g = RequestGroup(resources={"VCPU": 1}, forbidden=frozenset({"CUSTOM_GPU"}))
>>> shape, values = filter_shape(g, Names(trait_ids={"CUSTOM_GPU": 7}), "g_")
>>> shape, values
(FilterShape(prefix='g_', counts=(1, 0, 0, 0, 0)), {'g_forbidden': [7]})
>>> [(f.field, shape.count(f)) for f in GROUP_FILTERS if shape.count(f)]
[('forbidden', 1)]
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement, FromClause

from rpquery.read import _clauses as clauses
from rpquery.read._clauses import Binds, Ids
from rpquery.read._names import Names
from rpquery.read.request import RequestGroup

Clauses = list[ColumnElement[bool]]


@dataclass(frozen=True)
class Where:
    """Where a filter's clauses test a provider: ``rp`` (a provider alias), ``root``
    its root's id when the root's aggregates count too (the unsuffixed group of
    allocation candidates), ``root_exempt`` the providers a root's forbidden aggregate
    does not exclude (the sharing ones)."""

    rp: FromClause
    root: ColumnElement[int] | None = None
    root_exempt: Ids | None = None


#: The sharing-provider rules of a filter in the unsuffixed group (docs/read-path.md
#: *Semantics*): ``OWN``: serving another tree, a sharing provider passes on its own
#: aggregates (its root's do not count); ``ANCHOR``: as ``OWN``, and an anchor whose
#: root is a member is served by no sharing provider; ``LOCAL``: a sharing provider
#: serves its own tree only.
OWN, ANCHOR, LOCAL = "own", "anchor", "local"


@dataclass(frozen=True)
class GroupFilter:
    """One per-group filter: what it reads, how its values are bound, the clauses it
    adds, its rejection reason and its rules (one entry of :data:`GROUP_FILTERS`)."""

    #: the ``RequestGroup`` field it reads, also the name of its values (``prefix`` +
    #: field, + ``i`` for the ``i``th set of a ``sets`` filter)
    field: str
    #: an AND of sets, one value each (``required``, ``member_of``), else one value
    sets: bool
    #: a set's (or the field's) value as bound, from the field and the request's names
    value: Callable[[Any, Names], Any]
    #: its clauses, from its values (or bind parameters) at a :class:`Where`
    clauses: Callable[[Sequence[Any], Where], Clauses]
    #: its rejection reason (:mod:`rpquery.insight`), told in ``told`` order (a host
    #: counts under the first reason it meets)
    reason: str
    told: int
    #: bound as one value (``Binds.value``, a uuid), else as a list (``Binds.many``)
    scalar: bool = False
    #: one clause per set (each built and cached alone), else one for all its sets
    per_set: bool = False
    #: its clauses on every row of a statement over whole tables (a whole-cloud
    #: answer's one pass), when they differ
    whole_tables: Callable[[Sequence[Any], Where], Clauses] | None = None
    #: a trait test: a provider holds one of a value's traits (``True``) or none
    #: (``False``); insight reads the holders once per statement
    holders: bool | None = None
    #: the unsuffixed group of allocation candidates tests it over the whole tree (an
    #: any-of flag column per set, checked by the search), not per provider
    tree_wide: bool = False
    #: its rule for sharing providers in the unsuffixed group (:data:`OWN`,
    #: :data:`ANCHOR`, :data:`LOCAL`; ``None``: the same for every tree)
    sharing: str | None = None
    #: it selects some trees by an index: a group with it reads only those rows, never
    #: every inventory (:func:`rpquery.read.candidates._execute.carries_summary`)
    picks_trees: bool = False

    def of(self, group: RequestGroup) -> Any:
        """The field's value in ``group`` (``()``, an empty set or ``None``: absent)."""
        return getattr(group, self.field)

    def given(self, group: RequestGroup) -> int:
        """How many sets ``group`` gives (a filter of one value: 0 or 1), before
        names resolve."""
        v = self.of(group)
        return len(v) if self.sets else int(bool(v))

    def bind(self, group: RequestGroup, names: Names) -> list[Any]:
        """The values to bind: one per set, or the one value (none when absent, or
        when no value is left once names resolve: unknown forbidden traits drop out)."""
        v = self.of(group)
        if self.sets:
            return [self.value(s, names) for s in v]
        if not v:
            return []
        bound = self.value(v, names)
        return [bound] if bound else []

    def param(self, binds: Binds, name: str) -> Any:
        return binds.value(name, sa.String) if self.scalar else binds.many(name)

    def names(self, shape: FilterShape) -> list[str]:
        """The names of the values of this filter in ``shape``."""
        n = shape.count(self)
        if self.sets:
            return [shape.name(self.field, i) for i in range(n)]
        return [shape.name(self.field)] if n else []


def _traits(v: frozenset[str], names: Names) -> list[int]:
    return names.traits(v)


def _sorted(v: frozenset[str], _names: Names) -> list[str]:
    return sorted(v)


def _as_is(v: str, _names: Names) -> str:
    return v


def _lacks_traits(values: Sequence[Any], at: Where) -> Clauses:
    return [clauses.lacks_any_trait(at.rp.c.id, values[0])]


def _lacks_once(values: Sequence[Any], at: Where) -> Clauses:
    return [clauses.forbidden_once(at.rp.c.id, values[0])]


def _has_traits(values: Sequence[Any], at: Where) -> Clauses:
    return [clauses.has_any_trait(at.rp.c.id, v) for v in values]


def _in_aggregates(values: Sequence[Any], at: Where) -> Clauses:
    return [clauses.in_every_aggregate_set(at.rp.c.id, values, at.root)]


def _not_in_aggregates(values: Sequence[Any], at: Where) -> Clauses:
    return [clauses.not_in_aggregates(at.rp.c.id, values[0], at.root, at.root_exempt)]


def _in_tree(values: Sequence[Any], at: Where) -> Clauses:
    return [clauses.in_tree(at.rp.c.root_provider_id, values[0])]


FORBIDDEN_TRAITS = GroupFilter(
    field="forbidden",
    sets=False,
    value=_traits,
    clauses=_lacks_traits,
    whole_tables=_lacks_once,
    holders=False,
    reason="forbidden_trait",
    told=4,
)
REQUIRED_TRAITS = GroupFilter(
    field="required",
    sets=True,
    value=_traits,
    clauses=_has_traits,
    per_set=True,
    holders=True,
    reason="required_trait",
    told=3,
    tree_wide=True,
)
MEMBER_OF = GroupFilter(
    field="member_of",
    sets=True,
    value=_sorted,
    clauses=_in_aggregates,
    reason="member_of",
    told=1,
    sharing=OWN,
    picks_trees=True,
)
FORBIDDEN_AGGREGATES = GroupFilter(
    field="forbidden_aggs",
    sets=False,
    value=_sorted,
    clauses=_not_in_aggregates,
    reason="forbidden_aggregate",
    told=2,
    sharing=ANCHOR,
)
IN_TREE = GroupFilter(
    field="in_tree",
    sets=False,
    value=_as_is,
    scalar=True,
    clauses=_in_tree,
    reason="in_tree",
    told=0,
    sharing=LOCAL,
    picks_trees=True,
)

#: Every per-group filter, in the order of their clauses in a statement (the golden
#: SQL's order, tests/test_golden_sql.py).
GROUP_FILTERS: tuple[GroupFilter, ...] = (
    FORBIDDEN_TRAITS,
    REQUIRED_TRAITS,
    MEMBER_OF,
    FORBIDDEN_AGGREGATES,
    IN_TREE,
)
#: The filters in the order their rejection reasons are told (a host counts under
#: the first it fails).
TOLD_FILTERS = tuple(sorted(GROUP_FILTERS, key=lambda f: f.told))
_INDEX = {f.field: i for i, f in enumerate(GROUP_FILTERS)}
#: The filter the unsuffixed group tests over the whole tree (required traits): one
#: any-of flag column per set in its statement, the search checks them collectively.
(TREE_WIDE,) = (f for f in GROUP_FILTERS if f.tree_wide)


_FIELDS = operator.attrgetter(*(f.field for f in GROUP_FILTERS))


_SETS = tuple(f.sets for f in GROUP_FILTERS)


def filter_values(group: RequestGroup) -> tuple[Any, ...]:
    """The values of ``group``'s filter fields, in the table's order."""
    return _FIELDS(group)


def given_counts(group: RequestGroup) -> tuple[int, ...]:
    """:meth:`GroupFilter.given` of every filter, in the table's order."""
    values = zip(_SETS, _FIELDS(group), strict=True)
    return tuple(len(v) if sets else int(bool(v)) for sets, v in values)


def ruled(group: RequestGroup, rule: str) -> Any:
    """The value of ``group``'s filter whose sharing rule is ``rule`` (:data:`OWN`,
    :data:`ANCHOR`, :data:`LOCAL`), ``None`` when the group has none."""
    for f in GROUP_FILTERS:
        if f.sharing == rule and f.given(group):
            return f.of(group)
    return None


def tree_wide_sets(group: RequestGroup) -> tuple[Any, ...]:
    """The sets the unsuffixed ``group`` tests over the whole tree (any-of flags);
    none for a granular group, which tests them per provider."""
    return () if group.is_granular else tuple(TREE_WIDE.of(group))


@dataclass(frozen=True)
class FilterShape:
    """How many values of each filter a group has (``counts``, one per
    :data:`GROUP_FILTERS` entry; the values are bound by name: ``prefix`` + field,
    ``required0``, ``member_of1``...): the part of a statement's cache key the
    group's filters make."""

    prefix: str
    counts: tuple[int, ...]

    def name(self, field: str, i: int | None = None) -> str:
        return f"{self.prefix}{field}{'' if i is None else i}"

    def count(self, f: GroupFilter) -> int:
        return self.counts[_INDEX[f.field]]

    @classmethod
    def only(cls, prefix: str, f: GroupFilter | None = None, n: int = 0) -> FilterShape:
        """The shape of ``n`` values of filter ``f`` alone (no ``f``: no filter)."""
        return cls(prefix, tuple(n if g is f else 0 for g in GROUP_FILTERS))


def filter_shape(
    group: RequestGroup, names: Names, prefix: str
) -> tuple[FilterShape, dict[str, Any]]:
    """The shape of ``group``'s filters and their values, named with ``prefix``.
    Unknown forbidden traits drop out (no clause), as :meth:`Names.traits` does."""
    # GroupFilter.bind and .names, inlined: this runs for every group of a request
    counts = []
    values: dict[str, Any] = {}
    for f in GROUP_FILTERS:
        v = getattr(group, f.field)
        if f.sets:
            counts.append(len(v))
            for i, s in enumerate(v):
                values[f"{prefix}{f.field}{i}"] = f.value(s, names)
        elif v and (bound := f.value(v, names)):
            counts.append(1)
            values[prefix + f.field] = bound
        else:
            counts.append(0)
    return FilterShape(prefix, tuple(counts)), values


def _applies(f: GroupFilter, n: int, with_required: bool) -> bool:
    return bool(n) and (with_required or not f.tree_wide)


def shape_filters(
    shape: FilterShape,
    binds: Binds,
    rp: FromClause,
    *,
    with_required: bool,
    root_covers: bool,
    root_exempt: Ids | None = None,
    whole_tables: bool = False,
) -> list[ColumnElement[bool]]:
    """The clauses of :func:`provider_filters` for a group of ``shape``, its values
    taken from ``binds``. ``root_exempt`` (with ``root_covers``): providers whose root's
    forbidden aggregates do not exclude them
    (:func:`rpquery.read._clauses.not_in_aggregates`). ``whole_tables``: the filters'
    form for every row of a statement over whole tables (``GroupFilter.whole_tables``).

    With bind parameters (``Binds()``) each clause is built once per prefix and count
    and shared by every shape that has it (:func:`_bound_clause`): a statement of a new
    shape is made of clause objects built, and compiled, before
    (:mod:`rpquery.store._texts`)."""
    if binds.values is not None or not (
        root_exempt is None or isinstance(root_exempt, sa.BindParameter)
    ):
        return _shape_filters(
            shape,
            binds,
            rp,
            with_required=with_required,
            root_covers=root_covers,
            root_exempt=root_exempt,
            whole_tables=whole_tables,
        )
    exempt = None if root_exempt is None else root_exempt.key
    out: list[ColumnElement[bool]] = []
    for f, n in zip(GROUP_FILTERS, shape.counts, strict=True):
        if _applies(f, n, with_required):
            sizes: Sequence[int] = range(1, n + 1) if f.per_set else (n,)
            whole = whole_tables and f.whole_tables is not None
            out.extend(
                _bound_clause(rp, shape.prefix, f.field, k, root_covers, exempt, whole)
                for k in sizes
            )
    return out


@functools.lru_cache(maxsize=1024)
def _bound_clause(
    rp: FromClause,
    prefix: str,
    field: str,
    n: int,
    root_covers: bool,
    exempt: str | None,
    whole_tables: bool = False,
) -> ColumnElement[bool]:
    """One clause of :func:`shape_filters` with bind parameters: the last clause of a
    shape with only filter ``field`` (``n``: its count: the ``n - 1``th set of a
    ``per_set`` filter, ``n`` sets of another)."""
    only = FilterShape.only(prefix, GROUP_FILTERS[_INDEX[field]], n)
    root_exempt: Ids | None = None
    if exempt is not None:
        root_exempt = sa.bindparam(exempt, expanding=True)
    return _shape_filters(
        only,
        Binds(),
        rp,
        with_required=True,
        root_covers=root_covers,
        root_exempt=root_exempt,
        whole_tables=whole_tables,
    )[-1]


def _shape_filters(
    shape: FilterShape,
    binds: Binds,
    rp: FromClause,
    *,
    with_required: bool,
    root_covers: bool,
    root_exempt: Ids | None = None,
    whole_tables: bool = False,
) -> list[ColumnElement[bool]]:
    """:func:`shape_filters`, built anew."""
    root = rp.c.root_provider_id if root_covers else None
    at = Where(rp, root, root_exempt if root is not None else None)
    out: list[ColumnElement[bool]] = []
    for f, n in zip(GROUP_FILTERS, shape.counts, strict=True):
        if _applies(f, n, with_required):
            build = f.clauses
            if whole_tables and f.whole_tables is not None:
                build = f.whole_tables
            out.extend(build([f.param(binds, name) for name in f.names(shape)], at))
    return out


def provider_filters(
    group: RequestGroup,
    names: Names,
    rp: FromClause,
    *,
    with_required: bool,
    root_covers: bool | None = None,
) -> list[ColumnElement[bool]]:
    """Clauses every provider used by ``group`` must pass (``rp`` is a provider alias).

    Forbidden traits and aggregates are ``NOT EXISTS``. Required traits are per
    provider only for granular groups and provider lists (``with_required``); the
    unsuffixed group checks them collectively. Aggregates as Placement applies them
    (docs/design.md#trees-sharing-and-aggregates): with ``root_covers`` (the unsuffixed
    group of allocation candidates) a provider passes ``member_of`` if it or its root is
    in every term (the terms are not split between the two) and a forbidden aggregate of
    its root excludes it too; without (suffixed groups, provider lists) only the
    provider's own aggregates count.
    ``None``: as allocation candidates do, ``root_covers`` for the unsuffixed group only.
    """
    shape, values = filter_shape(group, names, "")
    if root_covers is None:
        root_covers = not group.is_granular
    return shape_filters(
        shape, Binds(values), rp, with_required=with_required, root_covers=root_covers
    )
