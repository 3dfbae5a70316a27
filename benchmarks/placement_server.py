"""Serve OpenStack Placement on a loopback port (runs in ``.venv-placement``).

The app is ``placement_driver.make_app`` (noauth2, the given database); the server is
the standard library's ``wsgiref`` (``.venv-placement`` has no production WSGI server):
one request per connection (HTTP/1.0 ``connection: close``), one at a time, which is
how the HTTP view of ``make bench`` uses it (one client, requests in turn). Prints
``ready`` on stdout once it listens; stops on SIGTERM.

    .venv-placement/bin/python benchmarks/placement_server.py URL PORT
"""

from __future__ import annotations

import importlib.util
import signal
import sys
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        pass


def main(url: str, port: int) -> None:
    spec = importlib.util.spec_from_file_location(
        "placement_driver", Path(__file__).with_name("placement_driver.py")
    )
    assert spec is not None and spec.loader is not None
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    server = make_server("127.0.0.1", port, driver.make_app(url), handler_class=QuietHandler)

    def stop(*_: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.path.pop(0)  # this directory: nothing here may shadow Placement's packages
    main(sys.argv[1], int(sys.argv[2]))
