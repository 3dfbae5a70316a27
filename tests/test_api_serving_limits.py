"""``rpquery serve`` under slow, huge and malformed requests, on a real loopback socket:
413 / 408 / 400 for bodies, 414 / 431 / 400 from gunicorn — all in Placement's JSON
error shape — slow clients that do not stall the server, and a bounded worker memory.

Figures (latency under slow clients, peak memory per worker) are printed with ``-s``;
docs/api.md ("Limits") says the limits and their defaults.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from typing import Any

import pytest

from rpquery.generator import CloudSpec, load_cloud
from tests.serving import HttpClient, Served, serving

#: Small limits so that the tests are quick; the defaults are checked by their own test.
SMALL = ["--max-body-size", "4096", "--body-timeout", "1", "--read-timeout", "2"]
HEAD = (
    "x-auth-token: admin\r\naccept: application/json\r\n"
    "openstack-api-version: placement 1.39\r\ncontent-type: application/json\r\n"
)


def head(method: str, path: str, framing: str) -> bytes:
    """A request's head with Placement's headers and ``framing`` (a length or chunked)."""
    return f"{method} {path} HTTP/1.1\r\nhost: t\r\n{HEAD}{framing}\r\n\r\n".encode()


def port_of(server: Served) -> int:
    return int(server.base.rsplit(":", 1)[1])


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP answer: ``(status, headers (lower-case), body)``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before an answer: {data[:200]!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(
        (k.strip().lower(), v.strip()) for k, v in (line.split(":", 1) for line in lines[1:])
    )
    size = int(headers.get("content-length", "0"))
    while len(body) < size:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body


def exchange(server: Served, data: bytes, *, timeout: float = 10) -> tuple[int, Any, float]:
    """Send ``data`` on a new connection; ``(status, JSON body, seconds to the answer)``."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=timeout) as sock:
        sock.sendall(data)
        status, headers, body = read_answer(sock)
    assert headers["content-type"] == "application/json", body[:300]
    return status, json.loads(body), time.monotonic() - started


def placement_error(answer: Any, status: int) -> str:
    """The detail of Placement's error shape, checked: one entry, the status, a title."""
    (entry,) = answer["errors"]
    assert entry["status"] == status and entry["title"] and entry["request_id"].startswith("req-")
    return str(entry["detail"])


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Served]:  # type: ignore[no-untyped-def]
    """One server with small limits for the module (a migrated SQLite file)."""
    from rpquery.db import Database
    from rpquery.store import migrations

    url = f"sqlite:///{tmp_path_factory.mktemp('limits') / 'limits.db'}"
    db = Database(url)
    migrations.upgrade(db)
    db.engine.dispose()
    with serving(url, workers=2, extra=SMALL) as served:
        yield served


def test_a_declared_body_over_the_limit_is_refused_at_once(server) -> None:  # type: ignore[no-untyped-def]
    request = head("PUT", "/allocations/x", f"content-length: {10**20}")
    status, answer, took = exchange(server, request)
    assert "Larger than max_request_body_size (4096)" in placement_error(answer, 413)
    assert took < 5  # nothing was read: not the body timeout, not the worker timeout


def test_a_chunked_body_over_the_limit_is_refused(server) -> None:  # type: ignore[no-untyped-def]
    chunk = b"1000\r\n" + b"[" * 4096 + b"\r\n"
    start = head("PUT", "/allocations/x", "transfer-encoding: chunked")
    status, answer, _ = exchange(server, start + chunk * 3 + b"0\r\n\r\n")
    assert "max_request_body_size" in placement_error(answer, 413)


def test_a_stalled_body_is_a_408_after_the_body_timeout(server) -> None:  # type: ignore[no-untyped-def]
    start = head("PUT", "/allocations/x", "content-length: 1000")
    status, answer, took = exchange(server, start + b'{"allocations": ')
    assert "not received within 1 seconds" in placement_error(answer, 408)
    assert 0.9 < took < 5


def test_a_body_cut_short_is_a_400(server) -> None:  # type: ignore[no-untyped-def]
    start = head("PUT", "/allocations/x", "content-length: 1000")
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        sock.sendall(start + b'{"allocations": ')
        sock.shutdown(socket.SHUT_WR)
        status, _, body = read_answer(sock)
    assert "ended after 16 of 1000 bytes" in placement_error(json.loads(body), 400)


def test_a_chunked_body_within_the_limit_reaches_the_app(server) -> None:  # type: ignore[no-untyped-def]
    body = json.dumps({"name": "CUSTOM_CHUNKED"}).encode()
    start = head("POST", "/resource_classes", "transfer-encoding: chunked")
    data = start + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        sock.sendall(data)
        status, _, _ = read_answer(sock)
    assert status == 201


@pytest.mark.parametrize(
    "request_text, status",
    [
        ("GET /resource_providers?name=" + "x" * 1_100_000 + " HTTP/1.1\r\n\r\n", 414),
        ("GET /resource_providers HTTP/1.1\r\nx-big: " + "y" * 9000 + "\r\n\r\n", 431),
        ("GET /resource_providers HTTP/1.1\r\n" + "x-h: 1\r\n" * 101 + "\r\n", 431),
        ("GET /resource_providers HTTP/1.1\r\ncontent-length: 1, 2\r\n\r\n", 400),
        ("GET /resource_providers HTTP/1.1\r\nbad header\r\n\r\n", 400),
        ("GET /resource_providers HTTP/9.9\r\n\r\n", 400),
    ],
    ids=["line-1.1MB", "field-9000", "fields-101", "two-lengths", "no-colon", "http-9.9"],
)
def test_errors_of_the_server_in_front_are_placement_json(server, request_text, status) -> None:  # type: ignore[no-untyped-def]
    got, answer, _ = exchange(server, request_text.encode("latin-1"))
    assert got == status
    assert len(placement_error(answer, status)) < 400  # never the whole request line


def test_a_legal_long_request_line_is_served(server) -> None:  # type: ignore[no-untyped-def]
    """1,000 granular groups (~25 KB), 10,000 ``in:`` aggregate uuids (~370 KB) and
    10,000 ``in:`` trait names (~270 KB) are within the default request line limit
    (1 MiB): answered by the app (the traits do not exist: its 400), not refused."""
    groups = "&".join(f"resources_G{i}=VCPU:1" for i in range(1000))
    aggregates = ",".join(str(uuid.UUID(int=i)) for i in range(10_000))
    traits = ",".join(f"CUSTOM_TRAIT_NUMBER_{i:05d}" for i in range(10_000))
    client = HttpClient(server.base)
    answers = [
        client.request("GET", f"/allocation_candidates?{query}")[::2]
        for query in (
            f"{groups}&group_policy=none",
            f"resources=VCPU:1&member_of=in:{aggregates}",
            f"resources=VCPU:1&required=in:{traits}",
        )
    ]
    client.close()
    empty = {"allocation_requests": [], "provider_summaries": {}}
    assert answers[:2] == [(200, empty), (200, empty)]
    assert answers[2][0] == 400 and "No such trait" in answers[2][1]["errors"][0]["detail"]


class SlowClients:
    """``count`` connections that send a request a few bytes at a time and never
    finish: half stop in the headers, half in the body."""

    def __init__(self, port: int, count: int) -> None:
        self.port, self.count = port, count
        self.socks: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._drip, daemon=True)

    def __enter__(self) -> SlowClients:
        for i in range(self.count):
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            if i % 2:
                start = head("PUT", "/allocations/x", "content-length: 4000")
                sock.sendall(start)
            else:
                sock.sendall(b"GET /resource_providers HTTP/1.1\r\n")
            self.socks.append(sock)
        self.thread.start()
        return self

    def _drip(self) -> None:
        while not self.stop.wait(0.3):
            for sock in self.socks:
                with suppress(OSError):
                    sock.send(b" ")

    def held(self) -> int:
        """How many of the connections the server still holds open."""
        alive = 0
        for sock in self.socks:
            sock.setblocking(False)
            try:
                alive += sock.recv(1, socket.MSG_PEEK) != b""
            except BlockingIOError:
                alive += 1
            except OSError:
                pass
        return alive

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        for sock in self.socks:
            sock.close()


def test_slow_clients_do_not_stall_the_server(db, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """64 clients dripping a byte every 0.3 s into their headers or body (the body
    times out after 3 s): /healthcheck and a ``limit=10`` candidates request still
    answer within 1 s, on every backend. (Before: sync workers, 2 of them — the whole
    API stopped answering for the 60 s worker timeout.)"""
    load_cloud(db, CloudSpec(hosts=50, seed=3))
    url = db.url.render_as_string(hide_password=False)
    extra = ["--body-timeout", "3", "--read-timeout", "5"]
    with serving(url, workers=2, extra=extra) as server, ExitStack() as stack:
        client = HttpClient(server.base)
        assert client.request("GET", "/healthcheck")[0] == 200
        slow = stack.enter_context(SlowClients(port_of(server), 64))
        time.sleep(1.0)
        held_before = slow.held()
        times: dict[str, list[float]] = {"healthcheck": [], "candidates": []}
        for _ in range(5):
            for name, path in (
                ("healthcheck", "/healthcheck"),
                ("candidates", "/allocation_candidates?resources=VCPU:1&limit=10"),
            ):
                started = time.monotonic()
                status, _, body = client.request("GET", path)
                times[name].append(time.monotonic() - started)
                assert status == 200, body
        print(f"\n{db.dialect_name}: {held_before} slow clients held; seconds: {times}")
        assert held_before == 64
        assert max(times["healthcheck"]) < 1 and max(times["candidates"]) < 1
        client.close()


def _worker_pids(server: Served) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == server.process.pid:
                pids.append(int(entry))
    return pids


def _peak_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


def test_peak_memory_per_worker_stays_bounded(sqlite_db) -> None:  # type: ignore[no-untyped-def]
    """The default limit (1 MiB) with the costliest JSON per byte (``[{},{},...]``),
    a body declared 10**20 bytes long and a 50 MB chunked body: every worker's peak
    resident memory stays under 200 MB."""
    url = sqlite_db.url.render_as_string(hide_password=False)
    with serving(url, workers=2) as server:
        limit = 1_048_576
        worst = b"[" + b"{}," * ((limit - 2) // 3 - 1) + b"{}]"
        assert len(worst) <= limit
        statuses = []
        for _ in range(4):  # both workers get some
            start = head("PUT", "/allocations/x", f"content-length: {len(worst)}")
            status, _, _ = exchange(server, start + worst, timeout=60)
            statuses.append(status)
        start = head("PUT", "/allocations/x", f"content-length: {10**20}")
        statuses.append(exchange(server, start)[0])
        start = head("PUT", "/allocations/x", "transfer-encoding: chunked")
        chunk = b"100000\r\n" + b"[" * 0x100000 + b"\r\n"
        with socket.create_connection(("127.0.0.1", port_of(server)), timeout=30) as sock:
            sock.sendall(start)
            try:
                for _ in range(50):
                    sock.sendall(chunk)
            except OSError:
                pass  # refused, and the server stopped reading
            statuses.append(read_answer(sock)[0])
        peaks = {pid: _peak_kb(pid) // 1024 for pid in _worker_pids(server)}
    print(f"\nstatuses {statuses}; peak MB per worker {peaks}")
    assert statuses[:4] == [400] * 4 and statuses[4:] == [413, 413]
    assert peaks and max(peaks.values()) < 200
