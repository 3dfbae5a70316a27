"""The gabbi run's counts per backend, file kind and outcome, printed at the end of the
run (``tests/conftest.py``'s terminal summary).

They are counted from the test reports where the summary is printed: in the one pytest
process, or in the controller of a pytest-xdist run (which gets every worker's reports).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.gabbi.manifest import is_policy_file

OUTCOMES = ("passed", "xfailed", "failed", "skipped", "xpassed")

_counts: Counter[tuple[str, str, str]] = Counter()


def _case_name(nodeid: str) -> str | None:
    """``gabbi-<backend>:<yaml file>_<test name>``, or None for a report that is not a gabbi
    case (e.g. the no-gabbits placeholder). The ``@<group>`` pytest-xdist appends to the id
    of a test in an ``xdist_group`` is dropped."""
    if "test_gabbi.py" not in nodeid:
        return None
    head, bracket, _group = nodeid.rpartition("]")
    name = head.partition("[")[2]
    return name if bracket and ":" in name else None


def _outcome(report: Any) -> str:
    if hasattr(report, "wasxfail") and report.outcome == "skipped":
        return "xfailed"
    if hasattr(report, "wasxfail") and report.outcome == "passed":
        return "xpassed"
    return str(report.outcome)


def count(report: Any) -> None:
    """Count a test report (``pytest_runtest_logreport``): the call, or a setup that did not
    pass."""
    name = _case_name(report.nodeid)
    if name is None:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        backend, _, case = name.partition(":")
        suite = case.split("_", 1)[0]
        kind = "policy" if is_policy_file(suite) else "non-policy"
        _counts[(backend.removeprefix("gabbi-"), kind, _outcome(report))] += 1


def summary_lines() -> list[str]:
    """``gabbi <backend> <kind>: passed=N xfailed=N ...`` per backend and kind counted."""
    lines = []
    for backend in sorted({b for b, _, _ in _counts}):
        for kind in ("non-policy", "policy"):
            parts = [f"{o}={_counts[(backend, kind, o)]}" for o in OUTCOMES]
            parts = [p for p in parts if not p.endswith("=0")]
            if parts:
                lines.append(f"gabbi {backend} {kind}: {' '.join(parts)}")
    return lines
