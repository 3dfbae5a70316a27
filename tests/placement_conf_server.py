"""Serve OpenStack Placement from a ``placement.conf`` (runs in ``.venv-placement``).

The application is Placement's own WSGI entry point (``placement.wsgi.init_application``,
what ``placement.wsgi.api:application`` builds): it reads
``$OS_PLACEMENT_CONFIG_DIR/placement.conf`` and ``sys.argv`` through oslo.config, so the
command line is cleared first. Served by the standard library's threaded WSGI server;
prints ``ready`` once it listens, stops on SIGTERM.

    .venv-placement/bin/python tests/placement_conf_server.py CONFIG_DIR PORT
"""

from __future__ import annotations

import os
import signal
import sys
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        pass


class ThreadedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def main(config_dir: str, port: int) -> None:
    os.environ["OS_PLACEMENT_CONFIG_DIR"] = config_dir
    sys.argv = sys.argv[:1]
    from placement.wsgi import init_application

    server = make_server(
        "127.0.0.1", port, init_application(), server_class=ThreadedServer,
        handler_class=QuietHandler,
    )

    def stop(*_: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.path.pop(0)  # this directory: nothing here may shadow Placement's packages
    main(sys.argv[1], int(sys.argv[2]))
