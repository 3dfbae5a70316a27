"""Judge a difference: a documented Placement bug, proven for this request, or a failure.

A difference is explained only when every differing piece is accounted for by one of
the Placement 16.0 bugs listed in ``docs/differential.md`` *and* the check for that
bug holds for this request — never by request ids or seeds:

``resourceless_no_filter``
    A resourceless group without a positive trait or aggregate filter matches nothing
    in Placement. Proof: the request has such a group, Placement's answer is empty,
    and every candidate rpquery returns passes :class:`.validator.Validator`.
``resourceless_in_tree``
    ``in_tree`` is ignored for resourceless groups. Proof: every candidate only
    Placement returns fails the validator on exactly that (``in_tree`` of a
    resourceless group), nothing else.
``sharing_anchor_dedup``
    Placement keeps one arbitrary anchor's copy of a group's candidate that sharing
    providers alone satisfy (its ``AllocationRequest`` equality ignores the anchor),
    so combinations with the other anchors' groups are lost. Proof: each candidate
    only rpquery returns is valid, has another group, and has a group served by
    sharing providers alone that more than one tree may anchor.
``shared_class_amounts``
    A class asked in the unsuffixed group and in a granular group corrupts amounts
    (Placement mutates a shared object). Proof: the request asks such a class, each
    candidate only rpquery returns is valid, each only Placement returns is not.
``postgresql_500``
    HTTP 500 on PostgreSQL: forbidden traits (candidates), or ``GET /usages`` at 1.38+
    (a non-portable GROUP BY). Proof: candidates are re-asked of Placement without the
    forbidden traits and the forbidden ones removed by the validator, which must give
    rpquery's answer (a resourceless group left with no filter keeps a harmless one:
    any trait of the cloud); usages are re-asked at 1.37 (no types) and both that total and
    rpquery's answer must equal the usages recomputed from the cloud's allocations.
``lazy_name_check`` (found by this test, not in issue 14's list)
    Placement resolves trait and class names group by group and stops at the first
    group with no candidates, so an unknown name in a later group gives 200 and an
    empty answer instead of 400. Proof: Placement's answer is empty, and asked a
    one-group request naming the same unknown name it refuses it with the same error.
``mysql_ratio32``
    MySQL's 32-bit FLOAT ``allocation_ratio`` (0.7 read as 0.699999988) loses the last
    unit. Proof: each candidate (or provider) only rpquery returns is valid with the
    ratio as written and invalid with the 32-bit one; summary capacities differ only
    where the 32-bit product is lower.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from rpquery.db import Database
from tests.differential.cloud import Cloud
from tests.differential.compare import (
    Answer,
    canonical_candidates,
    placement_answer,
    rpquery_answer,
    same,
)
from tests.differential.placement import Placement
from tests.differential.queries import Query
from tests.differential.validator import Validator

Verdict = tuple[str | None, str]  # (bug explaining it or None, why)


def _requests(counter: Counter[str]) -> list[dict[str, Any]]:
    return [json.loads(k) for k in counter for _ in range(counter[k])]


class Judge:
    def __init__(self, cloud: Cloud, backend: str, db: Database, placement: Placement) -> None:
        self.cloud, self.backend, self.db, self.placement = cloud, backend, db, placement
        self.v = Validator(cloud)
        self.v32 = Validator(cloud, ratio32=True)

    def verdict(
        self, q: Query, ours: Answer, theirs: Answer, full: Answer | None
    ) -> Verdict | None:
        """``None`` when the answers agree; else the bug that explains it, or why not."""
        if q.limit is not None and full is not None:
            return self.limited(q, ours, theirs, full)
        if same(q.kind, ours, theirs):
            return None
        return self.explain(q, ours, theirs)

    # ------------------------------------------------------------ limit

    def limited(self, q: Query, ours: Answer, theirs: Answer, full: Answer) -> Verdict | None:
        """rpquery's limited answer: a subset of the unlimited one, of the right size,
        with the summaries of its own trees; the unlimited answers must agree."""
        if ours.status != 200 or full.status != 200:
            return None if same(q.kind, ours, theirs) else self.explain(q, ours, theirs)
        ours_full = rpquery_answer(self.db, q.unlimited())
        verdict = None
        if not same(q.kind, ours_full, full):
            verdict = self.explain(q.unlimited(), ours_full, full)
            if verdict[0] is None:
                return verdict
        mine, _ = canonical_candidates(ours.body)
        everything, _ = canonical_candidates(ours_full.body)
        assert q.limit is not None
        if mine - everything or sum(mine.values()) != min(q.limit, sum(everything.values())):
            return None, (
                f"limit={q.limit}: {sum(mine.values())} requests, not a subset of the "
                f"{sum(everything.values())} unlimited ones or not min(limit, all) of them"
            )
        if canonical_candidates(ours.body)[1] != self.summaries(_requests(mine)):
            return None, "limit: summaries are not those of the returned requests' trees"
        return verdict

    def summaries(self, requests: list[dict[str, Any]]) -> dict[str, Any]:
        s = self.v.summaries(requests)
        return {u: {**x, "traits": sorted(x["traits"])} for u, x in s.items()}

    # ------------------------------------------------------------ explanation

    def explain(self, q: Query, ours: Answer, theirs: Answer) -> Verdict:
        if theirs.status == 500 and self.backend == "postgresql":
            return self.postgresql_500(q, ours, theirs)
        if ours.status == 400 and theirs.status == 200:
            return self.lazy_name_check(ours, theirs)
        if ours.status != 200 or theirs.status != 200:
            return (
                None,
                f"status: rpquery {ours.status} {ours.code or ''}, Placement {theirs.status}",
            )
        if q.kind == "candidates":
            return self.candidates(q, ours, theirs)
        if q.kind == "providers":
            return self.providers(q, ours, theirs)
        return None, "usages differ"

    def candidates(self, q: Query, ours: Answer, theirs: Answer) -> Verdict:
        mine, my_sums = canonical_candidates(ours.body)
        other, other_sums = canonical_candidates(theirs.body)
        bugs: set[str] = set()
        for ar in _requests(mine - other):
            bug, why = self.rpquery_only(q, ar, theirs)
            if bug is None:
                return None, why
            bugs.add(bug)
        for ar in _requests(other - mine):
            bug, why = self.placement_only(q, ar)
            if bug is None:
                return None, why
            bugs.add(bug)
        if my_sums != self.summaries(_requests(mine)):
            return None, "rpquery's summaries are not those of its requests' trees"
        if other_sums != self.summaries(_requests(other)):
            if not self.ratio32_summaries(other, other_sums):
                return None, "Placement's summaries are not those of its requests' trees"
            bugs.add("mysql_ratio32")
        return ("+".join(sorted(bugs)) or None), "proven" if bugs else "differs"

    def rpquery_only(self, q: Query, ar: dict[str, Any], theirs: Answer) -> Verdict:
        problems = self.v.problems(q, ar)
        if problems:
            return None, f"rpquery returned an invalid candidate: {'; '.join(problems)}"
        resourceless = [g for g in q.groups if g.suffix and not g.resources]
        if any(not g.positive for g in resourceless) and not theirs.body["allocation_requests"]:
            return "resourceless_no_filter", ""
        if self.backend == "mysql" and self.v32.problems(q, ar):
            return "mysql_ratio32", ""
        if self.shared_class(q):
            return "shared_class_amounts", ""
        if self.sharing_only_group(q, ar):
            return "sharing_anchor_dedup", ""
        return None, "a valid candidate Placement does not return, and no known bug explains it"

    def placement_only(self, q: Query, ar: dict[str, Any]) -> Verdict:
        problems = self.v.problems(q, ar)
        if not problems:
            return None, "a valid candidate rpquery does not return"
        if all(p.startswith("in_tree of resourceless group") for p in problems):
            return "resourceless_in_tree", ""
        if self.shared_class(q):
            return "shared_class_amounts", ""
        return None, f"Placement returned an invalid candidate: {'; '.join(problems)}"

    @staticmethod
    def shared_class(q: Query) -> bool:
        plain = {rc for g in q.groups if not g.suffix for rc in g.resources}
        return any(plain & set(g.resources) for g in q.groups if g.suffix)

    def sharing_only_group(self, q: Query, ar: dict[str, Any]) -> bool:
        """The mechanism of ``sharing_anchor_dedup``: another group, and a group whose
        providers are all sharing ones that several trees may anchor."""
        maps = {s: [self.v.name_of[u] for u in us] for s, us in ar["mappings"].items()}
        if len(maps) < 2:
            return False
        for names in maps.values():
            if all(self.cloud.providers[n].sharing for n in names):
                anchors = set.intersection(*(self.v.anchors(n) for n in names))
                if len(anchors) > 1:
                    return True
        return False

    def ratio32_summaries(self, other: Counter[str], sums: dict[str, Any]) -> bool:
        """On MySQL, Placement's summaries may carry the 32-bit capacities."""
        return self.backend == "mysql" and sums == {
            u: {**x, "traits": sorted(x["traits"])}
            for u, x in self.v32.summaries(_requests(other)).items()
        }

    def lazy_name_check(self, ours: Answer, theirs: Answer) -> Verdict:
        """rpquery refuses an unknown name that Placement never looked up (it stopped at
        an earlier group that matches nothing): Placement must refuse the name too when
        asked it alone, and its lazy answer must be empty."""
        probes = {
            "rpquery.trait.not_found": f"resources=VCPU:1&required={ours.token}",
            "rpquery.resource_class.not_found": f"resources={ours.token}:1",
        }
        probe = probes.get(ours.code or "")
        body = theirs.body
        empty = not (body.get("allocation_requests") or body.get("resource_providers"))
        if probe is None or not empty:
            return None, f"status: rpquery 400 {ours.code}, Placement 200"
        again = placement_answer(
            self.placement.ask([{"path": f"/allocation_candidates?{probe}"}])[0]
        )
        if again.status == 400 and again.code == ours.code:
            return "lazy_name_check", ""
        return None, f"rpquery 400 {ours.code}; Placement 200, and {again.status} for {probe}"

    # ------------------------------------------------------------ provider lists

    def providers(self, q: Query, ours: Answer, theirs: Answer) -> Verdict:
        mine = {p["uuid"] for p in ours.body["resource_providers"]}
        other = {p["uuid"] for p in theirs.body["resource_providers"]}
        if self.backend == "mysql" and other < mine and q.groups[0].resources:
            g = q.groups[0]
            lost = [self.v.name_of[u] for u in mine - other]
            if all(self.room(n, g.resources, self.v) and not self.room(n, g.resources, self.v32)
                   for n in lost):  # fmt: skip
                return "mysql_ratio32", ""
        return None, "provider lists differ"

    def room(self, name: str, resources: dict[str, int], v: Validator) -> bool:
        p = self.cloud.providers[name]
        return all(
            rc in p.inventory
            and p.inventory[rc].fits(n)
            and self.cloud.used(name, rc) + n <= v.capacity(p.inventory[rc])
            for rc, n in resources.items()
        )

    # ------------------------------------------------------------ PostgreSQL 500

    def postgresql_500(self, q: Query, ours: Answer, theirs: Answer) -> Verdict:
        if ours.status != 200:
            return None, f"Placement 500 and rpquery {ours.status}"
        if q.kind == "usages":
            return self.usages_500(q, ours)
        forbidden = any(g.forbidden for g in q.groups) or q.root_forbidden
        if q.kind != "candidates" or not forbidden:
            return None, "Placement 500 on PostgreSQL without forbidden traits"
        relaxed = [(k, _drop_forbidden(v) if k.startswith(("required", "root_required")) else v)
                   for k, v in q.pairs if k != "limit"]  # fmt: skip
        relaxed = [(k, v) for k, v in relaxed if v]
        relaxed += self.keep_groups(q, relaxed)
        again = Query(**{**q.__dict__, "pairs": relaxed})
        answer = placement_answer(self.placement.ask([{"path": again.path}])[0])
        if answer.status != 200:
            return None, f"Placement 500; re-asked without forbidden traits: {answer.status}"
        kept = [ar for ar in answer.body["allocation_requests"] if not self.v.problems(q, ar)]
        expected = {"allocation_requests": kept, "provider_summaries": self.summaries(kept)}
        if q.limit is not None:  # a subset of the right size, with its own trees' summaries
            mine, sums = canonical_candidates(ours.body)
            allowed, _ = canonical_candidates(expected)
            size = sum(mine.values()) == min(q.limit, len(kept))
            extra = [
                self.rpquery_only(q, ar, Answer(200, expected)) for ar in _requests(mine - allowed)
            ]
            bugs = {b for b, _ in extra}
            if None not in bugs and size and sums == self.summaries(_requests(mine)):
                return "+".join(sorted({"postgresql_500", *bugs})), ""  # type: ignore[arg-type]
        elif same("candidates", ours, Answer(200, expected)):
            return "postgresql_500", ""
        else:
            bug, why = self.candidates(q, ours, Answer(200, expected))
            if bug is not None:
                return f"postgresql_500+{bug}", ""
        return None, "Placement 500; its answer without the forbidden traits, filtered, differs"

    def keep_groups(self, q: Query, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """A harmless filter for each resourceless group the relaxed request leaves with
        none (it had forbidden traits only): without one Placement has no such group
        (``same_subtree`` naming it is a 400). Any trait of the cloud: the re-asked
        answer still holds every candidate whose provider for that group has a trait,
        and the validator judges them by the original request."""
        keys = {k for k, _ in pairs}
        every = ",".join(self.cloud.traits_used())
        return [
            (f"required{g.suffix}", f"in:{every}")
            for g in q.groups
            if g.suffix and not g.resources and every
            if not keys & {f"required{g.suffix}", f"member_of{g.suffix}"}
        ]

    def usages_500(self, q: Query, ours: Answer) -> Verdict:
        params = dict(q.pairs)
        path = "/usages?" + "&".join(f"{k}={params[k]}" for k in ("project_id", "user_id")
                                     if k in params)  # fmt: skip
        old = self.placement.ask([{"path": path, "version": "1.37"}])[0]
        expected, totals = self.expected_usages(params)
        if old["status"] != 200 or old["body"] != {"usages": totals}:
            return None, f"Placement 500; at 1.37 it answers {old}, the cloud says {totals}"
        if ours.body != expected:
            return None, f"Placement 500; rpquery's usages are not the cloud's {expected}"
        return "postgresql_500", ""

    def expected_usages(self, params: dict[str, str]) -> tuple[dict[str, Any], dict[str, int]]:
        """1.39 usages and all-type totals recomputed from the cloud's allocations."""
        wanted = params.get("consumer_type")
        groups: dict[str, dict[str, int]] = {}
        totals: Counter[str] = Counter()
        for c in self.cloud.consumers:
            if c.project != params["project_id"] or params.get("user_id", c.user) != c.user:
                continue
            kind = "all" if wanted == "all" else (c.ctype or "unknown")
            for r in c.allocations.values():
                totals.update(r)
            if wanted not in (None, "all", kind):
                continue
            g = groups.setdefault(kind, {"consumer_count": 0})
            g["consumer_count"] += 1
            for r in c.allocations.values():
                for rc, n in r.items():
                    g[rc] = g.get(rc, 0) + n
        return {"usages": groups}, dict(totals)


def _drop_forbidden(value: str) -> str:
    """``"A,!B"`` → ``"A"``; an ``in:`` value has no forbidden item."""
    if value.startswith("in:"):
        return value
    return ",".join(i for i in value.split(",") if not i.startswith("!"))
