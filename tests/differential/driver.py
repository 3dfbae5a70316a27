"""Placement's side of the differential test; runs in ``.venv-placement``.

Not imported by the tests: :mod:`tests.differential.placement` starts it with the
Placement virtualenv's interpreter, one process per cloud::

    .venv-placement/bin/python tests/differential/driver.py URL [OPTIONS_JSON]

Each line on stdin is a JSON list of requests ``{"method", "path", "body"?,
"version"?}`` (``version`` defaults to 1.39); each answer line on stdout is the list
of ``{"status", "body"}`` in order. Placement's in-process WSGI app (noauth2, the
given database URL) is built once, by ``benchmarks/placement_driver.py``;
``OPTIONS_JSON`` (``{"placement": {"max_allocation_candidates": 100}}``) sets options
over Placement's defaults.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

BENCH_DRIVER = Path(__file__).resolve().parents[2] / "benchmarks" / "placement_driver.py"


def _make_app(url: str, options: dict[str, dict[str, Any]] | None = None) -> Any:
    spec = importlib.util.spec_from_file_location("placement_driver", BENCH_DRIVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_app(url, options)


def _call(app: Any, item: dict[str, Any]) -> dict[str, Any]:
    import webob

    request = webob.Request.blank(
        item["path"],
        method=item.get("method", "GET"),
        headers={
            "X-Auth-Token": "admin",
            "OpenStack-API-Version": "placement " + item.get("version", "1.39"),
            "Accept": "application/json",
            "Content-Type": "application/json",
        },
    )
    if "body" in item:
        request.body = json.dumps(item["body"]).encode()
    response = request.get_response(app)
    try:
        body = json.loads(response.body) if response.body else None
    except ValueError:
        body = response.body.decode("utf-8", "replace")[:2000]
    return {"status": response.status_int, "body": body}


def main(url: str, options: dict[str, dict[str, Any]] | None = None) -> None:
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything Placement prints goes to stderr, not into the answers
    app = _make_app(url, options)
    answers.write("ready\n")
    answers.flush()
    for line in sys.stdin:
        batch = json.loads(line)
        answers.write(json.dumps([_call(app, item) for item in batch]) + "\n")
        answers.flush()


if __name__ == "__main__":
    sys.path.pop(0)  # this directory: nothing here may shadow Placement's packages
    main(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else None)
