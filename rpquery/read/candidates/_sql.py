"""Pure statement builders of the allocation-candidate read path.

Every function returns a Core ``Select`` and takes no connection, so
``tests/test_golden_sql.py`` compiles them for each dialect. The executor in
:mod:`rpquery.read.candidates` runs them in this order (a fixed number of round trips,
whatever the size of the cloud):

1. :func:`names_sharing_of` — resource class and trait ids of the request and the
   (sharing provider, tree it shares with) pairs (one ``UNION ALL``; :func:`sharing_of`
   alone for the insight readers);
2. :func:`roots_stmt` — anchor roots: ``root_required``, policies' ``where``, and (when
   ``limit`` can be pushed down) ordered and limited, a batch at a time (in id order
   after the last batch's root; in random order with a per-class "could this tree
   serve it" test, :func:`could_serve_of`);
3. :func:`group_rows_stmt` — per request group, one statement with capacity, usage,
   traits and aggregates of every provider in play; :func:`resourceless_stmt` for
   resourceless groups; :func:`tree_shape_stmt` when ``same_subtree`` is asked;
4. the provider summaries of the returned trees: :mod:`._summary_sql`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement, FromClause, Select
from sqlalchemy.sql.elements import BindParameter

from rpquery.read import _clauses as clauses
from rpquery.read._clauses import Binds, Ids, Uuids
from rpquery.read._clauses import id_list as _ids
from rpquery.read._filters import (
    TREE_WIDE,
    FilterShape,
    filter_shape,
    provider_filters,
    shape_filters,
)
from rpquery.read._names import SHARING_TRAIT as SHARING_TRAIT  # re-exported
from rpquery.read._names import Names
from rpquery.read.request import RequestGroup
from rpquery.store import dialects
from rpquery.store.tables import (
    inventories,
    resource_classes,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
    traits,
)

# Shared aliases (see rpquery.read._clauses): one column collection each, not one per
# statement built.
_RP = resource_providers.alias("rp")
_INV = inventories.alias("inv")
_NP = resource_providers.alias("np")
_NI = inventories.alias("ni")
_ST = resource_provider_traits.alias("st")
_SINV = inventories.alias("sinv")
_SAGG = resource_provider_aggregates.alias("sagg")
_TAGG = resource_provider_aggregates.alias("tagg")
_TP = resource_providers.alias("tp")
_SHT = traits.alias("sht")
_SRC = resource_classes.alias("src")
#: The anchor roots' alias of :func:`roots_stmt` (policies' clauses are built on it)
ROOT = resource_providers.alias("root")


@dataclass(frozen=True)
class RootRange:
    """Every tree whose root id is in ``[lo, hi]`` (values or bind parameters): a batch
    of consecutive roots in id order, ``rp.root_provider_id BETWEEN lo AND hi`` (one
    index range; no list of ids to send, parse and plan)."""

    lo: int | BindParameter[Any]
    hi: int | BindParameter[Any]


#: Roots given as ids, an expanding bind parameter, a subquery or a range of ids
#: (``None``: every root).
RootScope = Sequence[int] | BindParameter[Any] | Select | RootRange | None


# ------------------------------------------------------------------ per-provider filters


def group_filters(group: RequestGroup, names: Names, rp: FromClause) -> list[ColumnElement[bool]]:
    """:func:`provider_filters` as :func:`group_rows_stmt` applies them to ``group``:
    the one definition the rejection reasons (:mod:`rpquery.insight._why_sql`) and headroom
    (:mod:`rpquery.insight._headroom_sql`) reuse, so they filter exactly as candidates do."""
    return provider_filters(group, names, rp, with_required=group.is_granular)


@dataclass(frozen=True)
class GroupShape:
    """What a group's statements depend on besides its values: the cache key of
    :func:`group_rows_of` and :func:`could_serve_of`. The values (class ids, amounts,
    the filters' traits and aggregates) are named ``prefix`` + ``rc0``, ``amount0``,
    ``rcs``... (:func:`group_shape`). ``room``: whether :func:`group_rows_of` selects
    each row's capacity, usage and ``max_unit``: the search needs them only for a class
    another group of the request also asks for (otherwise the statement's own check
    that the amount fits is all there is to know). ``grouped`` (only without room
    columns and any-of flags): one row per provider, ``GROUP BY`` provider and root,
    with ``classes``, the sum of ``2**i`` over the group's classes ``rc<i>`` it can
    serve, instead of one row per (provider, class). ``summary`` (only without room
    columns, any-of flags or grouping): every inventory row of the scope, each with its
    capacity, its usage and ``fits``, 1 when the row is one the group's statement would
    return (its class asked for, the amount fits, the filters pass), else 0: the group's
    rows and the provider summaries' inventory rows in one pass over the inventories
    (a whole-cloud answer, where the summarised trees are nearly all)."""

    granular: bool
    resources: int
    filters: FilterShape
    room: bool = True
    grouped: bool = False
    summary: bool = False

    def name(self, field: str, i: int | None = None) -> str:
        return self.filters.name(field, i)


def group_shape(
    group: RequestGroup,
    names: Names,
    prefix: str = "g_",
    resources: Sequence[tuple[str, int]] | None = None,
) -> tuple[GroupShape, dict[str, Any]]:
    """The shape of ``group`` and its values (``resources``: only these, e.g. the one
    class a :func:`could_serve` test is about; default: the group's, by name).

    >>> from rpquery.read.request import RequestGroup
    >>> g = RequestGroup(resources={"VCPU": 2, "MEMORY_MB": 512})
    >>> shape, values = group_shape(g, Names(rc_ids={"VCPU": 0, "MEMORY_MB": 1}))
    >>> shape.resources, values
    (2, {'g_rc0': 1, 'g_amount0': 512, 'g_rc1': 0, 'g_amount1': 2, 'g_rcs': [0, 1]})
    """
    filters, values = filter_shape(group, names, prefix)
    pairs = sorted(group.resources.items()) if resources is None else list(resources)
    shape = GroupShape(group.is_granular, len(pairs), filters)
    for i, (rc, amount) in enumerate(pairs):
        values[shape.name("rc", i)] = names.rc_ids[rc]
        values[shape.name("amount", i)] = amount
    values[shape.name("rcs")] = sorted(names.rc_ids[rc] for rc, _ in pairs)
    return shape, values


def _fits_one_of(
    shape: GroupShape, binds: Binds, inv: FromClause, used: ColumnElement[int]
) -> ColumnElement[bool]:
    return sa.or_(
        *(
            sa.and_(
                inv.c.resource_class_id == binds.value(shape.name("rc", i)),
                clauses.capacity_fits(inv, binds.value(shape.name("amount", i)), used),
            )
            for i in range(shape.resources)
        )
    )


def _scope(rp: FromClause, roots: RootScope, sharing_ids: Ids) -> list[ColumnElement[bool]]:
    if roots is None:
        return []
    if isinstance(roots, (Select, RootRange, BindParameter)) and (
        isinstance(sharing_ids, BindParameter) or sharing_ids == ()
    ):
        return list(_bound_scope(rp, roots, sharing_ids))
    return _scope_clauses(rp, roots, sharing_ids)


@functools.lru_cache(maxsize=1024)
def _bound_scope(
    rp: FromClause, roots: Select | RootRange | BindParameter[Any], sharing_ids: Ids
) -> tuple[ColumnElement[bool], ...]:
    """:func:`_scope` of a bound scope (a batch's roots or range, the roots statement),
    built once per scope: the statements of every shape share its clause object, which
    :mod:`rpquery.store._texts` then finds compiled by identity."""
    return tuple(_scope_clauses(rp, roots, sharing_ids))


def _scope_clauses(
    rp: FromClause, roots: RootScope, sharing_ids: Ids
) -> list[ColumnElement[bool]]:
    assert roots is not None
    if isinstance(roots, RootRange):
        local = rp.c.root_provider_id.between(roots.lo, roots.hi)
    else:
        local = rp.c.root_provider_id.in_(_ids(roots) if not isinstance(roots, Select) else roots)
    if not isinstance(sharing_ids, BindParameter) and not sharing_ids:
        return [local]
    return [sa.or_(local, rp.c.id.in_(_ids(sharing_ids)))]


# ------------------------------------------------------------------ statements


def group_rows_stmt(
    group: RequestGroup,
    names: Names,
    roots: RootScope = None,
    sharing_ids: Ids = (),
    root_exempt: Ids | None = None,
) -> Select:
    """:func:`group_rows_of` ``group``, its values in the statement."""
    shape, values = group_shape(group, names)
    return group_rows_of(shape, Binds(values), roots, sharing_ids, root_exempt)


def group_rows_of(
    shape: GroupShape,
    binds: Binds,
    roots: RootScope = None,
    sharing_ids: Ids = (),
    root_exempt: Ids | None = None,
) -> Select:
    """One row per (provider, requested class) that can serve ``group``'s amount (with
    ``shape.summary``, every inventory row of the scope with its capacity, usage and
    whether it is such a row: see :class:`GroupShape`).

    ``SELECT rp.id, rp.root_provider_id, inv.resource_class_id [, capacity, used,
    inv.max_unit] [, EXISTS(trait in set_i) AS req_i ...]
    FROM inventories inv JOIN resource_providers rp ON rp.id = inv.resource_provider_id
    LEFT JOIN rpq_provider_usages pu ON (provider, class)
    WHERE inv.resource_class_id IN (:rcs) AND (rc = :rc1 AND <fits :amt1> OR ...)
    AND NOT EXISTS (<forbidden trait>) AND EXISTS (<member_of>) ...
    AND (rp.root_provider_id IN (:roots) OR rp.id IN (:sharing))``

    The room columns (capacity, used, ``max_unit``) only with ``shape.room``.
    Usage is one stored row per inventory (:func:`clauses.join_usage`): the planner
    looks it up by primary key for a batch of trees and hash- or merge-joins it for the
    whole cloud; ``allocations`` is never aggregated.

    ``root_exempt`` (the unsuffixed group's forbidden aggregates, sharing providers in
    play): providers kept when only their root is in a forbidden aggregate, ``NOT
    EXISTS (<root in it> AND rp.id NOT IN (:sharing))``. Such a sharing provider still
    serves other trees whose roots are not in it (Placement judges it there by its own
    aggregates and the anchor's); the executor keeps it from its own tree.
    """
    whole = roots is None
    if binds.values is None and (root_exempt is None or isinstance(root_exempt, BindParameter)):
        exempt = None if root_exempt is None else root_exempt.key
        columns, where = _group_parts(shape, exempt, whole)
    else:
        columns, where = _parts(shape, binds, root_exempt, whole)
    stmt = (
        sa.select(*columns)
        .select_from(_GROUP_FROM)
        .where(*where, *_scope(_RP, roots, sharing_ids))
    )
    return stmt.group_by(_RP.c.id, _RP.c.root_provider_id) if shape.grouped else stmt


_GROUP_FROM, _USED = clauses.join_usage(
    _INV.join(_RP, _RP.c.id == _INV.c.resource_provider_id), _INV
)
_Parts = tuple[tuple[ColumnElement[Any], ...], tuple[ColumnElement[bool], ...]]


def _parts(shape: GroupShape, binds: Binds, root_exempt: Ids | None, whole: bool) -> _Parts:
    """The columns and the ``WHERE`` clauses (but the scope) of :func:`group_rows_of`.
    With bind parameters (``Binds()``), each column and clause is built once per
    prefix and count (:func:`_bound`) and shared by the shapes that have it.

    ``whole`` (no batch): only then does a ``summary`` shape test its filters in their
    form for whole tables (:func:`rpquery.read._clauses.forbidden_once`): a trait's
    holders grow with the cloud, a batch's rows do not."""
    inv, rp = _INV, _RP
    bound = binds.values is None
    prefix = shape.filters.prefix
    flags = []
    if not shape.granular:  # the tree-wide filter's sets: one any-of flag column each
        flags = [
            _bound(prefix, "flag", i) if bound else _flag(binds.many(name), i)
            for i, name in enumerate(TREE_WIDE.names(shape.filters))
        ]
    room = _bound("", "room", 0) if bound else _room()
    columns: tuple[ColumnElement[Any], ...] = (
        rp.c.id,
        rp.c.root_provider_id,
        inv.c.resource_class_id,
        *(room if shape.room else ()),
        *flags,
    )
    if shape.grouped:
        assert not shape.room and not flags, shape
        classes = _bound(prefix, "classes", shape.resources) if bound else _classes(shape, binds)
        columns = (rp.c.id, rp.c.root_provider_id, classes)
    filters = shape_filters(
        shape.filters,
        binds,
        rp,
        with_required=shape.granular,
        root_covers=not shape.granular,
        root_exempt=root_exempt,
        # every inventory row: e.g. the forbidden traits' holders read once, not per row
        whole_tables=shape.summary and whole,
    )
    where: tuple[ColumnElement[bool], ...] = (
        _bound(prefix, "rcs", 0) if bound else _in_rcs(binds.many(shape.name("rcs"))),
        _bound(prefix, "fits", shape.resources)
        if bound
        else _fits_one_of(shape, binds, inv, _USED),
        *filters,
    )
    if shape.summary:
        assert not shape.room and not shape.grouped and not flags, shape
        # CASE, not the condition itself: 1 or 0 on every backend, never NULL
        fits = sa.type_coerce(
            sa.case((sa.and_(*where), sa.literal_column("1")), else_=sa.literal_column("0")),
            sa.Integer,
        ).label("fits")
        columns = (*columns, clauses.capacity(inv).label("capacity"), _USED.label("used"), fits)
        where = ()
    return columns, where


def _flag(trait_ids: Any, i: int) -> ColumnElement[bool]:
    return clauses.has_any_trait(_RP.c.id, trait_ids).label(f"req_{i}")


def _room() -> tuple[ColumnElement[Any], ...]:
    inv = _INV
    return (clauses.capacity(inv).label("capacity"), _USED.label("used"), inv.c.max_unit)


def _classes(shape: GroupShape, binds: Binds) -> ColumnElement[int]:
    bits: list[tuple[ColumnElement[bool], Any]] = [
        (
            _INV.c.resource_class_id == binds.value(shape.name("rc", i)),
            sa.literal_column(str(1 << i)),
        )
        for i in range(shape.resources)
    ]
    mask = sa.case(*bits, else_=sa.literal_column("0"))  # bits of the shape, not values
    return sa.cast(sa.func.sum(mask), sa.Integer).label("classes")


def _in_rcs(rc_ids: Any) -> ColumnElement[bool]:
    return _INV.c.resource_class_id.in_(rc_ids)


@functools.lru_cache(maxsize=256)
def _bound(prefix: str, kind: str, n: int) -> Any:
    """A column or clause of :func:`_parts` with bind parameters named ``prefix`` +
    field: the ``n``th trait flag, the room columns, the classes mask of ``n`` classes,
    the class list, the capacity test of ``n`` classes."""
    binds = Binds()
    like = GroupShape(False, n, FilterShape.only(prefix))
    if kind == "flag":
        return _flag(binds.many(like.name(TREE_WIDE.field, n)), n)
    if kind == "room":
        return _room()
    if kind == "classes":
        return _classes(like, binds)
    if kind == "rcs":
        return _in_rcs(binds.many(like.name("rcs")))
    assert kind == "fits", kind
    return _fits_one_of(like, binds, _INV, _USED)


@functools.lru_cache(maxsize=512)
def _group_parts(shape: GroupShape, root_exempt: str | None, whole: bool) -> _Parts:
    """:func:`_parts` with bind parameters, once per shape and ``whole`` (``root_exempt``:
    the name of the exempt providers' parameter): a group's statement for another scope
    (a batch's roots, the roots statement) reuses them."""
    exempt: BindParameter[Any] | None = None
    if root_exempt is not None:
        exempt = sa.bindparam(root_exempt, expanding=True)
    return _parts(shape, Binds(), exempt, whole)


def resourceless_stmt(
    group: RequestGroup, names: Names, roots: RootScope = None, sharing_ids: Ids = ()
) -> Select:
    """:func:`resourceless_of` ``group``, its values in the statement."""
    shape, values = filter_shape(group, names, "g_")
    return resourceless_of(shape, Binds(values), roots, sharing_ids)


def resourceless_of(
    shape: FilterShape, binds: Binds, roots: RootScope = None, sharing_ids: Ids = ()
) -> Select:
    """Providers that can stand for a resourceless granular group (traits and aggregates
    only), of the anchor trees or sharing with them (as any suffixed group):
    ``SELECT rp.id, rp.root_provider_id FROM resource_providers rp WHERE <filters>
    AND (rp.root_provider_id IN (:roots) OR rp.id IN (:sharing))``"""
    rp = _RP
    return (
        sa.select(rp.c.id, rp.c.root_provider_id)
        .where(
            *shape_filters(shape, binds, rp, with_required=True, root_covers=False),
            *_scope(rp, roots, sharing_ids),
        )
        .order_by(rp.c.id)
    )


def roots_in_aggregates_stmt(agg_uuids: Uuids) -> Select:
    """Roots that are members of one of the aggregates (the anchors a forbidden
    aggregate of the unsuffixed group rules out for sharing providers too).

    ``SELECT rpa.resource_provider_id FROM resource_provider_aggregates rpa
    JOIN placement_aggregates pa ON pa.id = rpa.aggregate_id
    JOIN resource_providers rp ON rp.id = rpa.resource_provider_id
    WHERE pa.uuid IN (:aggs) AND rp.parent_provider_id IS NULL``
    """
    from rpquery.store.tables import placement_aggregates
    from rpquery.store.tables import resource_provider_aggregates as rpa_t

    rpa = rpa_t.alias("rpa")
    pa = placement_aggregates.alias("pa")
    rp = resource_providers.alias("rp")
    return (
        sa.select(rpa.c.resource_provider_id)
        .select_from(
            rpa.join(pa, pa.c.id == rpa.c.aggregate_id).join(
                rp, rp.c.id == rpa.c.resource_provider_id
            )
        )
        .where(pa.c.uuid.in_(_ids(agg_uuids)), rp.c.parent_provider_id.is_(None))
        .distinct()
    )


def local_sharing_stmt(member_of: Sequence[Uuids], sharing_ids: Ids) -> Select:
    """Sharing providers that are children not themselves in every ``member_of`` term:
    in the unsuffixed group they pass through their root's aggregates, and then serve
    their own tree only (Placement offers a sharing provider to other trees only when
    it is itself in the requested aggregates).

    ``SELECT rp.id FROM resource_providers rp WHERE rp.id IN (:sharing)
    AND rp.parent_provider_id IS NOT NULL AND NOT (<own aggregates meet every term>)``
    """
    rp = _RP
    return sa.select(rp.c.id).where(
        rp.c.id.in_(_ids(sharing_ids)),
        rp.c.parent_provider_id.is_not(None),
        sa.not_(clauses.in_every_aggregate_set(rp.c.id, member_of)),
    )


def sharing_stmt(names: Names, rc_ids: Sequence[int], *, any_class: bool = False) -> Select:
    """:func:`sharing_of` with the values in the statement."""
    trait = names.sharing_trait if names.sharing_trait is not None else -1
    binds = Binds({"sharing_trait": trait, "sharing_rcs": sorted(rc_ids)})
    return sharing_of(binds, any_class=any_class)


def sharing_of(binds: Binds, *, any_class: bool = False) -> Select:
    """(sharing provider, root of a tree it shares with, requested class it has) rows.

    ``SELECT DISTINCT st.resource_provider_id, tp.root_provider_id, sinv.resource_class_id
    FROM resource_provider_traits st
    JOIN inventories sinv ON sinv.resource_provider_id = st.resource_provider_id
    JOIN resource_provider_aggregates sagg ON sagg.resource_provider_id = st.resource_provider_id
    JOIN resource_provider_aggregates tagg ON tagg.aggregate_id = sagg.aggregate_id
    JOIN resource_providers tp ON tp.id = tagg.resource_provider_id
    WHERE st.trait_id = :MISC_SHARES_VIA_AGGREGATE AND sinv.resource_class_id IN (:rcs)``

    With ``any_class`` (a request with resourceless groups, which a sharing provider may
    stand for whatever it holds) the inventory join is ``LEFT OUTER`` with the class
    test in its ``ON``: every sharing provider comes back, the class ``NULL`` when it has
    none of the requested ones.

    Run first and unscoped: it touches only sharing providers (few in any cloud), and
    tells :func:`could_serve` which classes trees need not hold themselves.
    """
    columns = (
        _ST.c.resource_provider_id.label("sharing_id"),
        _TP.c.root_provider_id,
        _SINV.c.resource_class_id,
    )
    has_class = _SINV.c.resource_class_id.in_(binds.many("sharing_rcs"))
    return _sharing(columns, binds.value("sharing_trait"), has_class, any_class)


def batch_sharing_of(binds: Binds) -> Select:
    """:func:`sharing_of`'s rows for the trees of a batch of roots only:
    ``... AND tp.root_provider_id IN (:sharing_roots)`` (a ``limit``'s batch needs the
    pairs of its own trees, not the cloud's: 6 of 1,009 at 5,000 hosts for the first
    batch of a ``limit=10``, 23 roots).

    The aggregates are matched as ``tagg.aggregate_id + 0 = sagg.aggregate_id + 0``,
    which no index answers: a sharing aggregate has hundreds of members (~500 in the
    bench cloud), and SQLite otherwise walked from the batch's providers to every member
    of their aggregates (1.9 ms at 5,000 hosts, more than reading every pair); so it
    pairs the few sharing providers' aggregates with the batch's providers' own
    (0.13-0.25 ms at 1,000 and 5,000 hosts)."""
    columns = (
        _ST.c.resource_provider_id.label("sharing_id"),
        _TP.c.root_provider_id,
        _SINV.c.resource_class_id,
    )
    has_class = _SINV.c.resource_class_id.in_(binds.many("sharing_rcs"))
    in_batch = _TP.c.root_provider_id.in_(binds.many("sharing_roots"))
    trait = binds.value("sharing_trait")
    return _sharing(columns, trait, has_class, False, by_member=True).where(in_batch)


def _sharing(
    columns: Sequence[ColumnElement[Any]],
    trait: Any,
    has_class: ColumnElement[bool],
    any_class: bool,
    *,
    by_member: bool = False,
) -> Select:
    """:func:`sharing_of`'s ``SELECT DISTINCT <columns> FROM ... WHERE ...`` with the
    sharing trait's id (a value, a parameter or a subquery) and the test of a requested
    class on ``sinv``; ``by_member``: the aggregates compared without their index
    (:func:`batch_sharing_of`)."""
    st, sinv, sagg, tagg, tp = _ST, _SINV, _SAGG, _TAGG, _TP
    zero = sa.literal_column("0", sa.Integer)
    same_agg = (
        tagg.c.aggregate_id + zero == sagg.c.aggregate_id + zero
        if by_member
        else tagg.c.aggregate_id == sagg.c.aggregate_id
    )
    on_inv = sinv.c.resource_provider_id == st.c.resource_provider_id
    with_inv = (
        st.outerjoin(sinv, sa.and_(on_inv, has_class)) if any_class else st.join(sinv, on_inv)
    )
    return (
        sa.select(*columns)
        .distinct()
        .select_from(
            with_inv.join(sagg, sagg.c.resource_provider_id == st.c.resource_provider_id)
            .join(tagg, same_agg)
            .join(tp, tp.c.id == tagg.c.resource_provider_id)
        )
        .where(st.c.trait_id == trait, *(() if any_class else (has_class,)))
    )


def names_sharing_of(
    *,
    any_class: bool = False,
    settings: ColumnElement[str] | None = None,
    fenced: bool = False,
    classes_only: bool = False,
) -> sa.CompoundSelect:
    """The request's names and its sharing pairs in one statement (one round trip): rows
    ``(name, id, root, rc)``, ``UNION ALL`` of

    - ``NULL, sharing provider, root of a tree it shares with, requested class it has``
      (:func:`sharing_of`, the trait and classes looked up by name: ``st.trait_id =
      (SELECT id FROM traits WHERE name = :sharing_trait_name)``, ``(SELECT name FROM
      resource_classes WHERE id = sinv.resource_class_id) IN (:sharing_rc_names)``);
    - ``name, id, NULL, NULL`` of every resource class (summaries name every
      inventory's);
    - ``name, id, 0, NULL`` of the traits named ``:trait_names`` (``0``: a trait);
    - with ``settings`` (PostgreSQL: ``set_config(...)``, the read's session settings,
      :func:`rpquery.store.dialects.read_settings`), ``SELECT NULL, ... WHERE
      <settings> IS NULL``: no row, and no round trip of its own (the settings hold for
      the statements after this one);
    - the roots' count (:func:`_roots_count`);

    ``classes_only`` (a ``limit``'s walk, which reads each batch's pairs with its roots,
    :func:`batch_sharing_of`): instead of the pairs, ``NULL, NULL, NULL, class`` of each
    requested class some sharing provider in an aggregate has (the classes of the pairs,
    without reading them), never with ``any_class``.

    No kind column: a sharing pair costs the driver one ``NULL`` more than
    :func:`sharing_of`'s row (a cloud may have thousands of pairs).

    ``fenced`` (PostgreSQL: :attr:`~rpquery.store.dialects._base.Backend.fences_sharing`):
    the sharing providers and their classes are a subquery with ``OFFSET 0``, which the
    planner plans apart rather than searching one five-relation join: planning 1.39 ->
    0.82 ms at 100 hosts, 1.9 -> 1.1 ms at 5,000 (load ~7-12, execution unchanged; the
    statement runs with every request).
    """
    null, rc, t, row = sa.null(), resource_classes, traits, _names_row
    # the sharing rows first: their integer columns type the NULLs of the others
    # (PostgreSQL types a UNION pairwise, two NULLs as text)
    branches = [
        _sharing_classes() if classes_only else _names_sharing(any_class, fenced),
        sa.select(*row(rc.c.name, rc.c.id, null, null)),
        sa.select(*row(t.c.name, t.c.id, sa.literal_column("0"), null)).where(
            dialects.in_name_list(t.c.name, "trait_names")
        ),
    ]
    branches.append(_roots_count())
    if settings is not None:
        branches.append(sa.select(*row(null, null, null, null)).where(settings.is_(None)))
    return sa.union_all(*branches)


def _roots_count() -> Select:
    """The roots' count branch of :func:`names_sharing_of`: ``NULL, <how many roots>,
    NULL, NULL`` (the only row with neither a name nor a root) when ``:count_roots`` is
    ``1`` (else ``0``, and the planners skip the scan: a constant false condition).
    It sizes a ``limit``'s batches (:class:`~rpquery.read.candidates._batches.Batches`),
    counted when the process has no recent count of this database's roots; one
    statement either way (no second shape to compile)."""
    rp, null = resource_providers, sa.null()
    counted = sa.and_(
        rp.c.parent_provider_id.is_(None), sa.bindparam("count_roots", type_=sa.Integer) == 1
    )
    count = sa.select(*_names_row(null, sa.func.count(), null, null)).select_from(rp)
    return count.where(counted)


_NAMES_COLUMNS = ("name", "id", "root", "rc")


def _names_row(*columns: ColumnElement[Any]) -> tuple[ColumnElement[Any], ...]:
    """``columns`` labelled as the rows of :func:`names_sharing_of`."""
    return tuple(c.label(n) for c, n in zip(columns, _NAMES_COLUMNS, strict=True))


def _by_name() -> tuple[ColumnElement[Any], ColumnElement[bool]]:
    """The sharing trait's id and the test of a requested class on ``sinv``, both
    looked up by name."""
    trait = (
        sa.select(_SHT.c.id)
        .where(_SHT.c.name == sa.bindparam("sharing_trait_name", type_=sa.String))
        .scalar_subquery()
    )
    # the class's name per inventory row (a sharing provider has a few), not a join:
    # one relation fewer for PostgreSQL to plan (0.75 -> 0.5 ms at 100 hosts)
    rc_name = sa.select(_SRC.c.name).where(_SRC.c.id == _SINV.c.resource_class_id)
    return trait, dialects.in_name_list(rc_name.scalar_subquery(), "sharing_rc_names")


def _sharing_classes() -> Select:
    """The ``classes_only`` branch of :func:`names_sharing_of`: ``SELECT DISTINCT NULL,
    NULL, NULL, sinv.resource_class_id FROM resource_provider_traits st JOIN inventories
    sinv ... JOIN resource_provider_aggregates sagg ... WHERE <sharing trait> AND
    <requested class>`` (a sharing provider in an aggregate shares with its own tree at
    least: these are the classes of :func:`_names_sharing`'s rows)."""
    trait, has_class = _by_name()
    st, sinv, sagg = _ST, _SINV, _SAGG
    no_id = sa.cast(sa.null(), sa.Integer)  # typed: the other branches' ids and roots
    return (
        sa.select(*_names_row(sa.null(), no_id, no_id, sinv.c.resource_class_id))
        .distinct()
        .select_from(
            st.join(sinv, sinv.c.resource_provider_id == st.c.resource_provider_id).join(
                sagg, sagg.c.resource_provider_id == st.c.resource_provider_id
            )
        )
        .where(st.c.trait_id == trait, has_class)
    )


def _names_sharing(any_class: bool, fenced: bool) -> Select:
    """The sharing pairs' branch of :func:`names_sharing_of`, the sharing trait and the
    requested classes looked up by name."""
    trait, has_class = _by_name()
    if fenced:
        return _fenced_sharing(_names_row, trait, has_class, any_class)
    shared = _names_row(
        sa.null(), _ST.c.resource_provider_id, _TP.c.root_provider_id, _SINV.c.resource_class_id
    )
    return _sharing(shared, trait, has_class, any_class)


def _fenced_sharing(
    row: Any, trait: Any, has_class: ColumnElement[bool], any_class: bool
) -> Select:
    """:func:`_sharing`'s rows, the sharing providers and their requested classes read
    in a subquery the planner keeps apart (``OFFSET 0``):
    ``SELECT DISTINCT NULL, s.id, tp.root_provider_id, s.rc FROM (SELECT
    st.resource_provider_id AS id, sinv.resource_class_id AS rc FROM ... OFFSET 0) AS s
    JOIN resource_provider_aggregates sagg ... JOIN resource_providers tp ...``"""
    st, sinv, sagg, tagg, tp = _ST, _SINV, _SAGG, _TAGG, _TP
    on_inv = sinv.c.resource_provider_id == st.c.resource_provider_id
    with_inv = (
        st.outerjoin(sinv, sa.and_(on_inv, has_class)) if any_class else st.join(sinv, on_inv)
    )
    own = (
        sa.select(st.c.resource_provider_id.label("id"), sinv.c.resource_class_id.label("rc"))
        .select_from(with_inv)
        .where(st.c.trait_id == trait, *(() if any_class else (has_class,)))
        .offset(sa.literal_column("0", sa.Integer))
        .subquery("s")
    )
    return (
        sa.select(*row(sa.null(), own.c.id, tp.c.root_provider_id, own.c.rc))
        .distinct()
        .select_from(
            own.join(sagg, sagg.c.resource_provider_id == own.c.id)
            .join(tagg, tagg.c.aggregate_id == sagg.c.aggregate_id)
            .join(tp, tp.c.id == tagg.c.resource_provider_id)
        )
    )


def _per_row(clause: ColumnElement[bool]) -> ColumnElement[bool]:
    """``(1 = 0 OR <clause>)``: the same truth value, but no planner turns a test under
    an ``OR`` into a semi-join, so a root's *could serve* tests stay per-row filters run
    in root-id order that stop at the ``LIMIT``. PostgreSQL otherwise misestimated four
    such semi-joins as one row and joined all 1,700 trees of a physnet before sorting
    (84 ms at 5,000 hosts); MariaDB materialised them for all roots (120 ms → 8 ms);
    SQLite runs them per row anyway. The correlation is a ``BETWEEN`` so PostgreSQL
    cannot fall back to a hashed subplan computed for every tree either.
    """
    return sa.or_(sa.literal_column("1") == sa.literal_column("0"), clause)


def could_serve(
    group: RequestGroup, rc: str, amount: int, names: Names, root_id: ColumnElement[int]
) -> ColumnElement[bool]:
    """:func:`could_serve_of` with the values in the statement."""
    shape, values = group_shape(group, names, "s_", [(rc, amount)])
    return could_serve_of(shape, Binds(values), root_id)


def could_serve_of(
    shape: GroupShape, binds: Binds, root_id: ColumnElement[int]
) -> ColumnElement[bool]:
    """Necessary test for ``roots_stmt`` (a randomized ``limit``'s random roots): a
    provider of the tree passes ``group``'s filters and has room for ``amount`` of
    ``rc``. (Not used for classes a sharing
    provider offers: those trees may rely on sharing.)

    ``EXISTS (SELECT * FROM resource_providers np, inventories ni
    WHERE np.root_provider_id = root.id AND np.id = ni.resource_provider_id
    AND ni.resource_class_id = :rc AND <fits> AND <filters>)``
    """
    ni, np_ = _NI, _NP
    used = clauses.usage_subquery(ni.c.resource_provider_id, ni.c.resource_class_id)
    return _per_row(
        sa.exists().where(
            # BETWEEN, not "=": same rows, same index range, but PostgreSQL cannot turn
            # it into a hashed subplan over every tree (see _per_row).
            np_.c.root_provider_id.between(root_id, root_id),
            np_.c.id == ni.c.resource_provider_id,
            ni.c.resource_class_id == binds.value(shape.name("rc", 0)),
            clauses.capacity_fits(ni, binds.value(shape.name("amount", 0)), used),
            *shape_filters(
                shape.filters,
                binds,
                np_,
                with_required=shape.granular,
                root_covers=not shape.granular,
            ),
        )
    )


def roots_stmt(
    root_required: Sequence[int] | Sequence[BindParameter[Any]],
    root_forbidden: Ids,
    policy_clauses: Sequence[ColumnElement[bool]] = (),
    serve_clauses: Sequence[ColumnElement[bool]] = (),
    *,
    limit: int | BindParameter[Any] | None = None,
    randomize: bool = False,
    exclude: Ids = (),
    after: int | BindParameter[Any] | None = None,
    root: FromClause | None = None,
) -> Select:
    """Anchor roots: ``SELECT root.id FROM resource_providers root
    WHERE root.parent_provider_id IS NULL AND <root_required EXISTS / NOT EXISTS>
    AND <policy clauses> AND <could_serve ...> [AND root.id > :after]
    ORDER BY root.id | random() LIMIT :n``

    ``root_required``: trait ids, or one expanding parameter per trait (each bound to
    a one-id list: the same SQL). ``after``: only roots past it (a walk over the roots
    in id order, batch by batch)."""
    root = root if root is not None else ROOT
    stmt = sa.select(root.c.id).where(root.c.parent_provider_id.is_(None))
    if root_required:
        each: list[Any] = list(root_required)
        if not isinstance(each[0], BindParameter):
            each = [[t] for t in sorted(each)]
        stmt = stmt.where(sa.and_(sa.true(), *(clauses.has_any_trait(root.c.id, t) for t in each)))
    if isinstance(root_forbidden, BindParameter) or root_forbidden:
        stmt = stmt.where(clauses.lacks_any_trait(root.c.id, root_forbidden))
    stmt = stmt.where(*policy_clauses, *serve_clauses)
    if isinstance(exclude, BindParameter) or exclude:
        stmt = stmt.where(root.c.id.not_in(_ids(exclude)))
    if after is not None:
        stmt = stmt.where(root.c.id > after)
    if limit is not None:
        order = dialects.random_order() if randomize else root.c.id
        stmt = stmt.order_by(order).limit(limit)
    return stmt


def tree_shape_stmt(roots: RootScope = None) -> Select:
    """``SELECT id, parent_provider_id FROM resource_providers WHERE root_provider_id IN
    (:roots)`` — the parent links ``same_subtree`` needs."""
    rp = _RP
    stmt = sa.select(rp.c.id, rp.c.parent_provider_id)
    return stmt.where(*_scope(rp, roots, ()))


def _in_trees(column: ColumnElement[Any], root_ids: Ids | str) -> ColumnElement[bool]:
    """``column IN (trees)``: a name binds a list of any length (see
    :class:`rpquery.store.dialects.in_id_list`); a sequence or parameter as usual."""
    if isinstance(root_ids, str):
        return dialects.in_id_list(column, root_ids)
    return column.in_(_ids(root_ids))
