"""Brute-force headroom reference for the property test: per host, the largest number of
the request's candidates (from ``tests/reference.py``, every rule of
docs/design.md#placement-semantics) that fit the host's free capacity *at once*. Every
multiset of candidates is tried (memoised on the room left); no SQL, no bound, no greedy
seed.
"""

from __future__ import annotations

import functools

from rpquery.read.request import CandidatesRequest
from tests.reference import SHARING, Cloud, reference_candidates

Placement = tuple[tuple[tuple[str, str], int], ...]


def placements(cloud: Cloud, req: CandidatesRequest, root: str) -> list[Placement]:
    """The distinct allocations of the candidates anchored at ``root``."""
    out = set()
    for allocs, _mappings in reference_candidates(cloud, req, only_root=root):
        out.add(tuple(sorted(((name, rc), amount) for name, res in allocs for rc, amount in res)))
    return sorted(out)


def free_room(cloud: Cloud) -> dict[tuple[str, str], float]:
    return {
        (name, rc): inv.capacity - p.used.get(rc, 0)
        for name, p in cloud.p.items()
        for rc, inv in p.inventory.items()
    }


def most_at_once(cands: list[Placement], room: dict[tuple[str, str], float]) -> int:
    """The size of the largest multiset of ``cands`` whose summed amounts fit ``room``."""
    keys = sorted({k for c in cands for k, _ in c})

    @functools.cache
    def best(start: int, left: tuple[float, ...]) -> int:
        have = dict(zip(keys, left, strict=True))
        top = 0
        for i in range(start, len(cands)):
            if all(have[k] >= a for k, a in cands[i]):
                after = dict(have)
                for k, a in cands[i]:
                    after[k] -= a
                top = max(top, 1 + best(i, tuple(after[k] for k in keys)))
        return top

    return best(0, tuple(room.get(k, 0.0) for k in keys))


def reference_headroom(cloud: Cloud, req: CandidatesRequest) -> dict[str, int]:
    """Host name → instances that fit it alone (hosts with none left out)."""
    room = free_room(cloud)
    out = {}
    for root in (n for n, p in cloud.p.items() if p.parent is None):
        n = most_at_once(placements(cloud, req, root), room)
        if n:
            out[root] = n
    return out


def uses_sharing(cloud: Cloud, req: CandidatesRequest) -> bool:
    """Does any candidate allocate from a sharing provider outside its host's tree?"""
    for root in (n for n, p in cloud.p.items() if p.parent is None):
        for placement in placements(cloud, req, root):
            for (name, _rc), _ in placement:
                if SHARING in cloud.p[name].traits and cloud.root(name) != root:
                    return True
    return False
