"""Where a big allocation-candidate answer's time goes (issue 18, item 1): the *split*
scenario of ``make bench`` (``--scenarios split``), and standalone on existing databases.

For each request of :data:`REQUESTS` (the whole cloud and ``limit=1000``), on each
loaded cloud, every round times, one after the other:

- **library**: ``allocation_candidates(db, query)``, with its statements timed:
  *SQL wait* = wall − CPU time of this process inside the driver's ``execute`` and
  ``fetchall`` (waiting for the server), *driver CPU* = CPU time there (sending,
  receiving and decoding rows into Python tuples; on SQLite the engine runs in this
  process, so the SQL itself is in this column and its wait is ~0), *build* = the
  rest of the call (statement cache, search, result rows);
- **render**: ``to_placement()`` (the dicts), and **json.dumps** of them, as a client
  of the library would serialise them;
- **body**: ``to_placement_json()``, the bytes the API sends (one pass), when the
  library has it;
- **WSGI**: the same request through :func:`rpquery.api.make_app` in-process (parse,
  library, body, headers), what the HTTP view and the side-by-side measure.

Also recorded: candidates, summaries, the values the statements shipped (rows ×
columns) and the body size. Medians over the rounds; the load average before and after.

    python -m benchmarks.split --url sqlite:////tmp/cloud.db [--url ...] [--rounds 7]
    python -m benchmarks.split --backends sqlite,postgresql,mysql --hosts 5000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks.config import Scale
from benchmarks.markdown import table

#: The requests split: the whole cloud and nova's ``limit=1000`` (the HTTP view's rows).
REQUESTS = {
    "candidates_forbidden_trait": "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU",
    "candidates_limit1000": "resources=VCPU:1,MEMORY_MB:512&limit=1000",
}
PHASES = ("sql_wait", "driver_cpu", "build", "render", "json_dumps", "body", "wsgi")


class _Clock:
    """Statement time of one library call: ``execute`` (engine events) and ``fetchall``
    (the read path's ``driver_rows``, wrapped while measuring)."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.values = 0
        self._started: tuple[float, float] | None = None

    def reset(self) -> None:
        self.wall = self.cpu = 0.0
        self.values = 0

    def start(self, *_: Any) -> None:
        self._started = (time.perf_counter(), time.process_time())

    def stop(self, *_: Any) -> None:
        if self._started is not None:
            wall, cpu = self._started
            self.wall += time.perf_counter() - wall
            self.cpu += time.process_time() - cpu
            self._started = None


@contextmanager
def _instrumented(db: Any) -> Iterator[_Clock]:
    import sqlalchemy as sa

    from rpquery.read.candidates import _batches, _execute, _summaries
    from rpquery.store import runner

    # every module that calls driver_rows by its own name
    callers = (_batches, _execute, _summaries, runner)
    clock = _Clock()
    plain = runner.driver_rows

    def timed_rows(
        conn: Any, stmt: Any, params: dict[str, Any], *, prepare: bool = False
    ) -> list[Any]:
        # (sent through SQLAlchemy, never prepared: the split times the driver's decoding)
        result = conn.execute(stmt, params)  # its execute is timed by the events
        try:
            clock.start()
            rows = list(result.cursor.fetchall()) if result.returns_rows else []
            clock.stop()
        finally:
            result.close()
        if rows:
            clock.values += len(rows) * len(rows[0])
        return rows

    sa.event.listen(db.engine, "before_cursor_execute", clock.start)
    sa.event.listen(db.engine, "after_cursor_execute", clock.stop)
    for module in callers:
        module.driver_rows = timed_rows  # type: ignore[attr-defined]
    try:
        yield clock
    finally:
        for module in callers:
            module.driver_rows = plain  # type: ignore[attr-defined]
        sa.event.remove(db.engine, "before_cursor_execute", clock.start)
        sa.event.remove(db.engine, "after_cursor_execute", clock.stop)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def measure(db: Any, query: str, rounds: int) -> dict[str, Any]:
    """Medians in ms of every phase of ``query`` on ``db`` (see the module's doc)."""
    from benchmarks.http_view import wsgi_get
    from rpquery.api import make_app
    from rpquery.read.candidates import allocation_candidates

    app = make_app(db)
    path = f"/allocation_candidates?{query}"
    times: dict[str, list[float]] = {k: [] for k in ("library", *PHASES)}
    load_before = os.getloadavg()[0]
    extra: dict[str, Any] = {}
    with _instrumented(db) as clock:
        for i in range(rounds + 1):  # the first round warms the caches, not counted
            clock.reset()
            library, answer = _timed(lambda: allocation_candidates(db, query))
            wall, cpu, values = clock.wall, clock.cpu, clock.values
            render, body = _timed(answer.to_placement)
            dumps, _ = _timed(lambda body=body: json.dumps(body).encode())
            to_json = getattr(answer, "to_placement_json", None)
            bytes_s = _timed(to_json)[0] if to_json is not None else None
            status_wsgi = _timed(lambda: wsgi_get(app, path))
            if i == 0:
                status, sent = status_wsgi[1]
                extra = {
                    "candidates": len(body["allocation_requests"]),
                    "summaries": len(body["provider_summaries"]),
                    "values_shipped": values,
                    "body_bytes": len(sent),
                    "status": status,
                }
                continue
            times["library"].append(library)
            times["sql_wait"].append(max(wall - cpu, 0.0))
            times["driver_cpu"].append(cpu)
            times["build"].append(library - wall)
            times["render"].append(render)
            times["json_dumps"].append(dumps)
            if bytes_s is not None:
                times["body"].append(bytes_s)
            times["wsgi"].append(status_wsgi[0])
    out: dict[str, Any] = {
        f"{k}_ms": round(statistics.median(v) * 1000, 1) if v else None for k, v in times.items()
    }
    out.update(extra)
    out["rounds"] = rounds
    out["loadavg_1m"] = f"{load_before:.1f} → {os.getloadavg()[0]:.1f}"
    return out


def run(ctx: Any, scale: Scale, append: Callable[[str, dict[str, Any]], None]) -> None:
    """The split of every request of :data:`REQUESTS` on ``ctx``'s cloud; one ``split``
    record each."""
    rounds = max(scale.min_rounds, min(7, scale.max_rounds))
    for name, query in REQUESTS.items():
        record = {"scenario": name, "backend": ctx.backend, "hosts": ctx.cloud.hosts}
        append("split", {**record, **measure(ctx.db, query, rounds)})


def markdown(records: list[dict[str, Any]]) -> list[str]:
    """The report's section: one row per (request, backend, size)."""
    md = ["## Split of big candidate answers: SQL, driver, build, render, body", ""]
    if not records:
        return [*md, "Not run in this report (`--scenarios split`, or every scenario)."]
    md += [
        "Median ms per request (benchmarks/split.py). *library* = `allocation_candidates()`"
        " = *SQL wait* (wall − CPU inside the driver's execute and fetch) + *driver CPU* "
        "(decoding rows; on SQLite the engine too) + *build* (the rest: search, results); "
        "*render*: `to_placement()` dicts; *json.dumps*: of those dicts; *body*: "
        "`to_placement_json()` bytes (what the API sends); *WSGI*: the whole request "
        "through the app in-process. *values*: rows × columns the statements shipped.",
        "",
    ]
    headers = [
        "request", "backend", "hosts", "library", "SQL wait", "driver CPU", "build",
        "render", "json.dumps", "body", "WSGI", "candidates", "summaries", "values",
        "bytes", "load",
    ]  # fmt: skip
    ordered = sorted(records, key=lambda r: (r["scenario"], r["backend"], r["hosts"]))
    md += table(headers, map(_cells, ordered))
    return md


def _cells(r: dict[str, Any]) -> list[Any]:
    return [
        r["scenario"], r["backend"], r["hosts"], r["library_ms"], r["sql_wait_ms"],
        r["driver_cpu_ms"], r["build_ms"], r["render_ms"], r["json_dumps_ms"],
        r.get("body_ms"), r["wsgi_ms"], r.get("candidates"), r.get("summaries"),
        r.get("values_shipped"), r.get("body_bytes"), r.get("loadavg_1m"),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from rpquery.db import Database

    parser = argparse.ArgumentParser(prog="python -m benchmarks.split", description=__doc__)
    parser.add_argument("--url", action="append", default=[], help="a loaded database")
    parser.add_argument("--backends", default="", help="load scratch clouds on these")
    parser.add_argument("--hosts", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default="", help="comma-separated request names")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    wanted = {k: v for k, v in REQUESTS.items() if not args.only or k in args.only.split(",")}
    records: list[dict[str, Any]] = []

    def split_of(db: Any, backend: str, hosts: int | str) -> None:
        for name, query in wanted.items():
            record = {"scenario": name, "backend": backend, "hosts": hosts}
            records.append({**record, **measure(db, query, args.rounds)})
            print(json.dumps(records[-1]), file=sys.stderr)

    for url in args.url:
        db = Database(url)
        split_of(db, db.engine.dialect.name, args.hosts)
        db.dispose()
    if args.backends:
        from benchmarks.config import available_backends, scratch_database
        from rpquery.generator import CloudSpec, load_cloud

        urls, missing = available_backends(tuple(args.backends.split(",")))
        for reason in missing.values():
            print(f"skipped: {reason}", file=sys.stderr)
        for backend, admin in urls.items():
            with scratch_database(backend, admin) as db:
                load_cloud(db, CloudSpec(hosts=args.hosts))
                split_of(db, backend, args.hosts)
    print(json.dumps(records, indent=1) if args.json else "\n".join(markdown(records)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
