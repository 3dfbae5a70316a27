"""Serve a WSGI app built in another virtualenv on a loopback port (standard library only).

Run with the other virtualenv's interpreter (Keystone's, Placement's): this file
imports nothing outside the standard library, and its own directory is taken off
``sys.path`` so that nothing here shadows that virtualenv's packages. ``BUILDER`` names
the function that returns the app: ``package.module:function`` (imported) or
``path/to/file.py:function`` (loaded from that file); it is called with the ``ARG``\\s,
after ``--env NAME=VALUE`` settings are made and ``sys.argv`` is cleared (Keystone's and
Placement's entry points parse it through oslo.config). Served by the standard
library's ``wsgiref`` (one request per connection), one request at a time or, with
``--threaded``, a thread per connection. Prints ``ready`` once it listens; stops on
SIGTERM.

    PYTHON tests/loopback_wsgi.py PORT BUILDER [--threaded] [--env NAME=VALUE] [ARG ...]

Used for Keystone (``tests/keystone_cloud.py``), Placement from a ``placement.conf``
(``tests/test_keystone_dropin.py``) and Placement on a database URL
(``benchmarks/http_view.py``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import signal
import sys
from collections.abc import Callable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        pass


class ThreadedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def builder(spec: str) -> Callable[..., Any]:
    """The function ``spec`` names (``module:function`` or ``file.py:function``)."""
    where, _, name = spec.rpartition(":")
    if where.endswith(".py"):
        loaded = importlib.util.spec_from_file_location(os.path.basename(where)[:-3], where)
        assert loaded is not None and loaded.loader is not None
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    return getattr(module, name)  # type: ignore[no-any-return]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="loopback_wsgi.py")
    parser.add_argument("port", type=int)
    parser.add_argument("builder")
    parser.add_argument("--threaded", action="store_true")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    args, extra = parser.parse_known_args(argv)
    for setting in args.env:
        name, _, value = setting.partition("=")
        os.environ[name] = value
    sys.argv = sys.argv[:1]
    app = builder(args.builder)(*extra)
    server = make_server(
        "127.0.0.1",
        args.port,
        app,
        server_class=ThreadedServer if args.threaded else WSGIServer,
        handler_class=QuietHandler,
    )

    def stop(*_: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.path.pop(0)  # this directory: nothing here may shadow the app's packages
    main(sys.argv[1:])
