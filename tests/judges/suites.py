"""Runs nova's and osc-placement's functional tests with Placement's fixture and with
rpquery's (the fixture swap, :mod:`tests.judges.placement_swap`) and compares the passes.

Run with ``.venv-nova``'s Python (``make nova-venv``; ``make test-nova``, ``.ci/run``)::

    python -m tests.judges.suites --suite nova --list tests/judges/lists/nova-ci.txt
    python -m tests.judges.suites --suite osc --list tests/judges/lists/osc.txt
    python -m tests.judges.suites --suite nova --list ... --modes record --record DIR

Each mode is one ``stestr run --load-list`` (nova's runner, ``--concurrency`` workers, nova's
tox environment) in a scratch directory. Both pass counts are printed, with every test that
fails with Placement (not rpquery's doing, but listed) and every test that passes with
Placement but not with rpquery. The exit status is 1 when that last set is not empty.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOVA_SRC = ROOT / ".venv-nova" / "src" / "nova-34.0.0"
#: nova's tox environment for functional tests (tox.ini, [testenv:functional]).
NOVA_ENV = {
    "OS_STDOUT_CAPTURE": "1",
    "OS_STDERR_CAPTURE": "1",
    "OS_TEST_TIMEOUT": "160",
    "NOVA_RAISE_ON_GREENLET_LEAK": "True",
    "OS_NOVA_DISABLE_EVENTLET_PATCHING": "False",
}


def test_path(suite: str) -> tuple[Path, Path]:
    """(test path, top dir) of a suite: nova's source tree, osc-placement's installed package."""
    if suite == "nova":
        return NOVA_SRC / "nova" / "tests" / "functional", NOVA_SRC
    site = Path(sysconfig.get_paths()["purelib"])
    return site / "osc_placement" / "tests" / "functional", site


def run(suite: str, mode: str, ids: Path, workers: int, record: Path | None) -> dict[str, str]:
    """``{test id: status}`` of one stestr run of the tests listed in ``ids``."""
    path, top = test_path(suite)
    # the venv's bin first, as under tox: osc-placement's tests run the `openstack` command
    search = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, **NOVA_ENV, "RPQUERY_JUDGE": mode, "PATH": search}
    if record is not None:
        env["RPQUERY_JUDGE_RECORD"] = str(record)
    with tempfile.TemporaryDirectory(prefix="rpq-judge-") as scratch:
        subprocess.run(
            [sys.executable, "-m", "stestr", "init"], cwd=scratch, check=True, capture_output=True
        )
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "stestr",
                "--test-path",
                str(path),
                "--top-dir",
                str(top),
                "run",
                "--subunit",
                "--concurrency",
                str(workers),
                "--load-list",
                str(ids.resolve()),
            ],
            cwd=scratch,
            env=env,
            capture_output=True,
            check=False,
        )
    statuses = parse_subunit(done.stdout)
    if not statuses:
        sys.stderr.write(done.stderr.decode(errors="replace")[-3000:])
        raise SystemExit(f"{suite} ({mode}): stestr ran no test (exit {done.returncode})")
    return statuses


def parse_subunit(stream: bytes) -> dict[str, str]:
    """Final status of each test in a subunit v2 stream (success, fail, skip...)."""
    import subunit
    import testtools

    statuses: dict[str, str] = {}

    def keep(test: dict[str, object]) -> None:
        statuses[str(test["id"])] = str(test["status"])

    result = testtools.StreamToDict(keep)
    result.startTestRun()
    subunit.ByteStreamToStreamResult(io.BytesIO(stream), non_subunit_name="stdout").run(result)
    result.stopTestRun()
    return {test: status for test, status in statuses.items() if status != "exists"}


def passed(statuses: dict[str, str]) -> set[str]:
    return {test for test, status in statuses.items() if status in ("success", "xfail")}


def compare(suite: str, ids: list[str], runs: dict[str, dict[str, str]]) -> int:
    """Print both pass counts and the differing tests; 1 when rpquery passes fewer."""
    name = "placement" if "placement" in runs else "record"  # recording runs Placement
    reference, ours = passed(runs[name]), passed(runs["rpquery"])
    print(f"{suite}: {len(ids)} tests selected")
    for mode, result in runs.items():
        print(f"  {mode:9} passed {len(passed(result))} of {len(result)} run")
    for test in sorted(set(ids) - reference):
        print(f"  fails with Placement too ({runs[name].get(test, 'not run')}): {test}")
    for test in sorted(ours - reference):
        print(f"  passes with rpquery only: {test}")
    missing = sorted(reference - ours)
    for test in missing:
        print(f"  FAILS WITH RPQUERY ONLY ({runs['rpquery'].get(test, 'not run')}): {test}")
    return 1 if missing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("nova", "osc"), required=True)
    parser.add_argument("--list", type=Path, required=True, help="file of test ids, one a line")
    parser.add_argument("--modes", default="placement,rpquery")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--record", type=Path, help="recording directory (mode record)")
    args = parser.parse_args(argv)
    ids = [line.strip() for line in args.list.read_text().splitlines()]
    ids = [test for test in ids if test and not test.startswith("#")]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as listed:
        listed.write("\n".join(ids) + "\n")
        listed.flush()
        runs = {}
        for mode in args.modes.split(","):
            started = time.monotonic()
            runs[mode] = run(args.suite, mode, Path(listed.name), args.workers, args.record)
            took = time.monotonic() - started
            print(
                f"{args.suite} ({mode}): {len(passed(runs[mode]))} of {len(runs[mode])} "
                f"passed in {took:.0f} s",
                flush=True,
            )
    if "rpquery" in runs and len(runs) > 1:
        return compare(args.suite, ids, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
