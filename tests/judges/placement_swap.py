"""The fixture swap: nova's and osc-placement's functional tests served by rpquery.

Both suites start Placement in-process through one fixture,
``placement.tests.functional.fixtures.placement.PlacementFixture`` (nova subclasses it).
A ``.pth`` file in ``.venv-nova`` (``make nova-venv``) imports this module at start-up and
calls :func:`arm`; nothing in nova or Placement is edited. ``RPQUERY_JUDGE`` picks what the
fixture serves:

- ``placement`` (or unset): Placement 16.0 itself, the reference run;
- ``rpquery``: ``rpquery.api.app.make_app(db, auth="noauth2")`` on a fresh SQLite database
  per fixture, at the same kind of wsgi-intercept URL with the same ``admin`` token;
- ``record``: Placement itself, every request and answer appended to
  ``$RPQUERY_JUDGE_RECORD/<pid>.jsonl`` (:mod:`tests.judges.recorder`), one case per fixture.

The patch is applied when the fixture module is first imported (an import hook), not at
start-up: importing Placement before nova's eventlet monkey-patching would change nova's runs.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import uuid
from collections.abc import Sequence
from types import ModuleType
from typing import Any

TARGET = "placement.tests.functional.fixtures.placement"
MODE_ENV = "RPQUERY_JUDGE"
MODES = ("placement", "rpquery", "record")


def mode() -> str:
    """The fixture's mode from ``RPQUERY_JUDGE``; an unknown one stops the run."""
    chosen = os.environ.get(MODE_ENV, "placement") or "placement"
    if chosen not in MODES:
        raise SystemExit(f"{MODE_ENV}={chosen!r}: use one of {', '.join(MODES)}")
    return chosen


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds the fixture module through the other finders and patches it once loaded."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        load = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            load(module)
            patch(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def arm() -> None:
    """Install the import hook unless the reference Placement is asked for."""
    if mode() != "placement" and not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())


def patch(module: Any) -> None:
    """Replace the fixture's ``setUp`` (rpquery) or its interceptor (record)."""
    chosen = mode()
    original = module.PlacementFixture.setUp
    if chosen == "rpquery":

        def setup(fixture: Any) -> None:
            _serve_rpquery(fixture, original, module.interceptor)

        module.PlacementFixture.setUp = setup
    elif chosen == "record":
        from tests.judges import recorder

        module.interceptor = recorder.RecordingInterceptors(module.interceptor)


def _serve_rpquery(fixture: Any, original: Any, interceptor: Any) -> None:
    """Placement's configuration (tests set options on ``conf_fixture``) without its
    database and app, then rpquery on a fresh SQLite file behind the same intercept."""
    import fixtures

    from rpquery.api.app import make_app
    from rpquery.db import Database
    from rpquery.store import migrations

    configure = fixture._configure_placement

    def configure_without_database(conf_fixture: Any) -> None:
        configure(conf_fixture)
        # Placement's configuration requires a database URL; its database is never opened.
        conf_fixture.config(group="placement_database", connection="sqlite://")

    fixture._configure_placement = configure_without_database
    fixture.db, fixture.use_intercept = False, False
    original(fixture)
    directory = fixture.useFixture(fixtures.TempDir()).path
    database = Database(f"sqlite:///{directory}/placement.db")
    migrations.upgrade(database)
    fixture.addCleanup(database.dispose)
    app = make_app(database, auth="noauth2")
    fixture.endpoint = f"http://{uuid.uuid4()}/placement"
    intercept = interceptor.RequestsInterceptor(lambda: app, url=fixture.endpoint)
    intercept.install_intercept()
    fixture.addCleanup(intercept.uninstall_intercept)
