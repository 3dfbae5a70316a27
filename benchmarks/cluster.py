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
``make bench`` (``benchmarks/run.py``) runs the same two scenarios through :func:`run`
and puts them in its report's **Clusters** section, or says why they were not run
(:func:`unavailable`: not root, a cluster tool missing).
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import RpqueryError
from rpquery.read.candidates import allocation_candidates
from rpquery.store import migrations
from rpquery.write import allocations as alloc_api
from rpquery.write.allocations import ConsumerAllocations
from tests.factories import provider
from tests.galera_cluster import GaleraCluster

ROOT = Path(__file__).resolve().parent.parent
ENV = {
    **os.environ,
    "PG_REPLICA_DIR": f"/tmp/rpquery-bench-pg-{os.getpid()}",
    "PG_REPLICA_PORT": os.environ.get("BENCH_PG_REPLICA_PORT", "45442"),
}
WRITERS = (1, 8, 16)
CANDIDATES_QUERY = "resources=VCPU:2,MEMORY_MB:4096&limit=50"


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
        raise RuntimeError(f"{name} {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
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


def unavailable() -> dict[str, str]:
    """Why each cluster scenario cannot run here (``galera``, ``replica``); an empty
    dict when both can."""
    why: dict[str, str] = {}
    if os.geteuid() != 0:
        reason = "needs root (the cluster nodes run as the mysql / postgres users)"
        return {"galera": reason, "replica": reason}
    missing = [
        tool
        for tool, there in (
            ("mariadbd", Path(os.environ.get("MARIADBD", "/usr/sbin/mariadbd")).exists()),
            ("mariadb-install-db", shutil.which("mariadb-install-db") is not None),
            ("galera-4", Path("/usr/lib/galera/libgalera_smm.so").exists()),
            ("rsync", shutil.which("rsync") is not None),
        )
        if not there
    ]
    if missing:
        why["galera"] = f"{', '.join(missing)} not installed (.ci/run installs them)"
    if not glob.glob("/usr/lib/postgresql/*/bin/pg_basebackup"):
        why["replica"] = "PostgreSQL's server binaries (pg_basebackup) not installed"
    return why


def bench_galera(seconds: float) -> list[dict[str, Any]]:
    """Claims/s with 1, 8 and 16 writers, on one node and spread over three."""
    cluster = GaleraCluster("bench")
    cluster.up()
    try:
        admin = cluster.urls()
        url = fresh_database(admin[0])
        nodes = [str(sa.make_url(u).set(database=sa.make_url(url).database)) for u in admin]
        db = Database(nodes[0])
        with db.begin() as conn:
            rps = [provider(conn, f"b{i}", inventory={"VCPU": 100000}).uuid for i in range(16)]
        db.dispose()
        time.sleep(1)
        records = []
        for writers in WRITERS:
            one, f1 = claims_per_second(nodes[:1], rps, writers, seconds)
            three, f3 = claims_per_second(nodes, rps, writers, seconds)
            records.append(
                {"cluster": "galera", "writers": writers, "seconds": seconds,
                 "one_node_per_s": round(one, 1), "three_nodes_per_s": round(three, 1),
                 "refused_one_node": f1, "refused_three_nodes": f3}
            )  # fmt: skip
            print(galera_markdown(records)[-1], flush=True)
        return records
    finally:
        cluster.stop()


def bench_replica(repeat: int) -> list[dict[str, Any]]:
    """Allocation-candidates latency on the primary and on the hot standby."""
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
        records = []
        for label, target in (
            ("primary", Database(url)),
            ("standby", Database(url, replicas=[standby])),
        ):
            allocation_candidates(target, CANDIDATES_QUERY)  # warm the pool and caches
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                allocation_candidates(target, CANDIDATES_QUERY)
                times.append((time.perf_counter() - t0) * 1000)
            times.sort()
            records.append(
                {"cluster": "replica", "reads_on": label, "requests": repeat,
                 "median_ms": round(statistics.median(times), 1),
                 "p90_ms": round(times[int(len(times) * 0.9)], 1)}
            )  # fmt: skip
            print(replica_markdown(records)[-1], flush=True)
            target.dispose()
        return records
    finally:
        script("pg-replica.sh", "down")


def run(
    which: tuple[str, ...], seconds: float, repeat: int
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The scenarios of ``which`` (``galera``, ``replica``) that can run here: their
    records, and the reason each one that did not run (or failed to start) did not."""
    records: list[dict[str, Any]] = []
    why = {k: v for k, v in unavailable().items() if k in which}
    for name in which:
        if name in why:
            continue
        load = round(os.getloadavg()[0], 1)
        try:
            done = bench_galera(seconds) if name == "galera" else bench_replica(repeat)
            records += [{**r, "load_average": load} for r in done]
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            why[name] = f"the cluster did not start or failed: {str(error)[:300]}"
    return records, why


def galera_markdown(records: list[dict[str, Any]]) -> list[str]:
    md = [
        "| writers | one node: claims/s | three nodes: claims/s | refused (one / three) |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for r in records:
        if r.get("cluster") == "galera":
            md.append(
                f"| {r['writers']} | {r['one_node_per_s']:.1f} | {r['three_nodes_per_s']:.1f} "
                f"| {r['refused_one_node']} / {r['refused_three_nodes']} |"
            )
    return md


def replica_markdown(records: list[dict[str, Any]]) -> list[str]:
    md = ["| reads on | candidates median (ms) | p90 (ms) |", "| --- | ---: | ---: |"]
    for r in records:
        if r.get("cluster") == "replica":
            md.append(f"| {r['reads_on']} | {r['median_ms']:.1f} | {r['p90_ms']:.1f} |")
    return md


def markdown(records: list[dict[str, Any]], why: dict[str, str]) -> list[str]:
    """The two tables (or why each was not run), as in ``make bench``'s report."""
    md: list[str] = []
    galera = [r for r in records if r.get("cluster") == "galera"]
    md += ["### Galera, 3 nodes: 1-VCPU claims on 16 providers, 100 projects", ""]
    if galera:
        md += [
            f"{galera[0]['seconds']:g} s per cell; one node: every writer on node 1; three "
            "nodes: each writer's claims go to the nodes in turn. Load average "
            f"{galera[0].get('load_average', '?')} when it started.",
            "",
            *galera_markdown(records),
        ]
    else:
        md.append(f"Not run: {why.get('galera', 'not selected')}.")
    md += ["", "### PostgreSQL: candidates on 200 providers, hot standby vs primary", ""]
    if any(r.get("cluster") == "replica" for r in records):
        load = next(r.get("load_average", "?") for r in records if r.get("cluster") == "replica")
        md += [f"`{CANDIDATES_QUERY}`; load average {load} when it started.", ""]
        md += replica_markdown(records)
    else:
        md.append(f"Not run: {why.get('replica', 'not selected')}.")
    return md


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per writer scenario")
    parser.add_argument("--repeat", type=int, default=50, help="candidates requests")
    parser.add_argument("--only", choices=["galera", "replica"])
    args = parser.parse_args()
    load = os.getloadavg()[0]
    which = (args.only,) if args.only else ("galera", "replica")
    records, why = run(which, args.seconds, args.repeat)
    lines = [
        f"# rpquery on loopback clusters ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"{os.cpu_count()} cores, load average {load:.1f} when the run started.",
        "",
        *markdown(records, why),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    out = ROOT / "benchmarks" / "results" / f"cluster-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}.md"
    out.write_text(text)
    print(f"written to {out}")
    if why:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
