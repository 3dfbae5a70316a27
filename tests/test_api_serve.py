"""``rpquery serve`` on a real socket (gunicorn, two workers), on every backend:
requests over TCP, one JSON access log line per request, graceful stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.serving import HttpClient, free_port, serve_command, serving


def _request(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("x-auth-token", "admin")
    req.add_header("accept", "application/json")
    req.add_header("openstack-api-version", "placement latest")
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _wait_ready(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"rpquery serve exited early: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        try:
            with urllib.request.urlopen(base + "/healthcheck", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    pytest.fail("rpquery serve did not answer /healthcheck within 60 s")


def test_serve_on_a_real_socket(db, tmp_path) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    url = db.url.render_as_string(hide_password=False)
    log = tmp_path / "access.log"
    cmd = serve_command(url, port, access_log=str(log))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ)
    try:
        _wait_ready(base, proc)
        status, created = _request(base, "POST", "/resource_providers", {"name": "cn1"})
        assert status == 200 and created["name"] == "cn1"
        status, shown = _request(base, "GET", f"/resource_providers/{created['uuid']}")
        assert status == 200 and shown["uuid"] == created["uuid"]
        status, error = _request(base, "GET", "/resource_providers/" + "0" * 32)
        assert status == 404 and error["errors"][0]["status"] == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0, proc.stderr.read()  # type: ignore[union-attr]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    api_lines = [entry for entry in lines if entry["path"] != "/healthcheck"]
    assert [(e["method"], e["status"]) for e in api_lines] == [
        ("POST", 200),
        ("GET", 200),
        ("GET", 404),
    ]
    assert all(e["request_id"].startswith("req-") for e in api_lines)
    assert api_lines[0]["version"] == "placement 1.39"


@pytest.mark.parametrize("worker_class", ["sync", "gevent", "gthread"])
def test_workers_keep_connections_alive(sqlite_db, worker_class) -> None:  # type: ignore[no-untyped-def]
    """Sync workers close the connection after each answer; gevent workers (the
    default) and threaded ones (``--threads`` > 1) keep it open for the client's next
    request (for 2 s: on a loaded machine the client may still have to open another)."""
    url = sqlite_db.url.render_as_string(hide_password=False)
    answers = []
    extra = [] if worker_class == "gevent" else ["--worker-class", worker_class]
    threads = 4 if worker_class == "gthread" else 1
    with serving(url, workers=1, threads=threads, extra=extra) as server:
        client = HttpClient(server.base)
        for _ in range(3):
            status, headers, _ = client.request("GET", "/resource_providers")
            answers.append((status, headers.get("connection", "keep-alive").lower()))
        client.close()
    if worker_class == "sync":
        assert answers == [(200, "close")] * 3
        assert client.connections == 3
    else:
        assert answers == [(200, "keep-alive")] * 3


def test_gevent_worker_serves_a_waiting_client_before_the_next_pipelined_request(
    sqlite_db, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """One gevent worker, two kept-alive connections each sending two requests at once
    (pipelined): each gets a turn before either gets a second, a connection whose next
    request is already read going to the back of the line (without it, a client that
    sent again at once kept the worker while the others waited: a1 a2 b1 b2)."""
    url = sqlite_db.url.render_as_string(hide_password=False)
    log = tmp_path / "access.log"

    def request(name: str) -> bytes:
        return (
            f"GET /resource_providers?name={name} HTTP/1.1\r\nhost: localhost\r\n"
            "x-auth-token: admin\r\naccept: application/json\r\n\r\n"
        ).encode()

    def answers(sock: socket.socket, count: int) -> bytes:
        data = b""
        while data.count(b'"resource_providers"') < count:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
        return data

    with serving(url, workers=1, access_log=str(log)) as server:
        port = int(server.base.rsplit(":", 1)[1])
        a, b = (socket.create_connection(("127.0.0.1", port), timeout=30) for _ in "ab")
        with a, b:
            for sock, name in ((a, "a0"), (b, "b0")):  # both accepted, waiting in the worker
                sock.sendall(request(name))
                answers(sock, 1)
            # both bursts waiting when the worker next looks (each connection's
            # greenlet back in its read): it is stopped meanwhile
            time.sleep(0.2)
            (worker,) = _children(server.process.pid)
            os.kill(worker, signal.SIGSTOP)
            try:
                a.sendall(request("a1") + request("a2"))
                b.sendall(request("b1") + request("b2"))
                time.sleep(0.2)  # on loopback, in the worker's socket buffers
            finally:
                os.kill(worker, signal.SIGCONT)
            assert answers(a, 2).count(b"HTTP/1.1 200") == 2
            assert answers(b, 2).count(b"HTTP/1.1 200") == 2
    names = [
        json.loads(line)["query"].removeprefix("name=")
        for line in log.read_text().splitlines()
        if json.loads(line)["path"] == "/resource_providers"
    ]
    assert names[:2] == ["a0", "b0"]
    assert sorted(names[2:4]) == ["a1", "b1"], names  # a turn each, then the second


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(p) for p in fh.read().split()]
