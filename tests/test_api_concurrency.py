"""Concurrency through HTTP: 16 client processes claim on a few shared providers through
``rpquery serve`` (a real socket, four gunicorn workers) on PostgreSQL and MariaDB,
until the providers are full.

Each claim is ``PUT /allocations/{consumer}`` with a 1.39 body (``consumer_generation``
null for a new consumer, project, user, ``consumer_type``). Every process first races
its partner process to create one shared consumer, then to move it (both sending
``consumer_generation`` 1), so consumer generation conflicts happen for certain; the
other claims race for the providers' generations and capacity. The
answers must be Placement's: 204, or 409 with ``placement.concurrent_update`` (a
generation conflict) or 409 ``placement.undefined_code`` "Unable to allocate inventory"
(no room left). Afterwards (:func:`benchmarks.invariants.check_invariants`, the
workload of ``benchmarks/contention.py`` without its schedulers): no provider is
over-allocated, by SQL and by ``GET /resource_providers/{uuid}/usages``; every 2xx claim
is there (``GET /allocations/{consumer}``) and nothing else is; the usage summaries are
exact (``rpquery db check``'s verify functions).
"""

from __future__ import annotations

import multiprocessing as mp
import random
import uuid as uuidlib
from collections import Counter
from typing import Any

from benchmarks.contention import (
    ANTI_AFFINITY_LIMIT,
    PROJECT,
    TYPE,
    USER,
    ProcessResult,
    child,
    setup,
)
from benchmarks.invariants import Ack, check_invariants
from rpquery.db import Database
from tests.serving import HttpClient, serving

CLIENTS = 16
WORKERS = 4
PROVIDERS = 3
#: What one claim takes from one provider (each provider has 32 VCPU, 32 GB).
CLAIM = {"VCPU": 1, "MEMORY_MB": 512}
VCPU_PER_PROVIDER = 32
#: Placement's answer to an allocation its provider cannot take.
NO_ROOM = "Unable to allocate inventory"


def _shared_consumer(index: int) -> str:
    """The consumer client ``index`` races its partner (``index ± CLIENTS/2``) for."""
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"rpquery-http-race-{index % (CLIENTS // 2)}"))


def _outcome(status: int, body: Any) -> str:
    """``ok``, ``conflict`` (409 placement.concurrent_update), ``full`` (409 capacity),
    or a description of anything else (a violation)."""
    if status == 204:
        return "ok"
    if status == 409:
        error = body["errors"][0]
        if error["status"] == 409 and error["code"] == "placement.concurrent_update":
            return "conflict"
        if error["code"] == "placement.undefined_code" and NO_ROOM in error["detail"]:
            return "full"
    return f"unexpected {status} {body}"


def _claimant(base: str, hosts: tuple[str, ...], index: int, start: Any, out: Any) -> None:
    """Race for the shared consumer, then claim until every provider has refused for
    lack of room; report what was acknowledged and every answer's kind. All processes
    pass ``start`` (a barrier) before each of the two phases."""
    rng = random.Random(index)
    http = HttpClient(base, version="1.39")
    result = ProcessResult()
    project = f"{PROJECT}-{index % 4}"

    def claim(consumer: str, host: str, generation: int | None = None) -> str:
        body = {
            "allocations": {host: {"resources": CLAIM}},
            "consumer_generation": generation,
            "project_id": project,
            "user_id": USER,
            "consumer_type": TYPE,
        }
        status, _, answer = http.request("PUT", f"/allocations/{consumer}", body)
        outcome = _outcome(status, answer)
        result.calls[outcome.split(" ")[0]] += 1
        if outcome == "ok":
            result.acked[consumer] = Ack({host: dict(CLAIM)}, (generation or 0) + 1)
        elif outcome.startswith("unexpected"):
            result.violations.append(f"PUT /allocations/{consumer}: {outcome}")
        return outcome

    shared = _shared_consumer(index)
    start.wait()
    if claim(shared, hosts[index % len(hosts)]) == "conflict":
        result.calls["create_conflict"] += 1
    start.wait()
    # Both move the shared consumer (generation 1 now) elsewhere: one may.
    if claim(shared, hosts[(index + 1) % len(hosts)], generation=1) == "conflict":
        result.calls["update_conflict"] += 1
    start.wait()
    open_hosts = list(hosts)
    while open_hosts:
        host = rng.choice(open_hosts)
        consumer = str(uuidlib.uuid4())
        while (outcome := claim(consumer, host)) == "conflict":
            pass  # a provider generation conflict: the claim never happened; again
        if outcome == "full":
            open_hosts.remove(host)  # claims only add: full stays full
        elif outcome != "ok":
            break
    http.close()
    out.put(result)


def test_sixteen_http_clients_claim_until_full(server_db: Database) -> None:
    layout = setup(server_db, PROVIDERS)
    url = server_db.url.render_as_string(hide_password=False)
    ctx = mp.get_context("fork")
    out, start = ctx.Queue(), ctx.Barrier(CLIENTS, timeout=120)
    with serving(url, workers=WORKERS) as server:
        procs = [
            ctx.Process(target=child, args=(_claimant, server.base, layout.hosts, i, start, out))
            for i in range(CLIENTS)
        ]
        for p in procs:
            p.start()
        results = [out.get(timeout=240) for _ in procs]
        for p in procs:
            p.join(timeout=30)
        http = HttpClient(server.base, version="1.39")
        calls: Counter[str] = Counter()
        acked: dict[str, Ack] = {}
        violations: list[str] = []
        for r in results:
            calls.update(r.calls)
            violations += r.violations
            for consumer, ack in r.acked.items():
                # the shared consumers: written by both partners, the later one counts
                if consumer in acked:
                    assert ack.generation != acked[consumer].generation, consumer
                if consumer not in acked or ack.generation > acked[consumer].generation:  # type: ignore[operator]
                    acked[consumer] = ack
        assert violations == []
        # Every 2xx claim is there, as it was acknowledged, owner and type included.
        for consumer, ack in acked.items():
            status, _, body = http.request("GET", f"/allocations/{consumer}")
            assert status == 200
            assert {rp: a["resources"] for rp, a in body["allocations"].items()} == (
                ack.allocations
            ), consumer
            assert body["consumer_generation"] == ack.generation
            assert body["consumer_type"] == TYPE and body["user_id"] == USER
        # Through the API, every provider is full and not one unit beyond.
        claimed: Counter[str] = Counter(rp for ack in acked.values() for rp in ack.allocations)
        for host in layout.hosts:
            status, _, body = http.request("GET", f"/resource_providers/{host}/usages")
            assert status == 200
            assert body["usages"] == {
                "VCPU": VCPU_PER_PROVIDER,
                "MEMORY_MB": VCPU_PER_PROVIDER * CLAIM["MEMORY_MB"],
            }, host
            assert claimed[host] == VCPU_PER_PROVIDER, host
        http.close()
    # By SQL: capacity, acknowledged state, no partial consumer, summaries exact.
    found = check_invariants(server_db, acked, layout.groups, ANTI_AFFINITY_LIMIT)
    assert found.violations == []
    assert found.checked >= len(acked) * 2
    # Each pair had one winner creating its shared consumer and one moving it.
    shared = {_shared_consumer(i) for i in range(CLIENTS)}
    assert {acked[c].generation for c in shared} == {2}
    assert calls["create_conflict"] == calls["update_conflict"] == CLIENTS // 2
    assert calls["conflict"] >= CLIENTS
    assert calls["full"] >= CLIENTS * PROVIDERS
    assert len(acked) == PROVIDERS * VCPU_PER_PROVIDER
    assert calls["ok"] == len(acked) + CLIENTS // 2
