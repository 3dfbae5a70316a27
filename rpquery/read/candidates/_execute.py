"""The read engine of allocation candidates: names and sharing pairs (one statement,
:mod:`._sharing`), then one statement per request group for a batch of anchor roots
(:func:`load_groups`), their rows turned into the plain data the search needs
(:class:`Loaded`).

The batches and their roots: :mod:`._batches`; the provider summaries:
:mod:`._summaries`; statements sent on the driver: :mod:`rpquery.store.runner`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import compress, repeat
from operator import and_, eq
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Executable

from rpquery.read._clauses import Binds, Ids, ids_param
from rpquery.read._filters import (
    ANCHOR,
    GROUP_FILTERS,
    LOCAL,
    OWN,
    FilterShape,
    filter_shape,
    ruled,
    tree_wide_sets,
)
from rpquery.read._names import resolve_names
from rpquery.read.candidates import _sql as q
from rpquery.read.candidates._batches import (
    ROOT_IDS,
    ROOT_RANGE,
    Batch,
    Batches,
    Roots,
    filters_key,
    roots_query,
)
from rpquery.read.candidates._search import Inventory, SearchData, SearchRules, Slot
from rpquery.read.candidates._sharing import Sharing, batch_pairs, names_sharing_query
from rpquery.read.request import CandidatesRequest, RequestGroup
from rpquery.store import dialects
from rpquery.store.runner import column_kinds, driver_rows, merged_rows, numbers

SHARING_IDS = ids_param("sharing_ids")
#: The same ids under another name, for the root's forbidden-aggregate test
#: (``rp.id NOT IN``): SQLAlchemy renders an empty expanding parameter once per name,
#: as ``IN`` or as ``NOT IN``, so a name used both ways renders one of them wrong when
#: the list is empty (PostgreSQL, MySQL: ``NOT IN (NULL) AND (1 != 1)``, always false)
SHARING_EXEMPT = ids_param("sharing_exempt")


NamesKey = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]


def names_key(names: q.Names) -> NamesKey:
    return tuple(sorted(names.rc_ids.items())), tuple(sorted(names.trait_ids.items()))


def fetch_names(conn: Connection, req: CandidatesRequest) -> q.Names:
    """The request's names (:func:`rpquery.read._names.resolve_names`), with every
    class's name for the summaries and the sharing trait."""
    return resolve_names(conn, req.resource_class_names(), req.trait_names(), every_class=True)


@dataclass(frozen=True)
class Loaded:
    """What the search needs for one batch of anchors."""

    anchors: list[int]
    slots: list[Slot]
    data: SearchData
    rules: SearchRules
    sharing_ids: frozenset[int] = frozenset()
    #: every inventory of the batch's trees as (provider ids, class ids, capacities,
    #: usages) columns, when a group's statement read them (``summary_rows``)
    inventory: Sequence[Sequence[Any]] | None = None
    #: a slot no provider can fill: the batch gives no candidate, and the groups after
    #: it were not read (:func:`load_groups` ``give_up``; ``slots`` are not all there)
    hopeless: bool = False
    #: the root of each row of ``inventory``
    inventory_roots: Sequence[int] = ()


class _Collector:
    """Accumulates rows of every group statement into search data."""

    def __init__(self, shared_with: dict[int, set[int]]) -> None:
        self.inventory: dict[tuple[int, int], Inventory] = {}
        self.root_of: dict[int, int] = {}
        self.flags: dict[int, tuple[bool, ...]] = {}
        self.shared_with = shared_with
        self.local_roots: set[int] = set()
        #: the summaries' inventory columns, when a group's statement read them
        self.summary_inventory: Sequence[Sequence[Any]] | None = None
        #: the root of each of their rows
        self.summary_roots: Sequence[int] = ()

    def offers(self, rows: Any, n_flags: int, room: bool = True) -> dict[int, list[int]]:
        """Rows of one group statement: class id → provider ids with room for the
        amount. ``room``: the rows have the room columns (capacity, used, ``max_unit``),
        kept as :class:`Inventory` for the search; without them nothing is kept but the
        trees and the offers (the search checks no capacity for those classes).

        Read as columns (``zip(*rows)``, in C): per row only what is kept, no
        unpacking (~13k rows for the whole cloud at 5,000 hosts)."""
        if not rows:
            return {}
        return self._offers(list(zip(*rows, strict=True)), n_flags, room)

    def _offers(
        self, cols: Sequence[Sequence[Any]], n_flags: int, room: bool
    ) -> dict[int, list[int]]:
        """:meth:`offers` of the rows as columns (at least one row)."""
        rps, rcs = cols[0], cols[2]
        self.root_of.update(zip(rps, cols[1], strict=True))
        by_rc = {rc: list(compress(rps, map(eq, rcs, repeat(rc)))) for rc in set(rcs)}
        if room:
            # ids and max_unit are integer columns on every driver; SUM is a Decimal on
            # MySQL (int() takes both)
            inventory, make = self.inventory, Inventory
            cells = zip(zip(rps, rcs, strict=True), cols[3], cols[4], cols[5], strict=True)
            for key, capacity, used, max_unit in cells:
                inventory[key] = make(float(capacity), int(used), max_unit)
        if n_flags:
            first = 6 if room else 3
            flags = self.flags
            for rp, *extra in zip(rps, *cols[first : first + n_flags], strict=True):
                flags[rp] = tuple(map(bool, extra))
        return by_rc

    def offers_summary(self, rows: Any) -> dict[int, list[int]]:
        """:meth:`offers` of a statement that read every inventory row with the
        summaries' columns (provider, root, class, capacity, used, ``fits``): the rows
        that fit are the group's; every row's (provider, class, capacity, used) is
        kept for the summaries (:attr:`summary_inventory`)."""
        rps, roots, rcs, capacities, used, fits = list(zip(*rows, strict=True)) or [()] * 6
        self.summary_inventory = (rps, rcs, capacities, used)
        self.summary_roots = roots
        fitting = [tuple(compress(c, fits)) for c in (rps, roots, rcs)]
        return self._offers(fitting, 0, False) if fitting[0] else {}

    def offers_grouped(self, rows: Any, bits: Sequence[int]) -> dict[int, list[int]]:
        """:meth:`offers` of a grouped statement's rows (provider, root, mask of the
        classes ``bits[i]`` it can serve as ``2**i``)."""
        if not rows:
            return {}
        rps, roots, masks = zip(*rows, strict=True)
        self.root_of.update(zip(rps, roots, strict=True))
        return {
            rc: rps_of
            for i, rc in enumerate(bits)
            if (rps_of := list(compress(rps, map(and_, masks, repeat(1 << i)))))
        }

    def add_local(self, providers: set[int]) -> None:
        """Note the trees of ``providers`` (found in a tree's own rows) as anchors."""
        root_of = self.root_of
        self.local_roots.update(root_of[rp] for rp in providers)

    def choices(
        self,
        providers: set[int],
        blocked: frozenset[int] = frozenset(),
        local_only: frozenset[int] = frozenset(),
    ) -> dict[int, list[int]]:
        """Anchor root → providers that may serve it (its own, then sharing ones). A
        ``blocked`` anchor gets none: the only providers of its tree in ``providers``
        are sharing ones, which serve other trees only. A ``local_only`` sharing
        provider serves its own tree only. Changes nothing."""
        root_of = self.root_of
        if not self.shared_with and not blocked:  # a tree's own providers, in id order
            own: dict[int, list[int]] = {}
            for rp in sorted(providers):
                found = own.get(root_of[rp])
                if found is None:
                    own[root_of[rp]] = [rp]
                else:
                    found.append(rp)
            return own
        out: dict[int, set[int]] = defaultdict(set)
        for rp in providers:
            if root_of[rp] not in blocked:
                out[root_of[rp]].add(rp)
        for root, sharing in self.shared_with.items():
            if root not in blocked:
                out[root].update((sharing & providers) - local_only)
        return {root: sorted(rps) for root, rps in out.items()}


class BatchRoots(Enum):
    """The cache keys standing for :data:`ROOT_IDS` and :data:`ROOT_RANGE`, the batch's
    roots bound at execution (a bind parameter's ``==`` builds SQL, so it cannot be a
    key itself)."""

    IDS = "ids"
    RANGE = "range"


#: What a batch's statements are scoped by, as a cache key: the batch's roots (ids or
#: a range), the roots statement itself, or nothing (every root).
ScopeKey = BatchRoots | sa.Select | None


def scope_key(scope: q.RootScope) -> ScopeKey:
    """The cache key of a batch's scope (:class:`Roots` ``scope``)."""
    if scope is ROOT_IDS:
        return BatchRoots.IDS
    if scope is ROOT_RANGE:
        return BatchRoots.RANGE
    assert scope is None or isinstance(scope, sa.Select), scope
    return scope


def _scope(key: ScopeKey) -> q.RootScope:
    if key is BatchRoots.IDS:
        return ROOT_IDS
    return ROOT_RANGE if key is BatchRoots.RANGE else key


def _sharing_ids(scope: q.RootScope) -> Ids:
    """Sharing providers are bound per batch when the roots are restricted."""
    return SHARING_IDS if scope is not None else ()


@dataclass(frozen=True)
class GroupRows:
    """A group with resources: its providers with room for each amount
    (:func:`rpquery.read.candidates._sql.group_rows_of`). With a filter of the
    :data:`~rpquery.read._filters.ANCHOR` rule (forbidden aggregates) in the unsuffixed
    group, the bound sharing providers are exempt from their root's (see
    :func:`_blocked_anchors`)."""

    shape: q.GroupShape

    def build(self, scope: q.RootScope) -> sa.Select:
        shape = self.shape
        anchored = any(shape.filters.count(f) for f in _ANCHORED)
        exempt = SHARING_EXEMPT if not shape.granular and anchored else None
        return q.group_rows_of(shape, Binds(), scope, _sharing_ids(scope), exempt)


@dataclass(frozen=True)
class ResourcelessRows:
    """A group without resources: the providers with its traits and aggregates
    (:func:`rpquery.read.candidates._sql.resourceless_of`)."""

    shape: FilterShape

    def build(self, scope: q.RootScope) -> sa.Select:
        return q.resourceless_of(self.shape, Binds(), scope, _sharing_ids(scope))


@dataclass(frozen=True)
class TreeShape:
    """Parent links of the batch's trees, for ``same_subtree``
    (:func:`rpquery.read.candidates._sql.tree_shape_stmt`)."""

    def build(self, scope: q.RootScope) -> sa.Select:
        return q.tree_shape_stmt(scope)


BatchStatement = GroupRows | ResourcelessRows | TreeShape


def group_statement(
    g: RequestGroup,
    names: q.Names,
    room: bool = True,
    grouped: bool = False,
    summary: bool = False,
) -> tuple[GroupRows | ResourcelessRows, dict[str, Any]]:
    """The statement of group ``g`` (by shape) and its values (``room``: with the
    room columns; ``grouped``: one row per provider when the group has no room columns,
    no any-of flags and several classes; ``summary``: every inventory row of the scope,
    with the summaries' columns and ``fits``, for a group that :func:`carries_summary`;
    see :class:`~rpquery.read.candidates._sql.GroupShape`)."""
    if g.resources:
        shape, values = q.group_shape(g, names)
        if summary:
            assert not room and carries_summary(g), g
            shape = dataclasses.replace(shape, room=False, summary=True)
        elif not room:
            flags = bool(tree_wide_sets(g))
            grouped = grouped and not flags and len(g.resources) > 1
            shape = dataclasses.replace(shape, room=False, grouped=grouped)
        return GroupRows(shape), values
    filters, values = filter_shape(g, names, "g_")
    return ResourcelessRows(filters), values


def carries_summary(g: RequestGroup) -> bool:
    """Whether ``g``'s statement can also read the provider summaries' inventory rows
    (:class:`~rpquery.read.candidates._sql.GroupShape` ``summary``): a group with
    resources and no any-of trait flags (granular, or without ``required``: the
    ``tree_wide`` filter), and no filter that ``picks_trees`` (``member_of``,
    ``in_tree``). Those pick some trees by an index; reading every
    inventory of the cloud instead, with the filter only in the ``fits`` flag, cost
    the sharing request of the bench cloud (``DISK_GB`` and ``member_of`` its sharing
    aggregate: 185 candidates of 1,000 hosts) 4,036 rows for 229 (SQLite, 11 -> 69 ms
    a request since 64cc4c7)."""
    picks = any(f.given(g) for f in _PICKS_TREES)
    return bool(g.resources) and not tree_wide_sets(g) and not picks


_PICKS_TREES = tuple(f for f in GROUP_FILTERS if f.picks_trees)
#: the filters whose sharing rule is :data:`~rpquery.read._filters.ANCHOR`
_ANCHORED = tuple(f for f in GROUP_FILTERS if f.sharing == ANCHOR)


@functools.lru_cache(maxsize=1024)
def _stmt(what: BatchStatement, scope: ScopeKey) -> sa.Select:
    """Group, resourceless and tree-shape statements, built once per shape: the group's
    values, the batch's roots and sharing providers are bound at execution."""
    return what.build(_scope(scope))


@dataclass(frozen=True)
class _Run:
    """Connection, names and the batch's scope: enough to fetch cached statements."""

    conn: Connection
    names: q.Names
    scope: ScopeKey
    params: dict[str, Any]
    #: rows of statements already run together (:meth:`prefetch`)
    fetched: dict[tuple[object, ...], list[Any]] = dataclasses.field(default_factory=dict)
    #: a walk's first batch (:attr:`Roots.first`): its group statements are planned
    #: without hash joins where the backend has a way (``merged_rows``' ``ordered``)
    first: bool = False

    def execute(self, what: BatchStatement, values: dict[str, Any] | None = None) -> Any:
        rows = self.fetched.get(_run_key(what, values))
        if rows is not None:
            return rows
        params = {**self.params, **values} if values else self.params
        stmt = _stmt(what, self.scope)
        if self._merges() or (dialects.ids_as_text(self.conn) and numbers(stmt)):
            # compiled as a merged batch's part would be, once; rows of numbers as one
            # text (a whole-cloud answer too: its one pass, ~20k inventories at 5,000
            # hosts, costs PyMySQL ~80 ms of CPU as rows)
            whole = self.scope is None and isinstance(what, GroupRows) and what.shape.summary
            ordered = self.first and isinstance(what, GroupRows)
            return merged_rows(self.conn, [(stmt, params)], whole_tables=whole, ordered=ordered)[0]
        return driver_rows(self.conn, stmt, params)

    def _merges(self) -> bool:
        """Whether this batch's statements run merged (:meth:`prefetch`)."""
        if self.scope is None or self.conn.dialect.paramstyle != "pyformat":
            return False
        return dialects.backend(self.conn.dialect.name).on_server

    def prefetch(self, parts: Sequence[tuple[BatchStatement, dict[str, Any] | None]]) -> None:
        """Run the batch's statements ``parts`` in one round trip where a round trip
        costs (a database server, not SQLite in the process) and the batch's roots are
        restricted (a ``limit``'s batch, root filters): :meth:`execute` then answers them
        from their rows (:func:`merged_rows`). Not for every root: a whole-cloud answer
        waits for its rows, not its round trips, and merged rows cost the driver a
        column more each (MariaDB, 5,000 hosts, ``same_subtree``: +8 % CPU). Nor on a
        small cloud: merged, every group is planned and read even when the first leaves
        a slot nobody fills (``give_up``), which most random requests do (PostgreSQL,
        100 hosts, make bench-shapes' first asks: 5.0 ms unmerged, 6.1 merged)."""
        if len(parts) < 2 or not self._merges():
            return
        stmts = [
            (_stmt(what, self.scope), {**self.params, **values} if values else self.params)
            for what, values in parts
        ]
        # one UNION: the widest statement's columns, and those whose columns are of the
        # same types, in the same order, as its first ones (a group read without its
        # room columns has its trait flags where another has capacity); the others run
        # alone when asked for
        widest = max(stmts, key=lambda st: len(st[0].selected_columns))[0]
        kinds = column_kinds(widest)
        fits = [
            i
            for i, (stmt, _) in enumerate(stmts)
            if kinds[: len(stmt.selected_columns)] == column_kinds(stmt)
        ]
        if len(fits) < 2:
            return
        ordered = self.first and all(isinstance(parts[i][0], GroupRows) for i in fits)
        merged = merged_rows(self.conn, [stmts[i] for i in fits], ordered=ordered)
        for i, rows in zip(fits, merged, strict=True):
            what, values = parts[i]
            self.fetched[_run_key(what, values)] = rows


def _run_key(what: BatchStatement, values: dict[str, Any] | None) -> tuple[object, ...]:
    items = sorted((values or {}).items())
    return (what, *((k, tuple(v) if isinstance(v, list) else v) for k, v in items))


def _blocked_anchors(run: _Run, g: RequestGroup, col: _Collector) -> frozenset[int]:
    """Roots in one of the unsuffixed group's forbidden aggregates: anchors nothing of
    that group may serve. As in Placement, a forbidden aggregate excludes a provider of
    the unsuffixed group when it or its root is a member, the "root" of a sharing
    provider serving another tree being the anchor it serves, not its own root.

    So the group statement excludes every provider in such a tree but the sharing ones
    (exempt from their root's aggregates there, not from their own), and
    :meth:`_Collector.choices` gives a blocked anchor neither its own sharing providers
    nor any other's: a child sharing provider whose root is in the aggregate serves
    only other trees. One statement, only with forbidden aggregates and sharing
    providers in play (without them the group statement has excluded everything)."""
    aggs = ruled(g, ANCHOR)  # forbidden aggregates
    if g.is_granular or aggs is None or not col.shared_with:
        return frozenset()
    rows = driver_rows(run.conn, _roots_in(), {"roots_in": sorted(aggs)})
    return frozenset(int(root) for (root,) in rows)


@functools.cache
def _roots_in() -> sa.Select:
    return q.roots_in_aggregates_stmt(ids_param("roots_in"))


def _local_only(run: _Run, g: RequestGroup, col: _Collector) -> frozenset[int]:
    """Sharing providers that may serve only their own tree in the unsuffixed group:
    every one with ``in_tree`` (as in Placement, ``in_tree`` there fixes the anchor
    to that tree: no sharing provider serves another tree, nor one of that tree serves
    another anchor), else the children passing ``member_of`` only through their root
    (:func:`rpquery.read.candidates._sql.local_sharing_stmt`; one statement, only with
    ``member_of`` and sharing providers in play)."""
    if g.is_granular or not col.shared_with:
        return frozenset()
    sharing = frozenset().union(*col.shared_with.values())
    if ruled(g, LOCAL) is not None:  # in_tree
        return sharing
    member_of = ruled(g, OWN)
    if member_of is None:
        return frozenset()
    params: dict[str, Any] = {"local_ids": sorted(sharing)}
    params.update({f"local_member_of{i}": sorted(s) for i, s in enumerate(member_of)})
    return frozenset(
        int(rp) for (rp,) in driver_rows(run.conn, _local_sharing_stmt(len(member_of)), params)
    )


@functools.lru_cache(maxsize=16)
def _local_sharing_stmt(terms: int) -> sa.Select:
    member_of = [ids_param(f"local_member_of{i}") for i in range(terms)]
    return q.local_sharing_stmt(member_of, ids_param("local_ids"))


def contended_classes(req: CandidatesRequest) -> frozenset[str]:
    """Classes two or more groups of ``req`` ask for: the only ones whose residual
    capacity the search tracks (see :func:`~rpquery.read.candidates._search.plan_slots`),
    so the only ones whose room columns it needs.

    >>> from rpquery.read.request import parse_candidates
    >>> sorted(contended_classes(parse_candidates(
    ...     "resources=VCPU:1,DISK_GB:5&resources_1=VCPU:1&group_policy=none")))
    ['VCPU']
    """
    seen: set[str] = set()
    twice: set[str] = set()
    for g in req.groups:
        twice.update(seen.intersection(g.resources))
        seen.update(g.resources)
    return frozenset(twice)


def _group_slots(
    run: _Run,
    g: RequestGroup,
    col: _Collector,
    room: bool = True,
    grouped: bool = False,
    summary: bool = False,
    give_up: bool = False,
) -> list[Slot]:
    names = run.names
    what, values = group_statement(g, names, room, grouped, summary)
    if not g.resources:
        rows = [(int(rp), int(root)) for rp, root in run.execute(what, values)]
        col.root_of.update(rows)
        found = {rp for rp, _ in rows}
        col.add_local(found)
        # the anchor tree's own providers and the sharing providers sharing with it
        return [Slot(g.suffix, "resourceless", (), col.choices(found))]
    n_flags = len(tree_wide_sets(g))
    assert isinstance(what, GroupRows)
    if what.shape.grouped:
        bits = [values[what.shape.name("rc", i)] for i in range(what.shape.resources)]
        by_rc = col.offers_grouped(run.execute(what, values), bits)
    elif what.shape.summary:
        by_rc = col.offers_summary(run.execute(what, values))
    else:
        by_rc = col.offers(run.execute(what, values), n_flags, room)
    amounts = tuple(sorted((names.rc_ids[rc], amt) for rc, amt in g.resources.items()))
    offered = [set(by_rc.get(rc, ())) for rc, _ in amounts]
    if g.is_granular:
        ok = set.intersection(*offered)
        col.add_local(ok)
        return [Slot(g.suffix, "granular", amounts, col.choices(ok))]
    col.add_local(set().union(*offered))
    if give_up and not all(offered):  # no candidate: who may serve whom does not matter
        return [Slot("", "class", ((rc, amt),), {}) for rc, amt in amounts]
    blocked = _blocked_anchors(run, g, col)
    local_only = _local_only(run, g, col)
    return [
        Slot("", "class", ((rc, amt),), col.choices(rps, blocked, local_only))
        for (rc, amt), rps in zip(amounts, offered, strict=True)
    ]


def load_groups(
    conn: Connection,
    req: CandidatesRequest,
    names: q.Names,
    roots: Roots,
    sharing: Sharing,
    lean: bool = True,
    grouped: bool | None = None,
    summary_rows: bool = False,
    give_up: bool = False,
) -> Loaded:
    """One statement per group, parent links if ``same_subtree``. ``lean`` (the
    default): only what the search needs: a group none of whose classes another group
    asks for is read without the room columns, and ``data.inventory`` holds only the
    classes some other group asks for too (:func:`contended_classes`); else (headroom,
    which counts every row's room) every row's. ``grouped``: a lean group of several
    classes is read one row per provider (default: where the driver decodes values
    slowly, :func:`rpquery.store.dialects.groups_offers`). ``summary_rows``: when the
    batch is every root (a whole-cloud answer), the first lean group that
    :func:`carries_summary` also reads every inventory with its capacity and usage, for
    the provider summaries (``Loaded.inventory``): one pass over the inventories
    instead of two. ``give_up``: once a group leaves a slot that no provider fills
    (nothing with room, the filters pass none), the batch can give no candidate: the
    groups after it, the unsuffixed group's blocked anchors and local sharing
    providers, and the parent links are not read (``Loaded.hopeless``; most random
    requests have no candidate: unmerged, they cost a statement each)."""
    scope = scope_key(roots.scope)
    bound = roots.ids if isinstance(scope, BatchRoots) else None  # the batch's roots
    shared_with = batch_pairs(conn, req, names, bound, sharing)
    sharing_ids = sorted(set().union(*shared_with.values())) if shared_with else []
    shared = {"sharing_ids": sharing_ids, "sharing_exempt": sharing_ids}
    run = _Run(conn, names, scope, {**roots.params, **shared}, first=roots.first)
    col = _Collector(shared_with)
    order = sorted(req.groups, key=lambda g: (not g.is_granular, not g.resources, g.suffix))
    offers = dialects.groups_offers(conn) if grouped is None else grouped
    plan = _Plan(order, contended_classes(req) if lean else None, offers)
    # every root (a whole-cloud answer), or a walk's batch of every root in an id range
    # with no sharing provider (the summarised trees are then the batches' own)
    whole_trees = roots.scope is None or (roots.scope is ROOT_RANGE and not sharing_ids)
    if summary_rows and whole_trees:
        plan.carrier = plan.summary_carrier()
    plan.prefetch(run, req)
    slots, hopeless = plan.slots(run, col, give_up)
    parent_of: dict[int, int | None] = {}
    if req.same_subtree and not hopeless:
        for rp, parent in run.execute(TreeShape()):
            parent_of[int(rp)] = int(parent) if parent is not None else None
    anchors = roots.ids if roots.ids is not None else sorted(col.local_roots | shared_with.keys())
    data = SearchData(col.inventory, col.root_of, parent_of)
    return Loaded(
        anchors,
        slots,
        data,
        _rules(req, col),
        frozenset(sharing_ids),
        col.summary_inventory,
        hopeless,
        col.summary_roots,
    )


def _rules(req: CandidatesRequest, col: _Collector) -> SearchRules:
    unsuffixed = [g for g in req.groups if not g.is_granular]
    return SearchRules(
        isolate=req.group_policy == "isolate",
        same_subtree=tuple(frozenset(s) for s in req.same_subtree),
        required_sets=len(tree_wide_sets(unsuffixed[0])) if unsuffixed else 0,
        flags=col.flags,
    )


@dataclass
class _Plan:
    """How :func:`load_groups` reads a batch's groups: in ``order``, with the room
    columns when another group asks for one of their classes (``contended``; ``None``:
    always), lean groups of several classes one row per provider (``grouped``), the
    summaries' inventory rows with the ``carrier`` group's."""

    order: list[RequestGroup]
    contended: frozenset[str] | None
    grouped: bool
    carrier: RequestGroup | None = None

    def summary_carrier(self) -> RequestGroup | None:
        """The first lean group that :func:`carries_summary` (none when not lean)."""
        contended = self.contended
        if contended is None:
            return None
        lean = (g for g in self.order if contended.isdisjoint(g.resources))
        return next((g for g in lean if carries_summary(g)), None)

    def room(self, g: RequestGroup) -> bool:
        return self.contended is None or not self.contended.isdisjoint(g.resources)

    @staticmethod
    def key(g: RequestGroup) -> tuple[object, ...]:
        """Groups of equal keys get the same rows (only their suffixes differ)."""
        return (filters_key(g), tuple(sorted(g.resources.items())))

    def prefetch(self, run: _Run, req: CandidatesRequest) -> None:
        """The statements :meth:`slots` runs, as it runs them, in one round trip where
        that pays (:meth:`_Run.prefetch`)."""
        parts: dict[tuple[object, ...], tuple[BatchStatement, dict[str, Any] | None]] = {}
        for g in self.order:
            statement = group_statement(
                g, run.names, self.room(g), self.grouped, g is self.carrier
            )
            parts.setdefault(self.key(g), statement)
        if req.same_subtree:
            parts[("tree shape",)] = (TreeShape(), None)
        run.prefetch(list(parts.values()))

    def slots(self, run: _Run, col: _Collector, give_up: bool) -> tuple[list[Slot], bool]:
        """Every group's slots, and whether the batch is hopeless (``give_up``: a slot
        nobody fills; the groups after it are not read)."""
        slots: list[Slot] = []
        done: dict[tuple[object, ...], list[Slot]] = {}
        for g in self.order:  # identical groups: one statement, the same choices per suffix
            key = self.key(g)
            if key in done:
                slots.extend(dataclasses.replace(s, suffix=g.suffix) for s in done[key])
                continue
            found = _group_slots(
                run, g, col, self.room(g), self.grouped, g is self.carrier, give_up
            )
            slots.extend(done.setdefault(key, found))
            if give_up and not all(any(s.choices.values()) for s in found):
                return slots, True
        return slots, False


def statements_for(req: CandidatesRequest, names: q.Names) -> list[Executable]:
    """The main statements of ``req`` for ``explain``: the anchor-roots statement (the
    first batch's when ``limit`` is set), then names and sharing pairs (one statement,
    without the session settings) and one statement per group
    as a full answer runs them (scoped by the roots statement, no sharing ids bound)."""
    batch = Batches(req.limit, randomize=req.randomize).first()
    out: list[Executable] = []
    if batch.limit is not None:
        first, values, _ = roots_query(req, names, (), batch)
        out.append(first.params(values))  # type: ignore[union-attr]
    roots, roots_values, _ = roots_query(req, names, (), Batch())
    if roots is not None and batch.limit is None:
        out.append(roots.params(roots_values))
    names_sharing, params = names_sharing_query(req, None)
    out.append(names_sharing.params(params))
    for g in req.groups:
        what, values = group_statement(g, names)
        stmt = _stmt(what, scope_key(roots))
        out.append(
            stmt.params({**roots_values, **values, "sharing_ids": [], "sharing_exempt": []})
        )
    return out
