"""``make soak-http``: ``rpquery serve`` under claimers, slow clients and worker kills,
then the invariants.

On each backend in turn (a scratch database with 20 hosts and the three groups of
:func:`benchmarks.contention.setup`): ``rpquery serve`` with ``--workers`` gevent
workers; ``--claimers`` threads claim (``PUT /allocations/{new}``) and free
(``DELETE``) over HTTP; ``--slow`` connections drip a byte every 0.3 s into a request
that never completes (reopened when the server drops them); every ``--kill-every``
seconds a random worker gets SIGKILL (gunicorn starts another). A probe asks
``/healthcheck`` every second. After ``--seconds``: every invariant of
:func:`benchmarks.invariants.check_invariants` (an answer lost with a killed worker
must have been written whole or not at all) and ``rpquery db check``. Prints the
counts per backend; exits 1 on any violation.

    python -m tests.reliability.soak_http --seconds 600 --backends sqlite,postgresql,mysql
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid as uuidlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from benchmarks.contention import ANTI_AFFINITY_LIMIT, PROJECT, TYPE, USER, Layout, setup
from benchmarks.invariants import Ack, check_invariants, read_state
from rpquery.db import Database
from tests.serving import HttpClient, Served, serving

ALLOCATION = {"VCPU": 1, "MEMORY_MB": 256}


@dataclass
class Tally:
    """What the threads saw; ``acked`` is what the server acknowledged per consumer,
    ``unsure`` the consumers whose last answer was lost (old and new allocations)."""

    calls: Counter[str] = field(default_factory=Counter)
    acked: dict[str, Ack] = field(default_factory=dict)
    unsure: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)
    health: list[float] = field(default_factory=list)
    kills: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, what: str) -> None:
        with self.lock:
            self.calls[what] += 1


def _claimer(base: str, layout: Layout, seed: int, stop: threading.Event, tally: Tally) -> None:
    rng = random.Random(seed)
    client = HttpClient(base, timeout=30)
    mine: list[str] = []
    while not stop.is_set():
        if mine and rng.random() < 0.3:
            consumer = mine.pop(rng.randrange(len(mine)))
            _call(client, tally, "delete", consumer, "DELETE", None, {})
            continue
        consumer = str(uuidlib.uuid4())
        allocations = {rng.choice(layout.hosts): {"resources": dict(ALLOCATION)}}
        body = {
            "allocations": allocations,
            "consumer_generation": None,
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_type": TYPE,
        }
        wanted = {rp: dict(ALLOCATION) for rp in allocations}
        if _call(client, tally, "claim", consumer, "PUT", body, wanted):
            mine.append(consumer)
    client.close()


def _call(
    client: HttpClient,
    tally: Tally,
    what: str,
    consumer: str,
    method: str,
    body: Any,
    wanted: dict[str, Any],
) -> bool:
    """One write; records its outcome and what it acknowledged. True when written.

    ``HttpClient`` sends a request again on a new connection when a kept-alive one
    breaks: after a worker killed mid-answer, the replay of a claim it wrote gets a 409
    and that of a delete a 404; such outcomes count as "written whole or not at all"."""
    old = tally.acked.get(consumer, Ack({}, None)).allocations
    try:
        status, _, _ = client.request(method, f"/allocations/{consumer}", body)
    except OSError:  # its worker was killed: written whole or not at all
        client.close()
        status = 0
    if status == 204 or (status == 404 and method == "DELETE"):
        # a 404: the client sent the DELETE again after its worker died answering it
        tally.count(f"{what}.ok" if status == 204 else f"{what}.replayed")
        with tally.lock:
            tally.acked[consumer] = Ack(wanted, None)
            tally.unsure.pop(consumer, None)
        return bool(wanted)
    outcome = "conflict" if status == 409 else "lost" if status in (0, 500, 502, 503) else "other"
    tally.count(f"{what}.{outcome}.{status}")
    if outcome != "other":  # a 409 may answer a replay of a claim its dead worker wrote
        with tally.lock:
            tally.unsure[consumer] = (old, wanted)
    return False


def _dripper(port: int, stop: threading.Event, tally: Tally) -> None:
    """One slow client, reconnecting whenever the server lets it go."""
    import socket

    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"PUT /allocations/x HTTP/1.1\r\nhost: s\r\n")
                sock.sendall(b"content-type: application/json\r\ncontent-length: 900\r\n\r\n")
                tally.count("slow.connected")
                while not stop.wait(0.3):
                    sock.sendall(b" ")
        except OSError:
            tally.count("slow.dropped")
            stop.wait(0.2)


def _killer(server: Served, every: float, stop: threading.Event, tally: Tally) -> None:
    rng = random.Random(7)
    while not stop.wait(every):
        workers = worker_pids(server.process.pid)
        if workers:
            os.kill(rng.choice(workers), signal.SIGKILL)
            tally.kills += 1


def _prober(base: str, stop: threading.Event, tally: Tally) -> None:
    client = HttpClient(base, timeout=30)
    while not stop.wait(1.0):
        started = time.monotonic()
        try:
            status = client.request("GET", "/healthcheck")[0]
        except OSError:
            client.close()
            status = 0
        tally.health.append(time.monotonic() - started)
        tally.count(f"healthcheck.{status}")
    client.close()


def worker_pids(master: int) -> list[int]:
    """The pids of ``master``'s child processes (gunicorn's workers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                if int(fh.read().rsplit(")", 1)[1].split()[1]) == master:
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


def settle(db: Database, tally: Tally) -> list[str]:
    """Each consumer whose last answer was lost holds its old or its new allocations,
    whole: that is then what counts as acknowledged. Returns the violations."""
    problems = []
    for consumer, (old, new) in tally.unsure.items():
        now = read_state(db, consumer)
        if now.allocations not in (old, new):
            problems.append(f"lost write {consumer}: stored {now.allocations}, not {old} or {new}")
        tally.acked[consumer] = now
    for consumer, ack in tally.acked.items():
        if ack.generation is None and ack.allocations:  # generation: as stored now
            tally.acked[consumer] = Ack(ack.allocations, read_state(db, consumer).generation)
    return problems


def run(db: Database, args: argparse.Namespace) -> dict[str, Any]:
    """The soak on ``db`` (migrated, empty); the per-backend summary."""
    layout = setup(db, 20)
    url = db.url.render_as_string(hide_password=False)
    db.dispose()
    tally, stop = Tally(), threading.Event()
    extra = ["--body-timeout", "5", "--read-timeout", "10"]
    with serving(url, workers=args.workers, extra=extra) as server:
        port = int(server.base.rsplit(":", 1)[1])
        threads = [
            threading.Thread(target=_claimer, args=(server.base, layout, i, stop, tally))
            for i in range(args.claimers)
        ]
        threads += [
            threading.Thread(target=_dripper, args=(port, stop, tally)) for _ in range(args.slow)
        ]
        threads += [
            threading.Thread(target=_killer, args=(server, args.kill_every, stop, tally)),
            threading.Thread(target=_prober, args=(server.base, stop, tally)),
        ]
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join(timeout=120)
    violations = settle(db, tally)
    found = check_invariants(db, tally.acked, layout.groups, ANTI_AFFINITY_LIMIT)
    check = subprocess.run(
        [sys.executable, "-m", "rpquery", "--db", url, "db", "check"],
        capture_output=True,
        text=True,
        check=False,
    )
    if check.returncode != 0:
        violations.append(f"rpquery db check exited {check.returncode}: {check.stdout[-500:]}")
    health = sorted(tally.health) or [0.0]
    return {
        "backend": db.dialect_name,
        "seconds": args.seconds,
        "workers": args.workers,
        "calls": dict(sorted(tally.calls.items())),
        "workers_killed": tally.kills,
        "healthcheck_max_s": round(health[-1], 3),
        "healthcheck_median_s": round(health[len(health) // 2], 4),
        "invariants_checked": found.checked,
        "violations": violations + found.violations,
    }


def main(argv: list[str] | None = None) -> int:
    from benchmarks.config import available_backends, scratch_database

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 600))
    )
    parser.add_argument("--backends", default="sqlite,postgresql,mysql")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--claimers", type=int, default=8)
    parser.add_argument("--slow", type=int, default=32)
    parser.add_argument("--kill-every", type=float, default=5.0)
    args = parser.parse_args(argv)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    urls, missing = available_backends(backends)
    summaries = []
    for backend in backends:
        if backend in urls:
            with scratch_database(backend, urls[backend]) as db:
                db.upgrade()
                summaries.append(run(db, args))
    for backend, reason in missing.items():
        print(f"BACKEND MISSING — {backend}: {reason}", file=sys.stderr)
    print(json.dumps(summaries, indent=1))
    return 1 if missing or any(s["violations"] for s in summaries) else 0


if __name__ == "__main__":
    raise SystemExit(main())
