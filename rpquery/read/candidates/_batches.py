"""Which anchor roots a request's batches ask for, and the hints that size them: the
batches of a ``limit`` (:class:`Batches`), the process-wide hints
(:class:`Hints`: candidates per root, the database's roots), and the anchor-roots
statement of a batch (:func:`roots_query`, :func:`select_roots`).

>>> Roots(ids=[3, 5], scope=[3, 5], params={"root_ids": [3, 5]}, exhausted=True).ids
[3, 5]
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement

from rpquery.policies.base import HostPolicy
from rpquery.read._clauses import Binds, ids_param
from rpquery.read._filters import filter_values, given_counts
from rpquery.read._policies import where_clauses
from rpquery.read.candidates import _sql as q
from rpquery.read.request import CandidatesRequest, RequestGroup
from rpquery.store import dialects
from rpquery.store.runner import driver_rows, ids_text

ROOT_IDS = ids_param("root_ids")
#: A batch of consecutive roots in id order (:class:`Batches`' walk)
ROOT_RANGE = q.RootRange(
    sa.bindparam("roots_lo", type_=sa.Integer), sa.bindparam("roots_hi", type_=sa.Integer)
)
EXCLUDE_IDS = ids_param("exclude_ids")


def filters_key(g: RequestGroup) -> tuple[object, ...]:
    """What a group's statements depend on besides its amounts: two groups with equal
    keys and equal resources get the same rows (the suffix only names them)."""
    return (g.is_granular, *filter_values(g))


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
    #: a walk's first batch of every root in an id range: every root up to the last
    #: (its statements read the indexes from their start:
    #: :func:`rpquery.store.dialects.ordered_joins`)
    first: bool = False


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
    """Orders *could serve* tests by their shape alone: granular or not, then how many
    of each filter the group gives (:data:`~rpquery.read._filters.GROUP_FILTERS`'
    order), then class name, for a stable order of tests of equal shape."""
    (_, rc, _amount), g = item
    return (g.is_granular, *given_counts(g), rc)


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
        ((count, total, text),) = driver_rows(conn, ids_text(stmt), params)
        # (a text cut right after a comma ends with an empty id: dropped, then counted)
        ids = sorted(int(i) for i in text.split(",") if i) if count and text else []
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
        first = batch.after is None
        return Roots(ids, ROOT_RANGE, scope, exhausted, filtered=False, first=first)
    return Roots(ids, ROOT_IDS, {"root_ids": ids}, exhausted, filtered)
