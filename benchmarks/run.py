"""``python -m benchmarks.run``: load clouds, time every scenario on every backend, report.

Defaults come from ``BENCH_SCALE`` (tiny|small|medium|large, default medium) and
``BENCH_BACKENDS`` (default sqlite,postgresql,mysql); a backend whose server does not
answer is skipped with its reason in the report. Results go to
``benchmarks/results/<UTC timestamp>/`` (``report.md``, ``results.json``, PNG plots,
pytest-benchmark's own JSON) and are compared with a baseline ``results.json``
(``--baseline``, default: the newest earlier run of the same scale).

    python -m benchmarks.run --scale small --backends sqlite,postgresql
    python -m benchmarks.run --placement          # side by side with OpenStack Placement
    python -m benchmarks.run --placement --scenarios http   # the HTTP view alone
    python -m benchmarks.run --scenarios split    # SQL, driver, build, render, body split
    python -m benchmarks.run --placement --hosts 5000 --scenarios http,concurrency

With ``--placement`` the ``concurrency`` scenario (benchmarks/concurrency.py) serves
``rpquery serve`` and Placement the same way on the largest cloud of each backend and
loops 1, 8 and 32 schedulers' requests against each (requests/s, p50/p99 latency).
After the timed scenarios come ``contention``, ``startup`` (one-off ``rpquery`` commands,
each a fresh process: benchmarks/startup.py), ``shapes`` (random never-seen candidates
requests on a 100-host cloud: benchmarks/shapes.py) and ``cluster``: claims/s on a 3-node
Galera cluster (1/8/16 writers, one node vs three; when ``mysql`` is benchmarked) and
candidates latency on a PostgreSQL hot standby vs its primary (when ``postgresql`` is),
each cluster started on loopback for the run (benchmarks/cluster.py; root and the
cluster tools, otherwise the report says why they were not run; ``--no-cluster`` or
``BENCH_CLUSTER=0`` leaves them out).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from pathlib import Path

from benchmarks import report
from benchmarks.config import ALL_BACKENDS, CONFIG_ENV, SCALES, RunConfig, available_backends

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--scale", default=os.environ.get("BENCH_SCALE", "medium"), choices=sorted(SCALES)
    )
    parser.add_argument(
        "--backends", default=os.environ.get("BENCH_BACKENDS", ",".join(ALL_BACKENDS))
    )
    parser.add_argument(
        "--scenarios",
        default="",
        help="comma-separated names, 'http' (HTTP view), 'split' (where big answers' time "
        "goes), 'concurrency' (many schedulers at once, with --placement: both servers), "
        "'contention', 'startup', 'shapes', 'cluster' (default: all)",
    )
    parser.add_argument(
        "--hosts",
        default=os.environ.get("BENCH_HOSTS", ""),
        help="comma-separated cloud sizes instead of the scale's (BENCH_HOSTS), e.g. 5000",
    )
    parser.add_argument(
        "--placement", action="store_true", help="side by side with OpenStack Placement"
    )
    parser.add_argument(
        "--out", type=Path, help="output directory (default: benchmarks/results/<ts>)"
    )
    parser.add_argument("--baseline", type=Path, help="results.json to compare with")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--no-autosave", action="store_true", help="skip pytest-benchmark autosave"
    )
    parser.add_argument(
        "--no-cluster",
        action="store_true",
        default=os.environ.get("BENCH_CLUSTER", "1") == "0",
        help="leave out the Galera and hot-standby scenarios (BENCH_CLUSTER=0)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wanted = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    unknown = set(wanted) - set(ALL_BACKENDS)
    if unknown:
        print(f"unknown backend(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    urls, missing = available_backends(wanted)
    for reason in missing.values():
        print(f"BACKEND SKIPPED — {reason}", file=sys.stderr)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or RESULTS / stamp
    out.mkdir(parents=True, exist_ok=True)
    notes = dict(missing)
    placement_ok = False
    if args.placement:
        from benchmarks import side_by_side

        placement_ok, why = side_by_side.ensure_venv()
        if not placement_ok:
            notes["placement"] = why
            print(f"PLACEMENT SKIPPED — {why}", file=sys.stderr)
    config = RunConfig(
        scale=args.scale,
        backends=tuple(b for b in wanted if b in urls),
        out_dir=str(out),
        urls=urls,
        scenarios=tuple(s.strip() for s in args.scenarios.split(",") if s.strip())
        or SCALES[args.scale].scenarios,
        placement=placement_ok,
        seed=args.seed,
        hosts=tuple(int(h) for h in args.hosts.split(",") if h.strip()),
    )
    code = _run_pytest(config, out, autosave=not args.no_autosave)
    if not config.scenarios or "contention" in config.scenarios:
        _run_contention(config, out)
    if not config.scenarios or "startup" in config.scenarios:
        _run_startup(config, out)
    if not config.scenarios or "shapes" in config.scenarios:
        _run_shapes(config, out)
    if not config.scenarios or "cluster" in config.scenarios:
        _run_cluster(wanted, args.scale, out, skip="--no-cluster" if args.no_cluster else "")
    baseline = args.baseline or report.find_baseline(RESULTS, out, args.scale)
    summary = report.build(out, config, notes, baseline)
    print(summary)
    print(f"\nreport: {out / 'report.md'}")
    return 0 if code in (0, 5) and report.all_ok(out) else 1


def _run_contention(config: RunConfig, out: Path) -> None:
    """The ``contention`` scenario: 16 writer and 8 scheduler processes on 20 hosts for
    a few seconds per backend (benchmarks/contention.py); figures go to records.json."""
    from benchmarks import contention

    workload = contention.Workload(seconds=contention.SECONDS_AT_SCALE[config.scale])
    print(f"contention: {workload.seconds:g} s per backend", file=sys.stderr)
    runs, _ = contention.run_backends(config.backends, workload)
    report.add_records(out, "contention", [r.summary() for r in runs])


def _run_startup(config: RunConfig, out: Path) -> None:
    """The ``startup`` scenario (benchmarks/startup.py): ``rpquery --help`` and one-off
    queries on a small SQLite cloud, each a fresh process; figures go to records.json."""
    from benchmarks import startup

    runs = startup.RUNS_AT_SCALE[config.scale]
    print(f"startup: median of {runs} runs per command", file=sys.stderr)
    report.add_records(out, "startup", startup.run(runs))


def _run_shapes(config: RunConfig, out: Path) -> None:
    """The ``shapes`` scenario (benchmarks/shapes.py): random never-seen candidates requests
    on a 100-host cloud per backend, each backend in a fresh process; to records.json."""
    from benchmarks import shapes

    n = shapes.REQUESTS_AT_SCALE[config.scale]
    print(f"shapes: {n} random requests per backend on {shapes.HOSTS} hosts", file=sys.stderr)
    report.add_records(out, "shapes", shapes.run(config.backends, n, config.seed))


#: Seconds per Galera writer cell and candidates requests per replica row, per scale.
CLUSTER_AT_SCALE = {
    "tiny": (1.0, 10),
    "small": (3.0, 30),
    "medium": (5.0, 50),
    "large": (10.0, 100),
}


def _run_cluster(wanted: tuple[str, ...], scale: str, out: Path, *, skip: str) -> None:
    """The ``cluster`` scenario (benchmarks/cluster.py): Galera with ``mysql``, the hot
    standby with ``postgresql``; its records (or why it was not run) go to records.json."""
    from benchmarks import cluster

    which = tuple(c for c, b in (("galera", "mysql"), ("replica", "postgresql")) if b in wanted)
    why = {c: f"{b} not in the benchmarked backends" for c, b in
           (("galera", "mysql"), ("replica", "postgresql")) if c not in which}  # fmt: skip
    records: list[dict[str, object]] = []
    if skip:
        why.update({c: f"left out ({skip})" for c in which})
    elif which:
        seconds, repeat = CLUSTER_AT_SCALE[scale]
        print(f"cluster: {', '.join(which)} ({seconds:g} s per Galera cell)", file=sys.stderr)
        records, failed = cluster.run(which, seconds, repeat)
        why.update(failed)
    for name, reason in sorted(why.items()):
        print(f"CLUSTER {name.upper()} NOT RUN — {reason}", file=sys.stderr)
    report.add_records(
        out, "cluster", [*records, *({"cluster": c, "not_run": r} for c, r in why.items())]
    )


def _run_pytest(config: RunConfig, out: Path, *, autosave: bool) -> int:
    import pytest

    os.environ[CONFIG_ENV] = str(config.save())
    args = [
        str(Path(__file__).with_name("bench_scenarios.py")),
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(ROOT),
        "--benchmark-json",
        str(out / "pytest-benchmark.json"),
        "--benchmark-storage",
        str(ROOT / ".benchmarks"),
        "--benchmark-columns",
        "median,iqr,min,max,rounds",
        "--benchmark-sort",
        "name",
    ]
    if autosave:
        args.append("--benchmark-autosave")
        if any((ROOT / ".benchmarks").glob("*/*.json")):
            args.append("--benchmark-compare")
    return int(pytest.main(args))


if __name__ == "__main__":
    raise SystemExit(main())
