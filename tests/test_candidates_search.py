"""The pruning search on its own (no database): bounded work and unchanged answers.

- Twins (interchangeable slots, e.g. identical request groups) are walked once per
  multiset of providers and then dealt out in every arrangement: the set of candidates
  equals the plain walk's (twins off), with no duplicate, on random small trees.
- With ``limit`` the caller stops the lazy search: the first candidate of 34 identical
  groups costs a number of steps linear in the groups, and a dead end (34 groups, room
  for 32) costs a polynomial number of steps, where the plain walk is exponential.
- The step budget ends a search that is too big with ``rpquery.candidates.too_complex``.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpquery.errors import TooComplex
from rpquery.read.candidates._search import (
    Inventory,
    SearchBudget,
    SearchData,
    SearchRules,
    Slot,
    SlotPlan,
    arrangements,
    is_plain,
    plain_candidates,
    plain_prefix,
    plan_slots,
    search_anchor,
)

VCPU, MEM = 0, 1
HOST, NUMA0, NUMA1, PF0 = 1, 2, 3, 4
PARENT = {HOST: None, NUMA0: HOST, NUMA1: HOST, PF0: NUMA0}


def numa_host(vcpus: int, max_unit: int | None = None) -> SearchData:
    """One host with two NUMA children of ``vcpus`` VCPU each."""
    cell = Inventory(capacity=float(vcpus), used=0, max_unit=max_unit or vcpus)
    inv = {(NUMA0, VCPU): cell, (NUMA1, VCPU): cell}
    return SearchData(inv, {HOST: HOST, NUMA0: HOST, NUMA1: HOST}, PARENT)


def identical(n: int, choices: list[int] | None = None) -> list[Slot]:
    """``n`` granular groups of VCPU:1 that can each use either NUMA node."""
    shared = {HOST: choices or [NUMA0, NUMA1]}
    return [Slot(f"_{i}", "granular", ((VCPU, 1),), shared) for i in range(n)]


def without_twins(plan: SlotPlan) -> SlotPlan:
    """The plain walk: every permutation of twins walked on its own (the old search)."""
    return plan._replace(twin_of=[-1] * len(plan.twin_of), twins=[])


def first(slots: list[Slot], data: SearchData, plan: SlotPlan, budget: SearchBudget) -> object:
    return next(search_anchor(HOST, slots, data, SearchRules(), plan, budget), None)


def test_first_of_34_identical_groups_costs_linear_steps() -> None:
    data = numa_host(vcpus=128, max_unit=32)
    for n in (16, 18, 20, 34):
        budget = SearchBudget(10_000)
        found = first(identical(n), data, plan_slots(identical(n)), budget)
        assert found is not None
        # n picks (one more past max_unit 32 on the first node) and n placed
        assert budget.steps <= 2 * n + 1


def test_a_dead_end_among_identical_groups_is_polynomial() -> None:
    """34 groups of VCPU:1 on two nodes of 16: no answer. Walking multisets visits at
    most 17 × 17 prefixes; the plain walk tries every sequence of nodes that fits."""
    data, slots = numa_host(vcpus=16), identical(34)
    plan = plan_slots(slots)
    budget = SearchBudget(10_000)
    assert first(slots, data, plan, budget) is None
    assert budget.steps <= 2 * 17 * 17
    with pytest.raises(TooComplex):
        first(slots, data, without_twins(plan), SearchBudget(1_000_000))


def test_every_arrangement_of_twins_is_a_candidate() -> None:
    """3 identical groups on two nodes: 8 candidates (as Placement answers: mappings
    differ), from 4 multisets."""
    slots = identical(3)
    budget = SearchBudget()
    found = [
        c.picks for c in search_anchor(HOST, slots, numa_host(8), SearchRules(), None, budget)
    ]
    assert sorted(found) == sorted(itertools.product((NUMA0, NUMA1), repeat=3))
    assert found[:2] == [(NUMA0, NUMA0, NUMA0), (NUMA0, NUMA0, NUMA1)]
    walked = budget.steps - 3 * len(found)
    plain = SearchBudget()
    again = list(
        search_anchor(
            HOST, slots, numa_host(8), SearchRules(), without_twins(plan_slots(slots)), plain
        )
    )
    assert len(again) == 8
    assert walked < plain.steps - 3 * len(again)


def test_the_budget_ends_a_search_that_is_too_big() -> None:
    slots = identical(20)  # 2^20 candidates
    budget = SearchBudget(5_000)
    with pytest.raises(TooComplex) as info:
        for _ in search_anchor(HOST, slots, numa_host(32), SearchRules(), None, budget):
            pass
    assert info.value.code == "rpquery.candidates.too_complex"
    assert info.value.token == "5000"
    assert 5_000 < budget.steps <= 5_000 + 20


def test_one_budget_spans_every_anchor() -> None:
    data = numa_host(8)
    slots = identical(2)
    budget = SearchBudget(100)
    for _ in range(3):
        assert len(list(search_anchor(HOST, slots, data, SearchRules(), None, budget))) == 4
    # per anchor: 4 candidates of 2 slots, and 5 picks (node 0 then 0 or 1; node 1 then 1)
    assert budget.steps == 3 * (4 * 2 + 5)
    with pytest.raises(TooComplex):
        for _ in range(10):
            list(search_anchor(HOST, slots, data, SearchRules(), None, budget))


@pytest.mark.parametrize(
    ("picks", "twins"),
    [
        ([1, 1, 2, 2, 3], [[0, 1, 2, 3, 4]]),
        ([1, 2, 1, 3, 3], [[0, 2], [3, 4]]),
        ([4, 1, 2, 9, 1, 3], [[1, 2, 5], [0, 3]]),
    ],
)
def test_arrangements_are_every_distinct_deal(picks: list[int], twins: list[list[int]]) -> None:
    got = list(arrangements(picks, twins))
    assert got[0] == tuple(picks) and len(set(got)) == len(got)
    expected = {
        p
        for p in itertools.permutations(picks)
        if all(sorted(p[i] for i in t) == sorted(picks[i] for i in t) for t in twins)
        and all(p[i] == picks[i] for i in range(len(picks)) if not any(i in t for t in twins))
    }
    assert set(got) == expected
    size = math.prod(multinomial([picks[i] for i in t]) for t in twins)
    assert len(got) == size


def multinomial(values: list[int]) -> int:
    """How many distinct orders ``values`` has."""
    counts = [values.count(v) for v in set(values)]
    return math.factorial(len(values)) // math.prod(math.factorial(c) for c in counts)


AMOUNTS = (((VCPU, 1),), ((VCPU, 2),), ((VCPU, 1), (MEM, 1)))
CHOICES = ([NUMA0, NUMA1], [HOST, NUMA0, NUMA1], [NUMA1, PF0])


@st.composite
def searches(draw: st.DrawFn) -> tuple[list[Slot], SearchData, SearchRules]:
    """Up to 5 suffixed slots drawn from few shapes (so twins are common), an optional
    unsuffixed class slot, random capacities and usage, isolate and same_subtree."""
    inv = {}
    for rp in (HOST, NUMA0, NUMA1, PF0):
        for rc in (VCPU, MEM):
            if draw(st.integers(0, 3)):
                cap = draw(st.integers(1, 5))
                inv[(rp, rc)] = Inventory(
                    float(cap), draw(st.integers(0, 1)), draw(st.integers(1, 5))
                )
    slots = []
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(("granular", "granular", "granular", "resourceless")))
        amounts = () if kind == "resourceless" else draw(st.sampled_from(AMOUNTS))
        choices = draw(st.sampled_from(CHOICES))
        slots.append(Slot(f"_{i}", kind, amounts, {HOST: choices}))
    if draw(st.booleans()):
        slots.append(Slot("", "class", ((MEM, 1),), {HOST: [HOST, NUMA0]}))
    subtree: tuple[frozenset[str], ...] = ()
    if len(slots) > 1 and draw(st.booleans()):
        subtree = (frozenset({"_0", "_1"}),)
    rules = SearchRules(isolate=draw(st.booleans()), same_subtree=subtree)
    data = SearchData(inv, {rp: HOST for rp in PARENT}, PARENT)
    return slots, data, rules


@settings(max_examples=300, deadline=None)
@given(searches())
def test_twins_change_the_work_not_the_answer(
    case: tuple[list[Slot], SearchData, SearchRules],
) -> None:
    slots, data, rules = case
    plan = plan_slots(slots, rules)
    fast, plain = SearchBudget(), SearchBudget()
    got = [c.picks for c in search_anchor(HOST, slots, data, rules, plan, fast)]
    want = [c.picks for c in search_anchor(HOST, slots, data, rules, without_twins(plan), plain)]
    assert len(set(got)) == len(got)
    assert sorted(got) == sorted(want)
    assert fast.steps <= plain.steps


@st.composite
def plain_batches(draw: st.DrawFn) -> tuple[list[int], list[Slot]]:
    """Anchors and unsuffixed class slots of distinct classes (a plain walk: nothing to
    check at any pick), each anchor with 0-3 choices per slot, some with none at all."""
    anchors = sorted(draw(st.sets(st.integers(1, 40), min_size=1, max_size=6)))
    slots = []
    for rc in range(draw(st.integers(1, 4))):
        choices: dict[int, list[int]] = {}
        for root in anchors:
            n = draw(st.integers(0, 3))
            if n or draw(st.booleans()):  # no entry, or an empty list
                choices[root] = [root * 10 + k for k in range(n)]
        slots.append(Slot("", "class", ((rc, 1),), choices))
    return anchors, slots


@settings(max_examples=300, deadline=None)
@given(plain_batches(), st.integers(1, 400))
def test_plain_candidates_are_the_walk(batch: tuple[list[int], list[Slot]], room: int) -> None:
    """The product shortcut yields what the walk yields, in its order, counting the same
    steps, and goes over the same budgets (then it counts nothing: the caller walks)."""
    anchors, slots = batch
    data, rules = SearchData({}, {}), SearchRules()
    plan = plan_slots(slots, rules)
    assert is_plain(plan, rules)
    walked, budget = [], SearchBudget(room)
    try:
        for root in anchors:
            walked.extend(
                (c.root_id, c.picks) for c in search_anchor(root, slots, data, rules, plan, budget)
            )
    except TooComplex:
        walked = None
    fast = SearchBudget(room)
    made = plain_candidates(anchors, slots, fast)
    if walked is None:
        assert made is None and fast.steps == 0
    else:
        assert made is not None
        assert [(c.root_id, c.picks) for c in made] == walked
        assert all(c.slots is slots for c in made)
        assert fast.steps == budget.steps
        if made:
            assert plain_candidates(anchors, slots, SearchBudget(budget.steps - 1)) is None


@settings(max_examples=300, deadline=None)
@given(plain_batches(), st.integers(1, 30), st.integers(1, 400))
def test_plain_prefix_is_the_walk_stopped(
    batch: tuple[list[int], list[Slot]], take: int, room: int
) -> None:
    """An anchor's first ``take`` candidates from the product (a ``limit``'s plain
    search) are the walk's first ``take``, in its order, counting the steps the walk
    has taken when its caller stops it there (or when it runs out), and go over the
    same budgets (then they count nothing: the caller walks): at ``room`` and at every
    budget around what the walk took."""
    anchors, slots = batch
    data, rules = SearchData({}, {}), SearchRules()
    plan = plan_slots(slots, rules)

    def walked(root: int, budget: SearchBudget) -> list[tuple[int, ...]] | None:
        try:
            walk = search_anchor(root, slots, data, rules, plan, budget)
            picks = [c.picks for c in itertools.islice(walk, take)]
            walk.close()  # as _collect stops it (its steps are counted then)
        except TooComplex:
            return None
        return picks

    for root in anchors:
        lists = [s.choices.get(root) for s in slots]
        if not all(lists):
            continue
        full = SearchBudget()
        walked(root, full)
        for budget in {room, *range(max(1, full.steps - len(slots) - 2), full.steps + 2)}:
            walk, fast = SearchBudget(budget), SearchBudget(budget)
            want = walked(root, walk)
            made = plain_prefix(root, slots, lists, take, fast)  # type: ignore[arg-type]
            if want is None:
                assert made is None and fast.steps == 0, budget
            else:
                assert made is not None, budget
                assert [c.picks for c in made] == want
                assert all(c.root_id == root and c.slots is slots for c in made)
                assert fast.steps == walk.steps


def test_plain_is_only_a_walk_with_nothing_to_check() -> None:
    vcpu = Slot("", "class", ((VCPU, 1),), {})
    mem = Slot("", "class", ((MEM, 1),), {})
    assert is_plain(plan_slots([vcpu, mem]), SearchRules())
    granular = Slot("_1", "granular", ((VCPU, 1),), {})
    other = Slot("_2", "granular", ((MEM, 1),), {})
    assert is_plain(plan_slots([granular, other]), SearchRules())
    assert not is_plain(plan_slots([vcpu, granular]), SearchRules())  # VCPU twice: room
    rules = SearchRules(isolate=True)
    assert not is_plain(plan_slots([granular, other], rules), rules)
    rules = SearchRules(required_sets=1)
    assert not is_plain(plan_slots([vcpu, mem], rules), rules)
    rules = SearchRules(same_subtree=(frozenset({"_1", "_2"}),))
    assert not is_plain(plan_slots([granular, other], rules), rules)
    twin = Slot("_3", "granular", ((MEM, 1),), {})
    assert not is_plain(plan_slots([other, twin]), SearchRules())  # twins (and MEM twice)
