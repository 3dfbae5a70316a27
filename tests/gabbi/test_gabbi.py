"""Placement 16.0's own gabbi suite, unchanged, against rpquery's WSGI app.

The YAML files are read from the ``openstack-placement`` package installed in
``.venv-placement`` (``make placement-venv``); their fixtures are ours
(:mod:`tests.gabbi.fixtures`). Each test is one pytest item, named
``gabbi-<backend>:<yaml file>_<test name>``; ``manifest.yaml`` lists the ones expected
to fail, with a reason each, as strict xfails. Under pytest-xdist (``make test``) a YAML
file's tests run in one worker, in order, as their fixtures need (tests/xdist_scopes.py).
SQLite always runs; PostgreSQL and MariaDB run when ``RPQUERY_GABBI_BACKENDS`` names them
(``.ci/run`` does).

    RPQUERY_GABBI_BACKENDS=sqlite .venv/bin/python -m pytest tests/gabbi -q -k allocations
"""

from __future__ import annotations

import os
import unittest

import pytest
from gabbi import driver, reporter

from tests.gabbi import fixtures, harness, manifest

GABBITS = harness.gabbits_dir()


def _cases(backend: str) -> list[tuple[str, object, object]]:
    """(id, gabbi test case, its file's suite) for every test of every YAML file."""
    loader = unittest.TestLoader()
    suite = driver.build_tests(
        str(GABBITS),
        loader,
        intercept=harness.intercept_for(backend),
        test_loader_name=f"gabbi-{backend}",
        fixture_module=fixtures.for_backend(backend),
    )
    cases: list[tuple[str, object, object]] = []
    for file_suite in suite:
        cases += [(f"gabbi-{backend}:{t.__class__.__name__}", t, file_suite) for t in file_suite]
    return cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.function is not test_gabbi:
        return
    if GABBITS is None:  # as tests/test_placement_db_sync.py: .ci/run tolerates no PyPI
        message = "Placement's gabbi files are missing: run `make placement-venv`"
        in_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
        marks = [] if in_ci else [pytest.mark.skip(message)]  # CI: a missing suite fails
        params = [pytest.param(None, message, id="no-gabbits", marks=marks)]
        metafunc.parametrize("case, suite", params)
        return
    entries = manifest.load()
    params = []
    for backend in harness.backends():
        for name, case, suite in _cases(backend):
            reason = manifest.reason_for(entries, name.split(":", 1)[1], backend)
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            params.append(pytest.param(case, suite, id=name, marks=marks))
    metafunc.parametrize("case, suite", params)


def test_gabbi(case, suite):  # type: ignore[no-untyped-def]
    """One gabbi test; its YAML file's fixtures start with the file's first test run
    (gabbi runs the earlier tests of the file first, as it always does)."""
    if case is None:
        pytest.fail(suite)
    harness.enter_suite(suite)
    case(reporter.PyTestResult())
