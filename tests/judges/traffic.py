"""The recorded traffic: merging a recording, loading it, replaying a case against an app.

A recording (:mod:`tests.judges.recorder`) leaves one ``<pid>.jsonl`` per test worker;
``python -m tests.judges.traffic DIR OUT.jsonl.gz`` merges them into one gzip file, cases
sorted by name and requests by index, so a re-recording diffs by case. The replay
(tests/judges/test_replay.py) reads those files with :func:`load`.
"""

from __future__ import annotations

import gzip
import io
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

TRAFFIC = Path(__file__).with_name("traffic")
#: Placement's fixture serves under this prefix (wsgi-intercept's SCRIPT_NAME).
SCRIPT_NAME = "/placement"

Exchange = dict[str, Any]


def merge(directory: Path, out: Path) -> tuple[int, int]:
    """Write every case of ``directory/*.jsonl`` into ``out`` (gzip): (cases, requests)."""
    cases: dict[str, list[Exchange]] = {}
    for part in sorted(directory.glob("*.jsonl")):
        for line in part.read_text(encoding="utf-8").splitlines():
            exchange = json.loads(line)
            cases.setdefault(exchange["case"], []).append(exchange)
    out.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same recording gives the same bytes
    with (
        gzip.GzipFile(out, "wb", compresslevel=9, mtime=0) as raw,
        io.TextIOWrapper(raw, encoding="utf-8") as text,
    ):
        for name in sorted(cases):
            for exchange in sorted(cases[name], key=lambda e: e["i"]):
                text.write(json.dumps(exchange, sort_keys=True) + "\n")
    return len(cases), sum(len(c) for c in cases.values())


def load(path: Path) -> dict[str, list[Exchange]]:
    """``{case: [exchange, ...]}`` in recorded order."""
    cases: dict[str, list[Exchange]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            exchange = json.loads(line)
            cases.setdefault(exchange["case"], []).append(exchange)
    return cases


def environ(exchange: Exchange) -> dict[str, Any]:
    """The WSGI environ of a recorded request, as wsgi-intercept built it for Placement."""
    body = exchange["body"].encode("utf-8")
    env: dict[str, Any] = {
        "REQUEST_METHOD": exchange["method"],
        "SCRIPT_NAME": SCRIPT_NAME,
        "PATH_INFO": exchange["path"],
        "QUERY_STRING": exchange["query"],
        "SERVER_NAME": "placement.example",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    headers = exchange["headers"]
    if "content-type" in headers:
        env["CONTENT_TYPE"] = headers["content-type"]
    for name in ("openstack-api-version", "x-auth-token", "accept"):
        if name in headers:
            env["HTTP_" + name.upper().replace("-", "_")] = headers[name]
    return env


def call(app: Callable[..., Iterable[bytes]], exchange: Exchange) -> tuple[int, str, str]:
    """(status, location header, body) of ``app``'s answer to a recorded request."""
    started: list[str] = []
    location: list[str] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        started.append(status)
        location.extend(value for name, value in headers if name.lower() == "location")

    chunks = app(environ(exchange), start_response)
    try:
        content = b"".join(chunks)
    finally:
        getattr(chunks, "close", lambda: None)()
    return int(started[0].split()[0]), "".join(location[:1]), content.decode("utf-8")


def main(argv: list[str]) -> int:
    directory, out = Path(argv[0]), Path(argv[1])
    cases, requests = merge(directory, out)
    print(f"{out}: {cases} cases, {requests} requests, {out.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
