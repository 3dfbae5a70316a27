"""Drops the gabbi run's databases at the end of the run (or of a pytest-xdist worker's);
the counts per backend and file kind are printed by ``tests/conftest.py``
(``tests/gabbi/counts.py``)."""

from __future__ import annotations

from tests.gabbi import harness


def pytest_sessionfinish(session, exitstatus):  # type: ignore[no-untyped-def]
    harness.close_all()
