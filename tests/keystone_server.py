"""Serve a real Keystone on a loopback port (runs in ``.venv-keystone``).

Keystone's WSGI app parses ``sys.argv`` through oslo.config when it is built, so it
cannot be handed to a server whose own options are on the command line: this wrapper
clears ``sys.argv``, points Keystone at its configuration directory
(``OS_KEYSTONE_CONFIG_DIR``, which holds ``keystone.conf``), builds the public
application and serves it with the standard library's threaded WSGI server. Prints
``ready`` once it listens; stops on SIGTERM.

    .venv-keystone/bin/python tests/keystone_server.py CONFIG_DIR PORT
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
    os.environ["OS_KEYSTONE_CONFIG_DIR"] = config_dir
    sys.argv = sys.argv[:1]
    from keystone.server import wsgi

    app = wsgi.initialize_public_application()
    server = make_server(
        "127.0.0.1", port, app, server_class=ThreadedServer, handler_class=QuietHandler
    )

    def stop(*_: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.path.pop(0)  # this directory: nothing here may shadow Keystone's packages
    main(sys.argv[1], int(sys.argv[2]))
