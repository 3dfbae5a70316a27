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
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from rpquery.read.candidates import _render

if TYPE_CHECKING:
    from rpquery.read.candidates._search import RawCandidate


_gc_lock = threading.Lock()
_gc_pauses = [0, False]  # [callers inside paused_gc, whether the first one disabled gc]


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector while a whole-cloud answer is built.

    Why: an answer allocates a few hundred thousand small dicts, tuples and rows; each
    allocation burst triggers generational collections that rescan everything alive
    (measured at 5,000 hosts: ~40 % of the Python time, e.g. rendering 10k summaries
    97 → 46 ms). Nothing built here forms reference cycles, so reference counting frees
    it all the same. Re-entrant and thread-safe (a counter): gc is re-enabled when the
    last caller leaves, and only if it was enabled when the first one came in.

    >>> with paused_gc():
    ...     gc.isenabled()
    False
    """
    with _gc_lock:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0 and _gc_pauses[1]:
                gc.enable()


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

    def _layout(self, c: RawCandidate, pattern: tuple[int, ...]) -> tuple[_Allocs, _Maps]:
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
            allocs, maps = found if found is not None else self._layout(c, pattern)
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


def shape_summaries(
    inventory_rows: Iterable[Any], trait_rows: Iterable[Any], rc_names: Mapping[int, str]
) -> list[SummaryRow]:
    """One :data:`SummaryRow` per provider from the summary statements' rows (see
    :meth:`SummaryRows.from_driver`). Identical trait sets and (capacity, used) pairs
    are shared between rows (both are immutable).

    >>> first = shape_summaries([(1, "u1", "cn1", None, 1, 0, 8.0, 2), (2, "u2", "n0", 1,
    ...     1, None, None, None), (1, "u1", "cn1", None, 1, 1, 512.0, 0)],
    ...     [(1, "B"), (1, "A")], {0: "VCPU", 1: "MEMORY_MB"})[0]
    >>> sorted(first[5]), first[5]["MEMORY_MB"], sorted(first[6])
    (['MEMORY_MB', 'VCPU'], ResourceSummary(capacity=512, used=0), ['A', 'B'])
    """
    names_of: dict[int, list[str]] = defaultdict(list)
    for rp, name in trait_rows:
        names_of[rp].append(name)
    trait_sets: dict[frozenset[str], frozenset[str]] = {}
    traits: dict[int, frozenset[str]] = {}
    for rp, found in names_of.items():
        key = frozenset(found)
        traits[rp] = trait_sets.setdefault(key, key)
    empty: frozenset[str] = frozenset()
    rows: list[SummaryRow] = []
    amounts: dict[tuple[int, int], ResourceSummary] = {}
    by_rp: dict[int, dict[str, ResourceSummary]] = {}
    last = None
    resources: dict[str, ResourceSummary] = {}
    for rp, uuid, name, parent, root, rc, capacity, used in inventory_rows:
        if rp != last:  # rows of a provider usually come together, but need not
            last = rp
            found_resources = by_rp.get(rp)
            if found_resources is None:
                resources = by_rp[rp] = {}
                rows.append((rp, uuid, name, parent, root, resources, traits.get(rp, empty)))
            else:
                resources = found_resources
        if rc is not None:
            # capacity is a float on every driver, SUM a Decimal on MySQL: int() both
            pair = (int(capacity), int(used))
            summary = amounts.get(pair)
            if summary is None:
                summary = amounts[pair] = ResourceSummary(*pair)
            resources[rc_names[rc]] = summary
    rows.sort(key=itemgetter(0))  # provider id order (the statement has no ORDER BY)
    return rows


class SummaryRows:
    """Provider summaries as read: one :data:`SummaryRow` per provider (parent and root
    as ids, mapped to uuids when built or rendered). Trait sets and resource summaries
    are shared between rows (immutable); their sorted orders are computed once each.

    >>> SummaryRows([(1, "rp-1", "cn1", None, 1, {}, frozenset({"B", "A"}))]).render()
    {'rp-1': {'resources': {}, 'traits': ['A', 'B'], 'parent_provider_uuid': None, \
'root_provider_uuid': 'rp-1'}}
    """

    __slots__ = ("_rows", "_raw", "uuid_by_id")

    def __init__(self, rows: Sequence[SummaryRow]) -> None:
        self._rows: Sequence[SummaryRow] | None = rows
        self._raw: tuple[tuple[Any, ...], tuple[Any, ...], Mapping[int, str]] | None = None
        self.uuid_by_id = {row[0]: row[1] for row in rows}

    @classmethod
    def from_driver(
        cls,
        inventory_rows: Sequence[Any],
        trait_rows: Sequence[Any],
        rc_names: Mapping[int, str],
    ) -> SummaryRows:
        """From the summary statements' rows as read: ``(provider id, uuid, name, parent
        id, root id, class id, capacity, used)`` ordered by provider, and ``(provider
        id, trait name)``; ``rc_names`` names the class ids. Only the id → uuid map
        (which requests need) is built now; the per-provider rows are shaped on first
        use, so an answer whose summaries are never read or rendered never pays for
        them."""
        out = cls.__new__(cls)
        out._rows = None
        # Kept as columns, not rows: a handful of tuples instead of ~50k for the cyclic
        # GC to walk when it is re-enabled after a whole-cloud answer (~5 ms).
        inv_cols = tuple(zip(*inventory_rows, strict=True)) or ((),) * 8
        trait_cols = tuple(zip(*trait_rows, strict=True)) or ((),) * 2
        out._raw = (inv_cols, trait_cols, rc_names)
        out.uuid_by_id = dict(zip(inv_cols[0], inv_cols[1], strict=True))
        return out

    @property
    def rows(self) -> Sequence[SummaryRow]:
        rows = self._rows
        if rows is None:
            assert self._raw is not None
            inv_cols, trait_cols, rc_names = self._raw
            rows = self._rows = shape_summaries(
                zip(*inv_cols, strict=True), zip(*trait_cols, strict=True), rc_names
            )
            self._raw = None
        return rows

    def placement_body(self, trait_key: Callable[[str], Any] | None = None) -> dict[str, Any]:
        """Placement's ``provider_summaries`` with shared parts, for the JSON body
        (:func:`._render.placement_json`): straight from the columns as read when the
        rows have not been shaped yet (one pass over them, no :data:`SummaryRow`),
        else from the rows."""
        raw = self._raw
        if raw is None:
            return _render.shared_summaries(self, trait_key)
        inv_cols, trait_cols, rc_names = raw
        return _render.summaries_from_columns(
            inv_cols, trait_cols, rc_names, self.uuid_by_id, trait_key
        )

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
