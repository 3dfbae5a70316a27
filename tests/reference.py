"""A deliberately simple brute-force allocation-candidate reference for property tests.

It works on an in-memory cloud model (the same one the property test inserts with
``tests.factories``), enumerates *every* assignment of providers to request slots for
every root, and checks every rule of docs/design.md#placement-semantics directly
(Placement 16.0's semantics, except its bugs listed in docs/placement-differences.md).
No pruning, no SQL: slow and obviously right, so rpquery's pruned SQL search can be
compared with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from rpquery.read.request import CandidatesRequest, RequestGroup

SHARING = "MISC_SHARES_VIA_AGGREGATE"


@dataclass(frozen=True)
class Inv:
    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = 100
    step_size: int = 1
    allocation_ratio: float = 1.0

    @property
    def capacity(self) -> float:
        return (self.total - self.reserved) * self.allocation_ratio


@dataclass
class Prov:
    name: str
    parent: str | None = None
    inventory: dict[str, Inv] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    traits: set[str] = field(default_factory=set)
    aggs: set[str] = field(default_factory=set)
    uuid: str = ""


#: A candidate as comparable data: (allocations, mappings) with provider names.
Key = tuple[
    tuple[tuple[str, tuple[tuple[str, int], ...]], ...], tuple[tuple[str, tuple[str, ...]], ...]
]


class Cloud:
    def __init__(self, providers: list[Prov]) -> None:
        self.p = {x.name: x for x in providers}

    def root(self, name: str) -> str:
        while self.p[name].parent is not None:
            name = self.p[name].parent  # type: ignore[assignment]
        return name

    def ancestors(self, name: str) -> list[str]:
        out = [name]
        while self.p[out[-1]].parent is not None:
            out.append(self.p[out[-1]].parent)  # type: ignore[arg-type]
        return out

    def tree(self, root: str) -> list[str]:
        return [n for n in self.p if self.root(n) == root]

    def available(self, root: str) -> list[str]:
        """The tree's providers plus every sharing provider sharing an aggregate with it."""
        tree_aggs = set().union(*(self.p[n].aggs for n in self.tree(root)))
        sharing = [n for n, x in self.p.items() if SHARING in x.traits and x.aggs & tree_aggs]
        return sorted(set(self.tree(root)) | set(sharing))


def _aggregates_ok(cloud: Cloud, g: RequestGroup, name: str, anchor: str) -> bool:
    """``member_of`` and forbidden aggregates as Placement applies them
    (docs/design.md#trees-sharing-and-aggregates).

    Suffixed groups: the provider's own aggregates. The unsuffixed group: the provider
    or its root must itself be in every ``member_of`` term (terms are not split between
    the two), and a sharing provider serving another tree must be in every term itself;
    a forbidden aggregate excludes the provider when it or the anchor root it serves is
    a member: its own root for a provider of the anchor tree, and for a sharing
    provider serving another tree that tree's root, not its own (as Placement)."""
    x = cloud.p[name]
    if g.suffix:
        return all(x.aggs & s for s in g.member_of) and not x.aggs & g.forbidden_aggs
    root = cloud.p[cloud.root(name)]

    def in_every_term(p: Prov) -> bool:
        return all(p.aggs & s for s in g.member_of)

    if g.member_of and not (in_every_term(x) or in_every_term(root)):
        return False
    if g.member_of and anchor != root.name and not in_every_term(x):
        return False  # a sharing provider serves other trees only if itself in every term
    return not (x.aggs | cloud.p[anchor].aggs) & g.forbidden_aggs


def _filters_ok(
    cloud: Cloud, g: RequestGroup, name: str, anchor: str, with_required: bool
) -> bool:
    x = cloud.p[name]
    if x.traits & g.forbidden or not _aggregates_ok(cloud, g, name, anchor):
        return False
    if g.in_tree is not None:
        tree_root = next((n for n, p in cloud.p.items() if p.uuid == g.in_tree), None)
        if tree_root is None or cloud.root(name) != cloud.root(tree_root):
            return False
        if not g.suffix and anchor != cloud.root(tree_root):
            return False  # the unsuffixed group's in_tree is its anchor tree too
    return not with_required or all(x.traits & s for s in g.required)


def _unit_ok(inv: Inv | None, amount: int) -> bool:
    return (
        inv is not None and inv.min_unit <= amount <= inv.max_unit and amount % inv.step_size == 0
    )


def _slots(req: CandidatesRequest) -> list[tuple[RequestGroup, str | None]]:
    out: list[tuple[RequestGroup, str | None]] = []
    for g in req.groups:
        if g.suffix:
            out.append((g, None))
        else:
            out.extend((g, rc) for rc in sorted(g.resources))
    return out


def _check(
    cloud: Cloud, req: CandidatesRequest, slots: list, picks: tuple[str, ...], anchor: str
) -> Key | None:
    allocs: dict[str, dict[str, int]] = {}
    maps: dict[str, set[str]] = {}
    for (g, rc), name in zip(slots, picks, strict=True):
        wanted = {rc: g.resources[rc]} if rc else dict(g.resources)
        for cls, amount in wanted.items():
            if not _unit_ok(cloud.p[name].inventory.get(cls), amount):
                return None
            allocs.setdefault(name, {}).setdefault(cls, 0)
            allocs[name][cls] += amount
        if not _filters_ok(cloud, g, name, anchor, with_required=bool(g.suffix)):
            return None
        maps.setdefault(g.suffix, set()).add(name)
    for name, res in allocs.items():
        for cls, total in res.items():
            inv = cloud.p[name].inventory[cls]
            if cloud.p[name].used.get(cls, 0) + total > inv.capacity or total > inv.max_unit:
                return None
    if not _rules_ok(cloud, req, slots, picks, maps):
        return None
    return (
        tuple(sorted((n, tuple(sorted(r.items()))) for n, r in allocs.items())),
        tuple(sorted((s, tuple(sorted(ns))) for s, ns in maps.items())),
    )


def _rules_ok(
    cloud: Cloud,
    req: CandidatesRequest,
    slots: list,
    picks: tuple[str, ...],
    maps: Mapping[str, set[str]],
) -> bool:
    unsuffixed = [g for g in req.groups if not g.suffix]
    if unsuffixed and unsuffixed[0].required:
        have = set().union(*(cloud.p[n].traits for n in maps.get("", set())))
        if any(not (have & s) for s in unsuffixed[0].required):
            return False
    if req.group_policy == "isolate":  # every suffixed group, resourceless ones too
        suffixed = [n for (g, _), n in zip(slots, picks, strict=True) if g.suffix]
        if len(suffixed) != len(set(suffixed)):
            return False
    for subtree in req.same_subtree:
        chosen = {next(iter(maps[s])) for s in subtree}
        if not any(all(top in cloud.ancestors(n) for n in chosen) for top in chosen):
            return False
    return True


def reference_candidates(
    cloud: Cloud, req: CandidatesRequest, only_root: str | None = None
) -> set[Key]:
    """Every distinct candidate of ``req`` on ``cloud``, by brute force (``only_root``:
    just those anchored at that root)."""
    out: set[Key] = set()
    slots = _slots(req)
    for root in (n for n, x in cloud.p.items() if x.parent is None and only_root in (None, n)):
        rt = cloud.p[root].traits
        if not req.root_required <= rt or rt & req.root_forbidden:
            continue
        # every slot, resourceless groups included: a provider of the tree or a sharing
        # provider sharing with it (as Placement)
        avail = cloud.available(root)
        for picks in itertools.product(*[avail] * len(slots)):
            key = _check(cloud, req, slots, picks, root)
            if key is not None:
                out.add(key)
    return out


def summarised(cloud: Cloud, keys: set[Key]) -> set[str]:
    """The providers Placement summarises for these candidates: every provider of each
    tree that some candidate allocates from (an anchor only sharing providers served,
    or a resourceless group's provider elsewhere, is not summarised)."""
    roots = {cloud.root(name) for allocs, _ in keys for name, _ in allocs}
    return {n for n in cloud.p if cloud.root(n) in roots}


def iter_keys(
    allocations: Iterator[tuple[Mapping[str, Mapping[str, int]], Mapping[str, tuple[str, ...]]]],
) -> set[Key]:
    """Turn (allocations, mappings) pairs with provider names into comparable keys."""
    return {
        (
            tuple(sorted((n, tuple(sorted(r.items()))) for n, r in a.items())),
            tuple(sorted((s, tuple(sorted(ns))) for s, ns in m.items())),
        )
        for a, m in allocations
    }
