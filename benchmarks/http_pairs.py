"""Placement and rpquery through HTTP in paired rounds, for a ratio that a shared machine's
changing load does not skew (issue 18: ratios "in one run against Placement").

The HTTP view (``benchmarks/http_view.py``) times all of rpquery's rounds, then all of
Placement's: on a loaded machine the two can see different loads (a whole-cloud
Placement request takes seconds). Here each round sends the request to every server in
turn — Placement under wsgiref (``tests/loopback_wsgi.py``), ``rpquery serve``
(2 workers × 4 threads), and optionally ``rpquery serve`` run from another checkout
(``--before PATH``: its code on ``PYTHONPATH``, e.g. a ``git worktree`` of an earlier
commit) — so a change of load hits them alike. Reported per request: the median of each
server, the ratio of the medians and the median of the per-round ratios, body sizes, the
load average before and after.

    python -m benchmarks.http_pairs --url sqlite:////tmp/cloud.db --rounds 7 \\
        [--before /tmp/old-checkout] [--requests whole,limit1000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from tests.serving import HttpClient, serving

#: The requests (issue 18's rows): nova's limit=1000, the whole cloud, limit=10.
REQUESTS = {
    "limit10": "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU&limit=10",
    "limit1000": "resources=VCPU:1,MEMORY_MB:512&limit=1000",
    "whole": "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU",
}


@contextmanager
def _env(name: str, value: str | None) -> Iterator[None]:
    saved = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


def pairs(
    url: str, names: list[str], rounds: int, before: str | None = None
) -> list[dict[str, Any]]:
    """Paired rounds of each request of ``names`` on the database at ``url``."""
    from benchmarks.http_view import placement_server

    out = []
    with ExitStack() as stack:
        bases = {"placement": stack.enter_context(placement_server(url))}
        if before is not None:
            # PYTHONSAFEPATH: `python -m rpquery` otherwise puts the working directory
            # first on sys.path, ahead of PYTHONPATH, and run from a checkout "before"
            # served that checkout's code, not the earlier one's
            with _env("PYTHONPATH", before), _env("PYTHONSAFEPATH", "1"):
                bases["before"] = stack.enter_context(serving(url, workers=2, threads=4)).base
        bases["rpquery"] = stack.enter_context(serving(url, workers=2, threads=4)).base
        clients = {k: HttpClient(base, version="1.39") for k, base in bases.items()}
        for name in names:
            path = f"/allocation_candidates?{REQUESTS[name]}"
            times: dict[str, list[float]] = {k: [] for k in clients}
            sizes: dict[str, int] = {}
            load = os.getloadavg()[0]
            for i in range(rounds + 1):  # round 0 warms every server up, not counted
                for who, client in clients.items():
                    started = time.perf_counter()
                    status, body = client.send("GET", path)
                    elapsed = time.perf_counter() - started
                    if status != 200:
                        raise RuntimeError(f"{who}: HTTP {status} for {path}: {body[:300]!r}")
                    sizes[who] = len(body)
                    if i:
                        times[who].append(elapsed)
            record: dict[str, Any] = {"request": name, "rounds": rounds}
            for who, series in times.items():
                record[f"{who}_ms"] = round(statistics.median(series) * 1000, 1)
            for who in (k for k in clients if k != "placement"):
                record[f"ratio_{who}"] = round(record["placement_ms"] / record[f"{who}_ms"], 1)
                per_round = [p / x for p, x in zip(times["placement"], times[who], strict=True)]
                record[f"paired_ratio_{who}"] = round(statistics.median(per_round), 1)
            record["bytes"] = sizes
            record["loadavg_1m"] = f"{load:.1f} → {os.getloadavg()[0]:.1f}"
            out.append(record)
        for client in clients.values():
            client.close()
    return out


def main(argv: list[str] | None = None) -> int:
    from benchmarks.side_by_side import available

    parser = argparse.ArgumentParser(prog="python -m benchmarks.http_pairs", description=__doc__)
    parser.add_argument("--url", action="append", required=True, help="a loaded database")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", default=",".join(REQUESTS))
    parser.add_argument("--before", help="a checkout to serve from as well (PYTHONPATH)")
    args = parser.parse_args(argv)
    ok, why = available()
    if not ok:
        print(f"Placement is not available: {why}", file=sys.stderr)
        return 2
    records = []
    for url in args.url:
        backend = url.split(":")[0].split("+")[0]
        for record in pairs(url, args.requests.split(","), args.rounds, args.before):
            records.append({"backend": backend, **record})
            print(json.dumps(records[-1]), file=sys.stderr, flush=True)
    print(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
