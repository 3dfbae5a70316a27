"""Never-seen request shapes: what an allocation-candidates request costs the first time it
is asked (issue 18, item 5; target: ≤ 3 ms on a 100-host cloud, every backend).

An API layer sees many request shapes (each combination of groups, classes, traits,
aggregates), so the first ask of a shape matters as much as a repeat. The ``shapes``
scenario of ``make bench`` loads a 100-host cloud per backend and, in a fresh process
(nothing built or compiled by an earlier request), asks N requests drawn from a seed
(:func:`draw`): 1–4 groups (the unsuffixed one or not, suffixed ones with random
suffixes, some resourceless under ``same_subtree``), random classes and amounts,
required, forbidden and any-of traits, ``member_of`` (any-of, forbidden), sometimes
``root_required`` and ``limit``. Each request is asked once and timed (the *first* ask),
then asked again at once (the *repeat*: what the same request costs once its statements
are built); the difference is what building statements for a new request costs.
Requests are distinct; one warm-up request (not counted) opens the connection first.

    python -m benchmarks.shapes --backends sqlite,postgresql,mysql --requests 200
    python -m benchmarks.shapes --backends sqlite --profile   # where the time goes
    python -m benchmarks.shapes --backends mysql --profile tottime
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Requests per backend, per scale.
REQUESTS_AT_SCALE = {"tiny": 20, "small": 100, "medium": 200, "large": 300}
HOSTS = 100
#: The target of issue 18, item 5: a never-seen request on a 100-host cloud, in ms.
TARGET_MS = 3.0

HOST_TRAITS = (
    "HW_CPU_X86_AVX2",
    "HW_CPU_X86_AVX512F",
    "COMPUTE_VOLUME_MULTI_ATTACH",
    "CUSTOM_LICENSED_WINDOWS",
    "CUSTOM_GPU",
    "STORAGE_DISK_SSD",
    "HW_CPU_X86_SSE42",
    *(f"CUSTOM_RACK_{r}" for r in range(8)),
)
NIC_TRAITS = ("HW_NIC_SRIOV", "HW_NIC_OFFLOAD_TSO")
PHYSNETS = ("CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B")
SUFFIXES = ("1", "2", "3", "_NET", "_NET2", "_CPU", "_ACCEL", "_X")
WARM_UP = "resources=VCPU:1,MEMORY_MB:512&limit=5"


def _traits(rng: random.Random, pool: tuple[str, ...], s: str) -> list[tuple[str, str]]:
    """``required{s}``: 0–2 required, 0–2 forbidden (disjoint), sometimes an any-of set."""
    picked = rng.sample(pool, rng.choice((0, 0, 1, 1, 2)) + rng.choice((0, 0, 1, 2)))
    cut = rng.randint(0, len(picked))
    plain = picked[:cut] + ["!" + t for t in picked[cut:]]
    pairs = [(f"required{s}", ",".join(plain))] if plain else []
    if rng.random() < 0.3:
        pairs.append((f"required{s}", "in:" + ",".join(rng.sample(pool, rng.randint(2, 3)))))
    return pairs


def _aggregates(rng: random.Random, aggs: list[str], s: str) -> list[tuple[str, str]]:
    pairs = []
    if rng.random() < 0.25:
        pick = rng.sample(aggs, rng.randint(1, min(2, len(aggs))))
        pairs.append((f"member_of{s}", ("in:" if len(pick) > 1 else "") + ",".join(pick)))
    if rng.random() < 0.15:
        pairs.append((f"member_of{s}", "!" + rng.choice(aggs)))
    return pairs


def _compute(rng: random.Random) -> str:
    out = [f"VCPU:{rng.choice((1, 1, 2, 4, 8))}"]
    if rng.random() < 0.8:
        out.append(f"MEMORY_MB:{rng.choice((256, 512, 1024, 2048, 4096))}")
    if rng.random() < 0.3:
        out.append(f"DISK_GB:{rng.choice((10, 20, 40, 100))}")
    return ",".join(out)


def draw(rng: random.Random, aggregates: list[str]) -> str:
    """One random, valid allocation-candidates query string."""
    pairs: list[tuple[str, str]] = []
    unsuffixed = rng.random() < 0.8
    if unsuffixed:
        pairs += [("resources", _compute(rng))]
        pairs += _traits(rng, HOST_TRAITS, "") + _aggregates(rng, aggregates, "")
    suffixes = rng.sample(SUFFIXES, rng.choice((0, 0, 1, 1, 2, 3) if unsuffixed else (1, 2, 3)))
    subtree: list[str] = []
    for s in suffixes:
        kind = rng.random()
        if kind < 0.45:  # a NUMA node's share
            pairs.append((f"resources{s}", _compute(rng)))
            subtree.append(s)
        elif kind < 0.85 or len(suffixes) == 1 or not (unsuffixed or s != suffixes[0]):
            # a VF on a physnet
            pairs.append((f"resources{s}", f"SRIOV_NET_VF:{rng.choice((1, 1, 2))}"))
            pairs.append((f"required{s}", rng.choice(PHYSNETS)))
            subtree.append(s)
        else:  # resourceless: traits only, under same_subtree
            pairs.append((f"required{s}", rng.choice(NIC_TRAITS)))
            subtree.append(s)
            subtree.append(next(x for x in suffixes if x != s))
        if rng.random() < 0.3:
            pairs += _traits(rng, NIC_TRAITS if "VF" in pairs[-1][1] else HOST_TRAITS, s)
        pairs += _aggregates(rng, aggregates, s) if rng.random() < 0.3 else []
    if len(suffixes) > 1 or (suffixes and rng.random() < 0.3):
        pairs.append(("group_policy", rng.choice(("none", "isolate"))))
    resourceless = {k[len("required") :] for k, _ in pairs if k.startswith("required")} - {
        k[len("resources") :] for k, _ in pairs if k.startswith("resources")
    }
    if resourceless or (len(set(subtree)) > 1 and rng.random() < 0.3):
        pairs.append(("same_subtree", ",".join(sorted(set(subtree)))))
    if rng.random() < 0.15:
        pairs.append(("root_required", rng.choice(HOST_TRAITS)))
    if rng.random() < 0.5:
        pairs.append(("limit", str(rng.choice((1, 10, 50, 1000)))))
    rng.shuffle(pairs)
    return "&".join(f"{k}={v}" for k, v in pairs)


def requests(seed: int, n: int, aggregates: list[str]) -> list[str]:
    """``n`` distinct requests drawn from ``seed`` (requests Placement refuses are kept
    out by :func:`draw`, and any left are reported, not timed)."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        out.setdefault(draw(rng, aggregates))
    return list(out)


def _percentile(values: list[float], p: float) -> float:
    data = sorted(values)
    return data[min(len(data) - 1, int(round(p * (len(data) - 1))))]


class _Compiles:
    """Counts statements SQLAlchemy had to compile (a compiled-cache miss) and parts the
    read path compiled (:mod:`rpquery.store._texts`: a statement's head or
    one of its clauses seen for the first time): a first ask that compiled nothing
    met only parts seen before, whatever its values and however they combine."""

    def __init__(self, db: Any) -> None:
        from sqlalchemy import event

        from rpquery.store import _texts

        self.cache_misses = 0
        self.engine = db.engine
        self.stats = _texts.PartStats
        self.parts_before = self.stats.compiled
        event.listen(self.engine, "after_cursor_execute", self.seen)

    @property
    def misses(self) -> int:
        return self.cache_misses + self.stats.compiled - self.parts_before

    def seen(self, conn: Any, cursor: Any, sql: str, params: Any, ctx: Any, many: bool) -> None:
        if ctx is not None and ctx.cache_hit == ctx.dialect.CACHE_MISS:
            self.cache_misses += 1


def _summary(label: str, values: list[float]) -> dict[str, Any]:
    if not values:
        return {f"{label}_median_ms": None, f"{label}_p90_ms": None}
    return {
        f"{label}_median_ms": round(statistics.median(values), 3),
        f"{label}_p90_ms": round(_percentile(values, 0.9), 3),
    }


def time_requests(db: Any, queries: list[str]) -> dict[str, Any]:
    """First ask and repeat of each query, in ms (wall clock, and this process's CPU
    time: the database server's is not in it, the machine's load much less), and the
    first asks split by whether they compiled a statement; refused queries are counted
    apart."""
    from rpquery.errors import InvalidRequest
    from rpquery.read.candidates import allocation_candidates

    allocation_candidates(db, WARM_UP)
    compiles = _Compiles(db)
    first: list[float] = []
    repeat: list[float] = []
    first_cpu: list[float] = []
    repeat_cpu: list[float] = []
    compiled: list[float] = []
    cached: list[float] = []
    refused = late = 0
    for qs in queries:
        misses = compiles.misses
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            allocation_candidates(db, qs)
            t1, c1 = time.perf_counter(), time.process_time()
            allocation_candidates(db, qs)
            t2, c2 = time.perf_counter(), time.process_time()
        except InvalidRequest:
            refused += 1
            continue
        first.append((t1 - t0) * 1000)
        repeat.append((t2 - t1) * 1000)
        first_cpu.append((c1 - c0) * 1000)
        repeat_cpu.append((c2 - c1) * 1000)
        (compiled if compiles.misses > misses else cached).append(first[-1])
        late += compiles.misses > misses and len(first) > len(queries) // 2
    return {
        "requests": len(first),
        "refused": refused,
        "compiled": len(compiled),
        # of the second half: the process had seen as many random requests before
        "compiled_second_half": late,
        **_summary("first", first),
        **_summary("repeat", repeat),
        **_summary("first_cpu", first_cpu),
        **_summary("repeat_cpu", repeat_cpu),
        **_summary("compiled", compiled),
        **_summary("cached", cached),
    }


@contextmanager
def _cloud(backend: str, url: str, seed: int) -> Iterator[tuple[Any, list[str]]]:
    from benchmarks.config import scratch_database
    from rpquery.generator import CloudSpec, load_cloud

    with scratch_database(backend, url) as db:
        cloud = load_cloud(db, CloudSpec(hosts=HOSTS, seed=seed))
        yield db, [*cloud.host_aggregates, *cloud.sharing_aggregates]


def measure(
    backend: str, url: str, n: int, seed: int, profile: str | None = None
) -> dict[str, Any]:
    """The record of one backend (in this process: run it in a fresh one)."""
    with _cloud(backend, url, seed) as (db, aggregates):
        queries = requests(seed, n, aggregates)
        before = os.getloadavg()[0]
        profiler = cProfile.Profile() if profile is not None else None
        if profiler is not None:
            profiler.enable()
        figures = time_requests(db, queries)
        if profiler is not None:
            profiler.disable()
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(profile).print_stats(45)
            print(out.getvalue(), file=sys.stderr)
        return {
            "backend": backend,
            "hosts": HOSTS,
            "seed": seed,
            **figures,
            "loadavg_before": round(before, 2),
            "loadavg_after": round(os.getloadavg()[0], 2),
        }


def run(backends: tuple[str, ...], n: int, seed: int) -> list[dict[str, Any]]:
    """One record per backend, each measured in a fresh process (cold caches)."""
    records = []
    for backend in backends:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.shapes", "--backends", backend,
             "--requests", str(n), "--seed", str(seed), "--json"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        records += json.loads(done.stdout)
    return records


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The report's table and the verdict on the target."""
    md = [
        "| backend | requests | first ask median ms | p90 ms | repeat median ms | p90 ms"
        " | CPU ms first / repeat | first asks that compiled | their median ms"
        " | the others' median ms | load average |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        md.append(
            f"| {r['backend']} | {r['requests']} | {_ms(r['first_median_ms'])}"
            f" | {_ms(r['first_p90_ms'])} | {_ms(r['repeat_median_ms'])}"
            f" | {_ms(r['repeat_p90_ms'])}"
            f" | {_ms(r['first_cpu_median_ms'])} / {_ms(r['repeat_cpu_median_ms'])}"
            f" | {r['compiled']} ({r['compiled_second_half']} of the second half)"
            f" | {_ms(r['compiled_median_ms'])}"
            f" | {_ms(r['cached_median_ms'])} | {r['loadavg_before']:.1f} → "
            f"{r['loadavg_after']:.1f} |"
        )
    if rows:
        verdict = ", ".join(
            f"{r['backend']} {r['first_median_ms']:.2f} ms "
            f"({'met' if r['first_median_ms'] <= TARGET_MS else 'missed'})"
            for r in rows
        )
        md += ["", f"Target (issue 18): a never-seen request ≤ {TARGET_MS:g} ms — {verdict}."]
    return md


def main(argv: list[str] | None = None) -> int:
    from benchmarks.config import available_backends

    parser = argparse.ArgumentParser(prog="python -m benchmarks.shapes", description=__doc__)
    parser.add_argument("--backends", default="sqlite,postgresql,mysql")
    parser.add_argument("--requests", type=int, default=REQUESTS_AT_SCALE["medium"])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", action="store_true", help="records as JSON")
    parser.add_argument(
        "--profile",
        nargs="?",
        const="cumulative",
        metavar="SORT",
        help="cProfile to stderr, sorted by SORT (cumulative; tottime...)",
    )
    args = parser.parse_args(argv)
    urls, missing = available_backends(tuple(args.backends.split(",")))
    for backend, reason in missing.items():
        print(f"{backend}: skipped ({reason})", file=sys.stderr)
    if len(urls) == 1:  # in this process
        records = [measure(b, u, args.requests, args.seed, args.profile) for b, u in urls.items()]
    else:  # each backend in a fresh process, its caches cold
        records = run(tuple(urls), args.requests, args.seed)
    print(json.dumps(records, indent=1) if args.json else "\n".join(markdown(records)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
