"""The per-provider filters of a request group, shared by allocation candidates
(:mod:`rpquery.read.candidates`) and provider lists (:mod:`rpquery.read.providers`).

A group's filters have a *shape* (:class:`FilterShape`: which filters, how many sets)
and *values* (trait ids, aggregate uuids, a tree's uuid), named after the shape's
``prefix``. :func:`shape_filters` builds the clauses of a shape with the values in
(``Binds(values)``) or as bind parameters (``Binds()``), so a statement built once
serves every group of the same shape:

>>> from rpquery.read.request import RequestGroup
>>> g = RequestGroup(resources={"VCPU": 1}, forbidden=frozenset({"CUSTOM_GPU"}))
>>> shape, values = filter_shape(g, Names(trait_ids={"CUSTOM_GPU": 7}), "g_")
>>> shape, values
(FilterShape(prefix='g_', forbidden=True, required=0, member_of=0, forbidden_aggs=False, \
in_tree=False), {'g_forbidden': [7]})
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement, FromClause

from rpquery.read import _clauses as clauses
from rpquery.read._clauses import Binds, Ids
from rpquery.read._names import Names
from rpquery.read.request import RequestGroup


@dataclass(frozen=True)
class FilterShape:
    """Which filters a group has (the values are bound by name: ``prefix`` + field,
    ``required0``, ``member_of1``...): the part of a statement's cache key the
    group's filters make."""

    prefix: str
    forbidden: bool
    required: int
    member_of: int
    forbidden_aggs: bool
    in_tree: bool

    def name(self, field: str, i: int | None = None) -> str:
        return f"{self.prefix}{field}{'' if i is None else i}"


def filter_shape(
    group: RequestGroup, names: Names, prefix: str
) -> tuple[FilterShape, dict[str, Any]]:
    """The shape of ``group``'s filters and their values, named with ``prefix``.
    Unknown forbidden traits drop out (no clause), as :meth:`Names.traits` does."""
    forbidden = names.traits(group.forbidden)
    shape = FilterShape(
        prefix,
        forbidden=bool(forbidden),
        required=len(group.required),
        member_of=len(group.member_of),
        forbidden_aggs=bool(group.forbidden_aggs),
        in_tree=group.in_tree is not None,
    )
    values: dict[str, Any] = {}
    if forbidden:
        values[shape.name("forbidden")] = forbidden
    for i, s in enumerate(group.required):
        values[shape.name("required", i)] = names.traits(s)
    for i, aggs in enumerate(group.member_of):
        values[shape.name("member_of", i)] = sorted(aggs)
    if group.forbidden_aggs:
        values[shape.name("forbidden_aggs")] = sorted(group.forbidden_aggs)
    if group.in_tree is not None:
        values[shape.name("in_tree")] = group.in_tree
    return shape, values


def shape_filters(
    shape: FilterShape,
    binds: Binds,
    rp: FromClause,
    *,
    with_required: bool,
    root_covers: bool,
    root_exempt: Ids | None = None,
) -> list[ColumnElement[bool]]:
    """The clauses of :func:`provider_filters` for a group of ``shape``, its values
    taken from ``binds``. ``root_exempt`` (with ``root_covers``): providers whose root's
    forbidden aggregates do not exclude them
    (:func:`rpquery.read._clauses.not_in_aggregates`).

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
        )
    exempt = None if root_exempt is None else root_exempt.key
    p = shape.prefix
    out = []
    if shape.forbidden:
        out.append(_bound_clause(rp, p, "forbidden", 1, root_covers, exempt))
    if with_required:
        out.extend(
            _bound_clause(rp, p, "required", i + 1, root_covers, exempt)
            for i in range(shape.required)
        )
    if shape.member_of:
        out.append(_bound_clause(rp, p, "member_of", shape.member_of, root_covers, exempt))
    if shape.forbidden_aggs:
        out.append(_bound_clause(rp, p, "forbidden_aggs", 1, root_covers, exempt))
    if shape.in_tree:
        out.append(_bound_clause(rp, p, "in_tree", 1, root_covers, exempt))
    return out


@functools.lru_cache(maxsize=1024)
def _bound_clause(
    rp: FromClause, prefix: str, kind: str, n: int, root_covers: bool, exempt: str | None
) -> ColumnElement[bool]:
    """One clause of :func:`shape_filters` with bind parameters: the last clause of a
    shape with only ``kind`` (``n``: its count: the ``n - 1``th required set, ``n``
    ``member_of`` terms)."""
    fields = {"forbidden": False, "required": 0, "member_of": 0}
    fields.update({"forbidden_aggs": False, "in_tree": False})
    fields[kind] = n if kind in ("required", "member_of") else True
    only = FilterShape(prefix, **fields)  # type: ignore[arg-type]
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
    )[-1]


def _shape_filters(
    shape: FilterShape,
    binds: Binds,
    rp: FromClause,
    *,
    with_required: bool,
    root_covers: bool,
    root_exempt: Ids | None = None,
) -> list[ColumnElement[bool]]:
    """:func:`shape_filters`, built anew."""
    out: list[ColumnElement[bool]] = []
    if shape.forbidden:
        out.append(clauses.lacks_any_trait(rp.c.id, binds.many(shape.name("forbidden"))))
    if with_required:
        out.extend(
            clauses.has_any_trait(rp.c.id, binds.many(shape.name("required", i)))
            for i in range(shape.required)
        )
    root = rp.c.root_provider_id if root_covers else None
    if shape.member_of:
        sets = [binds.many(shape.name("member_of", i)) for i in range(shape.member_of)]
        out.append(clauses.in_every_aggregate_set(rp.c.id, sets, root))
    if shape.forbidden_aggs:
        aggs = binds.many(shape.name("forbidden_aggs"))
        exempt = root_exempt if root is not None else None
        out.append(clauses.not_in_aggregates(rp.c.id, aggs, root, exempt))
    if shape.in_tree:
        tree = binds.value(shape.name("in_tree"), sa.String)
        out.append(clauses.in_tree(rp.c.root_provider_id, tree))
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
