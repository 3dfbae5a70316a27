"""Pure statement builders of the provider summaries of an allocation-candidates answer
(step 4 of :mod:`rpquery.read.candidates._sql`): one row per provider of the returned
trees with its resources (written as JSON by the database where its driver is slow,
:func:`summary_resources`) and trait ids, the inventories of the providers whose
resources were not written, the names of the trait ids; or all of it in one statement
for a small answer (:func:`summary_small_stmt`). Run by
:mod:`rpquery.read.candidates._summaries`.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement, FromClause, Select

from rpquery.read import _clauses as clauses
from rpquery.read._clauses import Ids
from rpquery.read._clauses import id_list as _ids
from rpquery.read.candidates._sql import _INV, _RP, _in_trees
from rpquery.store import dialects
from rpquery.store.tables import (
    inventories,
    resource_classes,
    resource_provider_traits,
    resource_providers,
    traits,
)

#: Capacities from here on are not written by the database (see
#: :func:`summary_resources`): a double's integer part is exact below 2**53.
SAFE_CAPACITY = 2**53


#: :func:`summary_resources` writes a capacity when the column's own product
#: ``(total - reserved) * allocation_ratio`` is below this in magnitude: 2**53 less a
#: margin (2**34, a relative 2**-19) wider than the gap between a ratio as stored (a
#: 32-bit ``FLOAT`` on MySQL/MariaDB, within 2**-24 of what was written) and as written,
#: so the capacity as written is below :data:`SAFE_CAPACITY` too, without writing the
#: ratio as text twice per inventory
WRITTEN_BELOW = SAFE_CAPACITY - 2**34


def summary_resources(rp_id: ColumnElement[int], named: int = 0) -> ColumnElement[str]:
    """Provider ``rp_id``'s resources as Placement's JSON, written by the database:
    ``{"VCPU":{"capacity":8,"used":2},...}`` (classes in no particular order), ``{}``
    without inventory, ``NULL`` when a capacity may not be below :data:`SAFE_CAPACITY`
    in magnitude (:data:`WRITTEN_BELOW`; or not a number): the caller reads those
    providers' inventory rows instead (:func:`summary_inventories_stmt`). Capacity is
    ``int((total - reserved) * allocation_ratio)``, truncated toward zero as Python's
    ``int()`` (:class:`~rpquery.store.dialects.trunc_int`).

    ``(SELECT CASE WHEN COUNT(*) = 0 THEN '{}' WHEN MAX(ABS(total - reserved) *
    allocation_ratio) < WRITTEN_BELOW THEN '{' || group_concat(<name> ||
    ':{"capacity":' || trunc(capacity) || ',"used":' || used || '}') || '}' END FROM
    inventories inv LEFT JOIN rpq_provider_usages pu ... WHERE inv.resource_provider_id =
    rp.id)``

    Class names: with ``named``, ``CASE inv.resource_class_id WHEN :summary_rc0 THEN
    :summary_rc_name0 ... ELSE json_quote((SELECT name FROM resource_classes ...)) END``,
    the bound names already quoted as JSON (the caller knows every class's name: no
    join per inventory; a class it does not know is looked up); without,
    ``json_quote(rc.name)`` of ``JOIN resource_classes rc``.
    """
    inv = _SUM_INV
    name, joined, used = _class_names(inv, named)
    cap = clauses.capacity(inv)
    piece = dialects.text_concat(
        name,
        sa.literal_column("""':{"capacity":'"""),
        dialects.trunc_int(cap),
        sa.literal_column("""',"used":'"""),
        used,
        sa.literal_column("'}'"),
    )
    stored = (inv.c.total - inv.c.reserved) * inv.c.allocation_ratio
    written = sa.case(
        (sa.func.count() == 0, sa.literal_column("'{}'")),
        (
            sa.func.max(sa.func.abs(stored)) < sa.literal_column(str(WRITTEN_BELOW)),
            dialects.text_concat(
                sa.literal_column("'{'"), dialects.concat_agg(piece), sa.literal_column("'}'")
            ),
        ),
    )
    return (
        sa.select(written)
        .select_from(joined)
        .where(inv.c.resource_provider_id == rp_id)
        .scalar_subquery()
    )


def _class_names(
    inv: FromClause, named: int
) -> tuple[ColumnElement[str], FromClause, ColumnElement[int]]:
    """The JSON-quoted class name of each inventory row of :func:`summary_resources`,
    the inventories joined with their usage (and their class, without ``named``), and
    the usage column."""
    if not named:
        rc = resource_classes.alias("rc")
        joined, used = clauses.join_usage(inv.join(rc, rc.c.id == inv.c.resource_class_id), inv)
        return dialects.json_quote(rc.c.name), joined, used
    rc_name = resource_classes.alias("rcn")
    other = dialects.json_quote(
        sa.select(rc_name.c.name).where(rc_name.c.id == inv.c.resource_class_id).scalar_subquery()
    )
    whens = [
        (
            sa.bindparam(f"summary_rc{i}", type_=sa.Integer),
            sa.bindparam(f"summary_rc_name{i}", type_=sa.String),
        )
        for i in range(named)
    ]
    joined, used = clauses.join_usage(inv, inv)
    return sa.case(*whens, value=inv.c.resource_class_id, else_=other), joined, used


def summary_trait_ids(rp_id: ColumnElement[int]) -> ColumnElement[str]:
    """Provider ``rp_id``'s trait ids as text, ``"12,7,30"`` (in no particular order),
    ``NULL`` without traits: ``(SELECT group_concat(rpt.trait_id) FROM
    resource_provider_traits rpt WHERE rpt.resource_provider_id = rp.id)``"""
    rpt = _SUM_RPT
    return (
        sa.select(dialects.concat_agg(rpt.c.trait_id))
        .where(rpt.c.resource_provider_id == rp_id)
        .scalar_subquery()
    )


_SUM_INV = inventories.alias("inv")
_SUM_RPT = resource_provider_traits.alias("rpt")


def every_trait_text_stmt() -> Select:
    """Every provider's trait ids (:func:`summary_trait_ids`) as one JSON text, with the
    count of providers that have traits (a text cut short has fewer), for summaries of
    (nearly) the whole cloud on MySQL/MariaDB instead of a correlated subquery per
    provider (:func:`summary_stmt` ``trait_ids=False``):

    ``SELECT COUNT(*), '[' || group_concat('[' || t.rp || ',"' || t.ids || '"]') || ']'
    FROM (SELECT rpt.resource_provider_id AS rp, group_concat(rpt.trait_id) AS ids
    FROM resource_provider_traits rpt GROUP BY rpt.resource_provider_id) AS t``

    One pass over the covering index: MariaDB 12-13 ms for 11k providers at 5,000
    hosts against ~24 for the subqueries of 10.7k (``JSON_ARRAYAGG`` of the same rows:
    ~20)."""
    rpt = _SUM_RPT
    per = (
        sa.select(
            rpt.c.resource_provider_id.label("rp"),
            dialects.concat_agg(rpt.c.trait_id).label("ids"),
        )
        .group_by(rpt.c.resource_provider_id)
        .subquery("t")
    )
    pair = dialects.text_concat(
        sa.literal_column("'['"),
        per.c.rp,
        sa.literal_column("""',"'"""),
        per.c.ids,
        sa.literal_column("""'"]'"""),
    )
    text = dialects.text_concat(
        sa.literal_column("'['"), dialects.concat_agg(pair), sa.literal_column("']'")
    )
    return dialects.long_concat_select(sa.func.count(), text).select_from(per)


def summary_stmt(
    root_ids: Ids | str | None,
    *,
    resources: bool = False,
    named: int = 0,
    trait_ids: bool = True,
    keyed: bool = False,
) -> Select:
    """Every provider of the trees ``root_ids`` (the anchors and the trees of sharing
    providers used by the returned candidates), one row each, with its traits as ids
    (:func:`summary_trait_ids`) and, with ``resources``, its resources as JSON text
    written by the database (:func:`summary_resources`; without, they come from
    :func:`summary_inventories_stmt`):

    ``SELECT rp.id, rp.uuid, rp.name, rp.parent_provider_id, rp.root_provider_id
    [, (<resources>)][, (<trait ids>)] FROM resource_providers rp
    WHERE rp.root_provider_id IN (:roots)``

    Without ``trait_ids``, the caller reads them for every provider at once
    (:func:`every_trait_text_stmt`) or takes them from its cache of trait sets
    (``keyed``: :mod:`~rpquery.read.candidates._trait_cache`). ``keyed`` adds what
    that cache's entries are checked against after ``root_provider_id``:
    ``rp.generation, CAST(rp.created_at AS VARCHAR)`` (:func:`provider_key_columns`).

    One value per provider for its traits instead of two per trait (28k rows at 5,000
    hosts, 401 distinct sets among 11k providers: their names are read once per set,
    :func:`summary_trait_names_stmt`). No ``ORDER BY``: summaries are sorted by uuid in
    Python. Parent and root come back as ids (they are in the same trees, so the caller
    maps them to uuids): no self-joins. ``root_ids`` given as a name binds a list of any
    length (:class:`rpquery.store.dialects.in_id_list`). On MySQL/MariaDB the
    statement lifts ``group_concat_max_len`` for itself
    (:class:`~rpquery.store.dialects.long_concat_select`).
    """
    rp = _RP
    columns: list[ColumnElement[Any]] = [
        rp.c.id,
        rp.c.uuid,
        rp.c.name,
        rp.c.parent_provider_id,
        rp.c.root_provider_id,
    ]
    if keyed:
        columns.extend(provider_key_columns(rp))
    if resources:
        columns.append(summary_resources(rp.c.id, named).label("resources"))
    if trait_ids:
        columns.append(summary_trait_ids(rp.c.id).label("trait_ids"))
    stmt = dialects.long_concat_select(*columns)
    if root_ids is None:  # every provider: the caller keeps those of its trees
        return stmt
    return stmt.where(_in_trees(rp.c.root_provider_id, root_ids))


def provider_key_columns(rp: FromClause) -> list[ColumnElement[Any]]:
    """``rp.generation, CAST(rp.created_at AS VARCHAR)``: with the id and uuid, what
    a provider's trait set is cached under (:mod:`~rpquery.read.candidates._trait_cache`).
    The creation time as text: the same value from every driver, none parsed."""
    return [rp.c.generation, sa.cast(rp.c.created_at, sa.String).label("created")]


def summary_traits_of(provider_ids: Ids | str) -> Select:
    """The trait ids of the providers ``provider_ids`` with what they are cached under
    (the cache's misses, :mod:`~rpquery.read.candidates._trait_cache`):

    ``SELECT rp.id, rp.uuid, rp.generation, CAST(rp.created_at AS VARCHAR),
    (<trait ids>) FROM resource_providers rp WHERE rp.id IN (:ids)``"""
    rp = _RP
    return dialects.long_concat_select(
        rp.c.id,
        rp.c.uuid,
        *provider_key_columns(rp),
        summary_trait_ids(rp.c.id).label("trait_ids"),
    ).where(_in_trees(rp.c.id, provider_ids))


def summary_inventories_stmt(root_ids: Ids | str) -> Select:
    """Every inventory of the trees ``root_ids`` with its capacity and stored usage,
    for :func:`summary_stmt` without ``resources`` (or, given provider ids instead
    with :func:`summary_inventories_of`, for the providers whose resources the database
    did not write):

    ``SELECT inv.resource_provider_id, inv.resource_class_id, capacity,
    COALESCE(pu.used, 0) AS used FROM resource_providers rp JOIN inventories inv ON ...
    LEFT JOIN rpq_provider_usages pu ON ... WHERE rp.root_provider_id IN (:roots)``

    Four values per inventory (providers' own columns come with :func:`summary_stmt`);
    classes as ids, named in Python (every class's name comes with the request's
    names); usage is the stored row of each inventory (:func:`clauses.join_usage`), so
    the cost follows the trees returned, never the cloud or its allocations.
    """
    rp, inv = _RP, _INV
    joined, used = clauses.join_usage(inv.join(rp, rp.c.id == inv.c.resource_provider_id), inv)
    return (
        _inventory_columns(inv, used)
        .select_from(joined)
        .where(_in_trees(rp.c.root_provider_id, root_ids))
    )


def summary_inventories_of(provider_ids: Ids | str) -> Select:
    """:func:`summary_inventories_stmt` of the providers ``provider_ids``:
    ``... FROM inventories inv LEFT JOIN rpq_provider_usages pu ... WHERE
    inv.resource_provider_id IN (:ids)``"""
    inv = _INV
    joined, used = clauses.join_usage(inv, inv)
    return (
        _inventory_columns(inv, used)
        .select_from(joined)
        .where(_in_trees(inv.c.resource_provider_id, provider_ids))
    )


def _inventory_columns(inv: FromClause, used: ColumnElement[int]) -> Select:
    return sa.select(
        inv.c.resource_provider_id,
        inv.c.resource_class_id,
        clauses.capacity(inv).label("capacity"),
        used.label("used"),
    )


def summary_trait_names_stmt(trait_ids: Ids) -> Select:
    """``SELECT t.id, t.name FROM traits t WHERE t.id IN (:ids)``: the names of the
    trait ids :func:`summary_stmt` returned (a few hundred at most)."""
    t = traits.alias("t")
    return sa.select(t.c.id, t.c.name).where(t.c.id.in_(_ids(trait_ids)))


def summary_small_stmt(
    root_ids: str, *, resources: bool = False, named: int = 0, inventories: bool = False
) -> sa.CompoundSelect:
    """The summaries of a small answer in one statement (one round trip): the providers
    (:func:`summary_stmt`), with ``inventories`` their inventory rows
    (:func:`summary_inventories_stmt`), and the names of their traits, ``UNION ALL``
    in one row layout, ``(id, uuid, name, parent, root[, resources], trait ids[,
    capacity])``:

    - a provider: as :func:`summary_stmt` (``uuid`` is never ``NULL``), ``NULL``
      capacity;
    - an inventory: ``provider, NULL, NULL, class, used, ..., NULL, capacity``;
    - a trait: ``id, NULL, name, NULL, NULL, ...`` of every trait some provider of the
      trees has (``t.id IN (SELECT rpt.trait_id FROM resource_provider_traits rpt JOIN
      resource_providers ... WHERE root_provider_id IN (:roots))``).

    Each branch reads only the answer's trees, so for a few trees this costs their
    rows, not the round trips of three statements (:func:`summary_trait_names_stmt`
    reads the names of the ids the providers' rows hold, so it must come after them);
    a big answer keeps those (the trait branch reads every trait row of its trees a
    second time)."""
    width = 5 + resources + 1
    providers = summary_stmt(root_ids, resources=resources, named=named)
    null = sa.null()
    branches: list[Select] = [providers]
    if inventories:
        providers = providers.add_columns(sa.cast(null, sa.Float).label("capacity"))
        rp, inv = _RP, _INV
        joined, used = clauses.join_usage(inv.join(rp, rp.c.id == inv.c.resource_provider_id), inv)
        middle = [null] * (width - 5)
        rows = sa.select(
            inv.c.resource_provider_id,
            null,
            null,
            inv.c.resource_class_id,
            used,
            *middle,
            clauses.capacity(inv),
        ).select_from(joined)
        branches = [providers, rows.where(_in_trees(rp.c.root_provider_id, root_ids))]
    t, rpt, trp = traits.alias("t"), resource_provider_traits.alias("srpt"), _RP_TRAITS
    held = (
        sa.select(rpt.c.trait_id)
        .select_from(rpt.join(trp, trp.c.id == rpt.c.resource_provider_id))
        .where(_in_trees(trp.c.root_provider_id, root_ids))
    )
    pads = [null] * (width - 3 + inventories)
    branches.append(sa.select(t.c.id, null, t.c.name, *pads).where(t.c.id.in_(held)))
    return sa.union_all(*branches)


_RP_TRAITS = resource_providers.alias("trp")
