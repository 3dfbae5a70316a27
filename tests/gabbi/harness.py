"""Databases and apps behind the gabbi run: one migrated database per backend for the
whole pytest run, emptied before each YAML file, and one WSGI app per YAML file.

gabbi asks for the app (``intercept``) while it builds the tests, before any fixture
runs; :class:`LazyApp` stands in and forwards every request to the app the running
fixture made (:func:`start_app`).
"""

from __future__ import annotations

import glob
import inspect
import os
import unittest
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from rpquery.db import Database
from rpquery.store import migrations
from tests import conftest

ROOT = Path(__file__).resolve().parents[2]
#: The backends the gabbi suite runs on: SQLite always, the servers when CI asks
#: (``RPQUERY_GABBI_BACKENDS=sqlite,postgresql,mysql``, set by ``.ci/run``).
GABBI_BACKENDS_ENV = "RPQUERY_GABBI_BACKENDS"

_databases: dict[str, Database] = {}
_dropped: list[Callable[[], None]] = []
_apps: dict[str, Callable[..., Any]] = {}


def gabbits_dir() -> Path | None:
    """Placement 16.0's own YAML files, from the package installed in ``.venv-placement``."""
    site = ROOT / ".venv-placement/lib/python3*/site-packages"
    found = sorted(glob.glob(str(site / "placement/tests/functional/gabbits")))
    return Path(found[-1]) if found else None


def backends() -> list[str]:
    wanted = os.environ.get(GABBI_BACKENDS_ENV, "sqlite")
    chosen = {w.strip() for w in wanted.split(",") if w.strip()}
    return [b for b in conftest.selected_backends() if b in chosen]


def _new_database(backend: str) -> Database:
    if backend == "sqlite":
        path = ROOT / ".pytest_cache" / f"gabbi_{os.getpid()}.db"
        path.parent.mkdir(exist_ok=True)
        path.unlink(missing_ok=True)
        _dropped.append(lambda: path.unlink(missing_ok=True))
        return Database(f"sqlite:///{path}")
    server = conftest._discover(backend)
    if server.admin_url is None:
        message = f"BACKEND MISSING — {server.reason}"
        if conftest.IN_CI:
            pytest.fail(message + " (CI=true: every backend is required)", pytrace=False)
        pytest.skip(message)
    url, name = conftest._create_database(server)
    _dropped.append(lambda: conftest._drop_database(server, name))
    return Database(url.render_as_string(hide_password=False))


def fresh_database(backend: str) -> Database:
    """The backend's database, migrated on first use, emptied (as new) every time."""
    if backend not in _databases:
        db = _new_database(backend)
        migrations.upgrade(db)
        _databases[backend] = db
    db = _databases[backend]
    conftest.empty_database(db)
    return db


def start_app(backend: str, db: Database, **options: Any) -> None:
    """A new app on ``db`` for the YAML file about to run. Options ``make_app`` does not
    take (e.g. CORS before it exists) are left out, and the tests needing them fail."""
    from rpquery.api import make_app

    accepted = inspect.signature(make_app).parameters
    _apps[backend] = make_app(db, **{k: v for k, v in options.items() if k in accepted})


def stop_app(backend: str) -> None:
    _apps.pop(backend, None)


class LazyApp:
    """The WSGI app gabbi intercepts: whatever app the running fixture started."""

    def __init__(self, backend: str) -> None:
        self.backend = backend

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        return _apps[self.backend](environ, start_response)


def intercept_for(backend: str) -> Callable[[], LazyApp]:
    return lambda: LazyApp(backend)


_suite: list[Any] = []  # the YAML file whose fixtures are running (at most one)


def enter_suite(suite: Any) -> None:
    """Start ``suite``'s fixtures (a YAML file's) unless they run already, stopping the
    previous file's first. gabbi's own pytest plugin does this by test-id patterns for
    every test of the session, and breaks on other tests' ids; this does it for ours."""
    if _suite and _suite[0] is suite:
        return
    leave_suite()
    suite.start(unittest.TestResult())
    _suite.append(suite)


def leave_suite() -> None:
    while _suite:
        _suite.pop().stop()


def close_all() -> None:
    """Dispose of the engines and drop the throw-away databases (end of the run)."""
    leave_suite()
    for db in _databases.values():
        db.dispose()
    _databases.clear()
    while _dropped:
        _dropped.pop()()
