"""Combine request groups into allocation requests: a depth-first search over the rows
the group statements returned, pruning on residual capacity as it goes.

Pure Python over plain data (no connection). One *slot* is filled at a time: a
granular group picks one provider for all its classes, a resourceless group picks one
provider, the unsuffixed group picks one provider per class. Every pick is checked at
once against what is left of the provider's capacity (existing usage plus what earlier
slots took, and ``max_unit`` on the summed amount), against ``group_policy=isolate``
(every suffixed group, resourceless ones included, on a provider of its own),
and, as soon as a ``same_subtree`` set is complete, against the subtree rule. So a
combination over capacity is never built, and a dead branch is cut at its first slot.

Bounded work: the search is lazy (a caller with ``limit`` results stops it), walks
interchangeable slots (identical groups) once per *multiset* of providers rather than
once per permutation, and counts its steps against a :class:`SearchBudget`, raising
``TooComplex`` (``rpquery.candidates.too_complex``) past it.

>>> inv = {(1, 0): Inventory(capacity=4.0, used=0, max_unit=4)}
>>> data = SearchData(inventory=inv, root_of={1: 1})
>>> slots = [Slot(suffix="", kind="class", rc_amounts=((0, 3),), choices={1: [1]})]
>>> [c.allocations for c in search_anchor(1, slots, data, SearchRules())]
[{1: {0: 3}}]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice, product
from typing import NamedTuple, TypeVar

from rpquery.errors import TooComplex

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
    ``taken``, the provider picked per slot in ``picks``, the index of that provider
    among the slot's choices in ``held``)."""

    __slots__ = ("root", "slots", "inv", "rules", "data", "choices", "taken", "picks", "held")

    def __init__(
        self, root: int, slots: Sequence[Slot], data: SearchData, rules: SearchRules
    ) -> None:
        self.root, self.slots, self.data, self.rules = root, slots, data, rules
        self.inv = data.inventory
        self.choices = [s.choices.get(root, ()) for s in slots]
        self.taken: dict[tuple[int, int], int] = {}
        self.picks = [0] * len(slots)
        self.held = [-1] * len(slots)

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
        """``group_policy=isolate``: no earlier suffixed group (with or without
        resources) picked ``rp``."""
        slots, picks = self.slots, self.picks
        return not any(_isolates(slots[j]) and picks[j] == rp for j in range(i))

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

    def pruned(self, i: int, last_class: int) -> bool:
        """Does the pick of slot ``i`` break ``same_subtree`` or, as the unsuffixed
        group's last class, its required traits?"""
        if self.rules.same_subtree and not self.subtrees_ok(i):
            return True
        return bool(self.rules.required_sets) and i == last_class and not self.traits_ok()

    def run(self, plan: SlotPlan, budget: SearchBudget) -> Iterator[RawCandidate]:
        """Each candidate of the anchor in turn (see :func:`search_anchor`).

        Iterative, over an explicit stack of choice indexes (``held``), so a caller
        with enough results simply stops iterating. A slot with a twin
        (:func:`_twins`) starts at the choice its twin holds: among twins, provider
        indexes never decrease, so each multiset of providers is walked once, then
        dealt out in every arrangement (:func:`arrangements`)."""
        slots, rules, picks, held = self.slots, self.rules, self.picks, self.held
        n, twin_of, twins = len(slots), plan.twin_of, plan.twins
        amounts_of, isolating, choices = plan.amounts, plan.isolating, self.choices
        checks = bool(rules.same_subtree or rules.required_sets)
        room, steps = budget.max_steps - budget.steps, 0
        start = [0] * n
        i = 0
        try:
            while i >= 0:
                amounts, k = amounts_of[i], start[i]
                if amounts or isolating[i]:
                    if held[i] >= 0 and amounts:
                        self.take(picks[i], amounts, -1)
                    k = self.next_fit(i, k, amounts, isolating[i])
                    steps += (k if k >= 0 else len(choices[i]) - 1) - start[i] + 1
                elif k < len(choices[i]):  # nothing to check: the next choice
                    picks[i] = choices[i][k]
                    steps += 1
                else:
                    k = -1
                if steps > room:
                    raise budget.exceeded()
                if k < 0:
                    held[i] = -1
                    i -= 1
                    continue
                held[i], start[i] = k, k + 1
                if checks and self.pruned(i, plan.last_class):
                    continue
                if i < n - 1:
                    i += 1
                    start[i] = held[twin_of[i]] if twin_of[i] >= 0 else 0
                    held[i] = -1
                    continue
                if not twins:
                    steps += n  # checked with the next pick
                    yield RawCandidate(self.root, tuple(picks), slots)
                    continue
                for dealt in arrangements(picks, twins):
                    steps += n
                    if steps > room:
                        raise budget.exceeded()
                    yield RawCandidate(self.root, dealt, slots)
        finally:
            budget.steps += steps

    def next_fit(self, i: int, k: int, amounts: Sequence[tuple[int, int]], isolate: bool) -> int:
        """The first choice of slot ``i`` from index ``k`` that fits what earlier slots
        took (picked, and its amounts taken), or ``-1``."""
        choices = self.choices[i]
        while k < len(choices):
            rp = choices[k]
            if (not amounts or self.fits(rp, amounts)) and (not isolate or self.isolated(i, rp)):
                self.picks[i] = rp
                if amounts:
                    self.take(rp, amounts, +1)
                return k
            k += 1
        return -1


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
    a batch, so :func:`plan_slots` runs once per batch, not once per anchor).

    ``amounts[i]``: slot ``i``'s amounts when another slot asks for one of its classes
    (residual capacity must be tracked), else ``()``; ``isolating[i]``: its pick must
    differ from earlier suffixed picks (``group_policy=isolate``); ``twin_of[i]``: the
    previous slot interchangeable with it (``-1``: none); ``twins``: the classes of
    interchangeable slots (two or more each)."""

    amounts: list[tuple[tuple[int, int], ...]]
    isolating: list[bool]
    last_class: int
    twin_of: list[int]
    twins: list[list[int]]


def _twins(slots: Sequence[Slot], rules: SearchRules) -> list[int]:
    """Per slot, the nearest earlier slot it can swap picks with (``-1``: none).

    Two suffixed slots are interchangeable when they have the same kind, the same
    amounts, the same choices on every anchor and belong to the same ``same_subtree``
    sets: swapping their providers turns any candidate into another one (same merged
    allocations, the two suffixes' mappings swapped), so the walk need only try each
    *multiset* of providers once. Identical request groups are the common case.

    >>> c = {1: [1, 2]}
    >>> _twins([Slot("_1", "granular", ((0, 1),), c), Slot("_2", "granular", ((0, 1),), c),
    ...         Slot("_3", "granular", ((0, 2),), c), Slot("_4", "granular", ((0, 1),), c)],
    ...        SearchRules())
    [-1, 0, -1, 1]
    """
    out: list[int] = []
    last: dict[tuple[object, ...], list[int]] = {}
    for i, slot in enumerate(slots):
        twin = -1
        if slot.kind != "class":
            sets = frozenset(k for k, s in enumerate(rules.same_subtree) if slot.suffix in s)
            heads = last.setdefault((slot.kind, slot.rc_amounts, sets), [])
            for n, j in enumerate(heads):
                if slots[j].choices is slot.choices or slots[j].choices == slot.choices:
                    twin, heads[n] = j, i
                    break
            else:
                heads.append(i)
        out.append(twin)
    return out


def _isolates(slot: Slot) -> bool:
    """Slots ``group_policy=isolate`` keeps on distinct providers: every suffixed group,
    resourceless ones included (as Placement counts them)."""
    return slot.kind == "granular" or (slot.kind == "resourceless" and slot.suffix != "")


def plan_slots(slots: Sequence[Slot], rules: SearchRules | None = None) -> SlotPlan:
    """The per-batch part of a walk, computed once per batch.

    >>> plan_slots([Slot("", "class", ((0, 1),), {})])
    SlotPlan(amounts=[()], isolating=[False], last_class=0, twin_of=[-1], twins=[])
    """
    rules = rules or SearchRules()
    contended = _contended(slots)
    amounts = [s.rc_amounts if c else () for s, c in zip(slots, contended, strict=True)]
    isolating = [rules.isolate and _isolates(s) for s in slots]
    last_class = max((j for j, s in enumerate(slots) if s.kind == "class"), default=-1)
    twin_of = _twins(slots, rules)
    members: dict[int, list[int]] = {}
    for i, twin in enumerate(twin_of):
        head = i if twin < 0 else members[twin][0]
        members.setdefault(head, []).append(i)
        members[i] = members[head]
    twins = [m for head, m in members.items() if m[0] == head and len(m) > 1]
    return SlotPlan(amounts, isolating, last_class, twin_of, twins)


def is_plain(plan: SlotPlan, rules: SearchRules) -> bool:
    """Is the walk a plain enumeration? With no residual capacity to track, no
    ``isolate``, no ``same_subtree`` or required-trait check and no twins, every
    choice of every slot fits whatever the others picked, so an anchor's candidates
    are the product of its slots' choices, in the walk's order (first slot slowest).

    >>> a = Slot("", "class", ((0, 1),), {}); b = Slot("", "class", ((1, 1),), {})
    >>> is_plain(plan_slots([a, b]), SearchRules()), is_plain(plan_slots([a, a]), SearchRules())
    (True, False)
    """
    return not (
        plan.twins
        or any(plan.amounts)
        or any(plan.isolating)
        or rules.same_subtree
        or rules.required_sets
    )


def plain_steps(choices: Sequence[Sequence[int]]) -> int:
    """The steps the walk takes over one anchor when it is plain (:func:`is_plain`;
    ``choices``: each slot's, none empty): one per provider tried at each depth (every
    prefix of the product), plus one per slot of each candidate produced.

    >>> plain_steps([[1, 2], [3, 4, 5]])  # 2 + 2*3 tries, 6 candidates of 2 slots
    20
    """
    steps, width = 0, 1
    for options in choices:
        width *= len(options)
        steps += width
    return steps + len(choices) * width


def plain_candidates(
    anchors: Sequence[int], slots: Sequence[Slot], budget: SearchBudget
) -> list[RawCandidate] | None:
    """What :func:`search_anchor` yields for each of ``anchors`` in turn, when the walk
    is plain (:func:`is_plain`): the product of each anchor's choices, in the walk's
    order, with the walk's steps counted in ``budget``. ``None`` (and nothing counted)
    when they would go over the budget: the caller walks instead, which raises
    ``TooComplex`` where the walk goes over.

    >>> c = {1: [1, 2], 5: [6]}
    >>> found = plain_candidates([1, 5], [Slot("", "class", ((0, 1),), c)], SearchBudget())
    >>> [(f.root_id, f.picks) for f in found]
    [(1, (1,)), (1, (2,)), (5, (6,))]
    """
    n = len(slots)
    per_slot = [list(map(slot.choices.get, anchors)) for slot in slots]
    per_anchor = zip(anchors, zip(*per_slot, strict=True), strict=True)
    todo: list[tuple[int, tuple[Sequence[int], ...]]] = []
    total = 0
    for root, lists in per_anchor:
        if not all(lists):  # a slot nobody can fill: the walk does nothing
            continue
        steps, width = 0, 1
        for options in lists:
            width *= len(options)
            steps += width
        total += steps + n * width
        todo.append((root, lists))
    if budget.steps + total > budget.max_steps:
        return None
    budget.steps += total
    out: list[RawCandidate] = []
    append, make = out.append, RawCandidate
    for root, lists in todo:
        for picks in product(*lists):
            append(make(root, picks, slots))
    return out


def plain_prefix(
    root: int,
    slots: Sequence[Slot],
    choices: Sequence[Sequence[int]],
    take: int,
    budget: SearchBudget,
) -> list[RawCandidate] | None:
    """The first ``take`` candidates :func:`search_anchor` yields for ``root`` when the
    walk is plain (:func:`is_plain`; ``choices``: each slot's for ``root``, none
    empty), the product's first ``take`` tuples, with the steps the walk takes to yield
    them counted in ``budget``: at each depth one per distinct prefix among them, plus
    one per slot of each. The caller stops after the ``take``-th (so the walk checks
    the budget last at its pick; with fewer candidates, the walk runs out and checks
    once more). ``None`` (nothing counted) when the walk would go over the budget: the
    caller walks instead, which raises where the walk goes over.

    >>> s = [Slot("", "class", ((0, 1),), {}), Slot("", "class", ((1, 1),), {})]
    >>> budget = SearchBudget()
    >>> [c.picks for c in plain_prefix(1, s, [[1, 2], [3, 4, 5]], 4, budget)]
    [(1, 3), (1, 4), (1, 5), (2, 3)]
    >>> budget.steps  # prefixes (1,) (2,), four pairs, 2 slots of each of four
    14
    """
    n = len(choices)
    if n == 2:  # the common shapes (one group of two classes, two groups), spelt out
        first, second = choices
        per = len(second)
        total = len(first) * per
        stopped = take <= total  # else the walk runs out, and checks its steps once more
        if not stopped:
            take = total
        steps = -(-take // per) + 3 * take
    else:
        tail = [1] * n  # tuples of the product sharing a prefix of length i + 1
        for i in range(n - 1, 0, -1):
            tail[i - 1] = tail[i] * len(choices[i])
        total = tail[0] * len(choices[0])
        stopped = take <= total
        if not stopped:
            take = total
        steps = sum(-(-take // per) for per in tail) + n * take
    # the walk checks the budget at each pick, a candidate's n steps with the next one
    if budget.steps + steps - (n if stopped else 0) > budget.max_steps:
        return None
    budget.steps += steps
    make = RawCandidate
    if take == total:
        return [make(root, picks, slots) for picks in product(*choices)]
    return [make(root, picks, slots) for picks in islice(product(*choices), take)]


DEFAULT_MAX_STEPS = 1_000_000
"""Steps one request may take when nobody says otherwise (see ``docs/read-path.md``):
about a second of search; the largest whole-cloud answer of the benchmarks (5,000
hosts, ~10,000 candidates) takes ~37,000."""


class SearchBudget:
    """The work one request may do: a *step* is one provider tried for one slot, or one
    provider placed in a candidate produced (a candidate of ``n`` slots costs ``n``, as
    building, keeping and rendering it does). ``steps`` counts what was done, across
    every anchor and batch of the request (walks share one budget one after another,
    never interleaved); going past ``max_steps`` raises :class:`TooComplex`
    (``rpquery.candidates.too_complex``) instead of running on.

    >>> budget = SearchBudget(2); budget.steps
    0
    >>> budget.exceeded().code
    'rpquery.candidates.too_complex'
    """

    __slots__ = ("max_steps", "steps")

    def __init__(self, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        self.max_steps = max_steps
        self.steps = 0

    def exceeded(self) -> TooComplex:
        return TooComplex(
            "rpquery.candidates.too_complex",
            f"allocation candidates: the search took more than {self.max_steps} steps "
            "(max_search_steps); add a limit, ask for fewer or more specific groups, "
            "or raise max_search_steps",
            token=str(self.max_steps),
        )

    def __repr__(self) -> str:
        return f"SearchBudget(max_steps={self.max_steps}, steps={self.steps})"


def arrangements(
    picks: Sequence[int], twins: Sequence[Sequence[int]]
) -> Iterator[tuple[int, ...]]:
    """Every distinct way to deal ``picks`` among twin slots: the providers of each
    class of twins permuted in every distinct order (lexicographic, starting with
    ``picks`` itself, whose twins' providers are in non-decreasing order), classes
    combined. Lazy: a caller with enough stops early.

    >>> list(arrangements([5, 7, 7, 9], [[0, 1, 2]]))
    [(5, 7, 7, 9), (7, 5, 7, 9), (7, 7, 5, 9)]
    """
    work = list(picks)

    def deal(c: int) -> Iterator[tuple[int, ...]]:
        if c == len(twins):
            yield tuple(work)
            return
        positions = twins[c]
        for order in _distinct_orders(sorted(work[p] for p in positions)):
            for p, rp in zip(positions, order, strict=True):
                work[p] = rp
            yield from deal(c + 1)

    return deal(0)


def _distinct_orders(values: list[int]) -> Iterator[list[int]]:
    """The distinct permutations of sorted ``values`` in lexicographic order (the
    classic next-permutation step; one list, changed in place between yields).

    >>> [list(o) for o in _distinct_orders([1, 1, 2])]
    [[1, 1, 2], [1, 2, 1], [2, 1, 1]]
    """
    a, n = values, len(values)
    while True:
        yield a
        i = n - 2
        while i >= 0 and a[i] >= a[i + 1]:
            i -= 1
        if i < 0:
            return
        j = n - 1
        while a[j] <= a[i]:
            j -= 1
        a[i], a[j] = a[j], a[i]
        a[i + 1 :] = a[:i:-1]


def search_anchor(
    root: int,
    slots: Sequence[Slot],
    data: SearchData,
    rules: SearchRules,
    plan: SlotPlan | None = None,
    budget: SearchBudget | None = None,
) -> Iterator[RawCandidate]:
    """Every allocation request anchored at tree ``root``, lazily: a caller with
    enough stops iterating and no more work is done (``plan``: :func:`plan_slots` of
    ``slots`` and ``rules``, computed here when not given; ``budget``: the steps
    allowed, a default :class:`SearchBudget` when not given).

    Order: combinations in provider-id order with twins' providers non-decreasing,
    each followed by its other arrangements among twins."""
    w = _Walk(root, slots, data, rules)
    if not slots or not all(w.choices):  # a slot nobody can fill: nothing to walk
        return iter(())
    return w.run(plan or plan_slots(slots, rules), budget or SearchBudget())
