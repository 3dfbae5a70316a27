"""The benchmark harness runs end to end at the tiny scale, so it cannot rot.

No timing is asserted: only that every scenario ran (or is reported as not available),
that statements, rows and plans were recorded, and that the report, plots and baseline
comparison were written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import (
    concurrency,
    explain,
    http_view,
    report,
    shapes,
    side_by_side,
    split,
    startup,
)
from benchmarks.config import RunConfig
from benchmarks.scenarios import (
    REGISTRY,
    Context,
    Scenario,
    claim_project,
    load_plugins,
    vcpu_providers,
)
from rpquery.db import Database
from rpquery.generator import CloudSpec, load_cloud
from rpquery.read.request import parse_candidates
from rpquery.usage.reads import project_usages
from rpquery.usage.summary import verify_usage_summary
from tests.conftest import ALL_BACKENDS, IN_CI, selected_backends

ROOT = Path(__file__).resolve().parent.parent


def _backends_and_env(servers: dict) -> tuple[list[str], dict[str, str]]:  # type: ignore[type-arg]
    """The selected backends that are up, with their admin URLs in the bench's env vars;
    a missing server fails under CI like every database test. The bench is a pytest run of
    its own: not a pytest-xdist worker's (pytest-benchmark times nothing in one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    backends = []
    for backend in selected_backends():
        if backend not in ALL_BACKENDS:
            continue  # galera: benchmarked by make bench's cluster scenario, not by --backends
        if backend != "sqlite":
            server = servers[backend]
            if server.admin_url is None:
                if IN_CI:
                    pytest.fail(f"BACKEND MISSING — {server.reason}", pytrace=False)
                continue
            url = server.admin_url.render_as_string(hide_password=False)
            env[f"RPQUERY_BENCH_{backend.upper()}_URL"] = url
        backends.append(backend)
    return backends, env


def test_tiny_bench_runs_every_scenario_on_every_backend(servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # One run for all backends: the harness's start-up cost is paid once.
    backends, env = _backends_and_env(servers)
    if not backends:
        pytest.skip("no benchmark backend selected (RPQUERY_TEST_BACKENDS names only galera)")
    out = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.run",
            "--scale",
            "tiny",
            "--backends",
            ",".join(backends),
            "--out",
            str(out),
            "--no-autosave",
            "--no-cluster",  # the Galera / hot-standby scenarios: tests/test_galera.py etc.
            "--baseline",
            str(tmp_path / "none.json"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    load_plugins()
    data = json.loads((out / "results.json").read_text())
    assert [(r["backend"], r["hosts"]) for r in data["loads"]] == [(b, 20) for b in backends]
    assert all(r["allocations"] > 0 for r in data["loads"])
    # loaded with the summaries' work done in one grouped pass where the backend can
    # suspend triggers in a transaction, and the summaries checked exact afterwards
    assert [r["summaries"] for r in data["loads"]] == [
        "triggers" if b == "mysql" else "grouped" for b in backends
    ]
    assert all(r["summaries_exact"] is True for r in data["loads"])
    for backend in backends:
        by_name = {r["scenario"]: r for r in data["results"] if r["backend"] == backend}
        assert set(by_name) == set(REGISTRY)
        for name, r in by_name.items():
            assert r["status"] in ("ok", "not available"), (backend, name, r.get("reason"))
            if r["status"] == "ok":
                assert r["median_ms"] > 0 and r["p95_ms"] >= r["median_ms"]
                assert r["statements"] >= 1 and r["rows"] >= 0
                if not REGISTRY[name].writes:
                    assert r["plans"], (backend, name)
        assert (out / f"latency-{backend}.png").read_bytes()[:4] == b"\x89PNG"
    md = (out / "report.md").read_text()
    assert "## Latency" in md and "## EXPLAIN" in md
    # the contention scenario: 16 writers and 8 schedulers per backend, invariants held
    assert [r["backend"] for r in data["contention"]] == backends
    for r in data["contention"]:
        assert r["violations"] == [] and r["invariants_checked"] > 40
        assert r["acknowledged_writes"] > 0 and 0 <= r["give_up_rate_writes"] <= 1
    assert "## Contention" in md
    # the startup scenario: each one-off command timed in fresh processes
    assert [r["command"] for r in data["startup"]] == list(startup.commands("sqlite://"))
    assert all(r["runs"] == 3 and r["cpu_median_s"] > 0 for r in data["startup"])
    assert all(r["wall_min_s"] <= r["wall_median_s"] <= r["wall_max_s"] for r in data["startup"])
    assert "## Start-up" in md and "Target (issue 18)" in md
    # the shapes scenario: random never-seen requests on 100 hosts, per backend
    assert [r["backend"] for r in data["shapes"]] == backends
    for r in data["shapes"]:
        assert r["hosts"] == shapes.HOSTS and r["refused"] == 0
        assert r["requests"] == shapes.REQUESTS_AT_SCALE["tiny"]
        assert r["first_median_ms"] > 0 and r["repeat_median_ms"] > 0
        assert 0 <= r["compiled_second_half"] < r["compiled"] <= r["requests"]
    assert "## Never-seen request shapes" in md
    # --no-cluster leaves out the cluster of each benchmarked server backend; a cluster
    # whose backend is not benchmarked (SQLite only: make test-fast) says that instead
    assert "## Clusters" in md
    cluster_of = {"mysql": "galera", "postgresql": "replica"}
    for backend, name in cluster_of.items():
        why = (
            "left out (--no-cluster)"
            if backend in backends
            else (f"{backend} not in the benchmarked backends")
        )
        assert {"cluster": name, "not_run": why} in data["cluster"], (name, data["cluster"])
        assert f"Not run: {why}." in md, name
    assert all(name in md for name in REGISTRY)
    # the HTTP view: each request answered 200 by the app and by rpquery serve, which
    # kept its connection alive; no Placement columns without --placement
    http = [(r["backend"], r["scenario"]) for r in data["http"]]
    assert sorted(http) == sorted((b, n) for b in backends for n in http_view.SCENARIOS)
    for r in data["http"]:
        assert r["status"] == "ok" and r["serve_keep_alive"] and r["bytes"] > 0, r
        assert r["library_ms"] > 0 and r["wsgi_ms"] > 0 and r["serve_ms"] > 0
        assert "placement_http_ms" not in r and r["ratio_http"] is None
    assert "## HTTP view" in md and "**Targets**" in md
    # the split of big answers: each phase timed, the statements' values counted, the
    # body sent by the app (200) as big as the library's JSON body
    split_rows = [(r["backend"], r["scenario"]) for r in data["split"]]
    assert sorted(split_rows) == sorted((b, n) for b in backends for n in split.REQUESTS)
    for r in data["split"]:
        assert r["status"] == 200 and r["candidates"] > 0 and r["values_shipped"] > 0, r
        assert r["library_ms"] > 0 and r["body_ms"] > 0 and r["wsgi_ms"] > 0, r
        assert r["body_bytes"] > 0 and r["driver_cpu_ms"] >= 0 and r["sql_wait_ms"] >= 0
    assert "## Split of big candidate answers" in md

    # Comparing the run with itself shows a 0 % change for every timed scenario.
    config = RunConfig.load(out / "config.json")
    report.build(out, config, {}, out / "results.json")
    again = json.loads((out / "results.json").read_text())["results"]
    assert all(r["change_pct"] == 0.0 for r in again if r["status"] == "ok")


def test_random_shapes_are_distinct_valid_and_drawn_from_the_seed() -> None:
    aggs = ["11111111-2222-4333-8444-55555555555" + str(i) for i in range(3)]
    drawn = shapes.requests(7, 300, aggs)
    assert drawn == shapes.requests(7, 300, aggs) != shapes.requests(8, 300, aggs)
    assert len(set(drawn)) == 300
    parsed = [parse_candidates(qs) for qs in drawn]  # none refused
    # every feature the scenario is meant to vary shows up
    groups = [g for req in parsed for g in req.groups]
    assert {len(req.groups) for req in parsed} >= {1, 2, 3, 4}
    assert any(g.forbidden for g in groups) and any(len(s) > 1 for g in groups for s in g.required)
    assert any(g.member_of for g in groups) and any(g.forbidden_aggs for g in groups)
    assert any(not g.resources for g in groups) and any(req.same_subtree for req in parsed)
    assert any(req.limit for req in parsed) and any(req.root_required for req in parsed)


def test_a_scenario_whose_module_has_not_landed_is_not_available() -> None:
    missing = Scenario("incl_future", ("rpquery.not_yet_written:run",), lambda ctx: None, "")  # type: ignore[arg-type,return-value]
    assert missing.missing() == "rpquery.not_yet_written"
    no_attr = Scenario("incl_future2", ("rpquery.db:not_a_function",), lambda ctx: None, "")  # type: ignore[arg-type,return-value]
    assert no_attr.missing() == "rpquery.db:not_a_function"
    assert REGISTRY["usages_by_consumer_type"].missing() is None


def test_full_scans_are_flagged_per_dialect_with_the_index_that_would_serve() -> None:
    sql = (
        "SELECT 1 FROM allocations AS a JOIN inventories AS inv "
        "ON inv.resource_provider_id = a.resource_provider_id "
        "WHERE a.resource_provider_id = ? AND a.resource_class_id = ? AND a.used > 0"
    )
    names = explain.aliases(sql)
    assert names["a"] == "allocations" and names["inv"] == "inventories"
    assert explain.sqlite_scans(
        "SCAN a\nSEARCH inv USING INDEX x (resource_provider_id=?)", names
    ) == [("allocations", "SCAN a")]
    pg = (
        "Nested Loop\n  ->  Seq Scan on allocations a  (cost=0.00..1.00 rows=1 width=4)\n"
        "  ->  Index Scan using x on inventories inv"
    )
    assert [t for t, _ in explain.postgresql_scans(pg, names)] == ["allocations"]
    maria = json.dumps(
        {
            "query_block": {
                "nested_loop": [
                    {"table": {"table_name": "inv", "access_type": "ALL", "r_rows": 9}},
                    {"table": {"table_name": "a", "access_type": "ref"}},
                ]
            }
        }
    )
    assert [t for t, _ in explain.mariadb_scans(maria, names)] == ["inventories"]
    hint = explain.suggest_index("allocations", sql)
    assert hint.startswith("allocations_resource_provider_class_used_idx")
    assert explain.suggest_index("inventories", sql).startswith(
        "uniq_inventories0resource_provider_resource_class"
    )


def _synthetic_run(out: Path) -> RunConfig:
    """records.json of a two-size run on two backends, with a writes side-by-side."""
    out.mkdir()
    results = []
    for backend, limit10 in (("postgresql", (8.0, 10.0)), ("sqlite", (1.0, 1.5))):
        for hosts, ms in zip((1000, 100_000), limit10, strict=True):
            for name, median, rows in (
                ("candidates_forbidden_trait_limit10", ms, 10),
                ("candidates_limit1000", 5 * ms, 1000),
                ("candidates_forbidden_trait", hosts * 0.04, hosts * 2),
            ):
                results.append(
                    {"backend": backend, "hosts": hosts, "scenario": name, "status": "ok",
                     "median_ms": median, "p95_ms": median, "rows": rows}
                )  # fmt: skip
    loads = [
        {"backend": b, "hosts": h, "providers": 2 * h, "allocations": 40 * h,
         "consumers": 13 * h, "seconds": h / 1000, "summaries": "grouped",
         "summaries_exact": True, "loadavg_5m": 1.0}
        for b in ("postgresql", "sqlite") for h in (1000, 100_000)
    ]  # fmt: skip
    writes = [
        {"backend": "postgresql", "hosts": 1000, "writers": 8, "claims_per_round": 32,
         "rounds": 5, "rpquery_library_per_s": 180.0, "rpquery_wsgi_per_s": 150.0,
         "placement_per_s": 60.0, "ratio": 3.0, "placement_statuses": {"204": 192}}
    ]  # fmt: skip
    records = {"loads": loads, "results": results, "placement_writes": writes}
    (out / "records.json").write_text(json.dumps(records))
    return RunConfig(scale="large", backends=("postgresql", "sqlite"), out_dir=str(out))


def test_report_shows_candidates_against_cloud_size_and_claims_against_placement(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    report.build(out, _synthetic_run(out), {}, None)
    md = (out / "report.md").read_text()
    assert (out / "scale-candidates.png").read_bytes()[:4] == b"\x89PNG"
    assert "![latency on scale-candidates.png](scale-candidates.png)" in md
    section = md.split("## Candidates vs cloud size")[1].split("## Latency")[0]
    # load s, limit=10, limit=1000, whole cloud, candidates, µs per candidate
    assert "| postgresql | 100,000 | 100.0 | 10.0 | 50.0 | 4,000.0 | 200,000 | 20.0 |" in section
    assert "postgresql: `limit=10` 8.0 ms at 1,000 hosts, 10.0 ms at 100,000 hosts" in section
    assert "(× 1.25 for × 100 hosts)" in section
    writes = md.split("### Writes")[1]
    assert "| postgresql | 1,000 | 8 | 180.0 | 150.0 | 60.0 | 3.0 | 204×192 |" in writes
    loads = md.split("## Cloud load times")[1].split("## Candidates")[0]
    assert "| sqlite | 1,000 | 2,000 | 40,000 | 13,000 | 1.0 | grouped | yes | 1.0 |" in loads


PLACEMENT_READY, PLACEMENT_WHY = side_by_side.available()


@pytest.mark.skipif(not PLACEMENT_READY, reason=f"no usable Placement: {PLACEMENT_WHY}")
def test_claims_side_by_side_writes_every_claim_through_both_apis(server_db: Database) -> None:
    """The writes side-by-side on a server backend: Placement (psycopg 2 on PostgreSQL)
    and rpquery's library and WSGI app each write every claim of both shapes."""
    cloud = load_cloud(server_db, CloudSpec(hosts=10, seed=4))
    ctx = Context(server_db, cloud, server_db.dialect_name)
    project, user = claim_project(ctx)

    def instances() -> int:
        got = project_usages(server_db, project, user_id=user, consumer_type="INSTANCE")
        return sum(g.consumer_count for g in got.groups)

    before = instances()
    records: list[dict[str, Any]] = []
    side_by_side.claims_side_by_side(ctx, lambda kind, r: records.append(r), rounds=1)
    assert [r["writers"] for r in records] == [1, 8]
    for r in records:
        claims = 2 * r["claims_per_round"]  # a warm-up round and one timed round
        assert r["placement_statuses"] == {"204": claims}
        assert r["rpquery_wsgi_statuses"] == {"204": claims}
        assert r["rpquery_library_per_s"] > 0 and r["placement_per_s"] > 0
    # (8 + 32) claims per round, two rounds, by Placement, rpquery's library and its API
    assert instances() - before == 3 * 2 * (8 + 32)
    assert verify_usage_summary(server_db) == []


def _bench_check(tmp_path: Path, threshold: str) -> tuple[subprocess.CompletedProcess[str], str]:
    out = tmp_path / f"check-{threshold}.md"
    done = subprocess.run(
        [
            sys.executable, "-m", "benchmarks.check", "--base", str(ROOT), "--backends", "sqlite",
            "--hosts", "20", "--rounds", "1", "--threshold", threshold, "--out", str(out),
        ],  # fmt: skip
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, out.read_text() if out.exists() else ""


def test_bench_check_compares_two_checkouts_and_fails_on_a_slower_median(tmp_path: Path) -> None:
    """``make bench-check``'s plumbing at 20 hosts: both versions (here this checkout
    twice, as a directory: no worktree made) time every scenario through the REST app
    in their own process, the table has a row per scenario; with any slowdown counted
    as one (a threshold of -99 %) every scenario is measured again, fails, and the exit
    status says so. No timing is asserted."""
    from benchmarks.check import SCENARIOS

    done, report = _bench_check(tmp_path, "100")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [line.split(" | ") for line in report.splitlines() if line.startswith("| sqlite |")]
    assert [r[2] for r in rows] == [s.name for s in SCENARIOS]
    assert {r[3] for r in rows} == {"wsgi", "library"}  # claims through the library
    assert all(r[9] == "ok" and r[8] == "–" for r in rows)
    done, report = _bench_check(tmp_path, "-0.99")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [line.split(" | ") for line in report.splitlines() if line.startswith("| sqlite |")]
    assert len(rows) == len(SCENARIOS)
    assert all(r[9] == "**FAIL**" and r[8] != "–" for r in rows)


@pytest.mark.skipif(not PLACEMENT_READY, reason=f"no usable Placement: {PLACEMENT_WHY}")
def test_concurrency_serves_both_apis_under_the_same_gunicorn(sqlite_db: Database) -> None:
    """The concurrency scenario's plumbing at 20 hosts (a few seconds, no timing asserted):
    rpquery serve and Placement under gunicorn, 1 and 3 clients each looping candidates
    and a claim; every rpquery answer a 200 or a 204, every claim answered 204 written,
    the report's table and its verdicts."""
    cloud = load_cloud(sqlite_db, CloudSpec(hosts=20, seed=4))
    ctx = Context(sqlite_db, cloud, "sqlite")
    project, user = claim_project(ctx)
    url = sqlite_db.url.render_as_string(hide_password=False)
    targets = vcpu_providers(sqlite_db, limit=1000)

    def instances() -> int:
        got = project_usages(sqlite_db, project, user_id=user, consumer_type="INSTANCE")
        return sum(g.consumer_count for g in got.groups)

    before = instances()
    records = concurrency.run(
        url, "sqlite", 20, targets, project, user, seconds=0.2, clients=(1, 3)
    )
    assert [(r["server"], r["clients"]) for r in records] == [
        ("rpquery", 1), ("placement", 1), ("rpquery", 3), ("placement", 3),
    ]  # fmt: skip
    written = 0
    for r in records:
        # (Placement on SQLite may answer a concurrent claim with HTTP 500: counted)
        wanted = {"get 200", "put 204"} if r["server"] == "rpquery" else {"get 200"}
        assert wanted <= set(r["statuses"]) <= {"get 200", "put 204", "put 500"}, r
        assert r["server"] == "placement" or set(r["statuses"]) == wanted, r
        assert r["get_n"] == r["put_n"] >= r["clients"] and r["loops_min_max"][0] >= 1
        assert r["get_p50_ms"] <= r["get_p99_ms"] and r["put_p50_ms"] <= r["put_p99_ms"]
        written += r["statuses"].get("put 204", 0)
    # the cells' claims answered 204, and up to 2 per worker per server of the warm-ups
    assert written <= instances() - before <= written + 2 * 2 * concurrency.WORKERS
    md = "\n".join(concurrency.markdown(records))
    assert "| sqlite | 20 | 3 | placement |" in md and "- sqlite at 3 clients: rpquery" in md
