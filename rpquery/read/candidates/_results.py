"""Result types of the allocation-candidate read path; :mod:`._render` renders them as
Placement 1.39's JSON (their ``to_placement`` / ``render`` methods delegate to it).

>>> AllocationRequest({"rp-1": {"VCPU": 1}}, {"": ("rp-1",)}, "rp-1").to_placement()
{'allocations': {'rp-1': {'resources': {'VCPU': 1}}}, 'mappings': {'': ['rp-1']}}

A whole-cloud answer holds ~10k requests and ~10k summaries, and building that many
frozen dataclasses costs more than the SQL. So :class:`AllocationCandidates` keeps the
search's compact rows (:class:`RequestRows`, :class:`SummaryRows`), renders
:meth:`AllocationCandidates.to_placement` straight from them, and builds the public
``allocation_requests`` / ``provider_summaries`` only on first access (then cached).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import orjson

from rpquery.read.candidates import _render

if TYPE_CHECKING:
    from rpquery.read.candidates._search import RawCandidate


_gc_lock = threading.Lock()
_gc_pauses = [0, False]  # [callers inside paused_gc, whether the first one disabled gc]
_gc_overdue = [0.0]  # monotonic time by which a collection is due while pauses overlap
_gc_depth = threading.local()  # this thread's pauses (``n``): only its outermost collects
#: Longest stretch (seconds) the collector stays paused while the pauses of a
#: server's threads overlap without a gap: past it, the caller leaving collects.
GC_PAUSE_LIMIT = 2.0


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector while a whole-cloud answer is built.

    Why: an answer allocates a few hundred thousand small dicts, tuples and rows; each
    allocation burst triggers generational collections that rescan everything alive
    (measured at 5,000 hosts: ~40 % of the Python time, e.g. rendering 10k summaries
    97 → 46 ms). Nothing built here forms reference cycles, so reference counting frees
    it all the same. Re-entrant and thread-safe (a counter): gc is re-enabled when the
    last caller leaves, and only if it was enabled when the first one came in.

    A server's threads may overlap their pauses without a gap for as long as requests
    keep coming; the cyclic garbage of everything else (requests' exceptions and their
    frames) would then never be collected. So a caller leaving while others are still
    inside runs one collection itself once the collector has been paused for
    :data:`GC_PAUSE_LIMIT` seconds, and the clock starts again. Only a thread's
    outermost pause does: a nested one (the body written inside
    :func:`allocation_candidates_json`'s pause) leaves with its answer still alive, and
    a collection then would walk it all (a whole cloud's answer taking over the limit,
    under load or a profiler: ~0.6 s a collection at 5,000 hosts on a loaded machine).

    >>> with paused_gc():
    ...     gc.isenabled()
    False
    """
    depth = getattr(_gc_depth, "n", 0)
    _gc_depth.n = depth + 1
    with _gc_lock:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
            _gc_overdue[0] = time.monotonic() + GC_PAUSE_LIMIT
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        _gc_depth.n = depth
        collect = False
        with _gc_lock:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0:
                if _gc_pauses[1]:
                    gc.enable()
            elif _gc_pauses[1] and not depth and time.monotonic() >= _gc_overdue[0]:
                _gc_overdue[0] = time.monotonic() + GC_PAUSE_LIMIT
                collect = True
        if collect:
            gc.collect()


@dataclass(frozen=True)
class ResourceSummary:
    capacity: int
    used: int


@dataclass(frozen=True)
class ProviderSummary:
    """One provider of a returned tree: every inventory's capacity and usage, traits."""

    uuid: str
    name: str | None
    parent_uuid: str | None
    root_uuid: str
    resources: Mapping[str, ResourceSummary]
    traits: frozenset[str]

    def to_placement(self) -> dict[str, Any]:
        return _render.render_summary(self)


@dataclass(frozen=True)
class AllocationRequest:
    """``allocations[rp_uuid][rc] = amount``; ``mappings[suffix]`` = providers used."""

    allocations: Mapping[str, Mapping[str, int]]
    mappings: Mapping[str, tuple[str, ...]]
    root_uuid: str

    @classmethod
    def _make(
        cls,
        allocations: Mapping[str, Mapping[str, int]],
        mappings: Mapping[str, tuple[str, ...]],
        root_uuid: str,
    ) -> AllocationRequest:
        """Build one without the frozen ``__init__`` (three ``object.__setattr__``
        calls): the same object, ~2x cheaper, for the 10⁴ requests of a whole-cloud
        answer. Only for values already checked (the search's own)."""
        out = _new_object(cls)
        out.__dict__.update(allocations=allocations, mappings=mappings, root_uuid=root_uuid)
        return out

    def to_placement(self) -> dict[str, Any]:
        return _render.render_request(self)


_new_object = object.__new__
# layout patterns of two picks: the same provider twice, or two providers
_SAME: tuple[int, ...] = (0, 0)
_APART: tuple[int, ...] = (0, 1)

# (provider id, uuid, name, parent id, root id, resources by class name, traits)
SummaryRow = tuple[
    int, str, "str | None", "int | None", int, dict[str, ResourceSummary], frozenset[str]
]
# (representative slot index, sorted (class name, amount) pairs) per provider allocated
_Allocs = tuple[tuple[int, tuple[tuple[str, int], ...]], ...]
# (suffix, representative slot indices) per suffix, sorted by suffix
_Maps = tuple[tuple[str, tuple[int, ...]], ...]


class RequestRows:
    """Allocation requests as the search found them: picks (provider ids per slot) plus
    id → uuid and class id → name maps. Candidates with the same slots and the same
    *pattern* (which slots picked the same provider) share a layout computed once —
    merged, name-sorted amounts per provider and suffix → slots — so rendering one is a
    few dict builds, with no per-candidate sorting beyond ordering two or three uuids.

    >>> RequestRows([], {}, {}).build()
    ()
    """

    __slots__ = ("chosen", "uuid_by_id", "rc_name", "_layouts")

    def __init__(
        self,
        chosen: Sequence[RawCandidate],
        uuid_by_id: Mapping[int, str],
        rc_name: Mapping[int, str],
    ) -> None:
        self.chosen, self.uuid_by_id, self.rc_name = chosen, uuid_by_id, rc_name
        self._layouts: dict[tuple[int, tuple[int, ...]], tuple[_Allocs, _Maps]] = {}

    def layout(self, c: RawCandidate, pattern: tuple[int, ...]) -> tuple[_Allocs, _Maps]:
        """The layout of candidates with ``c``'s slots and ``pattern`` (``pattern[j]``:
        the first slot that picked slot ``j``'s provider), computed once."""
        key = (id(c.slots), pattern)
        found = self._layouts.get(key)
        if found is not None:
            return found
        merged: dict[int, dict[str, int]] = {}
        suffixes: dict[str, list[int]] = {}
        for slot, rep in zip(c.slots, pattern, strict=True):
            ks = suffixes.setdefault(slot.suffix, [])
            if rep not in ks:
                ks.append(rep)
            if slot.rc_amounts:  # a resourceless group allocates nothing
                per = merged.setdefault(rep, {})
                for rc, amount in slot.rc_amounts:
                    name = self.rc_name[rc]
                    per[name] = per.get(name, 0) + amount
        allocs = tuple((rep, tuple(sorted(per.items()))) for rep, per in merged.items())
        maps = tuple((s, tuple(ks)) for s, ks in sorted(suffixes.items()))
        self._layouts[key] = (allocs, maps)
        return allocs, maps

    def laid_out(self) -> Iterator[tuple[Any, Any, list[str], Any, Any]]:
        """Each chosen candidate with its picks, their uuids and its (cached) layout."""
        uuid_by_id, layouts = self.uuid_by_id, self._layouts
        for c in self.chosen:
            picks = c.picks
            pattern: tuple[int, ...]
            if len(picks) == 2:  # the common shape (two classes, or two groups)
                pattern = _SAME if picks[0] == picks[1] else _APART
            else:
                pattern = tuple(map(picks.index, picks))
            found = layouts.get((id(c.slots), pattern))
            allocs, maps = found if found is not None else self.layout(c, pattern)
            yield c, picks, [uuid_by_id[p] for p in picks], allocs, maps

    def build(self) -> tuple[AllocationRequest, ...]:
        """The public frozen requests (mappings' providers in id order)."""
        uuid_by_id, out = self.uuid_by_id, []
        make = AllocationRequest._make
        for c, picks, uu, allocs, maps in self.laid_out():
            out.append(
                make(
                    {uu[k]: dict(res) for k, res in allocs},
                    {
                        s: (uu[ks[0]],)
                        if len(ks) == 1
                        else tuple(uu[k] for k in sorted(ks, key=picks.__getitem__))
                        for s, ks in maps
                    },
                    uuid_by_id[c.root_id],
                )
            )
        return tuple(out)

    def render(self) -> list[dict[str, Any]]:
        """Placement's ``allocation_requests`` (:func:`._render.render_request_rows`)."""
        return _render.render_request_rows(self)


class SummaryRows:
    """Provider summaries as read (:func:`~._summaries.fetch_summaries`): one row per
    provider (id, uuid, name, parent id, root id, its resources as JSON text when the
    database wrote them, its trait ids as text), inventory rows for the providers whose
    resources it did not write, and the trait sets by their text. Kept as columns (a
    handful of tuples for the cyclic GC to walk, not ~10k rows), written as JSON
    (:meth:`placement_body`) or shaped into :data:`SummaryRow` tuples (:attr:`rows`,
    for the public objects and :meth:`render`) only when asked.

    >>> rows = SummaryRows.from_driver(
    ...     [(1, "rp-1", "cn1", None, 1, '{"VCPU":{"capacity":8,"used":2}}', "7,3")],
    ...     [], {3: "B", 7: "A"}, {0: "VCPU"})
    >>> rows.render()
    {'rp-1': {'resources': {'VCPU': {'capacity': 8, 'used': 2}}, 'traits': ['A', 'B'], \
'parent_provider_uuid': None, 'root_provider_uuid': 'rp-1'}}
    """

    __slots__ = (
        "_providers",
        "_written",
        "_inventory",
        "_rc_names",
        "_resources",
        "_rows",
        "trait_sets",
        "uuid_by_id",
    )

    def __init__(
        self,
        providers: Sequence[Sequence[Any]],
        written: Sequence[str | None] | None,
        inventory: Sequence[Sequence[Any]],
        trait_sets: Mapping[str, frozenset[str]],
        rc_names: Mapping[int, str],
    ) -> None:
        #: (ids, uuids, names, parent ids, root ids, trait id texts) columns
        self._providers = providers
        #: each provider's resources as JSON text when the database wrote them (None:
        #: not written, from ``inventory``), else ``None``: all from ``inventory``
        self._written = written
        #: (provider ids, class ids, capacities, usages) columns
        self._inventory = inventory
        self._rc_names = rc_names
        self._resources: list[str] | None = None
        self._rows: list[SummaryRow] | None = None
        #: trait id text (as the summary statement returned it) → trait names
        self.trait_sets = trait_sets
        self.uuid_by_id: dict[int, str] = dict(zip(providers[0], providers[1], strict=True))

    @classmethod
    def from_driver(
        cls,
        provider_rows: Sequence[Sequence[Any]],
        inventory_rows: Sequence[Sequence[Any]] | None,
        trait_names: Mapping[int, str],
        rc_names: Mapping[int, str],
        *,
        inventory_columns: Sequence[Sequence[Any]] | None = None,
        trait_column: Sequence[str | None] | None = None,
        provider_columns: Sequence[Sequence[Any]] | None = None,
    ) -> SummaryRows:
        """From the summary statements' rows as read: ``(id, uuid, name, parent id,
        root id[, resources JSON], trait id text)`` per provider (with the resources
        column when the database wrote them), ``(provider id, class id, capacity,
        used)`` per inventory of the providers whose resources it did not write (or,
        ``inventory_rows`` ``None``, the same as ``inventory_columns``, one column each,
        which may hold other providers' too), trait id → name and class id → name. A
        trait id without a name (deleted meanwhile) is left out. ``trait_column``: the
        trait id texts, one per provider row, when the rows have none (columns after
        the root id's are then left out: what the trait cache checks);
        ``provider_columns``: the provider rows given as columns instead."""
        columns: list[Sequence[Any]] = (
            list(zip(*provider_rows, strict=True))
            if provider_columns is None
            else list(provider_columns)
        )
        if trait_column is not None:  # the rows' columns after the root's are not read
            columns = [*(columns[:5] or [()] * 5), trait_column]
        columns = columns or [()] * 6
        written = columns.pop(5) if len(columns) == 7 else None
        sets: dict[str, frozenset[str]] = {}
        name_of = trait_names.get
        for text in set(columns[5]):
            if text is not None:
                found = set(map(name_of, map(int, text.split(","))))
                found.discard(None)
                sets[text] = frozenset(found)  # type: ignore[arg-type]
        if inventory_rows is None:
            assert inventory_columns is not None
            inventory = list(inventory_columns)
        else:
            inventory = list(zip(*inventory_rows, strict=True)) or [()] * 4
        return cls(columns, written, inventory, sets, rc_names)

    @property
    def providers(self) -> Sequence[Sequence[Any]]:
        """(ids, uuids, names, parent ids, root ids, trait id texts), one column each."""
        return self._providers

    def resources(self) -> list[str]:
        """Each provider's resources as Placement's JSON text, in provider column
        order: as the database wrote them, else written here from the inventory rows
        (:func:`._render.resources_texts`). Computed once."""
        found = self._resources
        if found is None:
            ids, written = self._providers[0], self._written
            texts = _render.resources_texts(self._inventory, self._rc_names)
            if written is None:
                found = [texts.get(rp, "{}") for rp in ids]
            else:
                found = [
                    text if text is not None else texts.get(rp, "{}")
                    for rp, text in zip(ids, written, strict=True)
                ]
            self._resources = found
        return found

    @property
    def rows(self) -> Sequence[SummaryRow]:
        """One :data:`SummaryRow` per provider, in id order; identical trait sets and
        (capacity, used) pairs shared (both are immutable)."""
        rows = self._rows
        if rows is None:
            rows = self._rows = _shape(self)
        return rows

    def placement_body(self, trait_key: Callable[[str], Any] | None = None) -> Any:
        """Placement's ``provider_summaries`` for the JSON body
        (:func:`._render.placement_json`), as JSON text embedded by orjson
        (:func:`._render.summaries_json`; traits in ``trait_key`` order, default by
        name)."""
        return orjson.Fragment(_render.summaries_json(self, trait_key))

    def build(self) -> dict[str, ProviderSummary]:
        """The public frozen summaries by uuid."""
        uuid_by_id = self.uuid_by_id
        return {
            uuid: ProviderSummary(
                uuid,
                name,
                uuid_by_id[parent] if parent is not None else None,
                uuid_by_id[root],
                resources,
                traits,
            )
            for _, uuid, name, parent, root, resources, traits in self.rows
        }

    def render(self) -> dict[str, Any]:
        """Placement's ``provider_summaries`` (:func:`._render.render_summary_rows`)."""
        return _render.render_summary_rows(self)


def _shape(summaries: SummaryRows) -> list[SummaryRow]:
    ids, uuids, names, parents, roots, trait_texts = summaries.providers
    sets, empty = summaries.trait_sets, frozenset[str]()
    pairs: dict[tuple[int, int], ResourceSummary] = {}
    rows: list[SummaryRow] = []
    loads = orjson.loads
    texts = summaries.resources()
    for row in zip(ids, uuids, names, parents, roots, texts, trait_texts, strict=True):
        rp, uuid, name, parent, root, text, traits = row
        resources: dict[str, ResourceSummary] = {}
        for rc, amounts in loads(text).items():
            pair = (amounts["capacity"], amounts["used"])
            summary = pairs.get(pair)
            if summary is None:
                summary = pairs[pair] = ResourceSummary(*pair)
            resources[rc] = summary
        found = sets[traits] if traits is not None else empty
        rows.append((rp, uuid, name, parent, root, resources, found))
    rows.sort(key=itemgetter(0))  # provider id order (the statement has no ORDER BY)
    return rows


class AllocationCandidates:
    """An answer: ``allocation_requests`` (tuple) and ``provider_summaries`` (uuid →
    summary). Immutable. Built from objects, or (as :func:`allocation_candidates` does)
    from compact rows with :meth:`from_rows`, in which case the objects are built on
    first access and :meth:`to_placement` never builds them.

    >>> AllocationCandidates().to_placement()
    {'allocation_requests': [], 'provider_summaries': {}}
    """

    __slots__ = ("_requests", "_summaries", "_request_rows", "_summary_rows")
    _requests: tuple[AllocationRequest, ...] | None
    _summaries: Mapping[str, ProviderSummary] | None
    _request_rows: RequestRows | None
    _summary_rows: SummaryRows | None

    def __init__(
        self,
        allocation_requests: Sequence[AllocationRequest] = (),
        provider_summaries: Mapping[str, ProviderSummary] | None = None,
    ) -> None:
        _set = object.__setattr__
        _set(self, "_requests", tuple(allocation_requests))
        _set(self, "_summaries", {} if provider_summaries is None else provider_summaries)
        _set(self, "_request_rows", None)
        _set(self, "_summary_rows", None)

    @classmethod
    def from_rows(cls, requests: RequestRows, summaries: SummaryRows) -> AllocationCandidates:
        out = cls.__new__(cls)
        _set = object.__setattr__
        _set(out, "_requests", None)
        _set(out, "_summaries", None)
        _set(out, "_request_rows", requests)
        _set(out, "_summary_rows", summaries)
        return out

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"AllocationCandidates is immutable (setting {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"AllocationCandidates is immutable (deleting {name!r})")

    @property
    def allocation_requests(self) -> tuple[AllocationRequest, ...]:
        found = self._requests
        if found is None:
            assert self._request_rows is not None
            with paused_gc():
                found = self._request_rows.build()
            object.__setattr__(self, "_requests", found)
        return found

    @property
    def provider_summaries(self) -> Mapping[str, ProviderSummary]:
        found = self._summaries
        if found is None:
            assert self._summary_rows is not None
            with paused_gc():
                found = self._summary_rows.build()
            object.__setattr__(self, "_summaries", found)
        return found

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AllocationCandidates):
            return NotImplemented
        return (self.allocation_requests, self.provider_summaries) == (
            other.allocation_requests,
            other.provider_summaries,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"AllocationCandidates(allocation_requests={self.allocation_requests!r}, "
            f"provider_summaries={self.provider_summaries!r})"
        )

    def to_placement(self) -> dict[str, Any]:
        """The body of Placement 1.39's ``GET /allocation_candidates`` response; fresh
        dicts and lists (callers may mutate them), rendered from the compact rows when
        there are some, without building the public objects (:mod:`._render`)."""
        if self._request_rows is not None and self._summary_rows is not None:
            with paused_gc():
                return _render.render_rows(self._request_rows, self._summary_rows)
        return _render.render_objects(self.allocation_requests, self.provider_summaries)

    def to_placement_json(self, *, trait_key: Callable[[str], Any] | None = None) -> bytes:
        """:meth:`to_placement` as JSON bytes (UTF-8, no spaces), written in one pass
        by orjson with shared parts, never through the dicts :meth:`to_placement`
        returns: what an API sends. ``trait_key`` orders each summary's traits (default:
        by name; Placement's API lists standard traits before custom ones).

        >>> AllocationCandidates().to_placement_json()
        b'{"allocation_requests":[],"provider_summaries":{}}'
        """
        if self._request_rows is not None and self._summary_rows is not None:
            with paused_gc():
                return _render.placement_json(self._request_rows, self._summary_rows, trait_key)
        return _render.objects_json(self.allocation_requests, self.provider_summaries, trait_key)
