"""Run OpenStack Placement in-process and time requests (runs in ``.venv-placement``).

Not imported by rpquery: ``benchmarks/placement.py`` runs this file with the Placement
virtualenv's interpreter. Placement is configured with ``auth_strategy = noauth2`` and
the given database URL, built with ``placement.deploy.loadapp`` and called as a WSGI
application through webob (no socket, no HTTP server), so the timings are Placement's
own work: routing, SQL, and JSON rendering.

    .venv-placement/bin/python benchmarks/placement_driver.py URL requests.json

``requests.json`` is a list of ``{"name", "path", "rounds"}``; the answer (stdout) maps
each name to ``{"status", "times", "body"}``.

A claims item (``{"name", "claims": {...}, "rounds"}``, see :func:`claims`) times
``PUT /allocations/{consumer}`` of new consumers by one or more writer threads instead;
its answer is ``{"status", "times", "written", "statuses", "claims_per_round"}``
(``written``: claims answered 204 in each timed round).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

MICROVERSION = "placement 1.39"


def make_app(url: str, options: dict[str, dict[str, Any]] | None = None) -> Any:
    """Placement's app on ``url``; ``options`` maps a section to ``{option: value}``
    set over the defaults (``{"placement": {"max_allocation_candidates": 100}}``)."""
    from oslo_config import cfg
    from oslo_policy import opts as policy_opts
    from placement import conf, db_api, deploy

    config = cfg.ConfigOpts()
    conf.register_opts(config)
    policy_opts.set_defaults(config, enforce_new_defaults=False, enforce_scope=False)
    config.set_override("connection", url, group="placement_database")
    config.set_override("auth_strategy", "noauth2", group="api")
    config([], default_config_files=[])
    for group, values in (options or {}).items():
        for name, value in values.items():
            config.set_override(name, value, group=group)
    db_api.configure(config)
    return deploy.loadapp(config)


def call(app: Any, path: str) -> tuple[int, bytes]:
    import webob

    request = webob.Request.blank(
        path,
        headers={
            "X-Auth-Token": "admin",
            "OpenStack-API-Version": MICROVERSION,
            "Accept": "application/json",
        },
    )
    response = request.get_response(app)
    return response.status_int, response.body


def put(app: Any, path: str, body: dict[str, Any]) -> int:
    """One JSON ``PUT``; returns the HTTP status."""
    import webob

    request = webob.Request.blank(
        path,
        method="PUT",
        headers={
            "X-Auth-Token": "admin",
            "OpenStack-API-Version": MICROVERSION,
            "Accept": "application/json",
            "Content-Type": "application/json",
        },
    )
    request.body = json.dumps(body).encode()
    return int(request.get_response(app).status_int)


def claim_body(provider: str, project: str, user: str) -> dict[str, Any]:
    """A new INSTANCE consumer's allocations (1.38+ body): ``VCPU:1,MEMORY_MB:256`` on
    one provider, as the ``claim_*`` benchmark scenarios write them through rpquery."""
    return {
        "allocations": {provider: {"resources": {"VCPU": 1, "MEMORY_MB": 256}}},
        "consumer_generation": None,
        "project_id": project,
        "user_id": user,
        "consumer_type": "INSTANCE",
    }


def claims(app: Any, spec: dict[str, Any], rounds: int) -> dict[str, Any]:
    """Time ``rounds`` rounds (after one untimed warm-up round) of ``writers`` threads
    each sending ``per_writer`` claims (``PUT /allocations/{new uuid}``) on providers
    drawn from ``targets`` (seeded); one writer runs in this thread. Every status seen
    is counted (Placement answers 204 for a claim written)."""
    import random
    import threading
    import uuid
    from collections import Counter

    rng = random.Random(spec.get("seed", 7))
    writers, per_writer = int(spec["writers"]), int(spec["per_writer"])
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def claim_some(batch: list[tuple[str, dict[str, Any]]]) -> None:
        for consumer, body in batch:
            status = put(app, f"/allocations/{consumer}", body)
            with lock:
                statuses[status] += 1

    times, written = [], []
    for round_no in range(rounds + 1):
        batches = [
            [
                (
                    str(uuid.uuid4()),
                    claim_body(rng.choice(spec["targets"]), spec["project"], spec["user"]),
                )
                for _ in range(per_writer)
            ]
            for _ in range(writers)
        ]
        before = statuses[204]
        started = time.perf_counter()
        if writers == 1:
            claim_some(batches[0])
        else:
            threads = [threading.Thread(target=claim_some, args=(b,)) for b in batches]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if round_no:  # round 0 warms up
            times.append(time.perf_counter() - started)
            written.append(statuses[204] - before)
    return {
        "status": 204 if set(statuses) == {204} else 0,
        "times": times,
        "written": written,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "claims_per_round": writers * per_writer,
    }


def main(url: str, requests_file: str) -> None:
    app = make_app(url)
    with open(requests_file) as fh:
        wanted = json.load(fh)
    out: dict[str, Any] = {}
    for item in wanted:
        if "claims" in item:
            out[item["name"]] = claims(app, item["claims"], item["rounds"])
            continue
        status, body = call(app, item["path"])  # warm-up
        times = []
        for _ in range(item["rounds"]):
            started = time.perf_counter()
            status, body = call(app, item["path"])
            times.append(time.perf_counter() - started)
        try:
            decoded = json.loads(body)
        except ValueError:
            decoded = {"raw": body.decode("utf-8", "replace")[:2000]}
        out[item["name"]] = {"status": status, "times": times, "body": decoded}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    sys.path.pop(0)  # this directory: nothing here may shadow Placement's packages
    main(sys.argv[1], sys.argv[2])
