"""Pure statement builders of capacity headroom (:mod:`rpquery.insight._headroom`).

For a request of one group, how many times its amounts fit each provider is SQL
arithmetic on the rows the candidate query would return (the same filters, the same
``has_room`` and ``unit_allows`` clauses), summed per host::

    WITH r AS (SELECT <key> AS k, rp.id AS rp, inv.resource_class_id AS rc,
                      FLOOR((capacity - used) / <amount of rc>) AS n
               FROM inventories inv JOIN resource_providers rp ... LEFT JOIN usage ...
               WHERE inv.resource_class_id IN (:rcs) AND (rc = :rc1 AND <fits :amt1> OR ...)
               AND <the group's provider filters>)
    SELECT k, rc, SUM(n) FROM r GROUP BY k, rc                  -- unsuffixed group
    SELECT k, -1, SUM(m) FROM (SELECT k, MIN(n) AS m FROM r
        GROUP BY k, rp HAVING COUNT(*) = :classes) GROUP BY k   -- granular group

``<key>`` is the host (root) id, or the provider's own id for a sharing provider, whose
units the executor adds to every host it shares with. In the unsuffixed group with
``member_of``, forbidden aggregates or ``in_tree``, a sharing provider passes for its
own tree and for other trees by different rules (docs/read-path.md *Semantics*): the
filters spare it its root's forbidden aggregates, as the candidate query's do, and a
``scope`` column on its rows says which trees it may serve (1 its own, 2 others, 3
both).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement, Select
from sqlalchemy.sql.elements import BindParameter

from rpquery.insight import _why_sql as w
from rpquery.read import engine
from rpquery.read.request import RequestGroup
from rpquery.store import dialects
from rpquery.store.tables import (
    inventories,
    placement_aggregates,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
    traits,
)


def _units(group: RequestGroup, names: engine.Names, inv: Any, used: Any) -> ColumnElement[int]:
    """``FLOOR((capacity - used) / amount)`` of the row's class."""
    free = engine.capacity(inv) - used
    whens = [
        (inv.c.resource_class_id == names.rc_ids[rc], dialects.floor_int(free / amount))
        for rc, amount in sorted(group.resources.items())
    ]
    return sa.case(*whens, else_=0)


def _fits(group: RequestGroup, names: engine.Names, inv: Any, used: Any) -> ColumnElement[bool]:
    return sa.or_(
        *(
            sa.and_(
                inv.c.resource_class_id == names.rc_ids[rc],
                engine.capacity_fits(inv, amount, used),
            )
            for rc, amount in sorted(group.resources.items())
        )
    )


def _rows(group: RequestGroup, names: engine.Names, sharing_ids: engine.Ids) -> Any:
    inv = inventories.alias("inv")
    rp = resource_providers.alias("rp")
    joined, used = engine.join_usage(inv.join(rp, rp.c.id == inv.c.resource_provider_id), inv)
    key: ColumnElement[int] = rp.c.root_provider_id
    if isinstance(sharing_ids, BindParameter) or sharing_ids:
        key = sa.case((rp.c.id.in_(engine.id_list(sharing_ids)), rp.c.id), else_=key)
    filters = engine.group_filters(group, names, rp)
    scope: list[Any] = []
    if w.splits_sharing(group, sharing_ids):
        filters, scope = _sharing_scope(group, names, rp, engine.id_list(sharing_ids))
    return (
        sa.select(
            key.label("k"),
            rp.c.id.label("rp"),
            inv.c.resource_class_id.label("rc"),
            _units(group, names, inv, used).label("n"),
            *scope,
        )
        .select_from(joined)
        .where(
            inv.c.resource_class_id.in_(sorted(names.rc_ids[rc] for rc in group.resources)),
            _fits(group, names, inv, used),
            *filters,
        )
        .cte("r")
    )


def _sharing_scope(
    group: RequestGroup, names: engine.Names, rp: Any, sharing: engine.Ids
) -> tuple[list[ColumnElement[bool]], list[Any]]:
    """The unsuffixed group's filters with sharing providers in play, as the candidate
    query has them (:func:`rpquery.read.candidates._sql.group_rows_of` with
    ``root_exempt``: a sharing provider is not excluded by its root's forbidden
    aggregates, as it may serve other trees), and a ``scope`` column on a sharing
    provider's rows: 1 when it may serve its own tree (its root in no forbidden
    aggregate), + 2 when other trees (itself in every ``member_of`` term, no
    ``in_tree``: docs/read-path.md *Semantics*). Every other part of the filters is the
    same for both, and is in the ``WHERE``; ``NULL`` on other providers' rows."""
    shape, values = engine.filter_shape(group, names, "")
    filters = engine.shape_filters(
        shape, engine.Binds(values), rp, with_required=False, root_covers=True, root_exempt=sharing
    )
    own: ColumnElement[bool] = sa.true()
    aggs = engine.ruled(group, engine.ANCHOR)  # forbidden aggregates
    if aggs is not None:
        own = engine.not_in_aggregates(rp.c.root_provider_id, sorted(aggs))
    local = engine.ruled(group, engine.LOCAL) is not None  # in_tree
    member_of = engine.ruled(group, engine.OWN)
    other: ColumnElement[bool] = sa.false() if local else sa.true()
    if member_of is not None and not local:
        other = engine.in_every_aggregate_set(rp.c.id, [sorted(s) for s in member_of])
    value = sa.case((own, 1), else_=0) + sa.case((other, 2), else_=0)
    return filters, [sa.case((rp.c.id.in_(sharing), value)).label("scope")]


def units_stmt(group: RequestGroup, names: engine.Names, sharing_ids: engine.Ids) -> Select:
    """Per host (or sharing provider) and class, how many times ``group``'s amount of the
    class fits, summed over its providers (unsuffixed group); per host, how many times
    all of a granular group's amounts fit one provider, summed over its providers
    (class ``-1``). See the module docstring."""
    rows = _rows(group, names, sharing_ids)
    if not group.is_granular:
        scope = [sa.func.max(rows.c.scope)] if "scope" in rows.c else []
        return sa.select(rows.c.k, rows.c.rc, sa.func.sum(rows.c.n), *scope).group_by(
            rows.c.k, rows.c.rc
        )
    per_rp = (
        sa.select(rows.c.k, sa.func.min(rows.c.n).label("m"))
        .group_by(rows.c.k, rows.c.rp)
        .having(sa.func.count() == len(group.resources))
        .subquery("per_rp")
    )
    return sa.select(per_rp.c.k, sa.literal(-1, sa.Integer), sa.func.sum(per_rp.c.m)).group_by(
        per_rp.c.k
    )


def host_counts_stmt(group: RequestGroup, names: engine.Names) -> Select:
    """Without sharing providers: per host with room, its instances (the smallest over
    classes of :func:`units_stmt`'s sums), uuid and name, by host id::

        SELECT u.k, u.n, root.uuid, root.name FROM (SELECT k, MIN(s) AS n FROM
            (<units_stmt>) GROUP BY k HAVING COUNT(*) = :classes) u
        JOIN resource_providers root ON root.id = u.k WHERE u.n > 0 ORDER BY u.k"""
    per_class = units_stmt(group, names, ()).subquery("per_class")
    k, s = per_class.c[0], per_class.c[2]
    classes = 1 if group.is_granular else len(group.resources)
    u = (
        sa.select(k.label("k"), sa.func.min(s).label("n"))
        .group_by(k)
        .having(sa.func.count() == classes)
        .subquery("u")
    )
    root = resource_providers.alias("root")
    return (
        sa.select(u.c.k, u.c.n, root.c.uuid, root.c.name)
        .select_from(u.join(root, root.c.id == u.c.k))
        .where(u.c.n > 0)
        .order_by(u.c.k)
    )


def hosts_stmt() -> Select:
    """``SELECT id, uuid, name FROM resource_providers WHERE parent_provider_id IS NULL
    ORDER BY id``"""
    rp = resource_providers.alias("rp")
    return (
        sa.select(rp.c.id, rp.c.uuid, rp.c.name)
        .where(rp.c.parent_provider_id.is_(None))
        .order_by(rp.c.id)
    )


def host_labels_stmt(kind: str) -> Select:
    """``(host id, label)`` for ``--group-by``: the host's (root provider's) own
    aggregates (``kind="aggregate"``, by uuid) or traits (``kind="trait"``, by name).

    ``SELECT rpa.resource_provider_id, pa.uuid FROM resource_provider_aggregates rpa
    JOIN placement_aggregates pa ... JOIN resource_providers rp ...
    WHERE rp.parent_provider_id IS NULL``"""
    rp = resource_providers.alias("rp")
    if kind == "aggregate":
        link = resource_provider_aggregates.alias("rpa")
        label = placement_aggregates.alias("pa")
        on = label.c.id == link.c.aggregate_id
        value = label.c.uuid
    else:
        link = resource_provider_traits.alias("rpt")
        label = traits.alias("t")
        on = label.c.id == link.c.trait_id
        value = label.c.name
    return (
        sa.select(link.c.resource_provider_id, value)
        .select_from(link.join(label, on).join(rp, rp.c.id == link.c.resource_provider_id))
        .where(rp.c.parent_provider_id.is_(None))
    )
