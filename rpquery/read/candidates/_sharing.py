"""The sharing pairs of a candidates request: which sharing providers (the sharing
trait, in an aggregate) share with which trees, and which of the requested classes
they have.

Read with the request's names in its first statement (:func:`fetch_names_sharing`:
every pair of the cloud), or, for a small ``limit``'s walk where a round trip costs
little (SQLite, :func:`pairs_per_batch`), only the classes with the names and each
batch's own pairs with its roots (:func:`batch_pairs`). The statements:
:mod:`._sql` (``names_sharing_of``, ``sharing_of``, ``batch_sharing_of``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery.read._clauses import Binds
from rpquery.read._names import SHARING_TRAIT, names_found
from rpquery.read.candidates import _sql as q
from rpquery.read.candidates._batches import _ROOT_COUNT, ROOT_COUNT_AGE, Batch
from rpquery.read.request import CandidatesRequest
from rpquery.store import dialects
from rpquery.store.runner import driver_rows

#: The most roots of a batch whose own sharing pairs are read
#: (:func:`_batch_shared_with`); a larger batch reads every pair: 1,063 roots' pairs
#: cost ~10 ms more than the cloud's 1,009 (SQLite, 5,000 hosts).
PAIRS_BATCH_MOST = 200


@dataclass(frozen=True)
class Sharing:
    """Which sharing providers share with which trees, and the requested classes they
    have (trees need not hold those classes themselves)."""

    shared_with: dict[int, set[int]]
    rc_ids: frozenset[int]
    #: False: ``shared_with`` is not read (empty); each batch reads its trees' pairs
    #: (:func:`_batch_shared_with`), none when ``rc_ids`` is empty
    pairs: bool = True
    #: every pair (one map), once a batch of more than :data:`PAIRS_BATCH_MOST` roots
    #: read them
    every: list[dict[int, set[int]]] = dataclasses.field(default_factory=list, compare=False)


def pairs_per_batch(conn: Connection, first: Batch) -> bool:
    """Whether a request whose first batch is ``first`` reads each batch's sharing
    pairs (:func:`fetch_names_sharing` ``per_batch``): where a round trip costs little
    (SQLite, in the process; a server's statement more costs what the pairs save:
    3.8 ms either way on PostgreSQL at 5,000 hosts), when that batch has at most
    :data:`PAIRS_BATCH_MOST` roots. Not while this process has no recent count of the
    database's roots: the names statement counts them, and on a small cloud the first
    batch then becomes every root, whose pairs a per-batch read would fetch with a
    statement more (and a second names statement to compile for one request shape)."""
    if dialects.backend(conn.dialect.name).on_server:
        return False
    if _ROOT_COUNT.get(conn.engine.url, ROOT_COUNT_AGE) is None:
        return False
    return first.limit is not None and first.limit <= PAIRS_BATCH_MOST


@functools.cache
def _sharing(any_class: bool) -> sa.Select:
    return q.sharing_of(Binds(), any_class=any_class)


def _any_class(req: CandidatesRequest) -> bool:
    """A resourceless group may stand on a sharing provider whatever classes it holds."""
    return any(not g.resources for g in req.groups)


def _sharing_query(req: CandidatesRequest, names: q.Names) -> tuple[sa.Select, dict[str, Any]]:
    rc_ids = sorted(names.rc_ids[rc] for rc in req.resource_class_names())
    return _sharing(_any_class(req)), {"sharing_trait": names.sharing_trait, "sharing_rcs": rc_ids}


def fetch_names_sharing(
    conn: Connection, req: CandidatesRequest, per_batch: bool = False
) -> tuple[q.Names, Sharing]:
    """:func:`~rpquery.read.candidates._execute.fetch_names` and :func:`fetch_sharing`
    in one statement (:func:`rpquery.read.candidates._sql.names_sharing_of`), which
    also carries the read's server settings where there are some
    (:func:`rpquery.store.dialects.read_settings`): the first round trip of a request
    is its only one before the anchor roots.

    ``per_batch`` (:func:`pairs_per_batch`: a walk in small batches of roots, where a
    round trip costs little): without a resourceless group, only the classes the sharing pairs
    would have are read (``Sharing.pairs`` false), and each batch reads the pairs of
    its own trees (:func:`_batch_shared_with`): a ``limit=10`` of ``DISK_GB`` at 5,000
    hosts reads ~20 pairs, not the cloud's 1,032."""
    rcs, trs = set(req.resource_class_names()), set(req.trait_names())
    name = conn.dialect.name
    fenced = dialects.backend(name).fences_sharing
    cloud = conn.engine.url
    count = _ROOT_COUNT.get(cloud, ROOT_COUNT_AGE) is None
    classes_only = per_batch and not _any_class(req)
    stmt, params = names_sharing_query(
        req, dialects.read_settings(name), fenced, count, classes_only
    )
    every_rc: dict[str, int] = {}
    trait_ids: dict[str, int] = {}
    shared_with: dict[int, set[int]] = defaultdict(set)
    shared_rcs: set[int] = set()
    # (its plan is the same for every request: PostgreSQL keeps it)
    for name, ident, root, rc in driver_rows(conn, stmt, params, prepare=True):
        if name is None:
            if root is not None:
                shared_with[int(root)].add(int(ident))  # a sharing pair
                if rc is not None:
                    shared_rcs.add(int(rc))
            elif rc is not None:  # a class of the pairs (classes_only)
                shared_rcs.add(int(rc))
            elif count:  # the roots' count (0 when not counted)
                _ROOT_COUNT.put(cloud, int(ident))
        elif root is None:
            every_rc[name] = int(ident)
        else:
            trait_ids[name] = int(ident)
    names = names_found(rcs, trs, every_rc, trait_ids)
    return names, Sharing(shared_with, frozenset(shared_rcs), pairs=not classes_only)


def names_sharing_query(
    req: CandidatesRequest,
    settings: str | None,
    fenced: bool = False,
    count: bool = False,
    classes_only: bool = False,
) -> tuple[sa.CompoundSelect, dict[str, Any]]:
    params = {
        "trait_names": sorted({*req.trait_names(), SHARING_TRAIT}),
        "sharing_trait_name": SHARING_TRAIT,
        "sharing_rc_names": sorted(req.resource_class_names()),
        "count_roots": int(count),
    }
    return _names_sharing_stmt(_any_class(req), settings, fenced, classes_only), params


@functools.lru_cache(maxsize=8)
def _names_sharing_stmt(
    any_class: bool, settings: str | None, fenced: bool = False, classes_only: bool = False
) -> sa.CompoundSelect:
    column = None if settings is None else sa.literal_column(settings, sa.String)
    return q.names_sharing_of(
        any_class=any_class, settings=column, fenced=fenced, classes_only=classes_only
    )


@functools.cache
def _batch_sharing() -> sa.Select:
    return q.batch_sharing_of(Binds())


def batch_pairs(
    conn: Connection,
    req: CandidatesRequest,
    names: q.Names,
    bound: list[int] | None,
    sharing: Sharing,
) -> dict[int, set[int]]:
    """The sharing pairs of a batch's trees: those of ``bound``, the batch's roots when
    its statements are bound to them (else ``None``: every pair). Read by the names
    statement (``Sharing.pairs``), or for this batch (:func:`_batch_shared_with`); none
    when no sharing provider in an aggregate has a requested class."""
    if sharing.pairs:
        return _shared_with(bound, sharing)
    if sharing.rc_ids:
        return _batch_shared_with(conn, req, names, bound, sharing)
    return {}


def _batch_shared_with(
    conn: Connection,
    req: CandidatesRequest,
    names: q.Names,
    bound: list[int] | None,
    sharing: Sharing,
) -> dict[int, set[int]]:
    """The sharing pairs of the batch's trees, read for them (``Sharing.pairs`` false,
    some sharing provider in an aggregate with a requested class): those of ``bound``
    when they are at most :data:`PAIRS_BATCH_MOST` roots; else every pair
    (:func:`fetch_sharing`, once per request), as :func:`_shared_with` keeps them. One
    statement at most."""
    if bound is None or len(bound) > PAIRS_BATCH_MOST:
        if not sharing.every:
            sharing.every.append(fetch_sharing(conn, req, names).shared_with)
        return _shared_with(bound, dataclasses.replace(sharing, shared_with=sharing.every[0]))
    _, params = _sharing_query(req, names)
    pairs: dict[int, set[int]] = defaultdict(set)
    rows = driver_rows(conn, _batch_sharing(), {**params, "sharing_roots": bound})
    for sharing_id, root, _rc in rows:
        pairs[int(root)].add(int(sharing_id))
    return {r: pairs[r] for r in bound if r in pairs}


def _shared_with(bound: list[int] | None, sharing: Sharing) -> dict[int, set[int]]:
    """The pairs of ``sharing`` of the trees of ``bound`` (all of them when ``None``)."""
    if bound is not None:
        return {r: sharing.shared_with[r] for r in bound if r in sharing.shared_with}
    return sharing.shared_with


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
