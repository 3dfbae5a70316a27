"""The pytest-benchmark module that ``python -m benchmarks.run`` drives.

Not collected by the test suite (its name does not start with ``test_``); the runner
passes its configuration in the file named by ``RPQUERY_BENCH_CONFIG``. One cloud per
(backend, size) is loaded into a scratch database (module-scoped fixture, so every
scenario of that cloud runs before the next is loaded); read scenarios run first, then
the optional Placement side-by-side, the HTTP view (benchmarks/http_view.py), the split
of big answers (benchmarks/split.py), then the write scenarios. Every outcome is appended
to ``records.json`` in the output directory, which the report is built from.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import explain
from benchmarks.config import CONFIG_ENV, SCALES, RunConfig, scratch_database
from benchmarks.scenarios import REGISTRY, Context, Prepared, Scenario, load_plugins
from rpquery.generator import CloudSpec, load_cloud
from rpquery.usage.provider_totals import verify_provider_usages
from rpquery.usage.summary import verify_usage_summary

CONFIG = RunConfig.load(os.environ[CONFIG_ENV])
SCALE = SCALES[CONFIG.scale]
OUT = Path(CONFIG.out_dir)
load_plugins()
_selected = [s for s in REGISTRY.values() if not CONFIG.scenarios or s.name in CONFIG.scenarios]
READS = [s.name for s in _selected if not s.writes]
WRITES = [s.name for s in _selected if s.writes]
#: The HTTP view (benchmarks/http_view.py) runs with every scenario or when selected.
HTTP = not CONFIG.scenarios or "http" in CONFIG.scenarios
#: The split of big answers (benchmarks/split.py), likewise.
SPLIT = not CONFIG.scenarios or "split" in CONFIG.scenarios
#: Many schedulers at once (benchmarks/concurrency.py): with --placement, or when selected.
CONCURRENCY = (CONFIG.placement and not CONFIG.scenarios) or "concurrency" in CONFIG.scenarios
CLOUDS = [(b, h) for b in CONFIG.backends for h in CONFIG.sizes]


def _append(kind: str, record: dict[str, Any]) -> None:
    path = OUT / "records.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault(kind, []).append(record)
    path.write_text(json.dumps(data, indent=1, default=str))


def _progress(label: str) -> Any:
    last = [0.0]

    def show(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] > 0.5 or done >= total:
            last[0] = now
            sys.stderr.write(f"\r  loading {label}: {stage:<28} {done:>9,}/{total:,}   ")
            sys.stderr.flush()

    return show


@pytest.fixture(scope="module", params=CLOUDS, ids=[f"{b}-{h}" for b, h in CLOUDS])
def cloud(request: pytest.FixtureRequest) -> Iterator[Context]:
    backend, hosts = request.param
    with scratch_database(backend, CONFIG.urls[backend]) as db:
        label = f"{backend} {hosts} hosts"
        summary = load_cloud(
            db, CloudSpec(hosts=hosts, seed=CONFIG.seed), progress=_progress(label)
        )
        sys.stderr.write(f"\r  loaded {label} in {summary.seconds:.1f} s{' ' * 50}\n")
        started = time.perf_counter()
        drift = len(verify_usage_summary(db)) + len(verify_provider_usages(db))
        _append(
            "loads",
            {
                "backend": backend,
                "hosts": hosts,
                "providers": summary.providers,
                "allocations": summary.allocations,
                "consumers": summary.consumers,
                "seconds": round(summary.seconds, 2),
                "summaries": summary.summaries,
                "loadavg_5m": round(os.getloadavg()[1], 1),  # a busy machine loads slower
                # the usage summaries checked against a recomputation after the load
                "summaries_exact": drift == 0,
                "verify_seconds": round(time.perf_counter() - started, 2),
            },
        )
        yield Context(db, summary, backend)


def _base(ctx: Context, sc: Scenario) -> dict[str, Any]:
    return {"backend": ctx.backend, "hosts": ctx.cloud.hosts, "scenario": sc.name}


def _time_it(benchmark: Any, prepared: Prepared, once: float) -> dict[str, Any]:
    """Time ``rounds`` runs; ``once`` (the first, counted run) sizes ``rounds``."""
    budget = SCALE.seconds_per_scenario / max(once, 1e-6)
    rounds = int(min(SCALE.max_rounds, max(SCALE.min_rounds, budget)))
    benchmark.pedantic(prepared.run, rounds=rounds, iterations=1)
    data = sorted(benchmark.stats.stats.data)
    p95 = data[min(len(data) - 1, int(round(0.95 * (len(data) - 1))))]
    median = statistics.median(data)
    return {
        "median_ms": round(median * 1000, 3),
        "p95_ms": round(p95 * 1000, 3),
        "rounds": len(data),
        "ops_per_s": round(prepared.ops / median, 1) if prepared.ops > 1 else None,
    }


def _measure(benchmark: Any, ctx: Context, sc: Scenario) -> None:
    record = _base(ctx, sc)
    missing = sc.missing()
    if missing:
        reason = f"{missing} has not landed"
        _append("results", {**record, "status": "not available", "reason": reason})
        pytest.skip(f"{sc.name}: {reason}")
    try:
        prepared = sc.build(ctx)
        started = time.perf_counter()
        with ctx.db.count_statements() as counter:
            rows, selects = ctx.db.capture_selects(prepared.run)
        once = time.perf_counter() - started
        record.update(rows=rows, statements=counter.count, ops=prepared.ops)
        if prepared.explain:
            plans = explain.explain_all(ctx.db, selects)
            record["plans"] = [
                {"sql": p.sql, "plan": p.text, "flags": [f.__dict__ for f in p.flags]}
                for p in plans
            ]
        record.update(_time_it(benchmark, prepared, once))
        benchmark.extra_info.update({k: record[k] for k in ("rows", "statements", "p95_ms")})
    except Exception as error:
        failed = {"status": "failed", "reason": repr(error)}
        _append("results", {**record, **failed, "traceback": traceback.format_exc(limit=6)})
        raise
    _append("results", {**record, "status": "ok"})


@pytest.mark.parametrize("name", READS)
def test_read(benchmark: Any, cloud: Context, name: str) -> None:
    _measure(benchmark, cloud, REGISTRY[name])


@pytest.mark.skipif(not CONFIG.placement, reason="run with --placement")
def test_placement_side_by_side(cloud: Context) -> None:
    from benchmarks import side_by_side

    try:
        side_by_side.side_by_side(cloud, [REGISTRY[n] for n in READS], SCALE, _append)
    except Exception as error:
        _append(
            "placement",
            {
                "scenario": "(all)",
                "backend": cloud.backend,
                "hosts": cloud.cloud.hosts,
                "match": f"failed: {error!r}"[:500],
            },
        )
        raise


@pytest.mark.skipif(not HTTP, reason="select it with --scenarios http")
def test_http_view(cloud: Context) -> None:
    from benchmarks import http_view

    path = OUT / "records.json"
    earlier = json.loads(path.read_text()).get("placement", []) if path.exists() else []
    http_view.run(cloud, SCALE, _append, placement=CONFIG.placement, earlier=earlier)


@pytest.mark.skipif(not CONCURRENCY, reason="run with --placement or --scenarios concurrency")
def test_concurrency(cloud: Context) -> None:
    """rpquery serve (and Placement, with --placement) under 1, 8 and 32 clients, on the
    largest cloud of each backend (after the reads: its claims change the cloud)."""
    from benchmarks import concurrency
    from benchmarks.scenarios import claim_project, vcpu_providers

    if cloud.cloud.hosts != max(CONFIG.sizes):
        pytest.skip("the largest cloud only")
    project, user = claim_project(cloud)
    records = concurrency.run(
        cloud.db.url.render_as_string(hide_password=False),
        cloud.backend,
        cloud.cloud.hosts,
        vcpu_providers(cloud.db, limit=100_000),
        project,
        user,
        seconds=concurrency.SECONDS_AT_SCALE[CONFIG.scale],
        placement=CONFIG.placement,
    )
    for record in records:
        _append("concurrency", record)


@pytest.mark.skipif(not SPLIT, reason="select it with --scenarios split")
def test_split(cloud: Context) -> None:
    from benchmarks import split

    split.run(cloud, SCALE, _append)


@pytest.mark.parametrize("name", WRITES)
def test_write(benchmark: Any, cloud: Context, name: str) -> None:
    _measure(benchmark, cloud, REGISTRY[name])


CLAIMS = {"claim_1_writer", "claim_8_writers"}


@pytest.mark.skipif(not CONFIG.placement, reason="run with --placement")
@pytest.mark.skipif(
    bool(CONFIG.scenarios) and not CLAIMS & set(CONFIG.scenarios),
    reason="no claim scenario selected",
)
def test_placement_writes_side_by_side(cloud: Context) -> None:
    """Claims/s against Placement's ``PUT /allocations/{consumer}`` (after the writes)."""
    from benchmarks import side_by_side

    try:
        side_by_side.claims_side_by_side(cloud, _append)
    except Exception as error:
        _append(
            "placement_writes",
            {
                "backend": cloud.backend,
                "hosts": cloud.cloud.hosts,
                "writers": "(all)",
                "error": f"failed: {error!r}"[:500],
            },
        )
        raise
