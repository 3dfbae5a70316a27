"""Run OpenStack Placement in-process and time requests (runs in ``.venv-placement``).

Not imported by rpquery: ``benchmarks/placement.py`` runs this file with the Placement
virtualenv's interpreter. Placement is configured with ``auth_strategy = noauth2`` and
the given database URL, built with ``placement.deploy.loadapp`` and called as a WSGI
application through webob (no socket, no HTTP server), so the timings are Placement's
own work: routing, SQL, and JSON rendering.

    .venv-placement/bin/python benchmarks/placement_driver.py URL requests.json

``requests.json`` is a list of ``{"name", "path", "rounds"}``; the answer (stdout) maps
each name to ``{"status", "times", "body"}``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

MICROVERSION = "placement 1.39"


def make_app(url: str) -> Any:
    from oslo_config import cfg
    from oslo_policy import opts as policy_opts
    from placement import conf, db_api, deploy

    config = cfg.ConfigOpts()
    conf.register_opts(config)
    policy_opts.set_defaults(config, enforce_new_defaults=False, enforce_scope=False)
    config.set_override("connection", url, group="placement_database")
    config.set_override("auth_strategy", "noauth2", group="api")
    config([], default_config_files=[])
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


def main(url: str, requests_file: str) -> None:
    app = make_app(url)
    with open(requests_file) as fh:
        wanted = json.load(fh)
    out: dict[str, Any] = {}
    for item in wanted:
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
