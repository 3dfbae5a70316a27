"""An independent check of one allocation request against Placement's 1.39 rules.

Not a search: given a cloud (as generated, with its allocations), a request's meaning
(:class:`~tests.differential.queries.Query`) and one allocation request as rendered
(``{"allocations": ..., "mappings": ...}``), :meth:`Validator.problems` lists what is
wrong with it — empty when it is a valid candidate. It is the evidence behind every
proof in :mod:`.proofs`: a candidate only Placement returns must have problems, one
only rpquery returns must have none. Summaries are recomputed the same way
(:meth:`Validator.summaries`): every provider of each tree a request allocates from.

The rules (docs/design.md#placement-semantics): capacity ``(total - reserved) * ratio``
from the ratio as written (``ratio32=True`` evaluates it as MySQL's 32-bit FLOAT column holds it);
``min_unit``/``max_unit``/``step_size`` per group amount, the capacity on the summed
amounts; one provider per suffixed group, one per class of the unsuffixed group, all in
one anchor tree or sharing with it (``MISC_SHARES_VIA_AGGREGATE``, a common
aggregate); unsuffixed traits collectively, forbidden ones on every provider;
``member_of`` of the unsuffixed group on the providers that are in every term
themselves, accepted for a provider or its root (a sharing provider serving another
tree must be in every term itself), forbidden aggregates on a provider or the anchor
root it serves (its own root, but for a sharing provider serving another tree);
suffixed groups' filters on their own provider; ``in_tree`` on every provider a group
uses, the unsuffixed group's also fixing the anchor tree; ``isolate`` over every
suffixed group; ``same_subtree`` as one provider being an ancestor of all others;
``root_required`` on the anchor.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from tests.differential.cloud import Cloud, Inventory
from tests.differential.queries import Group, Query


def float32(ratio: str) -> float:
    """The double MySQL computes with for a FLOAT column holding ``ratio``.

    >>> float32("0.7") < 0.7
    True
    """
    return float(struct.unpack("f", struct.pack("f", float(ratio)))[0])


class Validator:
    def __init__(self, cloud: Cloud, *, ratio32: bool = False) -> None:
        self.cloud, self.ratio32 = cloud, ratio32
        self.p = cloud.providers
        self.name_of = {p.uuid: n for n, p in cloud.providers.items()}

    # ------------------------------------------------------------ cloud facts

    def capacity(self, inv: Inventory) -> Fraction | float:
        if self.ratio32:
            return (inv.total - inv.reserved) * float32(inv.ratio)
        return inv.capacity()

    def anchors(self, name: str) -> set[str]:
        """Roots whose candidates may use provider ``name``."""
        own = {self.cloud.root(name)}
        if not self.p[name].sharing:
            return own
        aggs = self.p[name].aggs
        return own | {self.cloud.root(n) for n, x in self.p.items() if x.aggs & aggs}

    def labels(self, uuids: Iterable[str]) -> str:
        return "{" + ",".join(sorted(self.cloud.label(u) for u in uuids)) + "}"

    def tree_of(self, rp_uuid: str | None) -> str | None:
        name = self.name_of.get(rp_uuid or "")
        return self.cloud.root(name) if name else None

    # ------------------------------------------------------------ filters

    def own_filters(self, g: Group, name: str) -> list[str]:
        """A suffixed group's filters on its one provider (own traits, own aggregates)."""
        x, out = self.p[name], []
        out += [f"{name} lacks any of {sorted(s)}" for s in g.required if not s & x.traits]
        out += [f"{name} has forbidden {t}" for t in sorted(g.forbidden & x.traits)]
        out += [f"{name} in none of {self.labels(s)}" for s in g.member_of if not s & x.aggs]
        out += [f"{name} in forbidden {self.labels(s)}" for s in g.forbidden_aggs if s & x.aggs]
        return out + self.in_tree(g, [name])

    def in_tree(self, g: Group, names: Iterable[str]) -> list[str]:
        if g.in_tree is None:
            return []
        tree = self.tree_of(g.in_tree)
        what = "in_tree of resourceless group" if not g.resources else "in_tree of group"
        return [f"{what} {g.suffix!r}: {n} outside" for n in names if self.cloud.root(n) != tree]

    def unsuffixed_filters(self, g: Group, used: set[str]) -> list[str]:
        out: list[str] = []
        traits = set().union(*(self.p[n].traits for n in used))
        out += [f"no provider used has any of {sorted(s)}" for s in g.required if not s & traits]
        for n in sorted(used):  # the anchor's forbidden aggregates: see _anchor
            out += [f"{n} has forbidden {t}" for t in sorted(g.forbidden & self.p[n].traits)]
            bad = [s for s in g.forbidden_aggs if s & self.p[n].aggs]
            out += [f"{n} in forbidden {self.labels(s)}" for s in bad]
        if g.member_of:
            members = {m for m, x in self.p.items() if all(s & x.aggs for s in g.member_of)}
            out += [
                f"{n} and its root not in every member_of term"
                for n in sorted(used)
                if n not in members and self.cloud.root(n) not in members
            ]
        return out + self.in_tree(g, sorted(used))

    # ------------------------------------------------------------ one candidate

    def problems(self, q: Query, ar: dict[str, Any]) -> list[str]:
        """What is wrong with ``ar`` as an answer to ``q`` (empty: a valid candidate)."""
        unknown = [
            u
            for u in [*ar["allocations"], *_flat(ar["mappings"].values())]
            if u not in self.name_of
        ]
        if unknown:
            return [f"unknown provider {unknown[0]}"]
        allocs = {
            (self.name_of[u], rc): amount
            for u, a in ar["allocations"].items()
            for rc, amount in a["resources"].items()
        }
        maps = {s: sorted(self.name_of[u] for u in us) for s, us in ar["mappings"].items()}
        wanted = {g.suffix for g in q.groups if g.suffix or g.resources}
        if set(maps) != wanted:
            return [f"mappings name groups {sorted(maps)}, the request has {sorted(wanted)}"]
        bad = [s for s in maps if s and len(maps[s]) != 1]
        if bad:
            return [f"suffixed group {bad[0]!r} maps to {maps[bad[0]]}"]
        best: list[str] | None = None
        for picks in self._assignments(q, maps):
            found = self._check(q, allocs, maps, picks)
            if best is None or len(found) < len(best):
                best = found
            if not best:
                break
        return best if best is not None else ["the unsuffixed mapping cannot cover its classes"]

    def _assignments(self, q: Query, maps: dict[str, list[str]]) -> Iterable[dict[str, str]]:
        """Every way to give each class of the unsuffixed group one of its providers."""
        g = next((g for g in q.groups if not g.suffix and g.resources), None)
        if g is None:
            yield {}
            return
        rcs = sorted(g.resources)
        for combo in itertools.product(maps[""], repeat=len(rcs)):
            if set(combo) == set(maps[""]):
                yield dict(zip(rcs, combo, strict=True))

    def _check(
        self,
        q: Query,
        allocs: dict[tuple[str, str], int],
        maps: dict[str, list[str]],
        picks: dict[str, str],
    ) -> list[str]:
        parts: dict[tuple[str, str], list[int]] = {}
        out: list[str] = []
        for g in q.groups:
            if g.suffix:
                name = maps[g.suffix][0]
                out += self.own_filters(g, name)
                for rc, amount in g.resources.items():
                    parts.setdefault((name, rc), []).append(amount)
            elif g.resources:
                out += self.unsuffixed_filters(g, set(picks.values()))
                for rc, amount in g.resources.items():
                    parts.setdefault((picks[rc], rc), []).append(amount)
        out += self._amounts(allocs, parts)
        out += self._policies(q, maps)
        return out + self._anchor(q, maps)

    def _amounts(
        self, allocs: dict[tuple[str, str], int], parts: dict[tuple[str, str], list[int]]
    ) -> list[str]:
        out: list[str] = []
        if {k: sum(v) for k, v in parts.items()} != allocs:
            out.append("allocated amounts are not the groups' amounts")
        for (name, rc), amounts in sorted(parts.items()):
            inv = self.p[name].inventory.get(rc)
            if inv is None:
                out.append(f"{name} has no {rc}")
                continue
            out += [f"{name} {rc}:{a} breaks min/max/step" for a in amounts if not inv.fits(a)]
            if self.cloud.used(name, rc) + sum(amounts) > self.capacity(inv):
                out.append(f"{name} {rc}: no room for {sum(amounts)}")
        return out

    def _policies(self, q: Query, maps: dict[str, list[str]]) -> list[str]:
        out: list[str] = []
        suffixed = [maps[g.suffix][0] for g in q.groups if g.suffix]
        if q.group_policy == "isolate" and len(set(suffixed)) < len(suffixed):
            out.append("isolate: two suffixed groups share a provider")
        for subtree in q.same_subtree:
            names = {n for s in subtree for n in maps.get(s, [])}
            common = set.intersection(*(set(self.cloud.ancestors(n)) for n in names))
            if names and not common & names:
                out.append(f"same_subtree {subtree}: {sorted(names)} not under one of them")
        return out

    def _anchor(self, q: Query, maps: dict[str, list[str]]) -> list[str]:
        used = set(_flat(maps.values()))
        roots = set.intersection(*(self.anchors(n) for n in used)) if used else set()
        for g in q.groups:
            if g.suffix or not g.resources:
                continue
            if g.in_tree is not None:  # the unsuffixed group's in_tree is the anchor tree
                roots &= {self.tree_of(g.in_tree)}
            for n in maps.get("", []) if g.member_of else []:
                if not all(s & self.p[n].aggs for s in g.member_of):
                    roots &= {self.cloud.root(n)}  # a sharing provider in only via its root
            # a forbidden aggregate rules out the anchor, whoever serves it: the root of
            # a provider of its tree, the "root" of a sharing provider serving it
            # (a child sharing provider whose own root is in it serves other trees)
            forbidden = set().union(*g.forbidden_aggs)
            blocked = {r for r in roots if forbidden & self.p[r].aggs}
            if blocked and not roots - blocked:
                where = self.labels(forbidden)
                return [f"anchor {', '.join(sorted(blocked))} in forbidden {where}"]
            roots -= blocked
        if not roots:
            return [f"no one anchor tree for {sorted(used)}"]
        ok = [
            r
            for r in roots
            if q.root_required <= self.p[r].traits and not q.root_forbidden & self.p[r].traits
        ]
        return [] if ok else [f"no anchor among {sorted(roots)} meets root_required"]

    # ------------------------------------------------------------ summaries

    def summaries(self, requests: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """Placement's provider summaries for ``requests``: every provider of each
        tree a request allocates from."""
        trees = {self.cloud.root(self.name_of[u]) for ar in requests for u in ar["allocations"]}
        out: dict[str, Any] = {}
        for name, x in self.p.items():
            root = self.cloud.root(name)
            if root not in trees:
                continue
            out[x.uuid] = {
                "resources": {
                    rc: {"capacity": int(self.capacity(inv)), "used": self.cloud.used(name, rc)}
                    for rc, inv in x.inventory.items()
                },
                "traits": sorted(x.traits),
                "parent_provider_uuid": self.p[x.parent].uuid if x.parent else None,
                "root_provider_uuid": self.p[root].uuid,
            }
        return out


def _flat(lists: Iterable[Iterable[str]]) -> list[str]:
    return [x for xs in lists for x in xs]
