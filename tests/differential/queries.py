"""Seeded random requests on one cloud: allocation candidates with every 1.39 feature,
``GET /resource_providers`` with its filters, and ``GET /usages``.

Each request keeps its meaning (groups, sets, policies: what :mod:`.proofs` checks
candidates against) and the exact query string asked of both sides, rendered in a
randomly chosen form (``required=A,!B`` or repeated, ``in:`` any-of, ``member_of=X``,
``in:``, ``!X`` or ``!in:``). A small share is made invalid on purpose (unknown
names, contradictions, missing ``group_policy`` ...): both sides must refuse those.

>>> from tests.differential.cloud import make_cloud
>>> qs = make_queries(make_cloud(3), 3, 100)
>>> len(qs), {q.kind for q in qs} == {"candidates", "providers", "usages"}
(100, True)
"""

from __future__ import annotations

import random
import uuid as uuidlib
from dataclasses import dataclass, field
from urllib.parse import urlencode

from tests.differential.cloud import CONSUMER_TYPES, PROJECTS, USERS, Cloud, unit

SUFFIXES = ("1", "2", "3", "_NET", "_GPU", "_X-1", "_ACCEL")
RC_WEIGHT = {"VCPU": 4, "MEMORY_MB": 3, "DISK_GB": 2, "SRIOV_NET_VF": 2}
#: A standard trait no generated provider has (valid, matches nothing).
UNUSED_TRAIT = "HW_GPU_API_VULKAN"


@dataclass
class Group:
    suffix: str
    resources: dict[str, int] = field(default_factory=dict)
    required: list[frozenset[str]] = field(default_factory=list)  # AND of any-of sets
    forbidden: set[str] = field(default_factory=set)
    member_of: list[frozenset[str]] = field(default_factory=list)  # AND of any-of sets
    forbidden_aggs: list[frozenset[str]] = field(default_factory=list)
    in_tree: str | None = None

    @property
    def positive(self) -> bool:
        """Whether the group has a positive trait or aggregate filter."""
        return bool(self.required or self.member_of)


@dataclass
class Query:
    """One request; ``pairs`` is exactly what both sides are asked."""

    kind: str  # candidates | providers | usages
    pairs: list[tuple[str, str]]
    groups: list[Group] = field(default_factory=list)
    group_policy: str | None = None
    root_required: set[str] = field(default_factory=set)
    root_forbidden: set[str] = field(default_factory=set)
    same_subtree: list[list[str]] = field(default_factory=list)
    limit: int | None = None
    invalid: str | None = None  # why it was made invalid, if it was

    @property
    def query(self) -> str:
        return urlencode(self.pairs, safe=",:!")

    @property
    def path(self) -> str:
        base = {"candidates": "/allocation_candidates", "providers": "/resource_providers"}
        return f"{base.get(self.kind, '/usages')}?{self.query}"

    def unlimited(self) -> Query:
        pairs = [(k, v) for k, v in self.pairs if k != "limit"]
        return Query(**{**self.__dict__, "pairs": pairs, "limit": None})

    def group(self, suffix: str) -> Group:
        return next(g for g in self.groups if g.suffix == suffix)


def _uuid(rng: random.Random) -> str:
    return str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


class _Maker:
    def __init__(self, cloud: Cloud, rng: random.Random) -> None:
        self.cloud, self.rng = cloud, rng
        self.traits = cloud.traits_used()  # required ones; forbidden may add UNUSED_TRAIT
        self.root_traits = sorted(set().union(*(cloud.providers[r].traits for r in cloud.roots())))
        self.classes = cloud.classes_used()
        self.aggs = list(cloud.aggregates.values())

    # ------------------------------------------------------------ pieces

    def trait(self) -> str:
        return self.rng.choice(self.traits)

    def agg(self) -> str:
        return self.rng.choice(self.aggs) if self.rng.random() < 0.9 else _uuid(self.rng)

    def provider_uuid(self) -> str:
        if self.rng.random() < 0.05:
            return _uuid(self.rng)
        return self.rng.choice(list(self.cloud.providers.values())).uuid

    def resources(self, n: int) -> dict[str, int]:
        weights = [RC_WEIGHT.get(rc, 1) for rc in self.classes]
        out: dict[str, int] = {}
        for _ in range(n):
            rc = self.rng.choices(self.classes, weights)[0]
            out[rc] = unit(rc) * self.rng.choice((1, 1, 1, 2, 2, 3, 5))
        return out

    def traits_filter(self, g: Group, own: set[str] | None = None) -> None:
        """Random trait filters; with ``own`` (a provider's traits) mostly ones it meets.
        Forbidden traits avoid the plain required ones (that conflict is made on
        purpose elsewhere) but may fall inside an any-of set (valid at 1.39)."""
        rng = self.rng
        pool = sorted(own) if own and rng.random() < 0.8 else self.traits
        for _ in range(rng.choice((0, 1, 1, 2))):
            g.required.append(frozenset({rng.choice(pool)}))
        everything = [*self.traits, UNUSED_TRAIT]
        if rng.random() < 0.3:
            anyof = set(rng.sample(everything, rng.randint(1, 2)))
            g.required.append(frozenset(anyof | {rng.choice(pool)}))
        plain = {t for x in g.required if len(x) == 1 for t in x}
        lacking = [t for t in everything if t not in (own or set())]
        for _ in range(rng.choice((0, 0, 1, 1, 2))):
            g.forbidden.add(rng.choice(lacking if rng.random() < 0.7 else everything))
        g.forbidden -= plain

    def aggs_filter(self, g: Group, own: set[str] | None = None) -> None:
        rng = self.rng
        pool = sorted(own) if own and rng.random() < 0.7 else None
        if rng.random() < 0.25:
            for _ in range(rng.choice((1, 1, 2))):
                terms = {self.agg() for _ in range(rng.randint(1, 3))}
                if pool:
                    terms.add(rng.choice(pool))
                g.member_of.append(frozenset(terms))
        if rng.random() < 0.2:
            g.forbidden_aggs.append(frozenset({self.agg() for _ in range(rng.randint(1, 2))}))

    def fitting(self, name: str) -> dict[str, int]:
        """One or two classes of provider ``name`` with an amount it could take."""
        p = self.cloud.providers[name]
        out: dict[str, int] = {}
        for rc in self.rng.sample(sorted(p.inventory), min(len(p.inventory), 2)):
            inv = p.inventory[rc]
            free = int(inv.capacity()) - self.cloud.used(name, rc)
            amounts = [a for a in range(inv.min_unit, free + 1) if inv.fits(a)][:3]
            out[rc] = self.rng.choice(amounts) if amounts else unit(rc)
        return out

    def group(self, suffix: str, resourceful: bool, near: list[str]) -> Group:
        """A group aimed at one provider of ``near`` most of the time (its classes,
        traits, aggregates mostly), else at random."""
        rng, g = self.rng, Group(suffix)
        target = rng.choice(near) if rng.random() < 0.7 else None
        if resourceful:
            if target and self.cloud.providers[target].inventory:
                g.resources = self.fitting(target)
            else:
                g.resources = self.resources(rng.choice((1, 1, 2, 3) if not suffix else (1, 1, 2)))
        p = self.cloud.providers[target] if target else None
        if rng.random() < 0.4 or (not resourceful and rng.random() < 0.8):
            self.traits_filter(g, p.traits if p else None)
        aggs = (p.aggs | self.cloud.providers[self.cloud.root(p.name)].aggs) if p else None
        self.aggs_filter(g, aggs)
        if rng.random() < 0.1:
            g.in_tree = self.provider_uuid()
        return g

    # ------------------------------------------------------------ rendering

    def render_group(self, g: Group) -> list[tuple[str, str]]:
        rng, s = self.rng, g.suffix
        pairs: list[tuple[str, str]] = []
        if g.resources:
            items = [f"{rc}:{n}" for rc, n in g.resources.items()]
            pairs.append((f"resources{s}", ",".join(items)))
        plain = [next(iter(x)) for x in g.required if len(x) == 1]
        plain += ["!" + t for t in sorted(g.forbidden)]
        rng.shuffle(plain)
        if plain:
            cut = rng.randint(1, len(plain))
            for chunk in (plain[:cut], plain[cut:]):
                if chunk:
                    pairs.append((f"required{s}", ",".join(chunk)))
        pairs += [(f"required{s}", "in:" + ",".join(sorted(x))) for x in g.required if len(x) > 1]
        for x in g.member_of:
            form = "in:" if len(x) > 1 or rng.random() < 0.3 else ""
            pairs.append((f"member_of{s}", form + ",".join(sorted(x))))
        for x in g.forbidden_aggs:
            form = "!in:" if len(x) > 1 or rng.random() < 0.3 else "!"
            pairs.append((f"member_of{s}", form + ",".join(sorted(x))))
        if g.in_tree is not None:
            pairs.append((f"in_tree{s}", g.in_tree))
        return pairs

    # ------------------------------------------------------------ requests

    def candidates(self) -> Query:
        rng = self.rng
        n_suffixed = rng.choice((0, 0, 0, 1, 1, 2, 2, 3))
        suffixes = rng.sample(SUFFIXES, n_suffixed)
        resourceless = [s for s in suffixes if rng.random() < 0.3 and len(suffixes) > 1]
        root = rng.choice(self.cloud.roots())
        near = self.cloud.tree(root) + [n for n, p in self.cloud.providers.items() if p.sharing]
        groups = [self.group(s, s not in resourceless, near) for s in suffixes]
        if rng.random() < 0.8 or not any(g.resources for g in groups):
            groups.insert(0, self.group("", True, near))
            if rng.random() < 0.3:  # classes from a second provider of the tree
                more = self.fitting(rng.choice(near))
                groups[0].resources.update(
                    {k: v for k, v in more.items() if k not in groups[0].resources}
                )
        q = Query("candidates", [], groups)
        if len(suffixes) > 1 or rng.random() < 0.2:
            q.group_policy = rng.choice(("none", "isolate"))
        if resourceless or (len(suffixes) > 1 and rng.random() < 0.4):
            members = set(resourceless) | set(rng.sample(suffixes, 2))
            q.same_subtree.append(sorted(members))
        if rng.random() < 0.2:
            pool = self.root_traits if self.root_traits and rng.random() < 0.8 else self.traits
            q.root_required.add(rng.choice(pool))
            if rng.random() < 0.5:
                q.root_forbidden.add(rng.choice([*self.traits, UNUSED_TRAIT]))
            q.root_forbidden -= q.root_required
        if rng.random() < 0.15:
            q.limit = rng.randint(1, 4)
        q.pairs = self.render_candidates(q)
        return q

    def render_candidates(self, q: Query) -> list[tuple[str, str]]:
        pairs = [p for g in q.groups for p in self.render_group(g)]
        if q.group_policy:
            pairs.append(("group_policy", q.group_policy))
        pairs += [("same_subtree", ",".join(s)) for s in q.same_subtree]
        roots = sorted(q.root_required) + ["!" + t for t in sorted(q.root_forbidden)]
        if roots:
            pairs.append(("root_required", ",".join(roots)))
        if q.limit is not None:
            pairs.append(("limit", str(q.limit)))
        self.rng.shuffle(pairs)
        return pairs

    def providers(self) -> Query:
        rng = self.rng
        g = self.group("", rng.random() < 0.5, list(self.cloud.providers))
        if rng.random() < 0.15:
            g.in_tree = self.provider_uuid()
        pairs = self.render_group(g)
        if rng.random() < 0.1:
            name = rng.choice([*self.cloud.providers, "nope"])
            pairs.append(("name", name))
        if rng.random() < 0.1:
            pairs.append(("uuid", self.provider_uuid()))
        rng.shuffle(pairs)
        return Query("providers", pairs, [g])

    def usages(self) -> Query:
        rng = self.rng
        pairs = [("project_id", rng.choice((*PROJECTS, "proj-z")))]
        if rng.random() < 0.4:
            pairs.append(("user_id", rng.choice((*USERS, "user-z"))))
        if rng.random() < 0.6:
            types = [t for t in CONSUMER_TYPES if t] + ["all", "unknown", "NOSUCH"]
            pairs.append(("consumer_type", rng.choice(types)))
        return Query("usages", pairs)


# ---------------------------------------------------------------- invalid requests


def _invalid(m: _Maker, q: Query) -> Query:
    """``q`` made invalid in one of several ways both sides must refuse."""
    rng = m.rng
    how = rng.choice(
        ("unknown_trait", "unknown_class", "conflict", "anyof_forbidden", "bad_amount")
        + (("unknown_subtree", "no_policy", "limit_zero") if q.kind == "candidates" else ())
    )
    pairs = list(q.pairs)
    suffix = q.groups[0].suffix if q.groups else ""
    if how == "unknown_trait":
        pairs.append((f"required{suffix}", "CUSTOM_NO_SUCH_TRAIT"))
    elif how == "unknown_class":
        key = next((k for k, _ in pairs if k.startswith("resources")), None)
        if key is None:
            pairs.append(("resources", "CUSTOM_NO_SUCH_RC:1"))
        else:
            pairs = [(k, v + ",CUSTOM_NO_SUCH_RC:1" if k == key else v) for k, v in pairs]
    elif how == "conflict":
        t = m.trait()
        pairs += [(f"required{suffix}", t), (f"required{suffix}", "!" + t)]
    elif how == "anyof_forbidden":
        pairs.append((f"required{suffix}", f"in:{m.trait()},!{m.trait()}"))
    elif how == "bad_amount":
        pairs.append(("resources_BAD", "VCPU:0"))
        if q.kind == "candidates":
            pairs.append(("same_subtree", "_BAD"))
    elif how == "unknown_subtree":
        pairs.append(("same_subtree", "_NOPE,1"))
    elif how == "no_policy":
        pairs = [(k, v) for k, v in pairs if k != "group_policy"]
        pairs += [("resources_P1", "VCPU:1"), ("resources_P2", "VCPU:1")]
    else:
        pairs = [(k, v) for k, v in pairs if k != "limit"] + [("limit", "0")]
    q.pairs, q.invalid = pairs, how
    return q


def make_queries(cloud: Cloud, seed: int, n: int) -> list[Query]:
    """``n`` requests on ``cloud``: ~75 % candidates, ~17 % provider lists, ~8 % usages;
    about 6 % of the first two kinds invalid on purpose."""
    rng = random.Random(seed * 7919 + 17)
    m = _Maker(cloud, rng)
    out: list[Query] = []
    for _ in range(n):
        roll = rng.random()
        q = m.candidates() if roll < 0.75 else m.providers() if roll < 0.92 else m.usages()
        if q.kind != "usages" and rng.random() < 0.06:
            q = _invalid(m, q)
        out.append(q)
    return out
