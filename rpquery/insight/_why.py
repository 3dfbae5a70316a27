"""Why no host fits: per rejection reason, how many hosts a candidates request excludes.

Placement answers an impossible request with an empty list. :func:`explain_no_candidates`
answers with counts, in the order the candidate query's filters apply (a host excluded
for several reasons counts under the first, and the counts plus the hosts that fit add
up to the number of hosts, i.e. root providers):

>>> from rpquery.db import Database
>>> db = Database("sqlite://"); db.upgrade()
>>> explain_no_candidates(db, "resources=VCPU:1").summary()
'0/0 hosts fit'

The reasons, in order (:data:`rpquery.insight._why_sql.REASONS`): ``in_tree``, ``member_of``,
``forbidden_aggregate``, ``required_trait`` (per trait set), ``forbidden_trait``,
``no_inventory`` (per class), ``no_capacity`` (per class, with the largest free amount
seen), ``unit_limits`` (amount outside min_unit/max_unit/step_size), then
``no_single_provider`` (a suffixed group's classes are each somewhere, never together),
``group_policy_isolate``, ``same_subtree``, ``groups_together`` (each group fits alone,
not all at once: their summed amounts), ``root_required`` and ``policy`` (one per host
policy).

How it runs: one grouped statement per request group (:mod:`rpquery.insight._why_sql`: every
inventory row of a requested class gets the number of the group's stages it passes, the
best per host is kept), then the candidate search itself on the few hosts every group
passes (:mod:`rpquery.read.candidates._search`, with ``isolate`` and ``same_subtree`` relaxed
to tell those reasons apart), then ``root_required`` and the policies on the hosts that
are left. The stages reuse the candidate query's own clauses, so a host told to fit is
a host :func:`rpquery.read.candidates.allocation_candidates` returns.

Where a filter is tested: on the providers that hold an inventory of a requested class
(sharing providers count for every host they may serve: in the unsuffixed group, for
another tree by their own aggregates only, never under ``in_tree``, and not for a host
in a forbidden aggregate, as the candidate query's rules say); a host with none of the
group's classes, on every provider of its tree (the first filter none passes, else
``no_inventory``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select

from rpquery.db import Database, reading
from rpquery.insight import _why_sql as w
from rpquery.policies.base import HostPolicy
from rpquery.read import engine
from rpquery.read.candidates import search_budget
from rpquery.read.request import CandidatesRequest, Params, RequestGroup, as_candidates_request
from rpquery.store import dialects
from rpquery.store.runner import driver_rows
from rpquery.store.tables import resource_providers

#: How many example hosts each reason lists by default.
EXAMPLES = 3


@dataclass(frozen=True)
class Host:
    """A host (root provider) given as an example."""

    uuid: str
    name: str | None


@dataclass(frozen=True)
class Reason:
    """Hosts excluded for one reason: ``code`` (see the module docstring), the request
    group it concerns (``""``: unsuffixed or the request as a whole), ``detail`` (the
    class, trait set, aggregates or policy), the ``count`` and a few ``examples``.
    ``largest_free``: for ``no_capacity``, the most free room of the class any of
    these hosts has."""

    code: str
    group: str
    detail: str
    count: int
    examples: tuple[Host, ...]
    largest_free: float | None = None

    def describe(self) -> str:
        """``"3 no_capacity VCPU (largest free 2)"``"""
        where = f" in group {self.group}" if self.group else ""
        text = f"{self.count} {self.code} {self.detail}".rstrip() + where
        if self.largest_free is not None:
            text += f" (largest free {_num(self.largest_free)})"
        return text

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["examples"] = [dataclasses.asdict(h) for h in self.examples]
        return out


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class Rejections:
    """The answer: ``hosts`` in all, how many ``fit`` (with examples), and the
    reasons in filter order; ``fit + sum(r.count for r in reasons) == hosts``."""

    hosts: int
    fit: int
    reasons: tuple[Reason, ...] = ()
    fit_examples: tuple[Host, ...] = ()

    def summary(self) -> str:
        """``"0/5 hosts fit: 3 no_capacity VCPU (largest free 2), 2 forbidden_trait X"``"""
        head = f"{self.fit}/{self.hosts} hosts fit"
        if not self.reasons:
            return head
        return head + ": " + ", ".join(r.describe() for r in self.reasons)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosts": self.hosts,
            "fit": self.fit,
            "fit_examples": [dataclasses.asdict(h) for h in self.fit_examples],
            "reasons": [r.to_dict() for r in self.reasons],
        }


def explain_no_candidates(
    db: Database | Connection,
    request: CandidatesRequest | Params,
    *,
    policies: Sequence[HostPolicy] = (),
    examples: int = EXAMPLES,
    max_search_steps: int | None = None,
) -> Rejections:
    """Why hosts are excluded from ``request``'s allocation candidates (typed, query
    string or multi-dict): counts per reason, in filter order, with up to ``examples``
    example hosts each. ``limit`` is ignored (every host is looked at). Unknown names
    raise ``InvalidRequest`` as the candidate query does."""
    req = as_candidates_request(request)
    budget = search_budget(db, max_search_steps)
    with reading(db) as conn:
        dialects.read_session_setup(conn)
        return _run(conn, req, policies, budget, examples)


#: A host's first reason: (rank, group index, detail index, code, group, detail).
Verdict = tuple[int, int, int, str, str, str]


def _ordered(req: CandidatesRequest) -> list[RequestGroup]:
    return sorted(req.groups, key=lambda g: (g.is_granular, g.suffix))


def _run(
    conn: Connection,
    req: CandidatesRequest,
    policies: Sequence[HostPolicy],
    budget: engine.SearchBudget,
    examples: int,
) -> Rejections:
    names = engine.fetch_names(conn, req)
    sharing = engine.fetch_sharing(conn, req, names)
    first: dict[int, Verdict] = {}
    free: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    if counted_in_sql(req, sharing):
        total, survivors, counted = _counted(conn, req.groups[0], names, examples)
    else:
        hosts = [int(h) for h in conn.execute(w.hosts_stmt()).scalars()]
        keys, root_of = keys_per_host(conn, sharing)
        for gi, g in enumerate(_ordered(req)):
            seen = SharingSeen(keys, root_of, {}, frozenset(), 0)
            _group_verdicts(conn, g, gi, names, sharing, seen, hosts, first, free)
        total, survivors, counted = len(hosts), [h for h in hosts if h not in first], {}
    fit = _search(conn, req, names, sharing, survivors, budget, first)
    fit = _root_required(conn, req, names, fit, first)
    for pi, policy in enumerate(policies):
        fit = _policy(conn, policy, pi, fit, first)
    return _answer(conn, total, fit, first, free, examples, counted)


def counted_in_sql(req: CandidatesRequest, sharing: engine.Sharing) -> bool:
    """Are the reasons counted in SQL? One group, no sharing provider of its classes,
    not a granular group of several classes (else per-host verdicts are merged in
    Python)."""
    if len(req.groups) != 1 or sharing.shared_with:
        return False
    g = req.groups[0]
    return not (g.is_granular and len(g.resources) > 1)


#: Hosts of one reason counted in SQL: (count, example host ids, largest free amount).
Counted = dict[Verdict, tuple[int, list[int], float | None]]


@functools.lru_cache(maxsize=128)
def _counted_plan(
    g: RequestGroup, key: engine.NamesKey, examples: int, dialect_name: str
) -> tuple[Select, tuple[w.Stage, ...]]:
    """:func:`rpquery.insight._why_sql.counted_stmt` and the group's filter stages, built once
    per request shape (as the candidate query caches its statements)."""
    names = engine.Names(dict(key[0]), dict(key[1]))
    stages = w.filter_stages(g, names, resource_providers.alias("rp"))
    return w.counted_stmt(g, names, examples, dialect_name), tuple(stages)


def _counted(
    conn: Connection, g: RequestGroup, names: engine.Names, examples: int
) -> tuple[int, list[int], Counted]:
    """A request of one group that no sharing provider serves: the reasons counted in
    SQL (:func:`rpquery.insight._why_sql.counted_stmt`, a handful of rows whatever the number of
    hosts) and the hosts that pass, for the search."""
    stmt, stages = _counted_plan(g, engine.names_key(names), examples, conn.dialect.name)
    classes = sorted(g.resources)
    survivors: list[int] = []
    out: Counted = {}
    total = 0
    for verdict, hosts, count, largest in driver_rows(conn, stmt, {}):
        # one row per example host, or (MariaDB) the examples as "id,id,..."
        ids = [int(h) for h in _text(hosts).split(",")]
        if int(verdict) == w.PASS:
            survivors.extend(ids)
            continue
        code, index = w.decode(int(verdict))
        if code in ("no_inventory", "no_capacity", "unit_limits"):
            detail = classes[index]
        elif code == "no_single_provider":
            detail = ",".join(classes)
        elif code == w.TREE_WIDE_REASON and not g.is_granular:
            detail = w.text_of(engine.tree_wide_sets(g)[index])
        else:
            detail = stages[index].detail
        key = (w.RANK[code], 0, index, code, g.suffix, detail)
        room = float(largest) if largest is not None and code == "no_capacity" else None
        if key not in out:
            out[key] = (int(count), [], room)
            total += int(count)
        out[key][1].extend(ids)
    for _, hs, _ in out.values():
        hs.sort()
    survivors.sort()
    return total + len(survivors), survivors, out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)


def keys_per_host(
    conn: Connection, sharing: engine.Sharing
) -> tuple[dict[int, list[int]], dict[int, int]]:
    """Host → the sharing providers whose levels count for it (those it shares with,
    and those in its own tree: the statement keys a sharing provider by its own id);
    and each sharing provider's root."""
    ids = sorted(set().union(*sharing.shared_with.values())) if sharing.shared_with else []
    out: dict[int, list[int]] = {h: sorted(s) for h, s in sharing.shared_with.items()}
    root_of: dict[int, int] = {}
    if ids:
        for rp, root, _uuid, _name in conn.execute(w.roots_of_stmt(ids)):
            root_of[int(rp)] = int(root)
            if int(rp) != int(root) and int(rp) not in out.get(int(root), ()):
                out.setdefault(int(root), []).append(int(rp))
    return out, root_of


Best = dict[int, tuple[int, float | None, tuple[int, ...]]]


@dataclass(frozen=True)
class SharingSeen:
    """How a group's rows of sharing providers count for a host: ``keys`` (host →
    sharing providers), their roots, and (when :func:`rpquery.insight._why_sql.splits_sharing`)
    ``other``: each sharing provider's rows as another tree sees them; ``blocked``
    hosts (roots in a forbidden aggregate) see them stop at stage ``cap``."""

    keys: Mapping[int, list[int]]
    root_of: Mapping[int, int]
    other: Mapping[int, dict[int, tuple[int, float | None, tuple[int, ...]]]]
    blocked: frozenset[int]
    cap: int

    def rows(self, rows: Any, k: int, host: int) -> Mapping[int, Any]:
        """The rows of key ``k`` (the host, or a sharing provider) as ``host`` sees them:
        a sharing provider of another tree by its other-tree levels (docs/read-path.md
        *Semantics*: its own aggregates only, never under ``in_tree``, not for an
        anchor in a forbidden aggregate)."""
        if k == host or not self.other or self.root_of.get(k, k) == host:
            return rows.get(k, {})
        got = self.other.get(k, {})
        if host not in self.blocked:
            return got
        return {rc: (min(lv, self.cap), None, (0,) * len(f)) for rc, (lv, _, f) in got.items()}


def _best(rows: Any, seen: SharingSeen, host: int) -> Best:
    """Per class id: the best level, largest free amount and required flags over the
    host's own providers and the sharing ones that count for it."""
    extra = seen.keys.get(host)
    if not extra:
        return rows.get(host, {})
    out: Best = {}
    for k in (host, *extra):
        for rc, (level, room, flags) in seen.rows(rows, k, host).items():
            old = out.get(rc)
            if old is None:
                out[rc] = (level, room, flags)
                continue
            best_room = room if old[1] is None else old[1] if room is None else max(old[1], room)
            merged = tuple(max(a, b) for a, b in zip(old[2], flags, strict=True))
            out[rc] = (max(old[0], level), best_room, merged)
    return out


def _group_verdicts(
    conn: Connection,
    g: RequestGroup,
    gi: int,
    names: engine.Names,
    sharing: engine.Sharing,
    seen: SharingSeen,
    hosts: Sequence[int],
    first: dict[int, Verdict],
    free: dict[tuple[str, str], dict[int, float]],
) -> None:
    """Run the group's statement and record, per host, the group's first failing stage
    when it comes before the host's earlier verdict."""
    stages = w.filter_stages(g, names, resource_providers.alias("rp"))
    if not g.resources:
        levels = {int(k): int(lv) for k, lv in conn.execute(w.resourceless_levels_stmt(g, names))}
        for h in hosts:
            lv = levels.get(h, 0)
            if lv < len(stages):
                s = stages[lv]
                _note(first, h, (w.RANK[s.code], gi, lv, s.code, g.suffix, s.detail))
        return
    shared = sorted(set().union(*sharing.shared_with.values())) if sharing.shared_with else []
    rows: dict[int, dict[int, tuple[int, float | None, tuple[int, ...]]]] = defaultdict(dict)
    other: dict[int, dict[int, tuple[int, float | None, tuple[int, ...]]]] = defaultdict(dict)
    nreq = len(engine.tree_wide_sets(g))
    for k, rc, level, room, *rest in driver_rows(conn, w.levels_stmt(g, names, shared), {}):
        rows[int(k)][int(rc)] = _level_row(level, room, rest[:nreq])
        if len(rest) > nreq and rest[nreq] is not None:  # a sharing provider, for other trees
            other[int(k)][int(rc)] = _level_row(rest[nreq], rest[nreq + 1], rest[nreq + 2 :])
    if w.splits_sharing(g, shared):
        blocked: frozenset[int] = frozenset()
        aggs = engine.ruled(g, engine.ANCHOR)  # forbidden aggregates
        if aggs is not None:
            stmt = w.roots_in_aggregates_stmt(sorted(aggs))
            blocked = frozenset(int(r) for r in conn.execute(stmt).scalars())
        cap = next((i for i, s in enumerate(stages) if s.of and s.of.sharing == engine.ANCHOR), 0)
        seen = dataclasses.replace(seen, other=other, blocked=blocked, cap=cap)
    bare = [h for h in hosts if not _best(rows, seen, h)]
    bare_verdicts = _bare_verdicts(conn, g, gi, names, stages, bare)
    for h in hosts:
        best = _best(rows, seen, h)
        verdict = bare_verdicts.get(h) or _host_verdict(g, gi, names, stages, best)
        if verdict is not None:
            _note(first, h, verdict)
            if verdict[3] == "no_capacity":
                room = best[names.rc_ids[verdict[5]]][1]
                if room is not None:
                    free[(g.suffix, verdict[5])][h] = room


def _level_row(
    level: Any, room: Any, flags: Sequence[Any]
) -> tuple[int, float | None, tuple[int, ...]]:
    return int(level), None if room is None else float(room), tuple(int(f or 0) for f in flags)


def _bare_verdicts(
    conn: Connection,
    g: RequestGroup,
    gi: int,
    names: engine.Names,
    stages: Sequence[w.Stage],
    bare: list[int],
) -> dict[int, Verdict]:
    """Hosts with no inventory of the group's classes (theirs or a sharing provider's):
    the first filter none of their providers passes (:func:`rpquery.insight._why_sql.bare_stmt`),
    else ``no_inventory`` of the first class."""
    stmt = w.bare_stmt(g, names, bare) if bare else None
    if stmt is None:
        return {}
    classes = sorted(g.resources)
    out: dict[int, Verdict] = {}
    for host, value in driver_rows(conn, stmt, {}):
        code, index = w.decode(int(value))
        if code == "no_inventory":
            detail = classes[index]
        elif code == w.TREE_WIDE_REASON and not g.is_granular:
            detail = w.text_of(engine.tree_wide_sets(g)[index])
        else:
            detail = stages[index].detail
        suffix = "" if code == w.TREE_WIDE_REASON and not g.is_granular else g.suffix
        out[int(host)] = (w.RANK[code], gi, index, code, suffix, detail)
    return out


def _host_verdict(
    g: RequestGroup, gi: int, names: engine.Names, stages: Sequence[w.Stage], best: Best
) -> Verdict | None:
    n = len(stages)
    found: list[Verdict] = []
    classes = sorted(g.resources)
    for ci, rc in enumerate(classes):
        got = best.get(names.rc_ids[rc])
        if got is None:
            found.append((w.RANK["no_inventory"], gi, ci, "no_inventory", g.suffix, rc))
        elif got[0] < n:
            s = stages[got[0]]
            found.append((w.RANK[s.code], gi, got[0], s.code, g.suffix, s.detail))
        elif got[0] < n + 2:
            code = "no_capacity" if got[0] == n else "unit_limits"
            found.append((w.RANK[code], gi, ci, code, g.suffix, rc))
    tree_wide = engine.tree_wide_sets(g)
    if tree_wide and best:  # no inventory at all: no_inventory
        have = [0] * len(tree_wide)
        for _, _, flags in best.values():
            have = [max(a, b) for a, b in zip(have, flags, strict=True)]
        code = w.TREE_WIDE_REASON
        for i, any_of in enumerate(tree_wide):
            if not have[i]:
                found.append((w.RANK[code], gi, i, code, "", w.text_of(any_of)))
    if found:
        return min(found)
    single = best.get(-1)
    if g.is_granular and len(classes) > 1 and (single is None or single[0] < n + 2):
        detail = ",".join(classes)
        return (w.RANK["no_single_provider"], gi, 0, "no_single_provider", g.suffix, detail)
    return None


def _note(first: dict[int, Verdict], host: int, verdict: Verdict) -> None:
    old = first.get(host)
    if old is None or verdict < old:
        first[host] = verdict


def _search(
    conn: Connection,
    req: CandidatesRequest,
    names: engine.Names,
    sharing: engine.Sharing,
    survivors: list[int],
    budget: engine.SearchBudget,
    first: dict[int, Verdict],
) -> list[int]:
    """The candidate search on the hosts every group passed: those with a candidate
    fit; the others are told apart by searching again with ``isolate``, then
    ``same_subtree``, then the unsuffixed group's collective traits relaxed."""
    if not survivors:
        return []
    roots = engine.Roots(survivors, engine.ROOT_IDS, {"root_ids": survivors}, True)
    loaded = engine.load_groups(conn, req, names, roots, sharing)
    rules = loaded.rules
    relaxed = [
        ("group_policy_isolate", "isolate", dataclasses.replace(rules, isolate=False)),
        ("same_subtree", "", dataclasses.replace(rules, isolate=False, same_subtree=())),
        (w.TREE_WIDE_REASON, "", engine.SearchRules(flags=rules.flags)),
    ]
    fit = [h for h in survivors if _has_candidate(loaded, h, rules, budget)]
    for h in sorted(set(survivors) - set(fit)):
        verdict: Verdict = (w.RANK["groups_together"], 0, 0, "groups_together", "", "")
        for code, detail, loose in relaxed:
            if _has_candidate(loaded, h, loose, budget):
                verdict = (w.RANK[code], 0, 0, code, "", detail or _subtrees(req, code))
                break
        first[h] = verdict
    return fit


def _subtrees(req: CandidatesRequest, code: str) -> str:
    if code == "same_subtree":
        return "&".join(",".join(s) for s in req.same_subtree)
    return "&".join(w.text_of(s) for g in req.groups for s in engine.tree_wide_sets(g))


def _has_candidate(
    loaded: engine.Loaded, host: int, rules: engine.SearchRules, budget: engine.SearchBudget
) -> bool:
    found = engine.search_anchor(
        host, loaded.slots, loaded.data, rules, engine.plan_slots(loaded.slots, rules), budget
    )
    return next(iter(found), None) is not None


def _root_required(
    conn: Connection,
    req: CandidatesRequest,
    names: engine.Names,
    fit: list[int],
    first: dict[int, Verdict],
) -> list[int]:
    if not fit or not (req.root_required or req.root_forbidden):
        return fit
    required, forbidden = names.traits(req.root_required), names.traits(req.root_forbidden)
    stmt = w.passing_roots_stmt(required, forbidden, None, fit)
    kept = {int(r) for r in conn.execute(stmt).scalars()}
    detail = ",".join([*sorted(req.root_required), *(f"!{t}" for t in sorted(req.root_forbidden))])
    for h in fit:
        if h not in kept:
            first[h] = (w.RANK["root_required"], 0, 0, "root_required", "", detail)
    return [h for h in fit if h in kept]


def policy_name(policy: HostPolicy) -> str:
    """A policy's name in reasons: its ``name`` attribute, else its class name."""
    name = getattr(policy, "name", None)
    return name if isinstance(name, str) and name else type(policy).__name__


def _policy(
    conn: Connection, policy: HostPolicy, index: int, fit: list[int], first: dict[int, Verdict]
) -> list[int]:
    if not fit:
        return fit
    kept = {int(r) for r in conn.execute(w.passing_roots_stmt((), (), policy, fit)).scalars()}
    survivors = [h for h in fit if h in kept]
    narrowed = policy.keep(conn, survivors) if survivors else None
    if narrowed is not None:
        kept &= set(narrowed)
    rank = w.RANK["policy"]
    for h in fit:
        if h not in kept:
            first[h] = (rank, 0, index, "policy", "", policy_name(policy))
    return [h for h in fit if h in kept]


def _answer(
    conn: Connection,
    total: int,
    fit: Sequence[int],
    first: Mapping[int, Verdict],
    free: Mapping[tuple[str, str], Mapping[int, float]],
    examples: int,
    counted: Counted,
) -> Rejections:
    """Reasons from the per-host verdicts (``first``) and those counted in SQL."""
    merged: dict[Verdict, tuple[int, list[int], float | None]] = dict(counted)
    by_reason: dict[Verdict, list[int]] = defaultdict(list)
    for h, v in sorted(first.items()):
        by_reason[v].append(h)
    for v, hs in by_reason.items():
        rooms = [free[(v[4], v[5])][h] for h in hs if h in free.get((v[4], v[5]), {})]
        largest = max(rooms) if v[3] == "no_capacity" and rooms else None
        old = merged.get(v)
        if old is None:
            merged[v] = (len(hs), hs[:examples], largest)
        else:
            bigger = max((x for x in (old[2], largest) if x is not None), default=None)
            merged[v] = (old[0] + len(hs), sorted(old[1] + hs)[:examples], bigger)
    shown = {h for _, hs, _ in merged.values() for h in hs[:examples]} | set(fit[:examples])
    info = {}
    if shown:
        for rp, _root, uuid, name in conn.execute(w.roots_of_stmt(sorted(shown))):
            info[int(rp)] = Host(str(uuid), name)
    reasons = [
        Reason(v[3], v[4], v[5], n, tuple(info[h] for h in hs[:examples]), largest)
        for v, (n, hs, largest) in sorted(merged.items())
    ]
    fit_examples = tuple(info[h] for h in fit[:examples])
    return Rejections(total, len(fit), tuple(reasons), fit_examples)


__all__ = ["Host", "Reason", "Rejections", "explain_no_candidates", "policy_name"]
