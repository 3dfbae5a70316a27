"""How many more instances of a request fit: per host and in total.

>>> from rpquery.db import Database
>>> db = Database("sqlite://"); db.upgrade()
>>> headroom(db, "resources=VCPU:1").total
0

**Per host**: the number of times the whole request (every group, sharing providers
included) can still be placed on the host at once, given free capacity, ``min_unit``
/ ``max_unit`` / ``step_size``, ``root_required`` and host policies, as if no other
host took anything. Each instance is a separate consumer: ``max_unit`` and
``group_policy=isolate`` apply within one instance, not across instances.

**Total**: the instances the whole cloud can still take at once. Hosts never compete
for their own providers, so without sharing providers the total is the sum of the
per-host figures. Hosts that share a provider compete for it, and the total counts its
capacity once: hosts are filled one after the other (by id), each taking its own
providers' room first and what earlier hosts left of the sharing providers (in
provider id order) for the rest. ``HostHeadroom.in_total`` is each host's part.
That fill is exact when the hosts that compete take one class from sharing providers
they all reach; otherwise it is a lower bound (a host filled earlier may take shared
room a later host needed more).

How: a request of one group (without the unsuffixed group's collective traits) is SQL
(:mod:`rpquery.insight._headroom_sql`: one grouped statement); every other request uses the
candidate search (:mod:`rpquery.read.candidates._search`, under the request's step budget):
each host's candidates, then the largest multiset of them whose summed amounts fit
(:func:`pack`, a depth-first search pruned by a per-class bound, at most
:data:`PACK_STEPS` steps per host). A host whose packing search is cut keeps the best
count found so far (at least the greedy one) and the answer says ``exact=False``.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select

from rpquery.db import Database, reading
from rpquery.errors import InvalidRequest
from rpquery.insight import _headroom_sql as hq
from rpquery.insight import _why_sql as w
from rpquery.insight._why import keys_per_host
from rpquery.policies.base import HostPolicy
from rpquery.read import engine
from rpquery.read.candidates import search_budget
from rpquery.read.request import CandidatesRequest, Params, RequestGroup, as_candidates_request
from rpquery.store import dialects
from rpquery.store.runner import driver_rows

GROUP_BY = ("aggregate", "trait")
#: Steps (multisets tried) of one host's packing search before it keeps its best so far.
PACK_STEPS = 2000


@dataclass(frozen=True)
class HostHeadroom:
    """One host: ``count`` instances fit it alone; ``in_total`` of them count in the
    total (fewer when earlier hosts took shared room)."""

    uuid: str
    name: str | None
    count: int
    in_total: int


@dataclass(frozen=True)
class GroupHeadroom:
    """``--group-by``: the hosts with one aggregate (uuid) or trait (name), or
    ``"(none)"``, and the sum of their ``in_total``."""

    label: str
    hosts: int
    count: int


@dataclass(frozen=True)
class Headroom:
    """``hosts``: every host with room for one instance or more (largest first);
    ``total`` = the sum of their ``in_total``; ``method``: ``sql`` or ``search``;
    ``exact``: False when some host's packing search was cut (its count is then a lower
    bound)."""

    hosts: tuple[HostHeadroom, ...]
    total: int
    method: str
    groups: tuple[GroupHeadroom, ...] = ()
    exact: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "method": self.method,
            "exact": self.exact,
            "hosts": [vars(h) for h in self.hosts],
            "groups": [vars(g) for g in self.groups],
        }


def headroom(
    db: Database | Connection,
    request: CandidatesRequest | Params,
    *,
    policies: Sequence[HostPolicy] = (),
    group_by: str | None = None,
    max_search_steps: int | None = None,
) -> Headroom:
    """How many more instances of ``request`` fit, per host and in total (see the
    module docstring); ``group_by`` (``aggregate`` or ``trait``) adds the sums per host
    aggregate or root trait. ``limit`` is ignored."""
    req = as_candidates_request(request)
    if group_by is not None and group_by not in GROUP_BY:
        raise InvalidRequest(
            "rpquery.request.bad_group_by",
            f"group_by must be one of {', '.join(GROUP_BY)}, not {group_by!r}",
            token=str(group_by)[:100],
        )
    budget = search_budget(db, max_search_steps)
    with reading(db) as conn:
        dialects.read_session_setup(conn)
        return _run(conn, req, policies, group_by, budget)


def single_group_sql(req: CandidatesRequest) -> bool:
    """Is ``req`` answered in SQL? One group with resources, and no collective traits."""
    if len(req.groups) != 1:
        return False
    g = req.groups[0]
    return not engine.tree_wide_sets(g)


#: Per host: its own units, and per sharing provider the units it offers. A unit map is
#: class id → instances (``-1``: a granular group's whole amounts).
Units = dict[int, int]


def _run(
    conn: Connection,
    req: CandidatesRequest,
    policies: Sequence[HostPolicy],
    group_by: str | None,
    budget: engine.SearchBudget,
) -> Headroom:
    names = engine.fetch_names(conn, req)
    sharing = engine.fetch_sharing(conn, req, names)
    cut: list[bool] = []
    if single_group_sql(req) and not sharing.shared_with:
        hosts, alone, fill = _host_counts(conn, req.groups[0], names)
        method = "sql"
    else:
        hosts = [(int(i), str(u), n) for i, u, n in driver_rows(conn, hq.hosts_stmt(), {})]
        keys, root_of = keys_per_host(conn, sharing)
        if single_group_sql(req):
            alone, fill = _sql_counts(conn, req, names, sharing, keys, root_of)
            method = "sql"
        else:
            alone, fill = _search_counts(conn, req, names, sharing, budget, cut)
            method = "search"
    eligible = _eligible(conn, req, names, policies, [h for h, _, _ in hosts if alone.get(h)])
    in_total = fill(eligible)
    kept = set(eligible)
    out = [
        HostHeadroom(uuid, name, alone[h], in_total.get(h, 0))
        for h, uuid, name in hosts
        if h in kept and alone.get(h, 0) > 0
    ]
    out.sort(key=lambda x: (-x.count, x.name or "", x.uuid))
    groups = _grouped(conn, group_by, in_total) if group_by else ()
    return Headroom(tuple(out), sum(in_total.values()), method, groups, not any(cut))


def _eligible(
    conn: Connection,
    req: CandidatesRequest,
    names: engine.Names,
    policies: Sequence[HostPolicy],
    hosts: list[int],
) -> list[int]:
    """Hosts with room that pass ``root_required`` and every policy."""
    if not hosts:
        return []
    required, forbidden = names.traits(req.root_required), names.traits(req.root_forbidden)
    if required or forbidden:
        stmt = w.passing_roots_stmt(required, forbidden, None, hosts)
        kept = {int(r) for r in conn.execute(stmt).scalars()}
        hosts = [h for h in hosts if h in kept]
    for policy in policies:
        if not hosts:
            break
        kept = {
            int(r) for r in conn.execute(w.passing_roots_stmt((), (), policy, hosts)).scalars()
        }
        hosts = [h for h in hosts if h in kept]
        narrowed = policy.keep(conn, hosts) if hosts else None
        if narrowed is not None:
            hosts = [h for h in hosts if h in narrowed]
    return hosts


# ---------------------------------------------------------------- one group, in SQL


@functools.lru_cache(maxsize=128)
def _host_counts_stmt(g: RequestGroup, key: engine.NamesKey) -> Select:
    """:func:`rpquery.insight._headroom_sql.host_counts_stmt`, built once per request shape."""
    return hq.host_counts_stmt(g, engine.Names(dict(key[0]), dict(key[1])))


@functools.lru_cache(maxsize=128)
def _units_stmt(g: RequestGroup, key: engine.NamesKey, shared: tuple[int, ...]) -> Select:
    """:func:`rpquery.insight._headroom_sql.units_stmt`, built once per request shape."""
    return hq.units_stmt(g, engine.Names(dict(key[0]), dict(key[1])), shared)


def _host_counts(
    conn: Connection, g: RequestGroup, names: engine.Names
) -> tuple[list[tuple[int, str, str | None]], dict[int, int], Any]:
    """One group that no sharing provider serves: every host's count in one statement
    (no competition: the total is the sum)."""
    hosts: list[tuple[int, str, str | None]] = []
    alone: dict[int, int] = {}
    for k, n, uuid, name in driver_rows(conn, _host_counts_stmt(g, engine.names_key(names)), {}):
        hosts.append((int(k), str(uuid), name))
        alone[int(k)] = int(n)

    def fill(eligible: list[int]) -> dict[int, int]:
        return {h: alone[h] for h in eligible}

    return hosts, alone, fill


def _sql_counts(
    conn: Connection,
    req: CandidatesRequest,
    names: engine.Names,
    sharing: engine.Sharing,
    keys: Mapping[int, list[int]],
    root_of: Mapping[int, int],
) -> tuple[dict[int, int], Any]:
    g = req.groups[0]
    shared = sorted(set().union(*sharing.shared_with.values())) if sharing.shared_with else []
    units: dict[int, Units] = defaultdict(dict)
    scope: dict[int, int] = {}
    for k, rc, n, *rest in driver_rows(
        conn, _units_stmt(g, engine.names_key(names), tuple(shared)), {}
    ):
        units[int(k)][int(rc)] = int(n or 0)
        if rest and rest[0] is not None:  # a sharing provider's trees
            scope[int(k)] = int(rest[0])
    if w.splits_sharing(g, shared):
        keys = _usable(conn, g, keys, root_of, scope)
    classes = [-1] if g.is_granular else sorted(names.rc_ids[rc] for rc in g.resources)
    alone = {
        h: _count(units[h], [units.get(s, {}) for s in keys.get(h, ()) if s != h], classes)
        for h in units.keys() | keys.keys()
    }

    def fill(eligible: list[int]) -> dict[int, int]:
        if not keys:  # nothing shared: each host's own count
            return {h: alone[h] for h in eligible}
        left = {s: dict(units.get(s, {})) for ss in keys.values() for s in ss}
        out: dict[int, int] = {}
        for h in eligible:
            own = units.get(h, {}) if h not in left else {}
            pool = [left[s] for s in keys.get(h, ()) if s != h]
            if h in left:  # the host is itself a sharing provider: its room is shared
                pool.insert(0, left[h])
            n = _count(own, pool, classes)
            for rc in classes:
                need = n - own.get(rc, 0)
                for offer in pool:
                    take = min(need, offer.get(rc, 0))
                    if take > 0:
                        offer[rc] -= take
                        need -= take
            out[h] = n
        return out

    return alone, fill


def _usable(
    conn: Connection,
    g: RequestGroup,
    keys: Mapping[int, list[int]],
    root_of: Mapping[int, int],
    scope: Mapping[int, int],
) -> dict[int, list[int]]:
    """``keys`` without the sharing providers a host may not use in the unsuffixed group
    (docs/read-path.md *Semantics*): one of its own tree unless it passes there (scope
    1), one of another tree unless it passes as such (scope 2: its own aggregates only,
    never under ``in_tree``) and the host's root is in no forbidden aggregate (one more
    statement, with forbidden aggregates only). A provider without rows has no units."""
    blocked: set[int] = set()
    aggs = engine.ruled(g, engine.ANCHOR)  # forbidden aggregates
    if aggs is not None:
        stmt = w.roots_in_aggregates_stmt(sorted(aggs))
        blocked = {int(r) for r in conn.execute(stmt).scalars()}

    def usable(s: int, h: int) -> bool:
        if s not in scope:
            return True
        if root_of.get(s, s) == h:
            return bool(scope[s] & 1)
        return bool(scope[s] & 2) and h not in blocked

    return {h: [s for s in ss if usable(s, h)] for h, ss in keys.items()}


def _count(own: Units, pool: Sequence[Units], classes: Sequence[int]) -> int:
    """Instances: per class, own units plus the pool's, the smallest over classes."""
    if not pool:
        return min((own.get(rc, 0) for rc in classes), default=0)
    return min((own.get(rc, 0) + sum(o.get(rc, 0) for o in pool) for rc in classes), default=0)


# ---------------------------------------------------------------- interacting groups


Placement = dict[tuple[int, int], int]


#: One slot of the request: the providers its candidates pick and its amounts.
SlotBound = tuple[frozenset[int], tuple[tuple[int, int], ...]]


def _search_counts(
    conn: Connection,
    req: CandidatesRequest,
    names: engine.Names,
    sharing: engine.Sharing,
    budget: engine.SearchBudget,
    cut: list[bool],
) -> tuple[dict[int, int], Any]:
    loaded = engine.load_groups(
        conn, req, names, engine.Roots(None, None, {}, True), sharing, lean=False
    )
    plan = engine.plan_slots(loaded.slots, loaded.rules)
    free = {key: inv.capacity - inv.used for key, inv in loaded.data.inventory.items()}
    candidates: dict[int, list[Placement]] = {}
    bounds: dict[int, list[SlotBound]] = {}
    for root in loaded.anchors:
        seen: dict[tuple[tuple[tuple[int, int], int], ...], Placement] = {}
        picked: list[set[int]] = [set() for _ in loaded.slots]
        for cand in engine.search_anchor(
            root, loaded.slots, loaded.data, loaded.rules, plan, budget
        ):
            flat = {
                (rp, rc): amt for rp, per in cand.allocations.items() for rc, amt in per.items()
            }
            seen.setdefault(tuple(sorted(flat.items())), flat)
            for j, rp in enumerate(cand.picks):
                picked[j].add(rp)
        if seen:
            candidates[root] = list(seen.values())
            bounds[root] = [
                (frozenset(picked[j]), slot.rc_amounts)
                for j, slot in enumerate(loaded.slots)
                if slot.rc_amounts
            ]
    best = {h: pack(c, free, cut, slots=bounds[h]) for h, c in candidates.items()}
    alone = {h: len(chosen) for h, chosen in best.items()}
    shared = loaded.sharing_ids

    def fill(eligible: list[int]) -> dict[int, int]:
        left = dict(free)
        out: dict[int, int] = {}
        for h in eligible:
            cands = candidates.get(h, [])
            if any(rp in shared for c in cands for rp, _ in c):
                chosen = pack(cands, left, cut, slots=bounds.get(h, ()))
            else:  # nobody else takes from this host's providers
                chosen = best.get(h, [])
            for placement in chosen:
                for key, amount in placement.items():
                    left[key] -= amount
            out[h] = len(chosen)
        return out

    return alone, fill


def pack(
    candidates: Sequence[Placement],
    free: Mapping[tuple[int, int], float],
    cut: list[bool] | None = None,
    max_steps: int = PACK_STEPS,
    slots: Sequence[SlotBound] = (),
) -> list[Placement]:
    """The largest multiset of ``candidates`` (each ``{(provider, class): amount}``)
    whose summed amounts fit ``free``: a depth-first search over candidates in
    non-decreasing index order (each multiset once), seeded with the greedy first-fit
    answer and cut when a bound cannot beat the best found: per class, the free room on
    every provider the candidates use over one instance's amount; per slot (``slots``:
    the providers a slot's candidates pick and its amounts), the instances those
    providers' free room allows. After
    ``max_steps`` nodes it stops with the best found and appends ``True`` to ``cut``.

    >>> a, b = {(1, 0): 2}, {(2, 0): 2}
    >>> len(pack([a, b], {(1, 0): 4.0, (2, 0): 3.0}))
    3
    """
    if not candidates:
        return []
    packer = _Packer(candidates, free, max_steps, slots)
    try:
        packer.go(0)
    except _Cut:
        if cut is not None:
            cut.append(True)
    return packer.best


class _Cut(Exception):
    """The packing search ran out of steps."""


class _Packer:
    """State of one :func:`pack` search: room left per (provider, class), the
    candidates chosen on the current path, the best multiset so far."""

    def __init__(
        self,
        candidates: Sequence[Placement],
        free: Mapping[tuple[int, int], float],
        max_steps: int,
        slots: Sequence[SlotBound] = (),
    ) -> None:
        self.candidates = candidates
        self.slots = slots
        self.per_rc: dict[int, int] = defaultdict(int)
        for (_, rc), amount in candidates[0].items():
            self.per_rc[rc] += amount
        keys = {key for c in candidates for key in c}
        self.room = {key: free.get(key, 0.0) for key in keys}
        self.best = _greedy(candidates, dict(self.room))
        self.chosen: list[Placement] = []
        self.steps, self.max_steps = 0, max_steps

    def bound(self) -> int:
        totals: dict[int, float] = defaultdict(float)
        for (_, rc), value in self.room.items():
            totals[rc] += max(value, 0.0)
        top = min(int(totals[rc] // amount) for rc, amount in self.per_rc.items() if amount)
        room = self.room
        for providers, amounts in self.slots:
            n = 0
            for rp in providers:
                n += min(int(max(room.get((rp, rc), 0.0), 0.0) // a) for rc, a in amounts)
            top = min(top, n)
        return top

    def fits(self, c: Placement) -> bool:
        return all(self.room[key] >= amount for key, amount in c.items())

    def take(self, c: Placement, sign: int) -> None:
        for key, amount in c.items():
            self.room[key] -= sign * amount

    def go(self, start: int) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise _Cut
        if len(self.chosen) > len(self.best):
            self.best = list(self.chosen)
        if len(self.chosen) + self.bound() <= len(self.best):
            return
        for i in range(start, len(self.candidates)):
            c = self.candidates[i]
            if self.fits(c):
                self.take(c, +1)
                self.chosen.append(c)
                self.go(i)
                self.chosen.pop()
                self.take(c, -1)


def _greedy(
    candidates: Sequence[Placement], room: dict[tuple[int, int], float]
) -> list[Placement]:
    out: list[Placement] = []
    for c in candidates:
        while all(room[key] >= amount for key, amount in c.items()):
            for key, amount in c.items():
                room[key] -= amount
            out.append(c)
    return out


# ---------------------------------------------------------------- --group-by


def _grouped(
    conn: Connection, kind: str, in_total: Mapping[int, int]
) -> tuple[GroupHeadroom, ...]:
    labels: dict[int, set[str]] = defaultdict(set)
    for host, label in conn.execute(hq.host_labels_stmt(kind)):
        if int(host) in in_total:
            labels[int(host)].add(str(label))
    hosts: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    for h, n in in_total.items():
        for label in labels.get(h) or {"(none)"}:
            hosts[label] += 1
            count[label] += n
    rows = [GroupHeadroom(label, hosts[label], count[label]) for label in hosts]
    rows.sort(key=lambda g: (-g.count, g.label))
    return tuple(rows)


__all__ = ["GroupHeadroom", "Headroom", "HostHeadroom", "headroom", "pack"]
