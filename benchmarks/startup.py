"""Start-up: what a one-off ``rpquery`` command costs, each run a fresh process (issue 18,
item 4; target: a query on a small SQLite database ≤ 0.3 s in all).

The ``startup`` scenario of ``make bench`` (and ``make bench-startup`` alone) times, in
subprocesses, the median of N runs of:

- ``python -c pass`` — the interpreter alone, the floor under everything else;
- ``python -c "import rpquery"`` — the public API (lazy: loads no SQLAlchemy);
- ``rpquery --help`` — the command line's group, no command loaded;
- ``rpquery candidates QS --json`` and ``rpquery usages QS --json`` on a small SQLite
  cloud (``rpquery load --hosts 20``, made once, not timed): a one-off query, start-up
  included.

The commands run as an installed ``rpquery`` does: with its bytecode cached (the warm-up
run writes ``__pycache__``; ``PYTHONDONTWRITEBYTECODE`` is dropped from their
environment, or every run would compile rpquery's modules from source again, ~0.1 s).
Each run records its wall-clock time and its CPU time (user + system, from
``getrusage(RUSAGE_CHILDREN)``); the load average is recorded before and after, because
on a shared machine the wall-clock time follows the load and the CPU time much less.
What each command may import is tested in ``tests/test_cli_startup.py``.

    python -m benchmarks.startup --runs 21 [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: Runs per command, per scale.
RUNS_AT_SCALE = {"tiny": 3, "small": 11, "medium": 21, "large": 31}

#: The target of issue 18, item 4: a one-off query, start-up included, in seconds.
TARGET_SECONDS = 0.3

HOSTS = 20
CANDIDATES = "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU&limit=10"
USAGES = "project_id=project-42-0000"


def rpquery_argv() -> list[str]:
    """The console script next to this interpreter (what a user runs), else ``-m``."""
    script = Path(sys.executable).with_name("rpquery")
    return [str(script)] if script.exists() else [sys.executable, "-m", "rpquery"]


def commands(url: str) -> dict[str, list[str]]:
    cli = rpquery_argv()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import rpquery": [sys.executable, "-c", "import rpquery"],
        "rpquery --help": [*cli, "--help"],
        "rpquery candidates (SQLite)": [*cli, "--db", url, "candidates", CANDIDATES, "--json"],
        "rpquery usages (SQLite)": [*cli, "--db", url, "usages", USAGES, "--json"],
    }


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_command(argv: list[str], runs: int) -> dict[str, Any]:
    """Median, min and max of ``runs`` runs of ``argv`` (one warm-up run first, so that
    the files are in the page cache), wall clock and CPU."""
    env = _environment()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
    walls, cpus = [], []
    for _ in range(runs):
        cpu0, t0 = _cpu_children(), time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu_children() - cpu0)
    return {
        "runs": runs,
        "wall_median_s": statistics.median(walls),
        "wall_min_s": min(walls),
        "wall_max_s": max(walls),
        "cpu_median_s": statistics.median(cpus),
        "cpu_min_s": min(cpus),
    }


def small_cloud(directory: Path) -> str:
    """A current SQLite database with a small sample cloud, made by ``rpquery load``."""
    url = f"sqlite:///{directory / 'startup.db'}"
    load = ["--db", url, "load", "--hosts", str(HOSTS), "--seed", "42", "--no-progress"]
    subprocess.run(
        [*rpquery_argv(), *load], stdout=subprocess.DEVNULL, check=True, env=_environment()
    )
    return url


def run(runs: int) -> list[dict[str, Any]]:
    """One record per command: its name, the medians, and the load average around it."""
    records = []
    with tempfile.TemporaryDirectory(prefix="rpquery-startup-") as tmp:
        url = small_cloud(Path(tmp))
        for name, argv in commands(url).items():
            before = os.getloadavg()[0]
            figures = time_command(argv, runs)
            records.append(
                {
                    "command": name,
                    **figures,
                    "loadavg_before": round(before, 2),
                    "loadavg_after": round(os.getloadavg()[0], 2),
                    "hosts": HOSTS,
                }
            )
    return records


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The report's table and the verdict on the target."""
    md = [
        "| command | wall median ms | wall min ms | CPU median ms | load average |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        md.append(
            f"| {r['command']} | {r['wall_median_s'] * 1000:.0f} | {r['wall_min_s'] * 1000:.0f}"
            f" | {r['cpu_median_s'] * 1000:.0f}"
            f" | {r['loadavg_before']:.1f} → {r['loadavg_after']:.1f} |"
        )
    queries = [r for r in rows if r["command"].startswith("rpquery candidates")]
    for r in queries:
        wall, cpu = r["wall_median_s"], r["cpu_median_s"]
        md += [
            "",
            f"Target (issue 18): a one-off query ≤ {TARGET_SECONDS * 1000:.0f} ms in all — "
            f"CPU {cpu * 1000:.0f} ms ({'met' if cpu <= TARGET_SECONDS else 'missed'}), "
            f"wall clock {wall * 1000:.0f} ms ({'met' if wall <= TARGET_SECONDS else 'missed'}"
            f" at load average {r['loadavg_before']:.1f}).",
        ]
    return md


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS_AT_SCALE["medium"])
    parser.add_argument("--json", action="store_true", help="records as JSON")
    args = parser.parse_args(argv)
    records = run(args.runs)
    print(json.dumps(records, indent=1) if args.json else "\n".join(markdown(records)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
