"""The order of limited answers (round-robin over roots) and Placement's candidate
options (``randomize_allocation_candidates``, ``max_allocation_candidates``,
``allocation_candidates_generation_strategy``), on every backend.

- Against Placement itself (``tests/differential``: seeded nested clouds written
  through Placement's REST API): a limited answer covers at least as many hosts as
  Placement's for the same request and ``limit``; each option gives what Placement
  run with the same option gives (sizes, subsets of the full answer, hosts covered).
- A property test: a limited answer, with or without the options, is a subset of the
  unlimited one, of the size Placement's rules give, covering as many anchors as it can.
- Randomized answers are subsets of the full answer and differ between calls.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks import side_by_side
from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.read.candidates import CandidateOptions, allocation_candidates
from rpquery.read.candidates import _batches as bt
from rpquery.read.candidates._spread import arrange, search_plan, spread
from rpquery.read.request import CandidatesRequest
from tests import test_candidates_property as prop
from tests.conftest import ALL_BACKENDS, IN_CI
from tests.differential.cloud import SHARING, make_cloud, write_requests
from tests.differential.placement import Placement
from tests.differential.queries import Query, make_queries
from tests.differential.run import origin_of, parse_seeds, prepare
from tests.factories import provider

READY, WHY = side_by_side.available()
#: Clouds compared with Placement in ``make test`` (one: seconds per backend);
#: ``RPQUERY_SPREAD_SEEDS=1-6`` compares more
SEEDS = tuple(parse_seeds(os.environ.get("RPQUERY_SPREAD_SEEDS", "1")))
LIMITS = (1, 2, 3, 5, 8)


def _need_placement() -> None:
    if not READY:
        message = f"PLACEMENT MISSING — {WHY}; `make placement-venv` installs it"
        if IN_CI:
            pytest.fail(message + " (CI=true: the differential test is required)", pytrace=False)
        pytest.skip(message)


def canon(body: dict[str, Any]) -> list[str]:
    """A body's allocation requests, each as canonical JSON (mapping lists sorted)."""
    out = []
    for ar in body["allocation_requests"]:
        maps = {k: sorted(v) for k, v in ar.get("mappings", {}).items()}
        out.append(json.dumps({"a": ar["allocations"], "m": maps}, sort_keys=True))
    return sorted(out)


def hosts(body: dict[str, Any]) -> set[str]:
    """The roots a body's requests allocate from, sharing providers left out: the
    hosts a scheduler can choose among."""
    summaries = body["provider_summaries"]
    return {
        summaries[rp]["root_provider_uuid"]
        for ar in body["allocation_requests"]
        for rp in ar["allocations"]
        if SHARING not in summaries[summaries[rp]["root_provider_uuid"]]["traits"]
    }


def ours(db: Database, q: Query, **options: Any) -> dict[str, Any] | None:
    try:
        answer = allocation_candidates(db, q.query, options=CandidateOptions(**options))
    except InvalidRequest:
        return None
    return answer.to_placement()


def with_limit(q: Query, limit: int) -> Query:
    full = q.unlimited()
    return dataclasses.replace(full, pairs=[*full.pairs, ("limit", str(limit))], limit=limit)


def _cloud(backend: str, database_url: Any, seed: int) -> tuple[Database, list[Query]]:
    """Cloud ``seed`` written by Placement into a fresh database; its candidates
    queries, unlimited."""
    db = prepare(database_url(backend), origin_of(seed))
    cloud = make_cloud(seed)
    with Placement(db.url.render_as_string(hide_password=False)) as placement:
        writes = write_requests(cloud)
        for item, answer in zip(writes, placement.ask(writes), strict=True):
            assert answer["status"] < 300, (item, answer)
    queries = [q.unlimited() for q in make_queries(cloud, seed, 60) if q.kind == "candidates"]
    return db, queries


def _agreeing(
    db: Database, placement: Placement, queries: list[Query]
) -> list[tuple[Query, dict[str, Any]]]:
    """The queries whose unlimited answers are the same set from both (the others
    differ for reasons the differential test explains), with that answer."""
    raw = placement.ask([{"path": q.path} for q in queries])
    out = []
    for q, theirs in zip(queries, raw, strict=True):
        mine = ours(db, q)
        if theirs["status"] != 200 or mine is None or not mine["allocation_requests"]:
            continue
        if canon(mine) == canon(theirs["body"]):
            out.append((q, mine))
    return out


@contextmanager
def _agreed(
    backend: str, database_url: Any, seed: int
) -> Iterator[tuple[Database, Placement, list[tuple[Query, dict[str, Any]]]]]:
    """Cloud ``seed`` written by Placement (:func:`_cloud`), Placement running on it with
    its default options, and the queries both answer alike (:func:`_agreeing`); the
    database is dropped from the pool afterwards."""
    db, queries = _cloud(backend, database_url, seed)
    try:
        with Placement(db.url.render_as_string(hide_password=False)) as placement:
            yield db, placement, _agreeing(db, placement, queries)
    finally:
        db.dispose()


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_limited_answers_cover_as_many_hosts_as_placement(backend: str, database_url) -> None:  # type: ignore[no-untyped-def]
    """Same request, same ``limit``: rpquery's answer covers at least as many hosts
    as Placement's (default options), is a subset of the full answer, and covers as
    many anchors as any answer of that size can."""
    _need_placement()
    compared = 0
    for seed in SEEDS:
        with _agreed(backend, database_url, seed) as (db, placement, agreeing):
            asked = [(q, k, full) for q, full in agreeing for k in LIMITS]
            raw = placement.ask([{"path": with_limit(q, k).path} for q, k, _ in asked])
            for (q, k, full), theirs in zip(asked, raw, strict=True):
                assert theirs["status"] == 200, theirs
                mine = ours(db, with_limit(q, k))
                assert mine is not None
                assert set(canon(mine)) <= set(canon(full)), q.path
                assert len(mine["allocation_requests"]) == min(k, len(full["allocation_requests"]))
                assert len(hosts(mine)) >= len(hosts(theirs["body"])), (q.path, k)
                compared += 1
    assert compared > 25 * len(SEEDS)


def _depth_first(answer: dict[str, Any], full: dict[str, Any]) -> bool:
    """Whether every tree of ``answer`` but one gives all its candidates of ``full``
    (depth-first: a tree's every candidate before the next tree's)."""

    def by_tree(body: dict[str, Any]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        summaries = body["provider_summaries"]
        for ar, text in zip(body["allocation_requests"], _each(body), strict=True):
            roots = sorted({summaries[rp]["root_provider_uuid"] for rp in ar["allocations"]})
            out.setdefault(",".join(roots), set()).add(text)
        return out

    got, every = by_tree(answer), by_tree(full)
    partial = [t for t, texts in got.items() if texts != every.get(t)]
    return len(partial) <= 1


def _each(body: dict[str, Any]) -> list[str]:
    return [canon({"allocation_requests": [ar]})[0] for ar in body["allocation_requests"]]


OPTIONS = (
    {"max_allocation_candidates": 3, "allocation_candidates_generation_strategy": "depth-first"},
    {"max_allocation_candidates": 3, "allocation_candidates_generation_strategy": "breadth-first"},
    {"max_allocation_candidates": 0},
    {"randomize_allocation_candidates": True},
    {"randomize_allocation_candidates": True, "max_allocation_candidates": 4},
)


def _library(conf: dict[str, Any]) -> dict[str, Any]:
    return {
        "randomize": conf.get("randomize_allocation_candidates", False),
        "max_candidates": conf.get("max_allocation_candidates", -1),
        "strategy": conf.get("allocation_candidates_generation_strategy", "depth-first"),
    }


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_each_option_as_placement_with_that_option(backend: str, database_url) -> None:  # type: ignore[no-untyped-def]
    """Placement started with each ``[placement]`` option, rpquery given the same
    (``CandidateOptions``), on the queries both answer alike without options: the
    same number of candidates, both subsets of the full answer; breadth-first covers
    the same number of hosts; depth-first takes whole trees but the last."""
    _need_placement()
    checked = 0
    for seed in SEEDS:
        with _agreed(backend, database_url, seed) as (db, _, agreeing):
            url = db.url.render_as_string(hide_password=False)
            for conf in OPTIONS:
                asked = [(q, k, full) for q, full in agreeing for k in (None, 2)]
                paths = [
                    {"path": (q if k is None else with_limit(q, k)).path} for q, k, _ in asked
                ]
                with Placement(url, {"placement": conf}) as placement:
                    raw = placement.ask(paths)
                for (q, k, full), theirs in zip(asked, raw, strict=True):
                    assert theirs["status"] == 200, theirs
                    mine = ours(db, q if k is None else with_limit(q, k), **_library(conf))
                    assert mine is not None
                    every = set(canon(full))
                    assert set(canon(mine)) <= every and set(canon(theirs["body"])) <= every
                    n = len(mine["allocation_requests"])
                    assert n == len(theirs["body"]["allocation_requests"]), (conf, q.path, k)
                    cap = conf.get("max_allocation_candidates", -1)
                    if cap >= 0 and k is None:
                        assert n == min(max(cap, 1), len(every)), (conf, q.path)
                        if (
                            conf.get("allocation_candidates_generation_strategy")
                            == "breadth-first"
                        ):
                            assert len(hosts(mine)) == len(hosts(theirs["body"])), (conf, q.path)
                        elif not conf.get("randomize_allocation_candidates"):
                            assert _depth_first(mine, full), (conf, q.path)
                    checked += 1
    assert checked > 50 * len(SEEDS)


def _flat_hosts(db: Database, n: int) -> None:
    with db.begin() as conn:
        for i in range(n):
            root = provider(conn, f"h{i:02d}", inventory={"MEMORY_MB": 4096})
            for j in range(2):
                provider(conn, f"h{i:02d}_numa{j}", parent=root, inventory={"VCPU": 4})


def test_randomized_answers_are_subsets_that_differ(db: Database) -> None:
    """``randomize`` (with or without ``max_candidates``): every answer a subset of
    the full one, of ``limit`` candidates on ``limit`` hosts, not the same every call."""
    _flat_hosts(db, 12)
    qs = "resources=VCPU:1,MEMORY_MB:512"
    full = {repr(ar) for ar in allocation_candidates(db, qs).allocation_requests}
    assert len(full) == 24
    for options in (CandidateOptions(randomize=True), CandidateOptions(True, 10)):
        seen = set()
        for _ in range(12):
            got = allocation_candidates(db, f"{qs}&limit=3", options=options)
            picked = [repr(ar) for ar in got.allocation_requests]
            assert set(picked) <= full and len(picked) == 3
            assert len({ar.root_uuid for ar in got.allocation_requests}) == 3
            seen.add(tuple(sorted(picked)))
        assert len(seen) > 1, options
    # unlimited: the whole answer, shuffled
    got = allocation_candidates(db, qs, options=CandidateOptions(randomize=True))
    assert {repr(ar) for ar in got.allocation_requests} == full


def test_limit_reads_only_a_batch_of_trees(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The round-robin order keeps the early stop: ``limit=3`` on 60 hosts (walked in
    batches, as a large cloud is) asks for one batch of ``limit + 10`` roots, not
    every root, and summarises 3 trees. Nothing learnt before: an earlier test's walk of
    this kind on this process's database would size the batch from its candidates per root
    (what ran earlier in the process depends on the order, and on pytest-xdist's workers)."""
    monkeypatch.setattr(bt.Batches, "ONE_BATCH", 0)
    monkeypatch.setattr(bt, "_PER_ROOT", bt.Hints(bt._PER_ROOT.size))
    _flat_hosts(db, 60)
    limits: list[int] = []

    def tracer(sql: str, params: Any) -> None:
        if isinstance(params, dict) and "batch_limit" in params:
            limits.append(params["batch_limit"])

    db.add_tracer(tracer)
    try:
        got = allocation_candidates(db, "resources=VCPU:1,MEMORY_MB:512&limit=3")
    finally:
        db.remove_tracer(tracer)
    assert limits == [13]
    assert len({ar.root_uuid for ar in got.allocation_requests}) == 3
    assert len({s.root_uuid for s in got.provider_summaries.values()}) == 3


def test_plans_and_orders() -> None:
    """What each option does to the search, and the order itself."""
    none = CandidateOptions()
    assert search_plan(5, none, randomize=False, every_candidate=False).mode == "spread"
    assert search_plan(5, none, randomize=False, every_candidate=True).mode == "all"
    assert search_plan(5, none, randomize=True, every_candidate=False).mode == "random"
    breadth = CandidateOptions(max_candidates=9, strategy="breadth-first")
    assert search_plan(5, breadth, randomize=False, every_candidate=False).target == 5
    assert search_plan(5, breadth, randomize=True, every_candidate=False).target == 9
    assert search_plan(None, breadth, randomize=False, every_candidate=False).target == 9
    assert CandidateOptions(max_candidates=0).cap == 1  # as Placement: it stops after one
    assert arrange([(1, "a"), (1, "b"), (2, "c")], 2, root_of=lambda c: c[0]) == [
        (1, "a"),
        (2, "c"),
    ]
    assert arrange([(1, "a"), (1, "b")], None, root_of=lambda c: c[0]) == [(1, "a"), (1, "b")]
    for bad in ({"max_candidates": -2}, {"strategy": "wide"}, {"randomize": 1}):
        with pytest.raises(InvalidRequest) as caught:
            CandidateOptions(**bad)  # type: ignore[arg-type]
        assert caught.value.code == "rpquery.request.bad_candidate_options"


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_random_clouds_limited_answers_are_subsets(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Random clouds and requests (``tests/test_candidates_property.py``'s), random
    ``limit`` and options: the answer is a subset of the unlimited one, of
    ``min(limit, max, total)`` candidates; without ``max`` it covers at least
    ``min(limit, anchors)`` anchors, the most an answer of its size can."""
    db = request.getfixturevalue("_migrated")(backend)

    @settings(
        max_examples=25 if backend == "sqlite" else 12,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(
        cloud=prop.clouds(child_sharing=True),
        req=prop.requests(),
        limit=st.integers(1, 5),
        cap=st.sampled_from((-1, -1, 0, 1, 3)),
        strategy=st.sampled_from(("depth-first", "breadth-first")),
    )
    def check(
        cloud: prop.Cloud, req: CandidatesRequest, limit: int, cap: int, strategy: Any
    ) -> None:
        prop.insert(db, cloud)
        try:
            full = allocation_candidates(db, req).allocation_requests
        except InvalidRequest:
            return
        every = {key(ar) for ar in full}
        options = CandidateOptions(max_candidates=cap, strategy=strategy)
        got = allocation_candidates(db, dataclasses.replace(req, limit=limit), options=options)
        picked = [key(ar) for ar in got.allocation_requests]
        assert set(picked) <= every and len(set(picked)) == len(picked)
        bound = limit if cap < 0 else min(limit, max(cap, 1))
        assert len(picked) == min(bound, len(every))
        if cap < 0:  # (a candidate of sharing providers alone may come from another
            # anchor than in the unlimited answer: at least as many anchors, not equal)
            anchors = {ar.root_uuid for ar in full}
            got_anchors = {ar.root_uuid for ar in got.allocation_requests}
            assert min(limit, len(anchors)) <= len(got_anchors) <= limit
        # the unlimited answer under the options: a subset too, in strategy order
        capped = allocation_candidates(db, req, options=options).allocation_requests
        assert {key(ar) for ar in capped} <= every

    check()


def key(ar: Any) -> str:
    """An allocation request as Placement's JSON (no anchor: a candidate of sharing
    providers alone is the same whichever anchor reached it first)."""
    return json.dumps(ar.to_placement(), sort_keys=True)


def test_spread_keeps_each_roots_order() -> None:
    items = [(3, 0), (1, 1), (3, 2), (3, 3), (2, 4), (1, 5)]
    assert spread(items, root_of=lambda c: c[0]) == [
        (3, 0),
        (1, 1),
        (2, 4),
        (3, 2),
        (1, 5),
        (3, 3),
    ]


def test_the_api_serves_placement_conf_options(db: Database, tmp_path: Any) -> None:
    """``placement.conf``'s three options reach ``GET /allocation_candidates`` through
    ``Settings.candidate_options`` and ``make_app`` (as ``build_app`` passes them):
    the bound, both strategies, and the pre-1.34 body (its own code path) too."""
    from rpquery.api import config, make_app
    from tests.api_client import WsgiClient

    _flat_hosts(db, 4)  # two candidates per host

    def ask(conf: str, path: str, version: str = "1.39") -> list[set[str]]:
        file = tmp_path / "placement.conf"
        file.write_text("[api]\nauth_strategy = noauth2\n[placement]\n" + conf)
        options = config.load([str(file)]).candidate_options
        app = WsgiClient(make_app(db, auth="none", candidate_options=options))
        got = app.simulate_get(
            path,
            headers={"x-auth-token": "admin", "openstack-api-version": f"placement {version}"},
        )
        assert got.status_code == 200, got.text
        body = got.json
        summaries = body["provider_summaries"]
        requests = body["allocation_requests"]
        if isinstance(requests[0]["allocations"], list):  # before 1.12
            return [{a["resource_provider"]["uuid"] for a in r["allocations"]} for r in requests]
        return [{summaries[rp]["root_provider_uuid"] for rp in r["allocations"]} for r in requests]

    path = "/allocation_candidates?resources=VCPU:1,MEMORY_MB:512"
    assert len(ask("", path)) == 8
    depth = ask("max_allocation_candidates = 4\n", path)
    assert len(depth) == 4 and len(set().union(*depth)) == 2  # two whole trees
    breadth = "max_allocation_candidates = 4\nallocation_candidates_generation_strategy = "
    wide = ask(breadth + "breadth-first\n", path)
    assert len(wide) == 4 and len(set().union(*wide)) == 4
    assert len(ask("max_allocation_candidates = 3\n", path, version="1.33")) == 3
    sampled = ask("randomize_allocation_candidates = true\n", path + "&limit=3")
    assert len(sampled) == 3 and len(set().union(*sampled)) == 3
