"""Run the differential test: clouds by seed, on each backend, both sides asked.

::

    python -m tests.differential.run --seeds 1-200 --backends sqlite,postgresql,mysql

(``make diff-placement SEEDS=1-200 BACKENDS=...`` runs this.) Per cloud: a fresh
database (schema by rpquery's ``db upgrade``, or by Placement's ``db sync`` and then
``db upgrade``: :func:`origin_of`), one Placement process that writes the cloud
through its REST API and then answers every request in one batch, rpquery's library
answers, the comparison, and a proof for every difference (:mod:`.proofs`). Exit
status 1 when any difference is unexplained; the first few are printed in full.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import side_by_side
from rpquery.db import Database
from rpquery.store import migrations
from tests.differential import report
from tests.differential.cloud import Cloud, make_cloud, write_requests
from tests.differential.compare import Answer, placement_answer, rpquery_answer
from tests.differential.placement import Placement
from tests.differential.proofs import Judge
from tests.differential.queries import Query, make_queries


@dataclass
class Difference:
    backend: str
    cloud: Cloud
    index: int
    query: Query
    ours: Answer
    theirs: Answer
    explained_by: str | None = None
    why: str = ""


@dataclass
class Stats:
    backend: str
    clouds: int = 0
    requests: int = 0
    same: int = 0
    explained: Counter[str] = field(default_factory=Counter)
    unexplained: list[Difference] = field(default_factory=list)
    examples: dict[str, Difference] = field(default_factory=dict)  # first of each bug
    errors: list[str] = field(default_factory=list)  # clouds the run could not finish

    def line(self) -> str:
        known = sum(self.explained.values())
        detail = ", ".join(f"{k}: {n}" for k, n in sorted(self.explained.items()))
        return (
            f"{self.backend}: {self.clouds} clouds, {self.requests} requests, "
            f"{self.same} same, {known} differences explained as Placement bugs"
            + (f" ({detail})" if detail else "")
            + f", {len(self.unexplained)} unexplained"
            + (f", {len(self.errors)} clouds failed to run" if self.errors else "")
        )


def parse_seeds(text: str) -> list[int]:
    """``"1-3,7"`` → ``[1, 2, 3, 7]``.

    >>> parse_seeds("1-3,7")
    [1, 2, 3, 7]
    """
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def run_cloud(db: Database, backend: str, seed: int, n: int, stats: Stats) -> None:
    """Write cloud ``seed`` through Placement on ``db``, ask ``n`` requests of both."""
    cloud = make_cloud(seed)
    queries = make_queries(cloud, seed, n)
    url = db.url.render_as_string(hide_password=False)
    with Placement(url) as placement:
        writes = write_requests(cloud)
        for item, answer in zip(writes, placement.ask(writes), strict=True):
            if answer["status"] >= 300:
                raise RuntimeError(f"seed {seed}: Placement refused {item}: {answer}")
        paths = [{"path": q.path} for q in queries]
        paths += [{"path": q.unlimited().path} for q in queries if q.limit is not None]
        raw = placement.ask(paths)
        unlimited = iter(raw[len(queries) :])
        judge = Judge(cloud, backend, db, placement)
        for i, (q, theirs) in enumerate(zip(queries, raw, strict=False)):
            stats.requests += 1
            ours, other = rpquery_answer(db, q), placement_answer(theirs)
            full = placement_answer(next(unlimited)) if q.limit is not None else None
            verdict = judge.verdict(q, ours, other, full)
            _count(stats, verdict, Difference(backend, cloud, i, q, ours, other))
    stats.clouds += 1


def _count(stats: Stats, verdict: tuple[str | None, str] | None, d: Difference) -> None:
    if verdict is None:
        stats.same += 1
        return
    d.explained_by, d.why = verdict
    d.why = d.why or ("proven" if d.explained_by else "differs")
    if d.explained_by:
        stats.explained[d.explained_by] += 1
        stats.examples.setdefault(d.explained_by, d)
    else:
        stats.unexplained.append(d)


# ---------------------------------------------------------------- databases


def origin_of(seed: int) -> str:
    """Who made the schema of cloud ``seed``'s database: rpquery (``db upgrade``) for
    odd seeds; Placement (``placement-manage db sync``, then rpquery's ``db upgrade``
    adds its own tables) for even ones — Placement must work on both."""
    return "placement" if seed % 2 == 0 else "rpquery"


def prepare(url: str, origin: str) -> Database:
    """Make the schema on the empty database at ``url`` (see :func:`origin_of`)."""
    if origin == "placement":
        synced = side_by_side.db_sync(url)
        if synced.returncode:
            raise RuntimeError(f"placement-manage db sync failed: {synced.stderr[-2000:]}")
    db = Database(url)
    migrations.upgrade(db)
    return db


@contextmanager
def fresh_database(backend: str, origin: str = "rpquery") -> Iterator[Database]:
    """A new database (schema by :func:`prepare`), dropped afterwards."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            db = prepare(f"sqlite:///{Path(tmp) / 'diff.db'}", origin)
            try:
                yield db
            finally:
                db.dispose()
        return
    from tests.conftest import Server, _create_database, _discover, _drop_database

    server: Server = _discover(backend)
    if server.admin_url is None:
        raise RuntimeError(f"BACKEND MISSING — {server.reason}")
    url, name = _create_database(server)
    try:
        db = prepare(url.render_as_string(hide_password=False), origin)
        try:
            yield db
        finally:
            db.dispose()
    finally:
        _drop_database(server, name)


def run_backend(
    backend: str, seeds: list[int], n: int, progress: Callable[[str], None] | None = None
) -> Stats:
    """Every seed's cloud on ``backend``, each in its own fresh database."""
    stats = Stats(backend)
    for seed in seeds:
        try:
            with fresh_database(backend, origin_of(seed)) as db:
                run_cloud(db, backend, seed, n, stats)
        except Exception as error:  # one broken cloud must not hide the others' results
            stats.errors.append(f"seed {seed}: {type(error).__name__}: {str(error)[-1500:]}")
        if progress is not None:
            progress(f"  {backend} seed {seed}: {stats.line()}")
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-20", help="e.g. 1-200 or 3,9,12-15")
    parser.add_argument("--backends", default="sqlite,postgresql,mysql")
    parser.add_argument("--requests", type=int, default=250, help="requests per cloud")
    parser.add_argument("--show", type=int, default=5, help="differences printed in full")
    parser.add_argument("--quiet", action="store_true", help="no line per cloud")
    parser.add_argument(
        "--examples", action="store_true", help="print the first difference of each known bug"
    )
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    failed = False
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        started = time.monotonic()
        stats = run_backend(backend, seeds, args.requests, None if args.quiet else print)
        print(f"{stats.line()} [{time.monotonic() - started:.0f} s]", flush=True)
        for d in stats.unexplained[: args.show]:
            print(report.describe(d), flush=True)
        for d in stats.examples.values() if args.examples else ():
            print(report.describe(d), flush=True)
        for error in stats.errors:
            print(f"--- CLOUD FAILED on {backend}: {error}", flush=True)
        failed = failed or bool(stats.unexplained or stats.errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
