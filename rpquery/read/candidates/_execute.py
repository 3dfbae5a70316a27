"""Thin executors of the allocation-candidate read path: run the builders of
:mod:`rpquery.read.candidates._sql` and turn rows into the plain data the search needs.

>>> Roots(ids=[3, 5], scope=[3, 5], params={"root_ids": [3, 5]}, exhausted=True).ids
[3, 5]
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import compress, repeat
from operator import and_, eq
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement, Executable

from rpquery.policies.base import HostPolicy
from rpquery.read._clauses import Binds, Ids, ids_param
from rpquery.read._filters import FilterShape, filter_shape
from rpquery.read._names import SHARING_TRAIT, names_found, resolve_names
from rpquery.read._policies import where_clauses
from rpquery.read.candidates import _sql as q
from rpquery.read.candidates import _texts
from rpquery.read.candidates._results import SummaryRows
from rpquery.read.candidates._search import Inventory, SearchData, SearchRules, Slot
from rpquery.read.request import CandidatesRequest, RequestGroup
from rpquery.store import dialects
from rpquery.store.tables import resource_providers

ROOT_IDS = ids_param("root_ids")
#: A batch of consecutive roots in id order (:class:`Batches`' walk)
ROOT_RANGE = q.RootRange(
    sa.bindparam("roots_lo", type_=sa.Integer), sa.bindparam("roots_hi", type_=sa.Integer)
)
SHARING_IDS = ids_param("sharing_ids")
#: The same ids under another name, for the root's forbidden-aggregate test
#: (``rp.id NOT IN``): SQLAlchemy renders an empty expanding parameter once per name,
#: as ``IN`` or as ``NOT IN``, so a name used both ways renders one of them wrong when
#: the list is empty (PostgreSQL, MySQL: ``NOT IN (NULL) AND (1 != 1)``, always false)
SHARING_EXEMPT = ids_param("sharing_exempt")
EXCLUDE_IDS = ids_param("exclude_ids")
#: At most this many classes are named by bound values in a written summary (the lowest
#: ids: the standard classes); any other is looked up per inventory
SUMMARY_NAMED = 64
#: Summaries of at most this many trees come from one statement
#: (:func:`~._sql.summary_small_stmt`), not two or three: as fast at 16 trees, ~0.1-0.2
#: ms slower at 64 (PostgreSQL, MariaDB, 1,000 hosts; docs/read-path.md)
SUMMARY_SMALL = 32
#: how the text of :func:`every_trait_text` begins on every backend (statement counts
#: in tests)
EVERY_TRAIT_TEXT_SQL = "GROUP BY rpt.resource_provider_id) AS t"

# The fixed statements below are built on first use, each once (``functools.cache``):
# a one-off command builds only those it sends (start-up, docs/benchmarks.md).


@functools.cache
def summary_providers() -> sa.Select:
    """The summaries' providers of the trees ``tree_ids``, their resources not written
    (:func:`fetch_summaries`; written: :func:`_summary`)."""
    return q.summary_stmt("tree_ids")


@functools.cache
def summary_inventories() -> sa.Select:
    return q.summary_inventories_stmt("tree_ids")


@functools.cache
def summary_inventories_of() -> sa.Select:
    return q.summary_inventories_of("summary_ids")


@functools.cache
def summary_trait_names() -> sa.Select:
    return q.summary_trait_names_stmt(ids_param("summary_trait_ids"))


@functools.cache
def summary_untraited() -> sa.Select:
    """The summaries' providers without their trait ids, of every tree, with
    :func:`every_trait_text` (MySQL/MariaDB, summaries of nearly the whole cloud:
    :func:`fetch_summaries`)."""
    return q.summary_stmt(None, trait_ids=False)


@functools.cache
def every_trait_text() -> sa.Select:
    """Every provider's trait ids as one text (:func:`every_trait_texts`)."""
    return q.every_trait_text_stmt()


NamesKey = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]


def driver_rows(
    conn: Connection, stmt: Executable, params: dict[str, Any], *, prepare: bool = False
) -> list[Any]:
    """Every row of ``stmt`` as the driver's own tuples, skipping SQLAlchemy's ``Row``
    objects (~0.5 µs a row: 15 ms of the ~30k trait rows of a whole-cloud answer).
    Only for the read path's statements, whose columns are ints, strings and numbers
    that need no result processing (callers convert with ``int()``/``float()``,
    which also takes MySQL's ``Decimal`` sums).

    A ``SELECT`` is sent as the text :mod:`~rpquery.read.candidates._texts` joins from
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


def names_key(names: q.Names) -> NamesKey:
    return tuple(sorted(names.rc_ids.items())), tuple(sorted(names.trait_ids.items()))


def fetch_names(conn: Connection, req: CandidatesRequest) -> q.Names:
    """The request's names (:func:`rpquery.read._names.resolve_names`), with every
    class's name for the summaries and the sharing trait."""
    return resolve_names(conn, req.resource_class_names(), req.trait_names(), every_class=True)


def filters_key(g: RequestGroup) -> tuple[object, ...]:
    """What a group's statements depend on besides its amounts: two groups with equal
    keys and equal resources get the same rows (the suffix only names them)."""
    return (g.is_granular, g.required, g.forbidden, g.member_of, g.forbidden_aggs, g.in_tree)


@dataclass(frozen=True)
class Roots:
    """Anchor roots of one batch: ``ids`` fetched (``None``: every root), ``scope`` the
    restriction the other statements use, ``params`` to bind, ``exhausted`` when no
    more roots exist."""

    ids: list[int] | None
    scope: q.RootScope
    params: dict[str, Any]
    exhausted: bool
    #: whether some root (in the id range of ``ids``) may not be an anchor: root
    #: filters, policies, *could serve* tests
    filtered: bool = True


@dataclass(frozen=True)
class Batch:
    """Which anchor roots one batch asks for (see :class:`Batches`).

    ``limit``: at most that many roots (``None``: every root left). ``walk``: roots in
    id order after ``after`` (``None``: from the first), with no *could serve* test;
    else, with a ``limit``, the roots whose trees could serve each requested class
    (``ORDER BY random()`` with ``randomize``). ``exclude``: roots of earlier batches."""

    limit: int | None = None
    walk: bool = False
    after: int | None = None
    exclude: tuple[int, ...] = ()


class Batches:
    """The anchor-root batches of a request, chosen one after the other from what the
    earlier ones gave. The answer never depends on them: candidates are taken in root
    order (every root up to a batch's last is searched before any later one), and
    batches go on until ``limit`` candidates are found or no root is left.

    - No ``limit`` (or a policy needing every candidate): one batch of every root.
    - ``limit`` with ``randomize``: ``max(min(2 * limit, limit + 250), 20)`` random
      roots whose trees could serve each requested class (*could serve* tests), then,
      if too few candidates came of them, every root left.
    - ``limit`` in root order: a walk over the roots in id order, with no *could serve*
      test (the group statements check capacity and filters anyway; the tests cost
      more than the rows of the trees they turn away: PostgreSQL 34 ms for 1,250
      roots at 5,000 hosts). The first batch is ``limit + 10`` roots (a tree with room
      gives at least one candidate), or, when a request of the same kind ran before on
      this database (``key``), what its candidates per root say ``limit`` needs, plus
      5 % and 10 roots (trees with NUMA nodes give several candidates each: 1,000
      candidates from ~490 roots at 5,000 hosts). A next batch is sized from the
      candidates per root seen so far: what the missing candidates need plus 25 % and
      10 roots, or four times the last batch while none was found; or, while none
      was found, every root left when the database's roots (``cloud``: counted by the
      last walk over every root, :data:`_ROOT_COUNT`) say they are at most four times
      that: one batch, not two (most random requests have no candidate, and a small
      cloud's walk would take three batches to find out).
    - ``limit`` on a small cloud (at most :attr:`ONE_BATCH` roots, or fewer than the
      first batch would be, as the names statement counted them: :data:`_ROOT_COUNT`):
      one batch of every root, as without ``limit`` (no roots statement, no next
      batch).

    >>> b = Batches(1000, randomize=False)
    >>> first = b.first(); first
    Batch(limit=1010, walk=True, after=None, exclude=())
    >>> b.next(first, Roots(list(range(1, 1011)), None, {}, False), 400, 1010)
    Batch(limit=1903, walk=True, after=1010, exclude=())
    >>> Batches(1000, randomize=True).first()
    Batch(limit=1250, walk=False, after=None, exclude=())
    >>> Batches(None, randomize=False).first()
    Batch(limit=None, walk=False, after=None, exclude=())
    """

    #: roots past what the candidates need, in every batch of a walk
    MARGIN = 10
    #: a later batch's roots: this many times what the missing candidates need
    SLACK = 1.25
    #: a first batch sized from an earlier request's candidates per root
    HINT_SLACK = 1.05

    def __init__(
        self, limit: int | None, *, randomize: bool, key: Hashable = None, cloud: Hashable = None
    ) -> None:
        self.limit = limit
        self.randomize = randomize
        self.key = key
        self.cloud = cloud
        self.searched = 0
        #: roots of the walk's batches so far, and whether each batch was every root
        #: of its id range (then they count the database's roots)
        self.walked = 0
        self.counting = True

    #: the largest ``LIMIT`` bound (a 32-bit ``INTEGER`` parameter on PostgreSQL): as
    #: good as none, no cloud has that many roots
    MOST = 2**31 - 1

    #: a cloud of at most this many roots (:data:`_ROOT_COUNT`) is read in one batch of
    #: every root, whatever the ``limit``: there the rows of the trees a smaller batch
    #: would skip cost less than the round trips of a walk (its roots statement, and a
    #: next batch's two when the first found too few); nor is one whose roots are
    #: fewer than the first batch would be. ``0``: always walked (tests)
    ONE_BATCH = 200

    def first(self) -> Batch:
        limit = self.limit
        if limit is None:
            return Batch()
        batch = self._first(limit)
        count = _ROOT_COUNT.get(self.cloud, ROOT_COUNT_AGE) if self.cloud is not None else None
        if not self.ONE_BATCH or count is None:
            return batch
        if count <= self.ONE_BATCH or count < (batch.limit or 0):
            return Batch()  # (a stale count only costs time: every root is read)
        return batch

    def _first(self, limit: int) -> Batch:
        if self.randomize:
            return Batch(min(max(min(2 * limit, limit + 250), 20), self.MOST))
        per_root = _PER_ROOT.get(self.key) if self.key is not None else None
        if per_root is None:
            return Batch(min(limit + self.MARGIN, self.MOST), walk=True)
        size = math.ceil(limit / per_root * self.HINT_SLACK)
        return Batch(min(min(size, 4 * limit) + self.MARGIN, self.MOST), walk=True)

    def next(self, batch: Batch, roots: Roots, found: int, searched: int) -> Batch | None:
        """The batch after ``batch`` (which gave ``roots``, of which the search looked
        at the first ``searched``; ``found`` candidates so far in all), or ``None`` when
        the answer is complete."""
        self.searched += searched
        limit = self.limit
        if batch.limit is None or limit is None:
            return None
        if batch.walk:
            self.walked += len(roots.ids or ())
            self.counting = self.counting and not roots.filtered
        if found >= limit or roots.exhausted:
            if batch.walk and found >= limit and self.key is not None:
                _remember(self.key, found / self.searched)
            if batch.walk and roots.exhausted and self.counting and self.cloud is not None:
                _ROOT_COUNT.put(self.cloud, self.walked)
            return None
        if not batch.walk:
            return Batch(exclude=(*batch.exclude, *(roots.ids or ())))
        if found:
            size = int((limit - found) * self.searched / found * self.SLACK) + self.MARGIN
        else:
            size = 4 * batch.limit
            # (filtered roots are fewer than the database's: what is left is less)
            count = _ROOT_COUNT.get(self.cloud) if self.cloud is not None else None
            left = None if count is None else int(count) - self.walked + self.MARGIN
            if left is not None and size < left <= 4 * size:
                size = left
        after = roots.ids[-1] if roots.ids else batch.after
        return Batch(min(size, self.MOST), walk=True, after=after)


class Hints:
    """A small bounded map shared by a process's threads (a server's requests): the
    least recently written key goes when a new one comes in full; reads and writes
    hold a lock, so no thread sees it mid-change and it never holds more than
    ``size`` keys.

    >>> h = Hints(2); h.put("a", 1.0); h.put("b", 2.0); h.put("a", 3.0); h.put("c", 4.0)
    >>> h.get("a"), h.get("b"), h.get("c"), len(h)
    (3.0, None, 4.0, 2)
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, max_age: float | None = None) -> float | None:
        """The value of ``key``; ``None`` when there is none, or (``max_age``) when it
        was written more than that many seconds ago."""
        with self._lock:
            found = self._items.get(key)
        if found is None or (max_age is not None and time.monotonic() - found[1] > max_age):
            return None
        return found[0]

    def put(self, key: Hashable, value: float) -> None:
        with self._lock:
            self._items[key] = (value, time.monotonic())
            self._items.move_to_end(key)
            if len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


#: candidates per root of the last walk that reached its ``limit``, per database and
#: kind of request (:func:`walk_key`): sizes the next such request's first batch. Only
#: a hint (a wrong one costs a batch more or fewer), written from a server's threads
_PER_ROOT = Hints(512)


#: roots of each database (its engine's URL), as the last walk over every root in id
#: order counted them: sizes a walk's batch once none was found (:meth:`Batches.next`).
#: Only a hint (a stale one costs a batch more or fewer). The names statement counts
#: them when the count is missing or older than :data:`ROOT_COUNT_AGE` seconds: a count
#: that small sends every ``limit`` in one batch (:attr:`Batches.ONE_BATCH`), so a cloud
#: that grew is seen within that time
_ROOT_COUNT = Hints(64)
ROOT_COUNT_AGE = 60.0


def small_cloud(conn: Connection) -> bool:
    """Whether ``conn``'s database is known to have at most :attr:`Batches.ONE_BATCH`
    roots (a count at most :data:`ROOT_COUNT_AGE` seconds old): there a statement's
    plan may be kept for any values (:func:`rpquery.store.dialects.unprepared`'s
    ``repeats``); a cloud that grew past it is seen within that time."""
    count = _ROOT_COUNT.get(conn.engine.url, ROOT_COUNT_AGE)
    return count is not None and count <= Batches.ONE_BATCH


def _remember(key: Hashable, per_root: float) -> None:
    _PER_ROOT.put(key, per_root)


def walk_key(conn: Connection, req: CandidatesRequest) -> Hashable:
    """What a walk's candidates per root depend on besides the cloud's fill: the
    database and the request but its amounts and ``limit``."""
    groups = tuple((g.suffix, filters_key(g), tuple(sorted(g.resources))) for g in req.groups)
    rules = (req.group_policy, req.same_subtree, req.root_required, req.root_forbidden)
    return (conn.engine.url, groups, rules)


@dataclass(frozen=True)
class RootsShape:
    """What the anchor-roots statement depends on besides its values (the cache key of
    :func:`roots_template`): how many ``root_required`` traits, whether any
    forbidden, one :class:`~rpquery.read.candidates._sql.GroupShape` per *could serve*
    test (``s0_``, ``s1_``... values), a ``LIMIT`` (``batch_limit``), random order,
    excluded roots (``exclude_ids``), a walk's start (``after_id``)."""

    required: int
    forbidden: bool
    serve: tuple[q.GroupShape, ...]
    limited: bool
    randomize: bool
    exclude: bool
    after: bool = False

    @property
    def filtered(self) -> bool:
        """Whether some root in an id range may not be an anchor."""
        return bool(self.required or self.forbidden or self.serve)


def roots_shape(
    req: CandidatesRequest,
    names: q.Names,
    batch: Batch,
    shared_rcs: frozenset[int] = frozenset(),
) -> tuple[RootsShape, dict[str, Any]]:
    """The shape of ``req``'s anchor-roots statement for ``batch``, and its values."""
    values: dict[str, Any] = {}
    serve: list[q.GroupShape] = []
    if batch.limit is not None and not batch.walk:
        tests: dict[tuple[tuple[object, ...], str, int], RequestGroup] = {}
        for g in req.groups:  # identical groups need one test, not one each
            for rc, amount in sorted(g.resources.items()):
                if names.rc_ids[rc] not in shared_rcs:
                    tests.setdefault((filters_key(g), rc, amount), g)
        # in a canonical order: the same tests in another order are the same statement
        for i, ((_, rc, amount), g) in enumerate(sorted(tests.items(), key=_test_order)):
            test, test_values = q.group_shape(g, names, f"s{i}_", [(rc, amount)])
            serve.append(test)
            values.update(test_values)
    if batch.limit is not None:
        values["batch_limit"] = batch.limit
    if batch.exclude:
        values["exclude_ids"] = list(batch.exclude)
    if batch.after is not None:
        values["after_id"] = batch.after
    required, forbidden = names.traits(req.root_required), names.traits(req.root_forbidden)
    for i, trait in enumerate(required):
        values[f"root_required{i}"] = [trait]
    if forbidden:
        values["root_forbidden"] = forbidden
    limited = batch.limit is not None
    shape = RootsShape(
        len(required),
        bool(forbidden),
        tuple(serve),
        limited,
        req.randomize and limited and not batch.walk,  # (an order only with a LIMIT)
        bool(batch.exclude),
        batch.after is not None,
    )
    return shape, values


def _test_order(item: tuple[tuple[tuple[object, ...], str, int], RequestGroup]) -> tuple[Any, ...]:
    """Orders *could serve* tests by their shape alone (then class name, for a stable
    order of tests of equal shape)."""
    (_, rc, _amount), g = item
    shape = (g.is_granular, bool(g.forbidden), len(g.required), len(g.member_of))
    return (*shape, bool(g.forbidden_aggs), g.in_tree is not None, rc)


def roots_template(
    shape: RootsShape, policy_clauses: Sequence[ColumnElement[bool]] = ()
) -> sa.Select | None:
    """The anchor-roots statement of ``shape``, its values bound at execution, or
    ``None`` when nothing restricts the roots."""
    if not (shape.limited or policy_clauses or shape.required or shape.forbidden or shape.exclude):
        return None
    return q.roots_stmt(
        [ids_param(f"root_required{i}") for i in range(shape.required)],
        ids_param("root_forbidden") if shape.forbidden else (),
        policy_clauses,
        [_serve_test(s) for s in shape.serve],
        limit=sa.bindparam("batch_limit", type_=sa.Integer) if shape.limited else None,
        randomize=shape.randomize,
        exclude=EXCLUDE_IDS if shape.exclude else (),
        after=sa.bindparam("after_id", type_=sa.Integer) if shape.after else None,
        root=q.ROOT,
    )


@functools.lru_cache(maxsize=1024)
def _serve_test(shape: q.GroupShape) -> ColumnElement[bool]:
    """A *could serve* test on :data:`~rpquery.read.candidates._sql.ROOT`, built once
    per shape: a roots statement of a new shape is assembled from known tests."""
    return q.could_serve_of(shape, Binds(), q.ROOT.c.id)


@functools.lru_cache(maxsize=1024)
def _cached_roots(shape: RootsShape) -> sa.Select | None:
    return roots_template(shape)


def roots_query(
    req: CandidatesRequest,
    names: q.Names,
    policies: Sequence[HostPolicy],
    batch: Batch,
    shared_rcs: frozenset[int] = frozenset(),
) -> tuple[sa.Select | None, dict[str, Any], bool]:
    """The anchor-roots statement (built once per shape unless a policy adds clauses),
    its values, and whether it filters roots (so a range of ids holds more than its
    anchors); the statement is ``None`` when nothing restricts the roots."""
    shape, values = roots_shape(req, names, batch, shared_rcs)
    policy_clauses = where_clauses(policies, q.ROOT.c.id)
    if policy_clauses:  # built for this request: a policy's clauses may hold any values
        return roots_template(shape, policy_clauses), values, True
    return _cached_roots(shape), values, shape.filtered


def select_roots(
    conn: Connection,
    req: CandidatesRequest,
    names: q.Names,
    policies: Sequence[HostPolicy],
    batch: Batch,
    shared_rcs: frozenset[int] = frozenset(),
) -> Roots:
    """Run the anchor-roots statement of ``batch`` (or skip it when nothing restricts
    the roots). A walk's batch of every root in an id range is scoped by that range
    (:class:`~rpquery.read.candidates._sql.RootRange`), any other limited batch by its
    ids, an unlimited one by the statement itself."""
    stmt, params, filtered = roots_query(req, names, policies, batch, shared_rcs)
    if stmt is None:
        return Roots(None, None, {}, True)
    if dialects.ids_as_text(conn) and (batch.walk or batch.limit is None):
        # one text of ids, not a row each (a walk's and an unlimited answer's roots
        # go in id order: sorted here; a random sample keeps its rows' order)
        ((count, total, text),) = driver_rows(conn, _ids_text(stmt), params)
        ids = sorted(map(int, text.split(","))) if count and text else []
        if len(ids) != count or sum(ids) != (total or 0):
            # cut short (group_concat_max_len, max_allowed_packet): read as rows
            ids = sorted(int(r) for (r,) in driver_rows(conn, stmt, params))
    else:
        ids = [int(r) for (r,) in driver_rows(conn, stmt, params)]
    if batch.limit is None:
        # no ORDER BY (a sort on the server for nothing): anchors go in id order, as a
        # limited walk takes them, whatever order the plan returned them in
        ids.sort()
        return Roots(ids, stmt, params, True)
    exhausted = len(ids) < batch.limit
    if batch.walk and not filtered and ids:
        scope = {"roots_lo": ids[0], "roots_hi": ids[-1]}
        return Roots(ids, ROOT_RANGE, scope, exhausted, filtered=False)
    return Roots(ids, ROOT_IDS, {"root_ids": ids}, exhausted, filtered)


@functools.lru_cache(maxsize=256)
def _ids_text(stmt: sa.Select) -> sa.Select:
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
    (:func:`rpquery.read.candidates._sql.group_rows_of`). With forbidden aggregates
    in the unsuffixed group, the bound sharing providers are exempt from their root's
    (see :func:`_blocked_anchors`)."""

    shape: q.GroupShape

    def build(self, scope: q.RootScope) -> sa.Select:
        shape = self.shape
        exempt = SHARING_EXEMPT if not shape.granular and shape.filters.forbidden_aggs else None
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
            flags = not g.is_granular and g.required
            grouped = grouped and not flags and len(g.resources) > 1
            shape = dataclasses.replace(shape, room=False, grouped=grouped)
        return GroupRows(shape), values
    filters, values = filter_shape(g, names, "g_")
    return ResourcelessRows(filters), values


def carries_summary(g: RequestGroup) -> bool:
    """Whether ``g``'s statement can also read the provider summaries' inventory rows
    (:class:`~rpquery.read.candidates._sql.GroupShape` ``summary``): a group with
    resources and no any-of trait flags (granular, or without ``required``), and no
    ``member_of`` or ``in_tree``. Those pick some trees by an index; reading every
    inventory of the cloud instead, with the filter only in the ``fits`` flag, cost
    the sharing request of the bench cloud (``DISK_GB`` and ``member_of`` its sharing
    aggregate: 185 candidates of 1,000 hosts) 4,036 rows for 229 (SQLite, 11 -> 69 ms
    a request since 64cc4c7)."""
    return (
        bool(g.resources)
        and (g.is_granular or not g.required)
        and not g.member_of
        and g.in_tree is None
    )


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

    def execute(self, what: BatchStatement, values: dict[str, Any] | None = None) -> Any:
        rows = self.fetched.get(_run_key(what, values))
        if rows is not None:
            return rows
        params = {**self.params, **values} if values else self.params
        stmt = _stmt(what, self.scope)
        if self._merges() or (dialects.ids_as_text(self.conn) and _numbers(stmt)):
            # compiled as a merged batch's part would be, once; rows of numbers as one
            # text (a whole-cloud answer too: its one pass, ~20k inventories at 5,000
            # hosts, costs PyMySQL ~80 ms of CPU as rows)
            whole = self.scope is None and isinstance(what, GroupRows) and what.shape.summary
            return merged_rows(self.conn, [(stmt, params)], whole_tables=whole)[0]
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
        kinds = _column_kinds(widest)
        fits = [
            i
            for i, (stmt, _) in enumerate(stmts)
            if kinds[: len(stmt.selected_columns)] == _column_kinds(stmt)
        ]
        if len(fits) < 2:
            return
        merged = merged_rows(self.conn, [stmts[i] for i in fits])
        for i, rows in zip(fits, merged, strict=True):
            what, values = parts[i]
            self.fetched[_run_key(what, values)] = rows


def _column_kinds(stmt: sa.Select) -> tuple[object, ...]:
    """The generic type of each column of ``stmt`` (integer, number, boolean...)."""
    return tuple(c.type._type_affinity for c in stmt.selected_columns)


def _run_key(what: BatchStatement, values: dict[str, Any] | None) -> tuple[object, ...]:
    items = sorted((values or {}).items())
    return (what, *((k, tuple(v) if isinstance(v, list) else v) for k, v in items))


_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)s")


def merged_rows(
    conn: Connection,
    stmts: Sequence[tuple[sa.Select, dict[str, Any]]],
    *,
    whole_tables: bool = False,
) -> list[list[Any]]:
    """The rows of several ``SELECT`` statements from one statement (one round trip),
    each statement's rows in a list. For a driver whose placeholders are named
    ``%(name)s`` (psycopg, PyMySQL: :meth:`_Run._merges`).

    Each statement's text is joined from its parts (:func:`~rpquery.read.candidates.
    _texts.template`: its SQL is the same as when it runs alone, a statement alone is
    sent as it is; :func:`_compiled` for one that cannot be), then the statements become one
    text: ``SELECT 0, p.* FROM (<first>) AS p UNION ALL SELECT 1, p.*, NULL, ... FROM
    (<second>) AS p ...``, each parameter renamed ``m<i>_<name>``, the widest statement
    first (PostgreSQL types a ``UNION`` from its first branch; the others are padded
    with ``NULL``). Merging costs a few string operations; compiling each part apart
    keeps SQLAlchemy's work once per part, whatever shapes a request combines.
    ``whole_tables``: the statements read every inventory of the cloud (a whole-cloud
    answer's one pass), where hash joins beat a lookup per row
    (:func:`~rpquery.store.dialects.long_concat_sql`)."""
    dialect = conn.dialect
    if dialects.ids_as_text(conn) and all(_numbers(stmt) for stmt, _ in stmts):
        return _text_rows(conn, stmts, whole_tables)
    if len(stmts) == 1:
        sql, values = _expanded(stmts[0][0], stmts[0][1], dialect, "")
        return [_fetch(conn, sql, values)]
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
    for row in _fetch(conn, " UNION ALL ".join(branches), params):
        i = row[0]
        out[i].append(row[1 : 1 + widths[i]])
    return out


_WHOLE = (sa.Integer, sa.Boolean)
_NUMBERS = (*_WHOLE, sa.Float)


def _numbers(stmt: sa.Select) -> bool:
    """Whether every column of ``stmt`` is a number: an integer or a boolean (a
    provider, a root, a class, a mask of classes, a trait flag) or a double (a
    capacity)."""
    return all(kind in _NUMBERS for kind in _column_kinds(stmt))


def _text_rows(
    conn: Connection,
    stmts: Sequence[tuple[sa.Select, dict[str, Any]]],
    whole_tables: bool = False,
) -> list[list[Any]]:
    """:func:`merged_rows` of statements whose columns are numbers (:func:`_numbers`),
    read as one text per statement, not a row per row (:func:`~rpquery.store.dialects.ids_as_text`:
    MySQL/MariaDB, whose driver decodes each row in Python): ``SELECT <i>, COUNT(*),
    GROUP_CONCAT(CONCAT_WS(':', IFNULL(p.a, ''), ...), ';' SEPARATOR '') FROM
    (<statement>) AS p``, one row per statement, joined by ``UNION ALL`` (one round
    trip), ``group_concat_max_len`` lifted; ``''`` reads back as ``NULL``. A text cut
    short (past ``group_concat_max_len``, or ``NULL`` past ``max_allowed_packet``) does
    not end its last row or holds fewer rows than counted: that statement is read again
    as rows. nova's ``limit=1000`` at 5,000 hosts (702 rows of a lean group, one per
    provider): 43.7 -> 27.3 ms, load ~7."""
    dialect = conn.dialect
    branches = []
    params: dict[str, Any] = {}
    for i, (stmt, bound) in enumerate(stmts):
        sql, values = _expanded(stmt, bound, dialect, f"m{i}_")
        names = _column_names(stmt, dialect)
        cells = ", ".join(f"IFNULL(p.`{name}`, '')" for name in names)
        branches.append(
            f"SELECT {i}, COUNT(*), GROUP_CONCAT(CONCAT(CONCAT_WS(':', {cells}), ';') "
            f"SEPARATOR '') FROM ({sql}) AS p"
        )
        params.update(values)
    sql = dialects.long_concat_sql(" UNION ALL ".join(branches), dialect, whole_tables)
    out: list[list[Any]] = [[] for _ in stmts]
    for i, count, text in _fetch(conn, sql, params):
        if not count:
            continue
        if isinstance(text, bytes):  # a binary string where a column is (flags)
            text = text.decode()
        stmt, bound = stmts[i]
        found = _parsed(text, count, _column_kinds(stmt))
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
    conn: Connection, sql: str, params: dict[str, Any], *, prepare: bool = False
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
    would begin it) and the statement goes on the driver's cursor."""
    if prepare and not conn.in_transaction():
        conn.begin()
    if _direct(conn):
        return _on_cursor(conn, sql, params, prepare=prepare)
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
    conn: Connection, sql: str, params: dict[str, Any], *, prepare: bool = False
) -> list[Any]:
    """:func:`_fetch` on a cursor of the driver, as ``exec_driver_sql`` would run it
    for what these statements need: the engine's cursor events fire (tracers, statement
    counts, batch timers; with no execution context), and a driver error goes through
    SQLAlchemy's handling (wrapped as ``DBAPIError``, a lost connection invalidated
    for :func:`rpquery.db.read_retrying`, the ``handle_error`` hooks)."""
    cursor = conn.connection.cursor()
    try:
        for before in conn.dispatch.before_cursor_execute:
            sql, params = before(conn, cursor, sql, params, None, False)
        if prepare:
            dialects.execute_prepared(conn, cursor, sql, params)
        else:
            cursor.execute(sql, params)
        conn.dispatch.after_cursor_execute(conn, cursor, sql, params, None, False)
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


@dataclass(frozen=True)
class Sharing:
    """Which sharing providers share with which trees, and the requested classes they
    have (trees need not hold those classes themselves)."""

    shared_with: dict[int, set[int]]
    rc_ids: frozenset[int]


@functools.cache
def _sharing(any_class: bool) -> sa.Select:
    return q.sharing_of(Binds(), any_class=any_class)


def _any_class(req: CandidatesRequest) -> bool:
    """A resourceless group may stand on a sharing provider whatever classes it holds."""
    return any(not g.resources for g in req.groups)


def _sharing_query(req: CandidatesRequest, names: q.Names) -> tuple[sa.Select, dict[str, Any]]:
    rc_ids = sorted(names.rc_ids[rc] for rc in req.resource_class_names())
    return _sharing(_any_class(req)), {"sharing_trait": names.sharing_trait, "sharing_rcs": rc_ids}


def fetch_names_sharing(conn: Connection, req: CandidatesRequest) -> tuple[q.Names, Sharing]:
    """:func:`fetch_names` and :func:`fetch_sharing` in one statement
    (:func:`rpquery.read.candidates._sql.names_sharing_of`), which also carries the
    read's session settings where there are some
    (:func:`rpquery.store.dialects.read_settings`): the first round trip of a request
    is its only one before the anchor roots."""
    rcs, trs = set(req.resource_class_names()), set(req.trait_names())
    name = conn.dialect.name
    fenced = dialects.backend(name).fences_sharing
    cloud = conn.engine.url
    count = _ROOT_COUNT.get(cloud, ROOT_COUNT_AGE) is None
    stmt, params = _names_sharing_query(req, dialects.read_settings(name), fenced, count)
    every_rc: dict[str, int] = {}
    trait_ids: dict[str, int] = {}
    shared_with: dict[int, set[int]] = defaultdict(set)
    shared_rcs: set[int] = set()
    # (its plan is the same for every request: PostgreSQL keeps it)
    for name, ident, root, rc in driver_rows(conn, stmt, params, prepare=True):
        if name is None:
            if root is None:  # the roots' count (0 when not counted)
                if count:
                    _ROOT_COUNT.put(cloud, int(ident))
                continue
            shared_with[int(root)].add(int(ident))  # a sharing pair
            if rc is not None:
                shared_rcs.add(int(rc))
        elif root is None:
            every_rc[name] = int(ident)
        else:
            trait_ids[name] = int(ident)
    names = names_found(rcs, trs, every_rc, trait_ids)
    return names, Sharing(shared_with, frozenset(shared_rcs))


def _names_sharing_query(
    req: CandidatesRequest, settings: str | None, fenced: bool = False, count: bool = False
) -> tuple[sa.CompoundSelect, dict[str, Any]]:
    params = {
        "trait_names": sorted({*req.trait_names(), SHARING_TRAIT}),
        "sharing_trait_name": SHARING_TRAIT,
        "sharing_rc_names": sorted(req.resource_class_names()),
        "count_roots": int(count),
    }
    return _names_sharing_stmt(_any_class(req), settings, fenced), params


@functools.lru_cache(maxsize=8)
def _names_sharing_stmt(
    any_class: bool, settings: str | None, fenced: bool = False
) -> sa.CompoundSelect:
    column = None if settings is None else sa.literal_column(settings, sa.String)
    return q.names_sharing_of(any_class=any_class, settings=column, fenced=fenced)


def fetch_sharing(conn: Connection, req: CandidatesRequest, names: q.Names) -> Sharing:
    """Sharing pairs for the request's classes (one statement; none without sharing)."""
    shared_with: dict[int, set[int]] = defaultdict(set)
    rcs: set[int] = set()
    if names.sharing_trait is None:
        return Sharing(shared_with, frozenset())
    stmt, params = _sharing_query(req, names)
    for sharing_id, root, rc in conn.execute(stmt, params).all():
        shared_with[int(root)].add(int(sharing_id))
        if rc is not None:
            rcs.add(int(rc))
    return Sharing(shared_with, frozenset(rcs))


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
    if g.is_granular or not g.forbidden_aggs or not col.shared_with:
        return frozenset()
    rows = driver_rows(run.conn, _roots_in(), {"roots_in": sorted(g.forbidden_aggs)})
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
    if g.in_tree is not None:
        return sharing
    if not g.member_of:
        return frozenset()
    params: dict[str, Any] = {"local_ids": sorted(sharing)}
    params.update({f"local_member_of{i}": sorted(s) for i, s in enumerate(g.member_of)})
    return frozenset(
        int(rp) for (rp,) in driver_rows(run.conn, _local_sharing_stmt(len(g.member_of)), params)
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
    n_flags = 0 if g.is_granular else len(g.required)
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
    requests have no candidate: on SQLite, where each statement is its own, and on a
    server for every root, whose statements are not merged, they cost a statement
    each)."""
    scope = scope_key(roots.scope)
    if roots.ids is not None and isinstance(scope, BatchRoots):
        shared_with = {r: sharing.shared_with[r] for r in roots.ids if r in sharing.shared_with}
    else:
        shared_with = sharing.shared_with
    sharing_ids = sorted(set().union(*shared_with.values())) if shared_with else []
    shared = {"sharing_ids": sharing_ids, "sharing_exempt": sharing_ids}
    run = _Run(conn, names, scope, {**roots.params, **shared})
    col = _Collector(shared_with)
    order = sorted(req.groups, key=lambda g: (not g.is_granular, not g.resources, g.suffix))
    contended = contended_classes(req) if lean else None
    if grouped is None:
        grouped = dialects.groups_offers(conn)
    carrier = None
    # every root (a whole-cloud answer), or a walk's batch of every root in an id range
    # with no sharing provider (the summarised trees are then the batches' own)
    whole_trees = roots.scope is None or (roots.scope is ROOT_RANGE and not sharing_ids)
    if summary_rows and whole_trees and contended is not None:
        carrier = next(
            (g for g in order if contended.isdisjoint(g.resources) and carries_summary(g)),
            None,
        )
    parts: dict[tuple[object, ...], tuple[BatchStatement, dict[str, Any] | None]] = {}
    for g in order:  # the statements _group_slots runs, as it runs them
        room = contended is None or not contended.isdisjoint(g.resources)
        key = (filters_key(g), tuple(sorted(g.resources.items())))
        parts.setdefault(key, group_statement(g, names, room, grouped, g is carrier))
    if req.same_subtree:
        parts[("tree shape",)] = (TreeShape(), None)
    run.prefetch(list(parts.values()))
    slots: list[Slot] = []
    done: dict[tuple[object, ...], list[Slot]] = {}
    hopeless = False
    for g in order:  # identical groups: one statement, the same choices under each suffix
        key = (filters_key(g), tuple(sorted(g.resources.items())))
        if key in done:
            slots.extend(dataclasses.replace(s, suffix=g.suffix) for s in done[key])
        else:
            room = contended is None or not contended.isdisjoint(g.resources)
            found = _group_slots(run, g, col, room, grouped, g is carrier, give_up)
            slots.extend(done.setdefault(key, found))
            if give_up and not all(any(s.choices.values()) for s in found):
                hopeless = True
                break
    parent_of: dict[int, int | None] = {}
    if req.same_subtree and not hopeless:
        for rp, parent in run.execute(TreeShape()):
            parent_of[int(rp)] = int(parent) if parent is not None else None
    anchors = roots.ids if roots.ids is not None else sorted(col.local_roots | shared_with.keys())
    unsuffixed = [g for g in req.groups if not g.is_granular]
    rules = SearchRules(
        isolate=req.group_policy == "isolate",
        same_subtree=tuple(frozenset(s) for s in req.same_subtree),
        required_sets=len(unsuffixed[0].required) if unsuffixed else 0,
        flags=col.flags,
    )
    data = SearchData(col.inventory, col.root_of, parent_of)
    return Loaded(
        anchors,
        slots,
        data,
        rules,
        frozenset(sharing_ids),
        col.summary_inventory,
        hopeless,
        col.summary_roots,
    )


def fetch_summaries(
    conn: Connection,
    root_ids: set[int],
    rc_names: Mapping[int, str],
    *,
    written: bool | None = None,
    inventory: Sequence[Sequence[Any]] | None = None,
    cloud_roots: Sequence[int] | None = None,
) -> SummaryRows:
    """Summaries of every provider in the trees ``root_ids``, kept as read:
    :class:`SummaryRows` writes or shapes them only when rendered or read.
    ``inventory``: (provider ids, class ids, capacities, usages) columns of every
    inventory of those trees (and maybe of others: only the summarised providers' are
    used), already read with a group's statement (:func:`load_groups`
    ``summary_rows``); without, they are read here (where the database does not write
    the resources).

    One row per provider with its trait ids (:func:`~._sql.summary_stmt`; on
    MySQL/MariaDB as one JSON text, :func:`json_rows`), then the names of the distinct
    ids (one small statement, none without traits). Without ``inventory``, resources
    are ``written`` as JSON text by the database where its driver decodes values
    slowly (default: :func:`rpquery.store.dialects.renders_summaries`, MySQL/MariaDB),
    else read as inventory rows (one more statement) for Python to write; a provider
    whose resources the database could not write exactly (a capacity of 2**53 or more)
    has its inventory rows read too.

    ``cloud_roots``: the root of every inventory of the cloud (with ``inventory``, read
    over every root); when ``root_ids`` are at least half of those trees, on
    MySQL/MariaDB the trait ids of every provider come as one text
    (:func:`every_trait_texts`), not from a subquery per summarised provider, and the
    providers' statement reads every provider (no list of thousands of trees to render
    inline), those of other trees dropped here."""
    if written is None:
        written = inventory is None and dialects.renders_summaries(conn)
    params: dict[str, Any] = {"tree_ids": sorted(root_ids)}
    as_json = dialects.rows_as_json(conn)
    read = json_rows if as_json else driver_rows
    small = len(root_ids) <= SUMMARY_SMALL
    every_trait = as_json and not written and cloud_roots is not None and not small
    if every_trait and 2 * len(root_ids) >= len(set(cloud_roots)):  # type: ignore[arg-type]
        texts = every_trait_texts(conn)
    else:
        texts = None
    named = sorted(rc_names.items())[:SUMMARY_NAMED] if written else []
    for i, (rc, name) in enumerate(named):  # class names bound, quoted (no join per inventory)
        params[f"summary_rc{i}"] = rc
        params[f"summary_rc_name{i}"] = orjson.dumps(name).decode()
    if small:  # providers, inventories, trait names: one statement
        with_inventory = not written and inventory is None
        stmt = _summary_small(written, len(named), with_inventory)
        rows = read(conn, stmt, params)
        return _small_summaries(conn, rows, rc_names, inventory, written, with_inventory)
    if written:
        providers = read(conn, _summary(len(named)), params)
    else:
        if texts is None:
            providers = read(conn, summary_providers(), params)
        else:  # every provider (no list of thousands of trees to render), kept here
            every = read(conn, summary_untraited(), {})
            providers = [row for row in every if row[4] in root_ids]
    if not written:
        inventory_rows = (
            driver_rows(conn, summary_inventories(), params) if inventory is None else None
        )
    else:
        unwritten = [row[0] for row in providers if row[5] is None]
        inventory_rows = []
        if unwritten:
            ids = {"summary_ids": unwritten}
            inventory_rows = driver_rows(conn, summary_inventories_of(), ids)
    column = None if texts is None else [texts.get(row[0]) for row in providers]
    trait_texts = set(column if column is not None else [row[-1] for row in providers])
    trait_texts.discard(None)
    trait_ids = sorted({int(t) for text in trait_texts for t in text.split(",")})
    trait_names: dict[int, str] = {}
    if trait_ids:
        rows = driver_rows(conn, summary_trait_names(), {"summary_trait_ids": trait_ids})
        trait_names = {int(ident): name for ident, name in rows}
    return SummaryRows.from_driver(
        providers,
        inventory_rows,
        trait_names,
        rc_names,
        inventory_columns=inventory,
        trait_column=column,
    )


def every_trait_texts(conn: Connection) -> dict[int, str] | None:
    """Every provider's trait ids as text (``"12,7,30"``, as
    :func:`~._sql.summary_trait_ids` writes them), by provider id, from one JSON text
    (:func:`~._sql.every_trait_text_stmt`); ``None`` when the text came back cut short
    (fewer providers than counted, no JSON, ``NULL`` past ``max_allowed_packet``): the
    caller reads them per provider instead."""
    ((count, text),) = driver_rows(conn, every_trait_text(), {})
    if not count:
        return {}
    try:
        pairs = orjson.loads(text) if text is not None else None
    except orjson.JSONDecodeError:
        pairs = None
    if not isinstance(pairs, list) or len(pairs) != count:
        return None
    return dict(pairs)


def _small_summaries(
    conn: Connection,
    rows: Sequence[Sequence[Any]],
    rc_names: Mapping[int, str],
    inventory: Sequence[Sequence[Any]] | None,
    written: bool,
    with_inventory: bool,
) -> SummaryRows:
    """:class:`SummaryRows` of :func:`~._sql.summary_small_stmt`'s rows: a provider's
    has a uuid, an inventory's neither a uuid nor a name, a trait's a name only. The
    inventory rows of providers whose resources the database did not write come from
    one more statement, as in :func:`fetch_summaries`."""
    providers: list[Sequence[Any]] = []
    inventory_rows: list[tuple[Any, ...]] = []
    trait_names: dict[int, str] = {}
    for row in rows:
        if row[1] is not None:
            providers.append(row[:-1] if with_inventory else row)
        elif row[2] is not None:
            trait_names[int(row[0])] = row[2]
        else:  # (provider, class, capacity, used)
            inventory_rows.append((row[0], row[3], row[-1], row[4]))
    unwritten = [row[0] for row in providers if row[5] is None] if written else []
    if unwritten:
        inventory_rows = driver_rows(conn, summary_inventories_of(), {"summary_ids": unwritten})
    return SummaryRows.from_driver(
        providers,
        inventory_rows if inventory is None else None,
        trait_names,
        rc_names,
        inventory_columns=inventory,
    )


@functools.lru_cache(maxsize=32)
def _summary_small(written: bool, named: int, inventories: bool) -> sa.CompoundSelect:
    return q.summary_small_stmt(
        "tree_ids", resources=written, named=named, inventories=inventories
    )


@functools.lru_cache(maxsize=8)
def _summary(named: int) -> sa.Select:
    """The summaries' providers with their resources written, ``named`` classes named
    by bound values (:func:`~rpquery.read.candidates._sql.summary_resources`)."""
    return q.summary_stmt("tree_ids", resources=True, named=named)


def fetch_uuids(conn: Connection, ids: set[int]) -> dict[int, str]:
    """Uuids of providers outside the summarised trees (an anchor that only sharing
    providers served): ``SELECT id, uuid FROM resource_providers WHERE id IN (:ids)``."""
    rows = conn.execute(_uuids(), {"uuid_ids": sorted(ids)})
    return {int(ident): uuid for ident, uuid in rows}


@functools.cache
def _uuids() -> sa.Select:
    rp = resource_providers
    return sa.select(rp.c.id, rp.c.uuid).where(rp.c.id.in_(ids_param("uuid_ids")))


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
    names_sharing, params = _names_sharing_query(req, None)
    out.append(names_sharing.params(params))
    for g in req.groups:
        what, values = group_statement(g, names)
        stmt = _stmt(what, scope_key(roots))
        out.append(
            stmt.params({**roots_values, **values, "sharing_ids": [], "sharing_exempt": []})
        )
    return out
