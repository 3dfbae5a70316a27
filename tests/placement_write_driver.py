"""Send write (and read) requests to OpenStack Placement in-process, in ``.venv-placement``.

Not imported by the tests: ``tests/test_usage_summary.py`` runs this file with the
Placement virtualenv's interpreter. It reuses ``benchmarks/placement_driver.py``'s app
(noauth2, the given database URL) and adds methods and JSON bodies::

    .venv-placement/bin/python tests/placement_write_driver.py URL requests.json

``requests.json`` is a list of ``{"method", "path", "body"?}``; stdout is the list of
``{"status", "body"}`` answers, in order.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

DRIVER = Path(__file__).resolve().parent.parent / "benchmarks" / "placement_driver.py"


def _placement_driver() -> Any:
    spec = importlib.util.spec_from_file_location("placement_driver", DRIVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(url: str, requests_file: str) -> None:
    import webob

    driver = _placement_driver()
    app = driver.make_app(url)
    answers = []
    for item in json.loads(Path(requests_file).read_text()):
        request = webob.Request.blank(
            item["path"],
            method=item["method"],
            headers={
                "X-Auth-Token": "admin",
                "OpenStack-API-Version": driver.MICROVERSION,
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
        answers.append({"status": response.status_int, "body": body})
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    sys.path.pop(0)  # this directory: nothing here may shadow Placement's packages
    main(sys.argv[1], sys.argv[2])
