"""Recording mode of the fixture swap: what a client sends Placement, and what it answers.

Each ``PlacementFixture`` is one *case* (a fresh, empty Placement database): the test that
started it, named by its id, plus ``#2``... when one test starts several. Every request the
fixture's app serves is kept in memory as one JSON object and the case is appended to
``$RPQUERY_JUDGE_RECORD/<pid>.jsonl`` when the fixture is cleaned up, so a case's lines stay
together even with parallel workers. ``python -m tests.judges.traffic`` merges the files.

One line: ``case``, ``i`` (index in the case), the request as the WSGI app saw it (``method``,
``path`` = PATH_INFO, ``query`` = QUERY_STRING, the ``headers`` that matter, ``body`` whole)
and the answer (``status``, the answer's ``headers`` that matter, ``answer`` = body whole).
"""

from __future__ import annotations

import inspect
import io
import json
import os
import unittest
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

RECORD_ENV = "RPQUERY_JUDGE_RECORD"
#: Request headers that change an answer (the version, the body's type, the caller).
REQUEST_HEADERS = {
    "HTTP_OPENSTACK_API_VERSION": "openstack-api-version",
    "CONTENT_TYPE": "content-type",
    "HTTP_X_AUTH_TOKEN": "x-auth-token",
    "HTTP_ACCEPT": "accept",
}
#: Answer headers kept for the reader (the replay compares status and body).
ANSWER_HEADERS = ("content-type", "openstack-api-version", "location")

_seen: dict[str, int] = {}


def current_test_id() -> str:
    """The id of the unittest test case whose setUp is running (found on the stack)."""
    for frame in inspect.stack(context=0):
        candidate = frame.frame.f_locals.get("self")
        if isinstance(candidate, unittest.TestCase):
            return candidate.id()
    return "unknown"


def case_name() -> str:
    """The test id, suffixed ``#n`` for the n-th fixture a test starts (n > 1)."""
    test = current_test_id()
    _seen[test] = _seen.get(test, 0) + 1
    return test if _seen[test] == 1 else f"{test}#{_seen[test]}"


class Recorder:
    """WSGI middleware: serves through ``app`` and keeps each exchange of one case."""

    def __init__(self, app: Callable[..., Iterable[bytes]], case: str) -> None:
        self.app = app
        self.case = case
        self.lines: list[dict[str, Any]] = []

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        answer: dict[str, Any] = {}

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer["status"] = int(status.split()[0])
            answer["headers"] = {k.lower(): v for k, v in headers if k.lower() in ANSWER_HEADERS}
            return start_response(status, headers, exc_info)

        chunks = self.app(environ, start)
        try:
            content = b"".join(chunks)
        finally:
            getattr(chunks, "close", lambda: None)()
        self.lines.append(self._line(environ, body, answer, content))
        return [content]

    def _line(
        self, environ: dict[str, Any], body: bytes, answer: dict[str, Any], content: bytes
    ) -> dict[str, Any]:
        headers = {name: environ[key] for key, name in REQUEST_HEADERS.items() if environ.get(key)}
        return {
            "case": self.case,
            "i": len(self.lines),
            "method": environ["REQUEST_METHOD"],
            "path": environ.get("PATH_INFO", ""),
            "query": environ.get("QUERY_STRING", ""),
            "headers": headers,
            "body": body.decode("utf-8"),
            "status": answer["status"],
            "answer_headers": answer["headers"],
            "answer": content.decode("utf-8"),
        }

    def flush(self) -> None:
        """Append this case to the worker's file (nothing when no request was made)."""
        if not self.lines:
            return
        directory = Path(os.environ[RECORD_ENV])
        directory.mkdir(parents=True, exist_ok=True)
        with (directory / f"{os.getpid()}.jsonl").open("a", encoding="utf-8") as out:
            for line in self.lines:
                out.write(json.dumps(line, sort_keys=True) + "\n")


class RecordingInterceptors:
    """Stands in for the fixture module's ``wsgi_intercept.interceptor``: its
    ``RequestsInterceptor`` wraps the app in a :class:`Recorder` for a new case."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def RequestsInterceptor(self, app: Callable[[], Any], url: str) -> Any:  # noqa: N802 - the real name
        recorder = Recorder(app(), case_name())
        intercept = self.real.RequestsInterceptor(lambda: recorder, url=url)
        uninstall = intercept.uninstall_intercept

        def uninstall_and_flush() -> None:
            uninstall()
            recorder.flush()

        intercept.uninstall_intercept = uninstall_and_flush
        return intercept
