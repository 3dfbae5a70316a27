"""The per-provider filters of a request group, shared by allocation candidates
(:mod:`rpquery.read.candidates`) and provider lists (:mod:`rpquery.read.providers`)."""

from __future__ import annotations

from sqlalchemy.sql import ColumnElement, FromClause

from rpquery.read import _clauses as clauses
from rpquery.read._names import Names
from rpquery.read.request import RequestGroup


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
    out: list[ColumnElement[bool]] = []
    forbidden = names.traits(group.forbidden)
    if forbidden:
        out.append(clauses.lacks_any_trait(rp.c.id, forbidden))
    if with_required:
        out.extend(clauses.has_any_trait(rp.c.id, names.traits(s)) for s in group.required)
    if root_covers is None:
        root_covers = not group.is_granular
    root = rp.c.root_provider_id if root_covers else None
    if group.member_of:
        out.append(clauses.in_every_aggregate_set(rp.c.id, group.member_of, root))
    if group.forbidden_aggs:
        out.append(clauses.not_in_aggregates(rp.c.id, group.forbidden_aggs, root))
    if group.in_tree is not None:
        out.append(clauses.in_tree(rp.c.root_provider_id, group.in_tree))
    return out
