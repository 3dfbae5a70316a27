"""Small named SQL pieces the read path composes into whole statements.

Each helper takes the columns it correlates with and returns a Core clause; none
touches a connection. Trait and aggregate tests are correlated ``EXISTS`` /
``NOT EXISTS`` subqueries so they go into the same statement as the capacity check
and stop at the first matching index entry.

>>> from sqlalchemy.dialects import sqlite
>>> rp = resource_providers.alias("rp")
>>> stmt = sa.select(rp.c.id).where(lacks_any_trait(rp.c.id, [7]))
>>> print(" ".join(str(stmt.compile(dialect=sqlite.dialect())).split()))
SELECT rp.id FROM resource_providers AS rp WHERE NOT (EXISTS (SELECT 1 FROM \
resource_provider_traits AS rpt WHERE rpt.resource_provider_id = rp.id AND rpt.trait_id \
IN (__[POSTCOMPILE_trait_id_1])))
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement, FromClause, Select

from rpquery import dialects
from rpquery.tables import (
    allocations,
    inventories,
    placement_aggregates,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
)

Col = ColumnElement[int]


def _exists(own: Sequence[FromClause], *where: ColumnElement[bool]) -> ColumnElement[bool]:
    """``EXISTS (SELECT 1 FROM <own> WHERE <where>)``, correlated to every other table
    it mentions at whatever depth it is nested (not only the enclosing SELECT)."""
    return sa.select(sa.literal_column("1")).where(*where).correlate_except(*own).exists()


def usage_subquery(rp_id: Col, rc_id: Col) -> ColumnElement[int]:
    """Usage of one (provider, class), summed only for the row it correlates with.

    ``COALESCE((SELECT SUM(a.used) FROM allocations a
    WHERE a.resource_provider_id = :rp AND a.resource_class_id = :rc), 0)`` — served by
    the ``(resource_provider_id, resource_class_id, used)`` index, so the cost follows
    the providers in play, not the size of the cloud.
    """
    a = allocations.alias("a")
    total = (
        sa.select(sa.func.sum(a.c.used))
        .where(a.c.resource_provider_id == rp_id, a.c.resource_class_id == rc_id)
        .correlate_except(a)
        .scalar_subquery()
    )
    return sa.func.coalesce(total, 0)


def usage_by_provider(
    rc_ids: Collection[int] | None,
    scope: Callable[[FromClause], list[ColumnElement[bool]]],
) -> Select:
    """Usage per (provider, class), summed only for the providers ``scope`` admits.

    ``SELECT a.resource_provider_id, a.resource_class_id, SUM(a.used) AS used
    FROM allocations a JOIN resource_providers up ON up.id = a.resource_provider_id
    WHERE a.resource_class_id IN (:rcs) AND <scope(up)>
    GROUP BY a.resource_provider_id, a.resource_class_id ORDER BY <the same>`` — one
    grouped pass, in index order, that a whole-cloud answer needs anyway.
    """
    a = allocations.alias("ua")
    up = resource_providers.alias("up")
    stmt = sa.select(
        a.c.resource_provider_id, a.c.resource_class_id, sa.func.sum(a.c.used).label("used")
    )
    if rc_ids is not None:
        stmt = stmt.where(a.c.resource_class_id.in_(sorted(rc_ids)))
    limits = scope(up)
    if limits:  # no scope (a whole-cloud answer): no join needed
        stmt = stmt.select_from(a.join(up, up.c.id == a.c.resource_provider_id)).where(*limits)
    stmt = stmt.group_by(a.c.resource_provider_id, a.c.resource_class_id)
    # Asking for the index's order makes PostgreSQL aggregate straight off an index-only
    # scan of allocations_resource_provider_class_used_idx (GroupAggregate) instead of
    # a sequential scan and a hash (~40% less at 5,000 hosts). Others ignore it.
    return stmt.order_by(a.c.resource_provider_id, a.c.resource_class_id)


def capacity(inv: FromClause) -> ColumnElement[float]:
    """``(inv.total - inv.reserved) * inv.allocation_ratio``."""
    return dialects.capacity_expr(inv.c.total, inv.c.reserved, inv.c.allocation_ratio)


def capacity_fits(inv: FromClause, amount: int, used: ColumnElement[int]) -> ColumnElement[bool]:
    """``amount`` more units fit this inventory row.

    ``used + :amount <= (total - reserved) * allocation_ratio AND min_unit <= :amount
    AND max_unit >= :amount AND (step_size = 1 OR MOD(:amount, step_size) = 0)``
    """
    amt = sa.literal(amount, sa.Integer)
    return sa.and_(
        used + amt <= capacity(inv),
        inv.c.min_unit <= amt,
        inv.c.max_unit >= amt,
        # "step_size = 1 OR ..." reads the same but lets planners estimate it from
        # column statistics (an expression "= 0" is guessed at 0.5% and wrecks plans).
        sa.or_(inv.c.step_size == 1, amt % inv.c.step_size == 0),
    )


def has_trait(rp_id: Col, trait_id: int) -> ColumnElement[bool]:
    """``EXISTS (SELECT 1 FROM resource_provider_traits WHERE rp = :rp AND trait_id = :t)``"""
    return has_any_trait(rp_id, [trait_id])


def has_all_traits(rp_id: Col, trait_ids: Iterable[int]) -> ColumnElement[bool]:
    """One ``EXISTS`` per trait, ANDed (``sa.true()`` for none)."""
    return sa.and_(sa.true(), *(has_trait(rp_id, t) for t in sorted(trait_ids)))


def has_any_trait(rp_id: Col, trait_ids: Collection[int]) -> ColumnElement[bool]:
    """``EXISTS (SELECT 1 FROM resource_provider_traits rpt
    WHERE rpt.resource_provider_id = :rp AND rpt.trait_id IN (:ids))``"""
    rpt = resource_provider_traits.alias("rpt")
    return _exists(
        [rpt], rpt.c.resource_provider_id == rp_id, rpt.c.trait_id.in_(sorted(trait_ids))
    )


def lacks_any_trait(rp_id: Col, trait_ids: Collection[int]) -> ColumnElement[bool]:
    """Forbidden traits: ``NOT EXISTS (SELECT 1 FROM resource_provider_traits rpt
    WHERE rpt.resource_provider_id = :rp AND rpt.trait_id IN (:ids))``"""
    return sa.not_(has_any_trait(rp_id, trait_ids))


def _agg_member(providers: list[Col], agg_uuids: Collection[str]) -> ColumnElement[bool]:
    rpa = resource_provider_aggregates.alias("rpa")
    pa = placement_aggregates.alias("pa")
    return _exists(
        [rpa, pa],
        rpa.c.aggregate_id == pa.c.id,
        pa.c.uuid.in_(sorted(agg_uuids)),
        rpa.c.resource_provider_id.in_(providers),
    )


def in_aggregates(
    rp_id: Col, agg_uuids: Collection[str], root_id: Col | None = None
) -> ColumnElement[bool]:
    """The provider (or, with ``root_id``, its root) is in one of the aggregates.

    ``EXISTS (SELECT 1 FROM resource_provider_aggregates rpa, placement_aggregates pa
    WHERE rpa.aggregate_id = pa.id AND pa.uuid IN (:aggs)
    AND rpa.resource_provider_id IN (:rp, :root))``
    """
    return _agg_member([rp_id] if root_id is None else [rp_id, root_id], agg_uuids)


def not_in_aggregates(
    rp_id: Col, agg_uuids: Collection[str], root_id: Col | None = None
) -> ColumnElement[bool]:
    """Forbidden aggregates: ``NOT EXISTS`` of :func:`in_aggregates`."""
    return sa.not_(in_aggregates(rp_id, agg_uuids, root_id))


def in_tree(root_id: Col, tree_uuid: str) -> ColumnElement[bool]:
    """``root_id = (SELECT root_provider_id FROM resource_providers WHERE uuid = :u)``"""
    t = resource_providers.alias("tree")
    return (
        root_id == sa.select(t.c.root_provider_id).where(t.c.uuid == tree_uuid).scalar_subquery()
    )


def shares_with_tree(sharing_rp_id: Col, root_id: Col) -> ColumnElement[bool]:
    """The (sharing) provider shares an aggregate with some provider of the tree.

    ``EXISTS (SELECT 1 FROM resource_provider_aggregates sa
    JOIN resource_provider_aggregates ta ON ta.aggregate_id = sa.aggregate_id
    JOIN resource_providers tp ON tp.id = ta.resource_provider_id
    WHERE sa.resource_provider_id = :sharing AND tp.root_provider_id = :root)``
    """
    sa_ = resource_provider_aggregates.alias("sagg")
    ta = resource_provider_aggregates.alias("tagg")
    tp = resource_providers.alias("tp")
    return _exists(
        [sa_, ta, tp],
        sa_.c.resource_provider_id == sharing_rp_id,
        ta.c.aggregate_id == sa_.c.aggregate_id,
        tp.c.id == ta.c.resource_provider_id,
        tp.c.root_provider_id == root_id,
    )


def has_inventory(rp_id: Col, rc_ids: Collection[int]) -> ColumnElement[bool]:
    """``EXISTS (SELECT 1 FROM inventories WHERE resource_provider_id = :rp
    AND resource_class_id IN (:rcs))``"""
    inv = inventories.alias("hinv")
    return _exists(
        [inv], inv.c.resource_provider_id == rp_id, inv.c.resource_class_id.in_(sorted(rc_ids))
    )
