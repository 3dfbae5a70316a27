"""Many schedulers at once: ``rpquery serve`` and OpenStack Placement served the same way
on the same database, 1, 8 and 32 concurrent clients (issue 34, item 4).

Both APIs run under gunicorn with the same worker class and count (:data:`WORKERS`
``gevent`` workers: ``rpquery serve``'s default; Placement through
``benchmarks/placement_gunicorn.py`` in ``.venv-placement``). Each client is a thread of
this process with its own kept-alive connection, looping what a scheduler does for
every boot: ``GET /allocation_candidates?resources=VCPU:1,MEMORY_MB:512&limit=1000``
(nova's ``max_placement_results``), then ``PUT /allocations/{new consumer}`` claiming
``VCPU:1,MEMORY_MB:256`` on a random VCPU provider (microversion 1.39, noauth2 admin).
A cell (server × clients) runs for its seconds; requests started before its end are
waited for. Per cell: requests/s (every request of the cell over its wall time, until
the last answer: a server whose answers take longer than the cell is not cut short),
p50 and p99 latency of each kind, HTTP statuses. The cells alternate the two
servers at each client count, rpquery first.

    python -m benchmarks.concurrency --url sqlite:////tmp/cloud.db --seconds 20
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.markdown import table
from tests.serving import HttpClient, free_port, serving

ROOT = Path(__file__).resolve().parent.parent
#: Concurrent clients per cell.
CLIENTS = (1, 8, 32)
#: gunicorn workers of each server, and their class.
WORKERS, WORKER_CLASS = 2, "gevent"
#: What a scheduler asks for, and the claim it then writes.
CANDIDATES = "/allocation_candidates?resources=VCPU:1,MEMORY_MB:512&limit=1000"
CLAIM = {"VCPU": 1, "MEMORY_MB": 256}
VERSION = "1.39"
#: Seconds per cell, per scale.
SECONDS_AT_SCALE = {"tiny": 1.0, "small": 10.0, "medium": 20.0, "large": 60.0}
#: Issue 34's targets at 32 clients: rpquery's requests/s ≥ 20× Placement's, and its p99
#: ≤ 10× its own p50 (each kind).
TARGET_RATIO, TARGET_TAIL = 20.0, 10.0
#: The packages gunicorn's gevent worker needs that ``.venv-placement`` lacks.
SHARED_PACKAGES = ("gunicorn", "gevent", "zope")


def _shared_dir() -> Path:
    """A directory of links to rpquery's gunicorn and gevent, for Placement's server."""
    import gunicorn

    site = Path(gunicorn.__file__).resolve().parent.parent
    # one directory per virtualenv: links left by another checkout (maybe removed since)
    # are never taken for this one's
    venv = hashlib.sha1(str(site).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"rpq-bench-gunicorn-{os.getuid()}-{venv}"
    path.mkdir(exist_ok=True)
    for name in SHARED_PACKAGES:
        link = path / name
        if link.is_symlink() and link.readlink() == site / name:
            continue
        staged = path / f".{name}.{os.getpid()}"
        staged.unlink(missing_ok=True)
        staged.symlink_to(site / name)
        staged.replace(link)  # atomic: a run beside this one sees the old link or the new
    return path


@contextmanager
def placement_gunicorn(url: str, workers: int = WORKERS) -> Iterator[str]:
    """Placement under gunicorn (``workers`` × :data:`WORKER_CLASS`) on a free port."""
    from benchmarks.side_by_side import PYTHON

    port = free_port()
    script = Path(__file__).with_name("placement_gunicorn.py")
    with tempfile.NamedTemporaryFile("wb", prefix="rpq-placement-", suffix=".log") as err:
        proc = subprocess.Popen(
            [str(PYTHON), str(script), url, str(port), str(workers), WORKER_CLASS,
             str(_shared_dir())],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            try:
                _wait(base, proc)
            except RuntimeError as error:
                raise RuntimeError(f"{error}: {Path(err.name).read_text()[-1500:]}") from None
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait(base: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """Until ``GET /`` answers (Placement has no /healthcheck); raises if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Placement's gunicorn exited with {proc.returncode}")
        client = HttpClient(base, timeout=60)
        try:
            if client.send("GET", "/")[0] == 200:
                return
        except OSError:
            time.sleep(0.3)
        finally:
            client.close()
    raise RuntimeError(f"Placement's gunicorn did not answer within {timeout:.0f} s")


def _claim_body(rp: str, project: str, user: str) -> bytes:
    return json.dumps(
        {
            "allocations": {rp: {"resources": CLAIM}},
            "consumer_generation": None,
            "project_id": project,
            "user_id": user,
            "consumer_type": "INSTANCE",
        }
    ).encode()


def cell(
    base: str, clients: int, seconds: float, targets: list[str], project: str, user: str
) -> dict[str, Any]:
    """``clients`` threads looping GET candidates + PUT claim for ``seconds``."""
    samples: dict[str, list[tuple[float, float]]] = {"get": [], "put": []}
    statuses: dict[str, int] = {}
    lock = threading.Lock()
    start = threading.Event()
    ends = [0.0]
    loops = [0] * clients

    def client(seed: int) -> None:
        rng = random.Random(seed)
        http = HttpClient(base, version=VERSION, timeout=900)
        start.wait()
        try:
            while True:  # one loop at least: a warm-up cell has no seconds
                for kind, method, path, body in (
                    ("get", "GET", CANDIDATES, None),
                    ("put", "PUT", f"/allocations/{uuid.uuid4()}",
                     _claim_body(rng.choice(targets), project, user)),
                ):  # fmt: skip
                    began = time.perf_counter()
                    try:
                        status = http.send(method, path, body)[0]
                    except OSError as error:
                        status, _ = 0, error
                        http.close()
                    done = time.perf_counter()
                    with lock:
                        samples[kind].append((began, done))
                        key = f"{kind} {status}"
                        statuses[key] = statuses.get(key, 0) + 1
                loops[seed] += 1
                if time.perf_counter() >= ends[0]:
                    break
        finally:
            http.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    began = time.perf_counter()
    ends[0] = began + seconds
    load = os.getloadavg()[0]
    start.set()
    for t in threads:
        t.join()
    record: dict[str, Any] = {
        "clients": clients,
        "seconds": seconds,
        "loadavg_1m": f"{load:.1f} → {os.getloadavg()[0]:.1f}",
        "statuses": dict(sorted(statuses.items())),
        # how evenly the server shared itself: loops (GET + PUT) per client
        "loops_min_max": [min(loops), max(loops)],
    }
    wall = time.perf_counter() - began
    record["wall_s"] = round(wall, 1)
    for kind, pairs in samples.items():
        latencies = sorted(done - b for b, done in pairs)
        record[f"{kind}_per_s"] = round(len(latencies) / wall, 2)
        record[f"{kind}_n"] = len(latencies)
        record[f"{kind}_p50_ms"] = _pct(latencies, 0.50)
        record[f"{kind}_p99_ms"] = _pct(latencies, 0.99)
    record["per_s"] = round((record["get_n"] + record["put_n"]) / wall, 2)
    return record


def _pct(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    i = min(len(sorted_values) - 1, max(0, int(round(q * len(sorted_values) + 0.5)) - 1))
    return round(sorted_values[i] * 1000, 1)


def run(
    url: str,
    backend: str,
    hosts: int,
    targets: list[str],
    project: str,
    user: str,
    *,
    seconds: float,
    clients: tuple[int, ...] = CLIENTS,
    placement: bool = True,
) -> list[dict[str, Any]]:
    """One record per (server, clients) on the database at ``url``."""
    out: list[dict[str, Any]] = []
    placement_url = url
    if backend == "postgresql":  # Placement writes through psycopg 2 (side_by_side)
        placement_url = url.replace("postgresql+psycopg:", "postgresql+psycopg2:", 1)
    with serving(url, workers=WORKERS) as ours:
        servers = {"rpquery": ours.base}
        with placement_gunicorn(placement_url) if placement else _nothing() as theirs:
            if theirs:
                servers["placement"] = theirs
            for base in servers.values():  # warm every worker: a few requests each
                cell(base, 2 * WORKERS, 0.0, targets, project, user)
            for n in clients:
                for who, base in servers.items():
                    record = {"server": who, "backend": backend, "hosts": hosts}
                    record.update(cell(base, n, seconds, targets, project, user))
                    print(json.dumps(record), file=sys.stderr, flush=True)
                    out.append(record)
    return out


@contextmanager
def _nothing() -> Iterator[str]:
    yield ""


def verdicts(records: list[dict[str, Any]]) -> list[str]:
    """Issue 34's targets at the largest client count, per backend."""
    lines = []
    top = max((r["clients"] for r in records), default=0)
    for backend in sorted({r["backend"] for r in records}):
        cells = {r["server"]: r for r in records if (r["backend"], r["clients"]) == (backend, top)}
        ours, theirs = cells.get("rpquery"), cells.get("placement")
        if ours is None:
            continue
        line = f"- {backend} at {top} clients: rpquery {ours['per_s']} requests/s"
        if theirs and theirs["per_s"]:
            ratio = ours["per_s"] / theirs["per_s"]
            met = "met" if ratio >= TARGET_RATIO else "MISSED"
            line += f", Placement {theirs['per_s']}: {ratio:.1f}× (≥ {TARGET_RATIO:g}×: {met})"
        tails = []
        for kind in ("get", "put"):
            p50, p99 = ours.get(f"{kind}_p50_ms"), ours.get(f"{kind}_p99_ms")
            if p50 and p99:
                met = "met" if p99 <= TARGET_TAIL * p50 else "MISSED"
                tails.append(
                    f"{kind.upper()} p99 {p99} ms = {p99 / p50:.1f}× p50 {p50} ms ({met})"
                )
        lines.append(line + "; " + ", ".join(tails) + f" (≤ {TARGET_TAIL:g}× p50)")
    return lines


def markdown(records: list[dict[str, Any]]) -> list[str]:
    """The report's section."""
    md = ["## Many schedulers at once: `rpquery serve` and Placement under load", ""]
    if not records:
        return [*md, "Not run (`make bench-placement`, or `--scenarios concurrency`)."]
    md += [
        f"Both under gunicorn, {WORKERS} `{WORKER_CLASS}` workers each, on the same database "
        "(benchmarks/concurrency.py); N client threads, each with its connection, looping "
        f"`GET {CANDIDATES}` then `PUT /allocations/{{new consumer}}` (`VCPU:1,MEMORY_MB:256` "
        "on a random VCPU provider), microversion 1.39. Requests/s: every request of the cell "
        "(GET and PUT together, then each) over its wall time (*seconds*: the cell's time "
        "plus the wait for the answers of requests sent before its end); latency over every "
        "request of the cell, ms; *loops*: fewest and most GET + PUT loops of one client.",
        "",
    ]
    headers = [
        "backend", "hosts", "clients", "server", "requests/s", "GET/s", "GET p50", "GET p99",
        "PUT/s", "PUT p50", "PUT p99", "seconds", "loops", "statuses", "load",
    ]  # fmt: skip
    ordered = sorted(records, key=lambda r: (r["backend"], r["hosts"], r["clients"], r["server"]))
    md += table(headers, map(_cells, ordered))
    return [*md, "", "**Targets**:", *verdicts(records)]


def _cells(r: dict[str, Any]) -> list[Any]:
    return [
        r["backend"], r["hosts"], r["clients"], r["server"], r["per_s"], r["get_per_s"],
        r["get_p50_ms"], r["get_p99_ms"], r["put_per_s"], r["put_p50_ms"], r["put_p99_ms"],
        r["wall_s"], "–".join(map(str, r["loops_min_max"])),
        ", ".join(f"{k}×{v}" for k, v in r["statuses"].items()),
        r["loadavg_1m"],
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from benchmarks.scenarios import vcpu_providers
    from rpquery.db import Database

    parser = argparse.ArgumentParser(prog="python -m benchmarks.concurrency", description=__doc__)
    parser.add_argument("--url", required=True, help="a loaded database")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", default=",".join(map(str, CLIENTS)))
    parser.add_argument("--hosts", type=int, default=0, help="the cloud's hosts (reported)")
    parser.add_argument("--no-placement", action="store_true")
    args = parser.parse_args(argv)
    db = Database(args.url)
    targets = vcpu_providers(db, limit=100_000)
    with db.connect() as conn:
        project, user = conn.exec_driver_sql(
            "SELECT p.external_id, u.external_id FROM projects p, users u "
            "ORDER BY p.id DESC, u.id DESC LIMIT 1"
        ).one()
    db.dispose()
    backend = args.url.split(":")[0].split("+")[0]
    records = run(
        args.url, backend, args.hosts, targets, project, user,
        seconds=args.seconds, clients=tuple(int(c) for c in args.clients.split(",")),
        placement=not args.no_placement,
    )  # fmt: skip
    print("\n".join(markdown(records)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
