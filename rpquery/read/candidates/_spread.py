"""The order of limited answers, and Placement's candidate options.

A limited answer (``limit=N``) is taken round-robin over the anchor roots: the first
candidate of every root before the second of any (:func:`spread`), so it covers as many
hosts as any answer of that size can, ``min(N, viable roots)``. The search still stops
early: once ``N`` roots have given a candidate, no later root can be in the answer
(:class:`Spread`, fed batch by batch).

:class:`CandidateOptions` are Placement 16.0's ``[placement]`` options that shape an
answer: ``randomize_allocation_candidates``, ``max_allocation_candidates`` and
``allocation_candidates_generation_strategy``; :func:`search_plan` says how a request
runs under them.

>>> from rpquery.read.candidates._search import RawCandidate
>>> found = [RawCandidate(r, (p,), ()) for r, p in [(1, 10), (1, 11), (1, 12), (2, 20), (3, 30)]]
>>> [c.picks[0] for c in spread(found)]
[10, 20, 30, 11, 12]
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from operator import attrgetter
from typing import TYPE_CHECKING, Literal, TypeVar

from rpquery.errors import InvalidRequest
from rpquery.read.candidates._search import (
    RawCandidate,
    SearchBudget,
    is_plain,
    plan_slots,
    search_anchor,
)

if TYPE_CHECKING:
    from rpquery.read.candidates._execute import Loaded
    from rpquery.read.request import CandidatesRequest

T = TypeVar("T")

STRATEGIES = ("depth-first", "breadth-first")
Strategy = Literal["depth-first", "breadth-first"]


@dataclass(frozen=True)
class CandidateOptions:
    """Placement 16.0's ``[placement]`` options of ``GET /allocation_candidates``.

    - ``randomize`` (``randomize_allocation_candidates``): a limited answer is a random
      sample of the candidates (of the first ``max_candidates`` when that is set), an
      unlimited one is shuffled; the sample is spread over roots as the default order
      is (a random candidate of each of randomly chosen roots first).
    - ``max_candidates`` (``max_allocation_candidates``): at most that many candidates
      are generated, in ``strategy`` order; ``limit`` then picks among them. ``-1``
      (the default): no bound.
    - ``strategy`` (``allocation_candidates_generation_strategy``): the order in which
      roots give candidates up to ``max_candidates``: ``depth-first`` (every candidate
      of a root before the next root) or ``breadth-first`` (round-robin: one of each
      root before a second of any). Without ``max_candidates`` it changes nothing.

    >>> CandidateOptions(max_candidates=100, strategy="breadth-first").cap
    100
    >>> CandidateOptions(strategy="sideways")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rpquery.errors.InvalidRequest: strategy must be 'depth-first' or 'breadth-first', not ...
    """

    randomize: bool = False
    max_candidates: int = -1
    strategy: Strategy = "depth-first"

    def __post_init__(self) -> None:
        if not isinstance(self.randomize, bool):
            raise InvalidRequest(
                "rpquery.request.bad_candidate_options",
                f"randomize must be true or false, not {self.randomize!r}",
                token=str(self.randomize)[:100],
            )
        m = self.max_candidates
        if not isinstance(m, int) or isinstance(m, bool) or m < -1:
            raise InvalidRequest(
                "rpquery.request.bad_candidate_options",
                f"max_candidates must be an integer >= -1, not {m!r}",
                token=str(m)[:100],
            )
        if self.strategy not in STRATEGIES:
            raise InvalidRequest(
                "rpquery.request.bad_candidate_options",
                f"strategy must be 'depth-first' or 'breadth-first', not {self.strategy!r}",
                token=str(self.strategy)[:100],
            )

    @property
    def cap(self) -> int | None:
        """How many candidates are generated at most, ``None`` when unbounded (``-1``);
        ``0`` is one, as in Placement (it stops once it holds at least that many)."""
        return None if self.max_candidates < 0 else max(self.max_candidates, 1)


DEFAULT_OPTIONS = CandidateOptions()


@dataclass(frozen=True)
class SearchPlan:
    """How one request runs (:func:`search_plan`).

    ``mode``: ``"all"`` every candidate (no bound); ``"spread"`` the first ``target``
    candidates round-robin over roots (:class:`Spread`); ``"depth"`` the first
    ``target`` candidates root after root; ``"random"`` a sample of random roots'
    candidates (a randomized ``limit`` with no ``max_candidates``). ``shuffle``:
    candidates are shuffled before the order of :func:`arrange`."""

    mode: Literal["all", "spread", "depth", "random"]
    target: int | None
    shuffle: bool


def search_plan(
    limit: int | None, options: CandidateOptions, *, randomize: bool, every_candidate: bool
) -> SearchPlan:
    """The plan for a request of ``limit`` (``every_candidate``: a policy needs every
    candidate, so ``limit`` cannot bound the search; ``randomize``: the request's own
    flag, or'ed with the options').

    >>> search_plan(10, DEFAULT_OPTIONS, randomize=False, every_candidate=False)
    SearchPlan(mode='spread', target=10, shuffle=False)
    >>> opts = CandidateOptions(max_candidates=50)
    >>> search_plan(10, opts, randomize=True, every_candidate=False)
    SearchPlan(mode='depth', target=50, shuffle=True)
    >>> search_plan(None, DEFAULT_OPTIONS, randomize=False, every_candidate=False)
    SearchPlan(mode='all', target=None, shuffle=False)
    """
    shuffle = randomize or options.randomize
    cap = options.cap
    bound = None if every_candidate else limit
    if cap is not None:
        if options.strategy == "depth-first":
            return SearchPlan("depth", cap, shuffle)
        # breadth-first: the first ``cap`` round-robin; a ``limit`` below it is its prefix
        target = cap if shuffle or bound is None else min(cap, bound)
        return SearchPlan("spread", target, shuffle)
    if bound is None:
        return SearchPlan("all", None, shuffle)
    if shuffle:
        return SearchPlan("random", bound, shuffle)
    return SearchPlan("spread", bound, shuffle)


def searched_request(req: CandidatesRequest, how: SearchPlan) -> CandidatesRequest:
    """The request the batches and the search see under ``how``: random roots only
    in the ``"random"`` mode; elsewhere no ``limit`` of the request's own (the plan's
    ``target`` bounds the search) and no random roots."""
    if how.mode == "random":
        return req if req.randomize else dataclasses.replace(req, randomize=True)
    if req.randomize or req.limit != how.target:
        return dataclasses.replace(req, limit=None, randomize=False)
    return req


_root_id = attrgetter("root_id")


def spread(items: Sequence[T], root_of: Callable[[T], int] = _root_id) -> list[T]:
    """``items`` round-robin over their roots: the first item of each root (roots in
    the order of their first item), then the second of each root that has one, and so
    on; within a root, items keep their order."""
    per_root: dict[int, list[T]] = {}
    for item in items:
        per_root.setdefault(root_of(item), []).append(item)
    if len(per_root) == len(items):
        return list(items)
    lists = list(per_root.values())
    out: list[T] = []
    depth = 0
    while lists:
        out.extend(lst[depth] for lst in lists)
        depth += 1
        lists = [lst for lst in lists if len(lst) > depth]
    return out


def arrange(
    items: Sequence[T], limit: int | None, root_of: Callable[[T], int] = _root_id
) -> list[T]:
    """A limited answer's order (:func:`spread`), cut at ``limit``; an unlimited
    answer as it is."""
    if limit is None:
        return list(items)
    return spread(items, root_of)[:limit]


def shuffled(items: Sequence[T]) -> list[T]:
    out = list(items)
    random.shuffle(out)
    return out


class Spread:
    """The first ``target`` candidates round-robin over anchor roots, fed one batch of
    roots at a time (:meth:`add`). Each anchor's first candidate is taken as its batch
    is searched; the batches stop once ``target`` anchors gave one
    (:attr:`viable`). Only when fewer anchors than ``target`` give a candidate are
    their later candidates drawn (:meth:`answer`), lazily, one round at a time.

    A candidate made of sharing providers alone can come from several anchors: only
    its first is kept (``seen``), as :func:`~rpquery.read.candidates._collect` does."""

    def __init__(self, target: int, budget: SearchBudget) -> None:
        self.target = target
        self.budget = budget
        self.firsts: list[RawCandidate] = []
        #: each anchor's later candidates, lazily (same order as ``firsts``): a walk
        #: under way, or the batch a plain anchor's walk starts from when asked for
        self.rests: list[Iterator[RawCandidate] | tuple[Loaded]] = []
        self.seen: set[tuple[object, ...]] = set()

    @property
    def viable(self) -> int:
        """Anchors that gave a candidate so far."""
        return len(self.firsts)

    def add(self, loaded: Loaded) -> int:
        """Take the first candidate of each anchor of the batch ``loaded``, in order,
        until ``target`` anchors gave one. Returns how many anchors it searched."""
        slots, data, rules = loaded.slots, loaded.data, loaded.rules
        shared = loaded.sharing_ids
        allocating = [j for j, slot in enumerate(slots) if slot.rc_amounts]
        plan = plan_slots(slots, rules)
        if not shared and is_plain(plan, rules):
            return self._add_plain(loaded)
        for searched, root in enumerate(loaded.anchors, 1):
            walk = self._unseen(
                search_anchor(root, slots, data, rules, plan, self.budget), shared, allocating
            )
            first = next(walk, None)
            if first is None:
                continue
            self.firsts.append(first)
            self.rests.append(walk)
            if len(self.firsts) >= self.target:
                return searched
        return len(loaded.anchors)

    def _add_plain(self, loaded: Loaded) -> int:
        """:meth:`add` of a plain walk (:func:`is_plain`, no sharing provider): an
        anchor's first candidate is the product's first tuple, the first choice of
        each slot, with the steps the walk takes to yield it (two per slot, checked as
        :func:`plain_prefix` does); the later ones are walked only when asked for."""
        slots = loaded.slots
        per_slot = [slot.choices for slot in slots]
        budget = self.budget
        n = len(slots)
        firsts, rests, target = self.firsts, self.rests, self.target
        later = (loaded,)  # the later candidates: walked from ``loaded`` when asked for
        for searched, root in enumerate(loaded.anchors, 1):
            picks = []
            for choices in per_slot:
                these = choices.get(root)
                if not these:  # a slot nobody can fill
                    break
                picks.append(these[0])
            else:
                if budget.steps + n > budget.max_steps:  # the walk raises where it goes over
                    next(_later(loaded, root, budget, skip=0))
                budget.steps += 2 * n
                firsts.append(RawCandidate(root, tuple(picks), slots))
                rests.append(later)
                if len(firsts) >= target:
                    return searched
        return len(loaded.anchors)

    def _unseen(
        self, walk: Iterator[RawCandidate], shared: frozenset[int], allocating: list[int]
    ) -> Iterator[RawCandidate]:
        for cand in walk:
            if shared and all(cand.picks[j] in shared for j in allocating):
                key = cand.key()
                if key in self.seen:
                    continue
                self.seen.add(key)
            yield cand

    def answer(self) -> list[RawCandidate]:
        """The first ``target`` candidates, round-robin over the anchors in order."""
        out = self.firsts[: self.target]
        if len(out) >= self.target:
            return out
        live = [
            _later(rest[0], first.root_id, self.budget) if isinstance(rest, tuple) else rest
            for first, rest in zip(self.firsts, self.rests, strict=True)
        ]
        while live and len(out) < self.target:
            still: list[Iterator[RawCandidate]] = []
            for walk in live:
                cand = next(walk, None)
                if cand is None:
                    continue
                out.append(cand)
                if len(out) >= self.target:
                    return out
                still.append(walk)
            live = still
        return out


def _later(
    loaded: Loaded, root: int, budget: SearchBudget, skip: int = 1
) -> Iterator[RawCandidate]:
    """A plain anchor's candidates after its first ``skip``, walked only when asked for."""
    plan = plan_slots(loaded.slots, loaded.rules)
    walk = search_anchor(root, loaded.slots, loaded.data, loaded.rules, plan, budget)
    yield from islice(walk, skip, None)
