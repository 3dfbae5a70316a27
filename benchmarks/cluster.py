"""``python -m benchmarks.cluster`` (``make bench-cluster``): rpquery on the loopback
clusters of ``scripts/galera.sh`` and ``scripts/pg-replica.sh`` (root; each started for
the run and stopped after it, on their own ports and data directories).

1. Galera: claims per second with 1, 8 and 16 writer processes, all through one node vs
   spread over the three nodes (each writer's claims go to the nodes in turn; each claim
   1 VCPU on one of 16 providers with room for all, for one of 100 projects; a claim
   retries on generation and certification conflicts as usual).
2. PostgreSQL: allocation-candidates latency (median of ``--repeat`` requests) on the hot
   standby vs the primary, 200 providers.

Figures are printed as a Markdown table and written to
``benchmarks/results/cluster-<UTC timestamp>.md``. No figure is asserted anywhere.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import os
import random
import statistics
import subprocess
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

from rpquery import allocations as alloc_api
from rpquery import migrations
from rpquery.allocations import ConsumerAllocations
from rpquery.candidates import allocation_candidates
from rpquery.db import Database
from rpquery.errors import RpqueryError
from tests.factories import provider

ROOT = Path(__file__).resolve().parent.parent
ENV = {
    **os.environ,
    "GALERA_DIR": f"/tmp/rpquery-bench-galera-{os.getpid()}",
    "GALERA_PORT": os.environ.get("BENCH_GALERA_PORT", "24406"),
    "GALERA_GCOMM_PORT": os.environ.get("BENCH_GALERA_GCOMM_PORT", "34567"),
    "PG_REPLICA_DIR": f"/tmp/rpquery-bench-pg-{os.getpid()}",
    "PG_REPLICA_PORT": os.environ.get("BENCH_PG_REPLICA_PORT", "45442"),
}


def script(name: str, *args: str) -> str:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / name), *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"{name} {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def fresh_database(admin_url: str) -> str:
    name = f"rpq_bench_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    engine.dispose()
    url = str(sa.make_url(admin_url).set(database=name))
    db = Database(url)
    migrations.upgrade(db)
    db.dispose()
    return url


def _claimer(
    urls: list[str], rps: list[str], seconds: float, seed: int, out: multiprocessing.Queue
) -> None:  # type: ignore[type-arg]
    """Claim for ``seconds``; consecutive claims go to the nodes of ``urls`` in turn."""
    rng = random.Random(seed)
    dbs = [Database(url, pool_size=1, max_overflow=0) for url in urls]
    ok = failed = 0
    deadline = time.monotonic() + seconds
    turn = seed
    while time.monotonic() < deadline:
        db = dbs[turn % len(dbs)]
        turn += 1
        request = ConsumerAllocations(
            str(uuid.uuid4()),
            f"p{rng.randrange(100)}",
            "u",
            "INSTANCE",
            None,
            {rng.choice(rps): {"VCPU": 1}},
        )
        try:
            alloc_api.replace_allocations(db, request)
            ok += 1
        except RpqueryError:
            failed += 1
    for db in dbs:
        db.dispose()
    out.put((ok, failed))


def claims_per_second(
    urls: list[str], rps: list[str], writers: int, seconds: float
) -> tuple[float, int]:
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_claimer, args=(urls, rps, seconds, i, out)) for i in range(writers)
    ]
    started = time.monotonic()
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 300) for _ in procs]
    for p in procs:
        p.join()
    elapsed = time.monotonic() - started
    return sum(r[0] for r in results) / elapsed, sum(r[1] for r in results)


def bench_galera(seconds: float) -> list[str]:
    script("galera.sh", "up")
    try:
        admin = script("galera.sh", "urls").split()
        url = fresh_database(admin[0])
        nodes = [str(sa.make_url(u).set(database=sa.make_url(url).database)) for u in admin]
        db = Database(nodes[0])
        with db.begin() as conn:
            rps = [provider(conn, f"b{i}", inventory={"VCPU": 100000}).uuid for i in range(16)]
        db.dispose()
        time.sleep(1)
        rows = [
            "| writers | one node: claims/s | three nodes: claims/s | refused (one / three) |",
            "| ---: | ---: | ---: | ---: |",
        ]
        for writers in (1, 8, 16):
            one, f1 = claims_per_second(nodes[:1], rps, writers, seconds)
            three, f3 = claims_per_second(nodes, rps, writers, seconds)
            rows.append(f"| {writers} | {one:.1f} | {three:.1f} | {f1} / {f3} |")
            print(rows[-1], flush=True)
        return rows
    finally:
        script("galera.sh", "down")


def bench_replica(repeat: int) -> list[str]:
    script("pg-replica.sh", "up")
    try:
        primary_admin, standby_admin = script("pg-replica.sh", "urls").split()
        url = fresh_database(primary_admin)
        db = Database(url)
        with db.begin() as conn:
            for i in range(200):
                provider(conn, f"h{i}", inventory={"VCPU": 64, "MEMORY_MB": 262144})
        db.dispose()
        standby = str(sa.make_url(standby_admin).set(database=sa.make_url(url).database))
        time.sleep(2)
        rows = ["| reads on | candidates median (ms) | p90 (ms) |", "| --- | ---: | ---: |"]
        query = "resources=VCPU:2,MEMORY_MB:4096&limit=50"
        for label, target in (
            ("primary", Database(url)),
            ("standby", Database(url, replicas=[standby])),
        ):
            allocation_candidates(target, query)  # warm the pool and caches
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                allocation_candidates(target, query)
                times.append((time.perf_counter() - t0) * 1000)
            times.sort()
            p90 = times[int(len(times) * 0.9)]
            rows.append(f"| {label} | {statistics.median(times):.1f} | {p90:.1f} |")
            print(rows[-1], flush=True)
            target.dispose()
        return rows
    finally:
        script("pg-replica.sh", "down")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per writer scenario")
    parser.add_argument("--repeat", type=int, default=50, help="candidates requests")
    parser.add_argument("--only", choices=["galera", "replica"])
    args = parser.parse_args()
    load = os.getloadavg()[0]
    lines = [
        f"# rpquery on loopback clusters ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"{os.cpu_count()} cores, load average {load:.1f} when the run started.",
        "",
    ]
    if args.only in (None, "galera"):
        lines += ["## Galera, 3 nodes: 1-VCPU claims on 16 providers", ""]
        lines += bench_galera(args.seconds) + [""]
    if args.only in (None, "replica"):
        lines += ["## PostgreSQL: candidates on 200 providers, standby vs primary", ""]
        lines += bench_replica(args.repeat) + [""]
    text = "\n".join(lines)
    print(text)
    out = ROOT / "benchmarks" / "results" / f"cluster-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}.md"
    out.write_text(text)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
