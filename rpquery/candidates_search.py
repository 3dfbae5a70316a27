"""Combine request groups into allocation requests: a depth-first search over the rows
the group statements returned, pruning on residual capacity as it goes.

Pure Python over plain data (no connection). One *slot* is filled at a time: a
granular group picks one provider for all its classes, a resourceless group picks one
provider, the unsuffixed group picks one provider per class. Every pick is checked at
once against what is left of the provider's capacity (existing usage plus what earlier
slots took, and ``max_unit`` on the summed amount), against ``group_policy=isolate``,
and, as soon as a ``same_subtree`` set is complete, against the subtree rule. So a
combination over capacity is never built, and a dead branch is cut at its first slot.

>>> inv = {(1, 0): Inventory(capacity=4.0, used=0, max_unit=4)}
>>> data = SearchData(inventory=inv, root_of={1: 1})
>>> slots = [Slot(suffix="", kind="class", rc_amounts=((0, 3),), choices={1: [1]})]
>>> [c.allocations for c in search_anchor(1, slots, data, SearchRules())]
[{1: {0: 3}}]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Inventory:
    """Capacity of one (provider, class), its usage and ``max_unit``."""

    capacity: float
    used: int
    max_unit: int


@dataclass(frozen=True)
class Slot:
    """One choice to make: ``kind`` is ``granular`` (one provider for all of a group's
    classes), ``resourceless`` or ``class`` (one class of the unsuffixed group).
    ``choices`` maps an anchor root id to the provider ids that may fill the slot."""

    suffix: str
    kind: str
    rc_amounts: tuple[tuple[int, int], ...]
    choices: Mapping[int, Sequence[int]]


@dataclass(frozen=True)
class SearchRules:
    """Request-wide rules: isolate, same_subtree sets and unsuffixed required traits
    (``flags[rp]`` tells which any-of sets provider ``rp`` satisfies)."""

    isolate: bool = False
    same_subtree: tuple[frozenset[str], ...] = ()
    required_sets: int = 0
    flags: Mapping[int, tuple[bool, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchData:
    inventory: Mapping[tuple[int, int], Inventory]
    root_of: Mapping[int, int]
    parent_of: Mapping[int, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class RawCandidate:
    """A candidate in ids: ``allocations[rp][rc] = amount``, ``mappings[suffix]``."""

    root_id: int
    allocations: dict[int, dict[int, int]]
    mappings: dict[str, tuple[int, ...]]

    def key(self) -> tuple[object, ...]:
        allocs = tuple(
            sorted((rp, tuple(sorted(a.items()))) for rp, a in self.allocations.items())
        )
        return allocs, tuple(sorted(self.mappings.items()))


class _State:
    """Mutable state of one depth-first walk (residual capacity and picks)."""

    def __init__(self, n_slots: int) -> None:
        self.taken: dict[tuple[int, int], int] = {}
        self.picks: list[int] = [0] * n_slots


def _fits(data: SearchData, state: _State, rp: int, rc_amounts: Sequence[tuple[int, int]]) -> bool:
    for rc, amount in rc_amounts:
        inv = data.inventory.get((rp, rc))
        if inv is None:
            return False
        total = state.taken.get((rp, rc), 0) + amount
        if inv.used + total > inv.capacity or total > inv.max_unit:
            return False
    return True


def _take(state: _State, rp: int, rc_amounts: Sequence[tuple[int, int]], sign: int) -> None:
    for rc, amount in rc_amounts:
        state.taken[(rp, rc)] = state.taken.get((rp, rc), 0) + sign * amount


def _ancestors(data: SearchData, rp: int) -> Iterator[int]:
    node: int | None = rp
    while node is not None:
        yield node
        node = data.parent_of.get(node)


def in_one_subtree(data: SearchData, providers: set[int]) -> bool:
    """True when one of ``providers`` is an ancestor-or-self of all the others."""
    return any(all(top in set(_ancestors(data, p)) for p in providers) for top in providers)


def _slot_ok(slots: Sequence[Slot], i: int, rp: int, state: _State, rules: SearchRules) -> bool:
    slot = slots[i]
    if rules.isolate and slot.kind == "granular":
        for j in range(i):
            if slots[j].kind == "granular" and state.picks[j] == rp:
                return False
    return True


def _subtrees_ok(
    slots: Sequence[Slot], i: int, state: _State, data: SearchData, rules: SearchRules
) -> bool:
    """Check every same_subtree set that slot ``i`` completes."""
    if not rules.same_subtree:
        return True
    done = {s.suffix: state.picks[j] for j, s in enumerate(slots[: i + 1]) if s.kind != "class"}
    for group_set in rules.same_subtree:
        complete = slots[i].suffix in group_set and group_set <= done.keys()
        if complete and not in_one_subtree(data, {done[s] for s in group_set}):
            return False
    return True


def _traits_ok(slots: Sequence[Slot], state: _State, rules: SearchRules) -> bool:
    if not rules.required_sets:
        return True
    have = [False] * rules.required_sets
    for j, slot in enumerate(slots):
        if slot.kind == "class":
            for k, flag in enumerate(rules.flags.get(state.picks[j], ())):
                have[k] = have[k] or flag
    return all(have)


def _emit(root: int, slots: Sequence[Slot], state: _State) -> RawCandidate:
    allocations: dict[int, dict[int, int]] = {}
    mappings: dict[str, set[int]] = {}
    for j, slot in enumerate(slots):
        rp = state.picks[j]
        mappings.setdefault(slot.suffix, set()).add(rp)
        for rc, amount in slot.rc_amounts:
            per_rp = allocations.setdefault(rp, {})
            per_rp[rc] = per_rp.get(rc, 0) + amount
    return RawCandidate(root, allocations, {s: tuple(sorted(p)) for s, p in mappings.items()})


def search_anchor(
    root: int, slots: Sequence[Slot], data: SearchData, rules: SearchRules
) -> Iterator[RawCandidate]:
    """Every allocation request anchored at tree ``root``, in provider-id order."""
    state = _State(len(slots))
    last_class = max((j for j, s in enumerate(slots) if s.kind == "class"), default=-1)

    def walk(i: int) -> Iterator[RawCandidate]:
        if i == len(slots):
            yield _emit(root, slots, state)
            return
        slot = slots[i]
        for rp in slot.choices.get(root, ()):
            if not _fits(data, state, rp, slot.rc_amounts) or not _slot_ok(
                slots, i, rp, state, rules
            ):
                continue
            state.picks[i] = rp
            _take(state, rp, slot.rc_amounts, +1)
            if _subtrees_ok(slots, i, state, data, rules) and (
                i != last_class or _traits_ok(slots, state, rules)
            ):
                yield from walk(i + 1)
            _take(state, rp, slot.rc_amounts, -1)

    yield from walk(0)
