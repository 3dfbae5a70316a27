"""The HTTP view of ``make bench``: the same requests as a library call, through the WSGI
app in-process, and through ``rpquery serve`` over loopback, side by side with OpenStack
Placement on the same database.

For each request of :data:`SCENARIOS` (their paths are the read scenarios' Placement
twins in ``benchmarks/scenarios.py``), on each loaded cloud:

- **library**: the scenario's own call (``allocation_candidates(db, query)``, ...);
- **WSGI**: :func:`rpquery.api.make_app` on the same :class:`~rpquery.db.Database`,
  called in-process with a plain PEP 3333 environ (no socket), as
  ``benchmarks/placement_driver.py`` calls Placement; *WSGI overhead* = WSGI − library;
- **serve**: ``rpquery serve`` (2 workers × 4 threads: threaded workers keep the
  connection alive) over loopback, one client in this process reusing its connection
  (``tests/serving.HttpClient``), the body read but not decoded; *serve, new
  connection*: the same with a connection per request;
- **Placement WSGI**: Placement in-process in ``.venv-placement`` (the side-by-side's
  figure when it ran on this cloud, else the same driver);
- **Placement HTTP**: Placement's app under the standard library's ``wsgiref`` server in
  ``.venv-placement`` (``tests/loopback_wsgi.py`` with ``placement_driver.make_app``;
  it has no production server, and wsgiref answers one request per connection).

The rpquery columns are measured in turn within each round (library, WSGI, serve, serve
with a new connection), so a load change on a shared machine hits them alike. Ratios
are Placement / rpquery medians.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.config import Scale
from benchmarks.markdown import table
from benchmarks.scenarios import REGISTRY, Context, Prepared
from benchmarks.wsgi_environ import environ
from tests.serving import HttpClient, free_port, serving

#: The requests of the HTTP view: candidates with ``limit=10`` and ``limit=1000``, the
#: whole cloud, a provider list and a project's usages.
SCENARIOS = (
    "candidates_forbidden_trait_limit10",
    "candidates_limit1000",
    "candidates_forbidden_trait",
    "providers_required_forbidden",
    "usages_by_consumer_type",
    "candidates_sharing_disk",
    "candidates_sriov_isolate",
)
LIMIT10 = SCENARIOS[0]
MICROVERSION = "placement 1.39"
#: Rounds per request: as many as fit in the scale's time budget, within these bounds.
MAX_ROUNDS, PLACEMENT_MAX_ROUNDS = 200, 20
#: Issue 17's targets at 5,000 hosts.
TARGET_RATIO, TARGET_OVERHEAD_MS = 100.0, 2.0


# ---------------------------------------------------------------- in-process WSGI


def wsgi_environ(path: str) -> dict[str, Any]:
    """A GET of ``path`` as a WSGI server would pass it, with Placement's headers."""
    return environ("GET", path, MICROVERSION)


def wsgi_get(app: Callable[..., Any], path: str) -> tuple[int, bytes]:
    """Call ``app`` for ``GET path``; ``(status, body)``."""
    seen: list[int] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        seen.append(int(status[:3]))

    chunks = app(wsgi_environ(path), start_response)
    try:
        body = b"".join(chunks)
    finally:
        if hasattr(chunks, "close"):
            chunks.close()
    return seen[0], body


# ---------------------------------------------------------------- Placement over loopback


@contextmanager
def placement_server(url: str) -> Iterator[str]:
    """Placement under wsgiref in ``.venv-placement`` on a free port; its base URL."""
    from benchmarks.side_by_side import PYTHON

    port = free_port()
    script = Path(__file__).resolve().parent.parent / "tests" / "loopback_wsgi.py"
    builder = f"{Path(__file__).with_name('placement_driver.py')}:make_app"
    with tempfile.TemporaryFile("w+") as err:  # a pipe nobody reads could fill
        proc = subprocess.Popen(
            [str(PYTHON), str(script), str(port), builder, url],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        try:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                proc.wait(timeout=30)
                err.seek(0)
                raise RuntimeError(f"Placement server did not start: {err.read()[-800:]}")
            yield f"http://127.0.0.1:{port}"
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------- timing


def _rounds(once: float, budget: float, low: int, high: int) -> int:
    return int(min(high, max(low, budget / max(once, 1e-6))))


def _ms(times: list[float]) -> float:
    return round(statistics.median(times) * 1000, 3)


def _ratio(theirs: float | None, ours: float | None) -> float | None:
    if theirs is None or not ours:
        return None
    return round(theirs / ours, 1)


def _time_placement(client: HttpClient, path: str, scale: Scale) -> tuple[int, list[float]]:
    started = time.perf_counter()
    status, _ = client.send("GET", path)  # warm-up, sizes the rounds
    once = time.perf_counter() - started
    times = []
    for _ in range(_rounds(once, scale.seconds_per_scenario, scale.min_rounds, 20)):
        started = time.perf_counter()
        status, _ = client.send("GET", path)
        times.append(time.perf_counter() - started)
    return status, times


def _measure_rpquery(
    app: Any, served: HttpClient, fresh: HttpClient, p: Prepared, path: str, scale: Scale
) -> dict[str, Any]:
    assert p.answer is not None
    answer = p.answer
    steps: dict[str, Callable[[], Any]] = {
        "library": answer,
        "wsgi": lambda: wsgi_get(app, path),
        "serve": lambda: served.send("GET", path),
        "serve_new_connection": lambda: (fresh.send("GET", path), fresh.close()),
    }
    times: dict[str, list[float]] = {k: [] for k in steps}
    cpu: dict[str, list[float]] = {"library": [], "wsgi": []}
    started = time.perf_counter()
    for step in steps.values():  # warm-up
        step()
    once = time.perf_counter() - started
    statuses = {wsgi_get(app, path)[0], served.send("GET", path)[0]}
    for _ in range(_rounds(once, 2 * scale.seconds_per_scenario, scale.min_rounds, MAX_ROUNDS)):
        for name, step in steps.items():
            started, cpu_started = time.perf_counter(), time.process_time()
            step()
            times[name].append(time.perf_counter() - started)
            if name in cpu:
                cpu[name].append(time.process_time() - cpu_started)
    record: dict[str, Any] = {f"{k}_ms": _ms(v) for k, v in times.items()}
    record["rounds"] = len(times["library"])
    record["bytes"] = len(wsgi_get(app, path)[1])
    record["status"] = "ok" if statuses == {200} else f"HTTP {sorted(statuses)}"
    # The overhead per round (paired), then its median: wall clock, and CPU time of this
    # process (what the API layer costs without the waits for a core of a busy machine).
    for key, series in (("wsgi_overhead_ms", times), ("wsgi_overhead_cpu_ms", cpu)):
        paired = zip(series["wsgi"], series["library"], strict=True)
        record[key] = _ms([wsgi - lib for wsgi, lib in paired])
    return record


def run(
    ctx: Context,
    scale: Scale,
    append: Callable[[str, dict[str, Any]], None],
    *,
    placement: bool,
    earlier: list[dict[str, Any]],
) -> None:
    """Measure every request of :data:`SCENARIOS` on ``ctx``'s cloud; append one ``http``
    record each. ``earlier``: the run's ``placement`` records (their Placement WSGI
    medians are reused)."""
    from rpquery.api import make_app

    prepared = {name: REGISTRY[name].build(ctx) for name in SCENARIOS}
    paths = {name: p.placement.path for name, p in prepared.items() if p.placement}
    url = ctx.db.url.render_as_string(hide_password=False)
    app = make_app(ctx.db)
    records: dict[str, dict[str, Any]] = {}
    with serving(url, workers=2, threads=4) as server:
        served = HttpClient(server.base, version="1.39")
        fresh = HttpClient(server.base, version="1.39")
        for name, path in paths.items():
            record = {"scenario": name, "backend": ctx.backend, "hosts": ctx.cloud.hosts}
            records[name] = {**record, "path": path}
            records[name].update(_measure_rpquery(app, served, fresh, prepared[name], path, scale))
        served.close()
    for record in records.values():
        # connections are closed after 2 s idle (gunicorn's keep-alive time): after a
        # slow round of the other columns, the next request opens a new one
        record["serve_keep_alive"] = served.connections < served.requests / 2
        record["serve_connections"] = f"{served.connections} for {served.requests} requests"
    if placement:
        _placement_columns(ctx, url, paths, records, scale, earlier)
    for record in records.values():
        record["ratio_wsgi"] = _ratio(record.get("placement_wsgi_ms"), record["wsgi_ms"])
        record["ratio_http"] = _ratio(record.get("placement_http_ms"), record["serve_ms"])
        append("http", record)


def _placement_columns(
    ctx: Context,
    url: str,
    paths: dict[str, str],
    records: dict[str, dict[str, Any]],
    scale: Scale,
    earlier: list[dict[str, Any]],
) -> None:
    from benchmarks.side_by_side import run_driver

    known = {
        r["scenario"]: r["placement_ms"]
        for r in earlier
        if r.get("placement_ms") is not None
        and (r["backend"], r["hosts"]) == (ctx.backend, ctx.cloud.hosts)
    }
    missing = [n for n in paths if n not in known]
    if missing:
        asked = [{"name": n, "path": paths[n], "rounds": scale.min_rounds} for n in missing]
        for name, answer in run_driver(url, asked).items():
            if answer["status"] == 200:
                known[name] = _ms(answer["times"])
    for name in paths:
        records[name]["placement_wsgi_ms"] = known.get(name)
    with placement_server(url) as base:
        client = HttpClient(base, version="1.39")
        for name, path in paths.items():
            status, times = _time_placement(client, path, scale)
            records[name]["placement_http_ms"] = _ms(times) if status == 200 else None
            if status != 200:
                records[name]["placement_status"] = f"HTTP {status}"
        client.close()


# ---------------------------------------------------------------- report


def markdown(records: list[dict[str, Any]]) -> list[str]:
    """The report's section: one row per (request, backend, size), then the targets."""
    md = ["## HTTP view: library, WSGI, `rpquery serve`, Placement", ""]
    if not records:
        return [*md, "Not run in this report (`--scenarios http`, or every scenario)."]
    md += [
        "Median ms per request (benchmarks/http_view.py). *WSGI*: rpquery's app called "
        "in-process; *overhead* = WSGI − library, per round (wall clock, and CPU time of "
        "the bench process); *serve*: `rpquery serve` "
        "(2 workers × 4 threads) over loopback, connection kept alive (*new conn*: one "
        "connection per request); *Placement WSGI*: in-process in `.venv-placement`; "
        "*Placement HTTP*: under wsgiref over loopback (one connection per request). "
        "Ratios: Placement / rpquery (WSGI / WSGI, HTTP / serve).",
        "",
    ]
    headers = [
        "request", "backend", "hosts", "library", "WSGI", "overhead", "overhead CPU", "serve",
        "new conn",
        "Placement WSGI", "Placement HTTP", "ratio WSGI", "ratio HTTP", "bytes", "rounds",
    ]  # fmt: skip
    ordered = sorted(records, key=lambda r: (r["scenario"], r["backend"], r["hosts"]))
    md += table(headers, map(_cells, ordered))
    return [*md, "", *targets(records)]


def _cells(r: dict[str, Any]) -> list[Any]:
    return [
        r["scenario"], r["backend"], r["hosts"], r["library_ms"], r["wsgi_ms"],
        r["wsgi_overhead_ms"], r["wsgi_overhead_cpu_ms"], r["serve_ms"],
        r["serve_new_connection_ms"],
        r.get("placement_wsgi_ms", "–"), r.get("placement_http_ms", "–"),
        r.get("ratio_wsgi") or "–", r.get("ratio_http") or "–", r["bytes"], r["rounds"],
    ]  # fmt: skip


def targets(records: list[dict[str, Any]]) -> list[str]:
    """Issue 17's targets, checked on the largest cloud of each backend."""
    lines = [f"**Targets** (`{LIMIT10}`, largest cloud per backend):"]
    largest: dict[str, int] = {}
    for r in records:
        largest[r["backend"]] = max(largest.get(r["backend"], 0), r["hosts"])
    for r in records:
        if r["scenario"] != LIMIT10 or r["hosts"] != largest[r["backend"]]:
            continue
        overhead, cpu = r["wsgi_overhead_ms"], r["wsgi_overhead_cpu_ms"]
        verdict = "met" if max(overhead, cpu) <= TARGET_OVERHEAD_MS else "MISSED"
        line = (
            f"- {r['backend']} at {r['hosts']} hosts: WSGI adds {overhead} ms wall clock, "
            f"{cpu} ms CPU (≤ {TARGET_OVERHEAD_MS:g} ms: {verdict})"
        )
        if r.get("ratio_http") is not None:
            met = "met" if r["ratio_http"] >= TARGET_RATIO else "MISSED"
            line += f"; through HTTP {r['ratio_http']}× faster than Placement (≥ 100×: {met})"
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.http_view RECORDS.json``: print the section of a run."""
    path = Path((argv or sys.argv[1:])[0])
    print("\n".join(markdown(json.loads(path.read_text()).get("http", []))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
