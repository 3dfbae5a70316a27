"""Starting ``rpquery serve`` on a real socket and talking to it over HTTP, shared by the
tests that need one (``test_api_serve.py``, ``test_osc_placement.py``,
``test_api_concurrency.py``) and the HTTP view of ``make bench``
(``benchmarks/http_view.py``)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_command(
    db_url: str,
    port: int,
    *,
    access_log: str,
    workers: int = 2,
    threads: int = 1,
    extra: Sequence[str] = (),
) -> list[str]:
    """The command line of ``rpquery serve`` on ``127.0.0.1:port`` over ``db_url``."""
    return [
        sys.executable,
        "-m",
        "rpquery",
        "--db",
        db_url,
        "serve",
        "--auth",
        "noauth2",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        *(["--threads", str(threads)] if threads > 1 else []),
        "--access-log",
        access_log,
        *extra,
    ]


class HttpClient:
    """A small HTTP/1.1 client for one server: one connection kept alive while the
    server keeps it (gunicorn's threaded workers do, its sync workers close after each
    response) and opened again when it does not; Placement's headers on every request
    (``x-auth-token: admin``, JSON, ``OpenStack-API-Version: placement <version>``)."""

    def __init__(self, base: str, *, version: str = "latest", timeout: float = 30) -> None:
        host, port = base.removeprefix("http://").rstrip("/").split(":")
        self.host, self.port, self.timeout = host, int(port), timeout
        self.version = version
        self.conn: http.client.HTTPConnection | None = None
        #: Connections opened and requests sent so far (1 connection when every request
        #: reused the first).
        self.connections = self.requests = 0
        #: The last answer's headers (lower-case names).
        self.headers: dict[str, str] = {}

    def send(self, method: str, path: str, raw: bytes | None = None) -> tuple[int, bytes]:
        """One request; ``(status, body bytes)``, nothing decoded (what the HTTP view of
        ``make bench`` times)."""
        headers = {
            "x-auth-token": "admin",
            "accept": "application/json",
            "openstack-api-version": f"placement {self.version}",
        }
        if raw is not None:
            headers["content-type"] = "application/json"
        reused = self.conn is not None
        try:
            return self._send(method, path, raw, headers)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # A kept-alive connection the server closed meanwhile (gunicorn closes one
            # idle for its keep-alive time, 2 s): again on a new one, as HTTP clients do.
            self.close()
            if not reused:
                raise
            return self._send(method, path, raw, headers)

    def _send(
        self, method: str, path: str, raw: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self.connections += 1
        self.requests += 1
        self.conn.request(method, path, body=raw, headers=headers)
        resp = self.conn.getresponse()
        data = resp.read()
        self.headers = {name.lower(): value for name, value in resp.getheaders()}
        if resp.will_close:
            self.close()
        return resp.status, data

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], Any]:
        """``(status, headers (lower-case names), body)``: ``body`` is sent as JSON; the
        answer's body decoded when it is JSON, else its text (``None`` when empty)."""
        raw = json.dumps(body).encode() if body is not None else None
        status, data = self.send(method, path, raw)
        if not data:
            return status, self.headers, None
        if self.headers.get("content-type", "").startswith("application/json"):
            return status, self.headers, json.loads(data)
        return status, self.headers, data.decode("utf-8", "replace")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@dataclass
class Served:
    """A running ``rpquery serve``: its base URL and process."""

    base: str
    process: subprocess.Popen[bytes]
    stderr_path: str

    def stderr(self) -> str:
        with open(self.stderr_path, errors="replace") as fh:
            return fh.read()


def wait_ready(base: str, proc: subprocess.Popen[bytes], *, timeout: float = 60) -> None:
    """Wait until ``GET /healthcheck`` answers 200; raises if the server exits first."""
    deadline = time.monotonic() + timeout
    client = HttpClient(base, timeout=2)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"rpquery serve exited early with {proc.returncode}")
        try:
            if client.request("GET", "/healthcheck")[0] == 200:
                return
        except OSError:
            time.sleep(0.2)
        finally:
            client.close()
    raise RuntimeError(f"rpquery serve did not answer /healthcheck within {timeout:.0f} s")


@contextmanager
def serving(
    db_url: str,
    *,
    workers: int = 2,
    threads: int = 1,
    access_log: str = "off",
    extra: Sequence[str] = (),
) -> Iterator[Served]:
    """``rpquery serve`` over ``db_url`` on a free loopback port, stopped with SIGTERM
    on exit (its stderr goes to a temporary file: a pipe nobody reads could fill);
    ``extra``: more ``serve`` options."""
    port = free_port()
    with tempfile.NamedTemporaryFile(
        "wb", prefix="rpq-serve-", suffix=".log", delete=False
    ) as err:
        proc = subprocess.Popen(
            serve_command(
                db_url,
                port,
                access_log=access_log,
                workers=workers,
                threads=threads,
                extra=extra,
            ),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=os.environ,
        )
    served = Served(f"http://127.0.0.1:{port}", proc, err.name)
    try:
        try:
            wait_ready(served.base, proc)
        except RuntimeError as error:
            raise RuntimeError(f"{error}: {served.stderr()[-1500:]}") from None
        yield served
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.unlink(err.name)
