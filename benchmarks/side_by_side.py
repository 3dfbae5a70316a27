"""Side by side with OpenStack Placement: same database, same questions, latency ratio.

``ensure_venv()`` installs ``openstack-placement`` (plus PyMySQL, psycopg, and psycopg 2
for Placement's own writes on PostgreSQL) from PyPI
into ``.venv-placement``; ``side_by_side()`` times each read scenario's Placement twin
with ``placement_driver.py`` in that interpreter, compares the answers with rpquery's
and appends one ``placement`` record per scenario to the run's records.
``db_sync()`` runs ``placement-manage db sync`` on a URL (used by the migration test).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.config import Scale
from benchmarks.scenarios import Context, Scenario

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-placement"
PYTHON = VENV / "bin" / "python"
DRIVER = Path(__file__).with_name("placement_driver.py")
PACKAGES = ("openstack-placement", "PyMySQL", "psycopg[binary]", "psycopg2-binary")
#: Pinned versions of Placement and everything it pulls in, so runs are reproducible.
CONSTRAINTS = Path(__file__).with_name("placement-constraints.txt")


def available() -> tuple[bool, str]:
    """Whether ``.venv-placement`` exists and can import Placement."""
    if not PYTHON.exists():
        return False, f"{VENV} does not exist (make bench-placement creates it)"
    done = subprocess.run(
        [str(PYTHON), "-c", "import placement.deploy, pymysql, psycopg, psycopg2"],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        return False, f"Placement does not import in {VENV}: {done.stderr.strip()[-300:]}"
    return True, ""


def ensure_venv() -> tuple[bool, str]:
    """Create ``.venv-placement`` and install Placement from PyPI unless it works already."""
    ok, why = available()
    if ok:
        return ok, why
    try:
        if not PYTHON.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(PYTHON), "-m", "pip", "install", "-q", "-c", str(CONSTRAINTS), *PACKAGES],
            check=True,
            capture_output=True,
            text=True,
        )
    except subprocess.CalledProcessError as error:
        return False, f"installing {', '.join(PACKAGES)} failed: {str(error.stderr)[-300:]}"
    return available()


def placement_url(ctx: Context) -> str:
    return ctx.db.url.render_as_string(hide_password=False)


def placement_write_url(ctx: Context) -> str:
    """The URL Placement writes through: on PostgreSQL with psycopg 2 (the pinned
    Placement's project insert reads ``cursor.lastrowid``, which psycopg 3 lacks)."""
    url = ctx.db.url
    if url.get_backend_name() == "postgresql":
        url = url.set(drivername="postgresql+psycopg2")
    return url.render_as_string(hide_password=False)


def run_driver(url: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(requests, fh)
    done = subprocess.run(
        [str(PYTHON), str(DRIVER), url, fh.name], capture_output=True, text=True, timeout=1800
    )
    Path(fh.name).unlink(missing_ok=True)
    if done.returncode:
        raise RuntimeError(f"Placement driver failed: {done.stderr.strip()[-800:]}")
    return dict(json.loads(done.stdout))


def db_sync(url: str) -> subprocess.CompletedProcess[str]:
    """``placement-manage db sync`` against ``url`` (a config file names the database)."""
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as fh:
        fh.write(f"[placement_database]\nconnection = {url}\n")
    try:
        return subprocess.run(
            [str(VENV / "bin" / "placement-manage"), "--config-file", fh.name, "db", "sync"],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        Path(fh.name).unlink(missing_ok=True)


def side_by_side(
    ctx: Context,
    scenarios: Sequence[Scenario],
    scale: Scale,
    append: Callable[[str, dict[str, Any]], None],
) -> None:
    """Time every runnable read scenario on Placement and compare answers."""
    prepared = {}
    for sc in scenarios:
        if sc.missing() is None:
            p = sc.build(ctx)
            if p.placement is not None and p.answer is not None:
                prepared[sc.name] = p
    rounds = scale.min_rounds  # Placement can be slow at scale: a few rounds suffice
    asked = [
        {"name": n, "path": p.placement.path, "rounds": rounds}  # type: ignore[union-attr]
        for n, p in prepared.items()
    ]
    theirs = run_driver(placement_url(ctx), asked)
    for name, p in prepared.items():
        append("placement", _compare(ctx, name, p, theirs[name], rounds))


#: (writers, claims per writer per round): the shapes of ``claim_1_writer`` and
#: ``claim_8_writers``.
CLAIM_SHAPES = ((1, 8), (8, 4))
#: Rounds per claim shape and side (after one warm-up round on Placement's side).
CLAIM_ROUNDS = 5


def claims_side_by_side(
    ctx: Context, append: Callable[[str, dict[str, Any]], None], rounds: int = CLAIM_ROUNDS
) -> None:
    """Claims/s of new consumers (``VCPU:1,MEMORY_MB:256`` on one of 400 VCPU providers)
    by one writer and by 8 writer threads: Placement's ``PUT /allocations/{consumer}``
    (in-process WSGI, microversion 1.39), rpquery's library write function, and
    rpquery's own WSGI app answering the same ``PUT``; one ``placement_writes`` record
    per shape. Every claim must be written (HTTP 204 on both APIs)."""
    from benchmarks.scenarios import _claims, claim_project, library_claim, vcpu_providers

    targets = vcpu_providers(ctx.db)
    project, user = claim_project(ctx)
    asked = [
        {
            "name": f"claims_{writers}_writers",
            "rounds": rounds,
            "claims": {
                "writers": writers,
                "per_writer": per_writer,
                "targets": targets,
                "project": project,
                "user": user,
            },
        }
        for writers, per_writer in CLAIM_SHAPES
    ]
    theirs = run_driver(placement_write_url(ctx), asked)
    wsgi = _WsgiClaims(ctx)
    for (writers, per_writer), item in zip(CLAIM_SHAPES, asked, strict=True):
        answer = theirs[item["name"]]
        claims = writers * per_writer
        record: dict[str, Any] = {
            "backend": ctx.backend,
            "hosts": ctx.cloud.hosts,
            "writers": writers,
            "claims_per_round": claims,
            "rounds": rounds,
        }
        for side, send in (("library", library_claim), ("wsgi", wsgi.send)):
            run = _claims(ctx, writers, per_writer, send).run
            run()  # warm-up, as on Placement's side
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                run()
                times.append(time.perf_counter() - started)
            record[f"rpquery_{side}_per_s"] = round(claims / statistics.median(times), 1)
        record["rpquery_wsgi_statuses"] = wsgi.seen()
        record["placement_statuses"] = answer["statuses"]
        if answer["times"]:
            # claims written (HTTP 204) per second: a refused claim does not count
            rates = [n / t for n, t in zip(answer["written"], answer["times"], strict=True)]
            record["placement_per_s"] = round(statistics.median(rates), 1)
            record["ratio"] = round(
                record["rpquery_library_per_s"] / max(record["placement_per_s"], 1e-3), 2
            )
        append("placement_writes", record)


class _WsgiClaims:
    """``PUT /allocations/{consumer}`` sent to rpquery's WSGI app (``rpquery.api``,
    noauth2 admin, microversion 1.39) in-process, as Placement is driven."""

    def __init__(self, ctx: Context) -> None:
        from rpquery.api import make_app

        self.app = make_app(ctx.db)
        self.lock = threading.Lock()
        self.statuses: dict[str, int] = {}

    def send(self, db: Any, consumer: str, rp: str, project: str, user: str) -> None:
        import falcon.testing

        body = {
            "allocations": {rp: {"resources": {"VCPU": 1, "MEMORY_MB": 256}}},
            "consumer_generation": None,
            "project_id": project,
            "user_id": user,
            "consumer_type": "INSTANCE",
        }
        environ = falcon.testing.create_environ(
            path=f"/allocations/{consumer}",
            method="PUT",
            headers={
                "X-Auth-Token": "admin",
                "OpenStack-API-Version": "placement 1.39",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
            body=json.dumps(body),
        )
        seen: list[str] = []
        b"".join(self.app(environ, lambda status, headers: seen.append(status)))
        code = seen[0].split()[0]
        with self.lock:
            self.statuses[code] = self.statuses.get(code, 0) + 1
        if code != "204":
            raise RuntimeError(f"rpquery's PUT /allocations answered {seen[0]}")

    def seen(self) -> dict[str, int]:
        with self.lock:
            out = dict(sorted(self.statuses.items()))
            self.statuses.clear()
            return out


def _compare(
    ctx: Context, name: str, p: Any, answer: dict[str, Any], rounds: int
) -> dict[str, Any]:
    ours_times = []
    result = None
    for _ in range(rounds):
        started = time.perf_counter()
        result = p.answer()
        ours_times.append(time.perf_counter() - started)
    record: dict[str, Any] = {
        "scenario": name,
        "backend": ctx.backend,
        "hosts": ctx.cloud.hosts,
        "rpquery_ms": round(statistics.median(ours_times) * 1000, 2),
    }
    if answer["status"] != 200:
        detail = json.dumps(answer["body"])[:300]
        return {**record, "match": f"Placement HTTP {answer['status']}: {detail}"}
    record["placement_ms"] = round(statistics.median(answer["times"]) * 1000, 2)
    record["ratio"] = round(record["placement_ms"] / max(record["rpquery_ms"], 1e-3), 2)
    mine = p.placement.normalize_ours(result)
    other = p.placement.normalize_theirs(answer["body"])
    if p.placement.exact:
        record["match"] = "same" if mine == other else _diff(mine, other)
    else:
        record["match"] = f"counts {_size(mine)} vs {_size(other)} (limit: random samples)"
    return record


def _size(value: Any) -> int:
    return len(value) if hasattr(value, "__len__") else 1


def _diff(mine: Any, other: Any) -> str:
    if isinstance(mine, set) and isinstance(other, set):
        only_ours, only_theirs = len(mine - other), len(other - mine)
        return f"DIFFERENT: {only_ours} only in rpquery, {only_theirs} only in Placement"
    return f"DIFFERENT: rpquery {str(mine)[:150]} vs Placement {str(other)[:150]}"


def main() -> int:
    """``python -m benchmarks.side_by_side``: make sure ``.venv-placement`` works."""
    ok, why = ensure_venv()
    print(f"Placement venv {VENV}: " + ("ready" if ok else f"unavailable: {why}"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
