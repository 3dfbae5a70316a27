"""Placement 16.0's own gabbi suite, unchanged, against rpquery's WSGI app.

The YAML files are read from the ``openstack-placement`` package installed in
``.venv-placement`` (``make placement-venv``); their fixtures are ours
(:mod:`tests.gabbi.fixtures`). Each test is one pytest item, named
``gabbi-<backend>:<yaml file>_<test name>``; ``manifest.yaml`` lists the ones expected
to fail, with a reason each, as strict xfails. SQLite always runs; PostgreSQL and MariaDB
run when ``RPQUERY_GABBI_BACKENDS`` names them (``.ci/run`` does).

    RPQUERY_GABBI_BACKENDS=sqlite .venv/bin/python -m pytest tests/gabbi -q -k allocations
"""

from __future__ import annotations

import unittest

import pytest
from gabbi import driver, reporter

from tests.gabbi import fixtures, harness, manifest

GABBITS = harness.gabbits_dir()


def _cases(backend: str) -> list[tuple[str, object, object]]:
    """(id, callable, result) triples as gabbi's pytest plugin expects them: a start
    and a stop per YAML file around its tests."""
    loader = unittest.TestLoader()
    suite = driver.build_tests(
        str(GABBITS),
        loader,
        intercept=harness.intercept_for(backend),
        test_loader_name=f"gabbi-{backend}",
        fixture_module=fixtures.for_backend(backend),
    )
    result = reporter.PyTestResult()
    cases: list[tuple[str, object, object]] = []
    for file_suite in suite:
        tests = getattr(file_suite, "_tests", None)
        if not tests:
            continue
        first = f"gabbi-{backend}:{tests[0].__class__.__name__}"
        cases.append((f"start_{first}", file_suite.start, result))
        cases += [(f"gabbi-{backend}:{t.__class__.__name__}", t, result) for t in file_suite]
        cases.append((f"stop_{first}", file_suite.stop, None))
    return cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.function is not test_gabbi:
        return
    if GABBITS is None:  # as tests/test_placement_db_sync.py: .ci/run tolerates no PyPI
        message = "Placement's gabbi files are missing: run `make placement-venv`"
        params = [pytest.param(None, None, id="no-gabbits", marks=pytest.mark.skip(message))]
        metafunc.parametrize("test, result", params)
        return
    metafunc.config.pluginmanager.import_plugin("gabbi.pytester")
    entries = manifest.load()
    params = []
    for backend in harness.backends():
        for name, test, result in _cases(backend):
            reason = manifest.reason_for(entries, name.split(":", 1)[1], backend)
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            params.append(pytest.param(test, result, id=name, marks=marks))
    metafunc.parametrize("test, result", params)


def test_gabbi(test, result):  # type: ignore[no-untyped-def]
    if result is not None:
        test(result)
    elif test is not None:
        test()
