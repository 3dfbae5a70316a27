"""Starting ``rpquery serve`` on a real socket, shared by the tests that need one
(``test_api_serve.py``, ``test_osc_placement.py``)."""

from __future__ import annotations

import socket
import sys


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_command(db_url: str, port: int, *, access_log: str, workers: int = 2) -> list[str]:
    """The command line of ``rpquery serve`` on ``127.0.0.1:port`` over ``db_url``."""
    return [
        sys.executable,
        "-m",
        "rpquery",
        "--db",
        db_url,
        "serve",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--access-log",
        access_log,
    ]
