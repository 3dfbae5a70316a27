"""Drops the gabbi run's databases at the end and prints its counts per backend and
file kind (see ``test_gabbi.py``)."""

from __future__ import annotations

from collections import Counter

from tests.gabbi import harness
from tests.gabbi.manifest import is_policy_file

_counts: Counter[tuple[str, str, str]] = Counter()


def pytest_runtest_logreport(report):  # type: ignore[no-untyped-def]
    if "test_gabbi.py" not in report.nodeid or ":" not in report.nodeid.partition("[")[2]:
        return  # not a gabbi case (e.g. the no-gabbits placeholder)
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        name = report.nodeid.split("[", 1)[1].rstrip("]")
        backend = name.split(":", 1)[0].removeprefix("gabbi-")
        suite = name.split(":", 1)[1].split("_", 1)[0]
        kind = "policy" if is_policy_file(suite) else "non-policy"
        outcome = (
            "xfailed"
            if hasattr(report, "wasxfail") and report.outcome == "skipped"
            else (report.outcome)
        )
        if report.outcome == "passed" and hasattr(report, "wasxfail"):
            outcome = "xpassed"
        _counts[(backend, kind, outcome)] += 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    if not _counts:
        return
    for backend in sorted({b for b, _, _ in _counts}):
        for kind in ("non-policy", "policy"):
            parts = [
                f"{o}={_counts[(backend, kind, o)]}"
                for o in ("passed", "xfailed", "failed", "skipped", "xpassed")
                if _counts[(backend, kind, o)]
            ]
            terminalreporter.write_line(f"gabbi {backend} {kind}: {' '.join(parts)}")


def pytest_sessionfinish(session, exitstatus):  # type: ignore[no-untyped-def]
    harness.close_all()
