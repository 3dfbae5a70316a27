"""What a benchmark run covers: scales, backends, and a throw-away database per cloud.

Servers are found like the test suite finds them: ``RPQUERY_BENCH_<BACKEND>_URL`` (an
admin URL), else ``RPQUERY_TEST_<BACKEND>_URL``, else a server listening on localhost.
Each cloud gets its own database, created before the load and dropped afterwards, so a
benchmark never touches anybody else's data.

>>> SCALES["medium"].sizes
(1000, 5000)
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from rpquery.db import Database

ALL_BACKENDS = ("sqlite", "postgresql", "mysql")
LOCAL_DEFAULTS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
    "mysql": "mysql+pymysql://root@127.0.0.1:3306/mysql?charset=utf8mb4",
}
CONFIG_ENV = "RPQUERY_BENCH_CONFIG"


@dataclass(frozen=True)
class Scale:
    """Cloud sizes (hosts) and how long to time each scenario at each size."""

    name: str
    sizes: tuple[int, ...]
    seconds_per_scenario: float
    max_rounds: int
    min_rounds: int = 3
    #: The scenarios run when none is named (``--scenarios``); empty: all of them.
    scenarios: tuple[str, ...] = ()


#: What the large scale times by default (issue 18): candidates at three answer sizes,
#: usages, claims, contention. The rest (whole-cloud SR-IOV, headroom, why...) takes minutes per
#: round at 100,000 hosts; name them with ``--scenarios`` to run them anyway.
LARGE_SCENARIOS = (
    "candidates_forbidden_trait_limit10",
    "candidates_limit1000",
    "candidates_forbidden_trait",
    "usages_by_consumer_type",
    "claim_1_writer",
    "claim_8_writers",
    "contention",
)

SCALES = {
    "tiny": Scale("tiny", (20,), 0.0, 1, min_rounds=1),
    "small": Scale("small", (200, 1000), 1.0, 20),
    "medium": Scale("medium", (1000, 5000), 2.0, 30),
    "large": Scale("large", (1000, 10_000, 100_000), 3.0, 30, scenarios=LARGE_SCENARIOS),
}


@dataclass(frozen=True)
class RunConfig:
    """Everything the pytest-benchmark module needs, passed to it as a JSON file."""

    scale: str
    backends: tuple[str, ...]
    out_dir: str
    urls: dict[str, str] = field(default_factory=dict)
    scenarios: tuple[str, ...] = ()
    placement: bool = False
    seed: int = 42
    #: Cloud sizes instead of the scale's (``--hosts``); the scale still sets the rounds.
    hosts: tuple[int, ...] = ()

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.hosts or SCALES[self.scale].sizes

    def save(self) -> Path:
        path = Path(self.out_dir) / "config.json"
        path.write_text(json.dumps(asdict(self), indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path) -> RunConfig:
        data = json.loads(Path(path).read_text())
        data["backends"] = tuple(data["backends"])
        data["scenarios"] = tuple(data["scenarios"])
        data["hosts"] = tuple(data.get("hosts", ()))
        return cls(**data)


def server_url(backend: str) -> str | None:
    """The admin URL of ``backend``'s server, or ``None`` if none answers."""
    for env in (f"RPQUERY_BENCH_{backend.upper()}_URL", f"RPQUERY_TEST_{backend.upper()}_URL"):
        if os.environ.get(env):
            url = os.environ[env]
            return url if answers(url) else None
    return LOCAL_DEFAULTS[backend] if answers(LOCAL_DEFAULTS[backend]) else None


def answers(url: str | sa.URL) -> bool:
    """Whether a database at ``url`` accepts a connection within 3 s (tests use it too)."""
    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        return True
    except Exception:
        return False
    finally:
        engine.dispose()


def standalone_setup(
    description: str, argv: list[str] | None, **extra: tuple[type, Any]
) -> tuple[argparse.Namespace, dict[str, str]]:
    """Arguments and backend URLs of a standalone overhead benchmark
    (``python -m benchmarks.scenarios_<feature>``): ``--hosts``, ``--backends``,
    ``--rounds`` plus ``extra`` options (``name=(type, default)``); backends that do not
    answer are reported and left out."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--hosts", type=int, default=5000)
    for name, (kind, default) in extra.items():
        parser.add_argument(f"--{name}", type=kind, default=default)
    parser.add_argument("--backends", default="sqlite,postgresql,mysql")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    urls, missing = available_backends(tuple(args.backends.split(",")))
    for backend, reason in missing.items():
        print(f"{backend}: skipped ({reason})")
    return args, urls


def available_backends(wanted: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """``(urls, missing)``: admin URLs of the wanted backends that answer (SQLite always),
    and a reason for each one that does not."""
    urls: dict[str, str] = {}
    missing: dict[str, str] = {}
    for backend in wanted:
        if backend == "sqlite":
            urls[backend] = "sqlite://"
            continue
        url = server_url(backend)
        if url is None:
            missing[backend] = (
                f"no {backend} server answers (set RPQUERY_BENCH_{backend.upper()}_URL)"
            )
        else:
            urls[backend] = url
    return urls, missing


@contextmanager
def scratch_database(backend: str, admin_url: str) -> Iterator[Database]:
    """A new, empty database on ``backend``; dropped (SQLite: deleted) on exit."""
    name = f"rpq_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="rpq_bench_") as tmp:
            db = Database(f"sqlite:///{Path(tmp) / (name + '.db')}")
            try:
                yield db
            finally:
                db.dispose()
        return
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    db = Database(make_url(admin_url).set(database=name), pool_size=10, max_overflow=10)
    try:
        yield db
    finally:
        db.dispose()
        with admin.connect() as conn:
            force = " WITH (FORCE)" if backend == "postgresql" else ""
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}{force}")
        admin.dispose()
