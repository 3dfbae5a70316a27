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

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

K = TypeVar("K")
R = TypeVar("R")


class Inventory(NamedTuple):
    """Capacity of one (provider, class), its usage and ``max_unit`` (a tuple: tens of
    thousands are built per whole-cloud answer)."""

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


@dataclass(slots=True)
class RawCandidate:
    """A candidate as the walk found it: the anchor and the provider picked per slot.
    Internal and short-lived (a plain slotted class, no freezing cost); its
    allocations and mappings are built once, by :meth:`build`, straight into the
    caller's keys (uuids and class names for results, ids for deduplication)."""

    root_id: int
    picks: tuple[int, ...]
    slots: Sequence[Slot]

    def build(
        self, rp_key: Callable[[int], K], rc_key: Callable[[int], R]
    ) -> tuple[dict[K, dict[R, int]], dict[str, tuple[K, ...]]]:
        """``(allocations[rp][rc] = amount, mappings[suffix] = providers)``, providers
        of a suffix in id order, keys mapped through ``rp_key`` / ``rc_key``."""
        allocations: dict[K, dict[R, int]] = {}
        used: dict[str, list[int]] = {}
        for slot, rp in zip(self.slots, self.picks, strict=True):
            seen = used.get(slot.suffix)
            if seen is None:
                used[slot.suffix] = [rp]
            elif rp not in seen:
                seen.append(rp)
            if not slot.rc_amounts:  # a resourceless group allocates nothing
                continue
            key = rp_key(rp)
            per_rp = allocations.get(key)
            if per_rp is None:
                allocations[key] = {rc_key(rc): amount for rc, amount in slot.rc_amounts}
            else:
                for rc, amount in slot.rc_amounts:
                    per_rp[rc_key(rc)] = per_rp.get(rc_key(rc), 0) + amount
        mappings = {
            s: (rp_key(p[0]),) if len(p) == 1 else tuple(rp_key(i) for i in sorted(p))
            for s, p in used.items()
        }
        return allocations, mappings

    @property
    def allocations(self) -> dict[int, dict[int, int]]:
        return self.build(int, int)[0]

    @property
    def mappings(self) -> dict[str, tuple[int, ...]]:
        return self.build(int, int)[1]

    def key(self) -> tuple[object, ...]:
        allocations, mappings = self.build(int, int)
        allocs = tuple(sorted((rp, tuple(sorted(a.items()))) for rp, a in allocations.items()))
        return allocs, tuple(sorted(mappings.items()))


def _ancestors(data: SearchData, rp: int) -> Iterator[int]:
    node: int | None = rp
    while node is not None:
        yield node
        node = data.parent_of.get(node)


def in_one_subtree(data: SearchData, providers: set[int]) -> bool:
    """True when one of ``providers`` is an ancestor-or-self of all the others."""
    lines = [set(_ancestors(data, p)) for p in providers]
    return any(all(top in line for line in lines) for top in providers)


class _Walk:
    """One depth-first walk over the slots of one anchor tree (residual capacity in
    ``taken``, the provider picked per slot in ``picks``, results in ``out``)."""

    __slots__ = ("root", "slots", "inv", "rules", "data", "choices", "taken", "picks", "out")

    def __init__(
        self, root: int, slots: Sequence[Slot], data: SearchData, rules: SearchRules
    ) -> None:
        self.root, self.slots, self.data, self.rules = root, slots, data, rules
        self.inv = data.inventory
        self.choices = [s.choices.get(root, ()) for s in slots]
        self.taken: dict[tuple[int, int], int] = {}
        self.picks = [0] * len(slots)
        self.out: list[RawCandidate] = []

    def fits(self, rp: int, rc_amounts: Sequence[tuple[int, int]]) -> bool:
        inv, taken = self.inv, self.taken
        for rc, amount in rc_amounts:
            cell = inv.get((rp, rc))
            if cell is None:
                return False
            total = taken.get((rp, rc), 0) + amount
            if cell.used + total > cell.capacity or total > cell.max_unit:
                return False
        return True

    def isolated(self, i: int, rp: int) -> bool:
        slots, picks = self.slots, self.picks
        return not any(slots[j].kind == "granular" and picks[j] == rp for j in range(i))

    def take(self, rp: int, rc_amounts: Sequence[tuple[int, int]], sign: int) -> None:
        taken = self.taken
        for rc, amount in rc_amounts:
            taken[(rp, rc)] = taken.get((rp, rc), 0) + sign * amount

    def subtrees_ok(self, i: int) -> bool:
        """Check every same_subtree set that slot ``i`` completes."""
        slots, picks = self.slots, self.picks
        done = {s.suffix: picks[j] for j, s in enumerate(slots[: i + 1]) if s.kind != "class"}
        for group_set in self.rules.same_subtree:
            complete = slots[i].suffix in group_set and group_set <= done.keys()
            if complete and not in_one_subtree(self.data, {done[s] for s in group_set}):
                return False
        return True

    def traits_ok(self) -> bool:
        have = [False] * self.rules.required_sets
        flags = self.rules.flags
        for j, slot in enumerate(self.slots):
            if slot.kind == "class":
                for k, flag in enumerate(flags.get(self.picks[j], ())):
                    have[k] = have[k] or flag
        return all(have)

    def emit(self) -> None:
        self.out.append(RawCandidate(self.root, tuple(self.picks), self.slots))


def _contended(slots: Sequence[Slot]) -> list[bool]:
    """Per slot: does another slot ask for one of its classes? If not, the group
    statement's own check (usage + this amount fits, ``max_unit``) already holds for
    every choice, so the walk skips the residual-capacity bookkeeping for that slot.

    >>> a = Slot("", "class", ((0, 1),), {}); b = Slot("_N", "granular", ((0, 1),), {})
    >>> _contended([a, Slot("", "class", ((1, 1),), {})]), _contended([a, b])
    ([False, False], [True, True])
    """
    count: dict[int, int] = {}
    for slot in slots:
        for rc, _ in slot.rc_amounts:
            count[rc] = count.get(rc, 0) + 1
    return [any(count[rc] > 1 for rc, _ in slot.rc_amounts) for slot in slots]


class SlotPlan(NamedTuple):
    """What the walk needs to know about the slots alone (the same for every anchor of
    a batch, so :func:`plan_slots` runs once per batch, not once per anchor)."""

    contended: list[bool]
    last_class: int


def plan_slots(slots: Sequence[Slot]) -> SlotPlan:
    """The per-batch part of a walk, computed once per batch.

    >>> plan_slots([Slot("", "class", ((0, 1),), {})])
    SlotPlan(contended=[False], last_class=0)
    """
    last_class = max((j for j, s in enumerate(slots) if s.kind == "class"), default=-1)
    return SlotPlan(_contended(slots), last_class)


def search_anchor(
    root: int,
    slots: Sequence[Slot],
    data: SearchData,
    rules: SearchRules,
    plan: SlotPlan | None = None,
) -> list[RawCandidate]:
    """Every allocation request anchored at tree ``root``, in provider-id order
    (``plan``: :func:`plan_slots` of ``slots``, computed here when not given)."""
    w = _Walk(root, slots, data, rules)
    if not all(w.choices):  # a slot nobody can fill: nothing to walk
        return w.out
    n = len(slots)
    contended, last_class = plan if plan is not None else plan_slots(slots)
    check_traits = bool(rules.required_sets)
    check_subtrees = bool(rules.same_subtree)

    # ``walk`` gets itself as an argument rather than through its closure: a function
    # that refers to itself through a closure cell is a reference cycle, which kept
    # each anchor's walk (and through it the batch's search data) alive until the
    # cyclic GC found it (~95k objects, a 16 ms collection per whole-cloud answer at
    # 5,000 hosts). Without the cycle, reference counting frees it all at once.
    def walk(i: int, again: Callable[[int, Any], None]) -> None:
        if i == n:
            w.emit()
            return
        slot = slots[i]
        amounts = slot.rc_amounts if contended[i] else ()
        isolate = rules.isolate and slot.kind == "granular"
        for rp in w.choices[i]:
            if (amounts and not w.fits(rp, amounts)) or (isolate and not w.isolated(i, rp)):
                continue
            w.picks[i] = rp
            if amounts:
                w.take(rp, amounts, +1)
            if (not check_subtrees or w.subtrees_ok(i)) and (
                not check_traits or i != last_class or w.traits_ok()
            ):
                again(i + 1, again)
            if amounts:
                w.take(rp, amounts, -1)

    walk(0, walk)
    return w.out
