"""Hosts a limited answer covers: rpquery vs OpenStack Placement, same database.

A nested cloud (``rpquery.generator``, default 5,000 hosts) is loaded once per backend;
each request is asked with ``limit`` 5, 50, 200 and 1,000 of rpquery's library (its
1.39 JSON body) and of Placement (``placement_driver.py`` in ``.venv-placement``, same
database), and the distinct root providers the allocation requests take from are
counted (sharing providers left out: the hosts a scheduler chooses among).

    python -m benchmarks.spread_roots --hosts 5000 --backends sqlite
    python -m benchmarks.spread_roots --no-placement     # rpquery's counts only

Prints one Markdown table per backend (the figures of docs/read-path.md's *Order of
limited answers*; results in ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from benchmarks import side_by_side
from benchmarks.config import available_backends, scratch_database
from rpquery.generator import CloudSpec, load_cloud
from rpquery.read.candidates import allocation_candidates_json

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
REQUESTS = (
    "resources=VCPU:2,MEMORY_MB:1024",
    "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU",
    "resources=VCPU:4,MEMORY_MB:4096,DISK_GB:20",
)
LIMITS = (5, 50, 200, 1000)


def hosts(body: dict[str, Any]) -> int:
    """Distinct roots of the providers a body's allocation requests take from, but
    sharing providers' (those carry the sharing trait in their summary)."""
    summaries = body["provider_summaries"]
    roots = set()
    for ar in body["allocation_requests"]:
        for rp in ar["allocations"]:
            root = summaries[rp]["root_provider_uuid"]
            if SHARING_TRAIT not in summaries[root].get("traits", ()):
                roots.add(root)
    return len(roots)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=5000)
    parser.add_argument("--backends", default="sqlite")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-placement", action="store_true")
    parser.add_argument("--rounds", type=int, default=5, help="rpquery's timed calls")
    args = parser.parse_args(argv)
    urls, missing = available_backends(tuple(args.backends.split(",")))
    for backend, reason in missing.items():
        print(f"{backend}: skipped ({reason})")
    ask_placement = not args.no_placement and side_by_side.available()[0]
    for backend, admin in urls.items():
        with scratch_database(backend, admin) as db:
            db.upgrade()
            started = time.monotonic()
            load_cloud(db, CloudSpec(hosts=args.hosts, seed=args.seed))
            print(
                f"\n{backend}: {args.hosts} nested hosts loaded in "
                f"{time.monotonic() - started:.0f} s"
            )
            paths = [(qs, k) for qs in REQUESTS for k in (*LIMITS, None)]
            ours = {}
            took: dict[tuple[str, int | None], float] = {}
            for qs, k in paths:
                query = qs if k is None else f"{qs}&limit={k}"
                ours[(qs, k)] = json.loads(allocation_candidates_json(db, query))
                times = []
                for _ in range(args.rounds):
                    started = time.perf_counter()
                    allocation_candidates_json(db, query)
                    times.append(time.perf_counter() - started)
                took[(qs, k)] = statistics.median(times) * 1000
            theirs: dict[tuple[str, int | None], Any] = {}
            their_ms: dict[tuple[str, int | None], float] = {}
            if ask_placement:
                url = db.url
                if url.get_backend_name() == "postgresql":  # Placement 16.0 needs psycopg 2
                    url = url.set(drivername="postgresql+psycopg2")
                limited = [(qs, k) for qs, k in paths if k is not None]
                asked = [
                    {"name": str(i), "path": f"/allocation_candidates?{qs}&limit={k}", "rounds": 1}
                    for i, (qs, k) in enumerate(limited)
                ]
                answers = side_by_side.run_driver(url.render_as_string(hide_password=False), asked)
                for i, key in enumerate(limited):
                    answer = answers[str(i)]
                    theirs[key] = answer["body"] if answer["status"] == 200 else None
                    their_ms[key] = answer["times"][0] * 1000
            print(
                "\n| request | limit | candidates (all) | hosts with one (all) | rpquery: hosts "
                f"| Placement: hosts | rpquery ms (library, median of {args.rounds}) "
                "| Placement ms (WSGI, one call) |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|---:|")
            for qs in REQUESTS:
                full = ours[(qs, None)]
                for k in LIMITS:
                    other = theirs.get((qs, k))
                    placement_ms = their_ms.get((qs, k))
                    print(
                        f"| `{qs}` | {k} | {len(full['allocation_requests'])} | {hosts(full)} "
                        f"| {hosts(ours[(qs, k)])} "
                        f"| {hosts(other) if other is not None else '-'} "
                        f"| {took[(qs, k)]:.1f} "
                        f"| {'-' if placement_ms is None else f'{placement_ms:.0f}'} |"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
