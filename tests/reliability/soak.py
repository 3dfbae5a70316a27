"""``make soak``: the reliability workload for minutes, then the invariants.

16 writer processes (claims, deletes, moves) and 8 schedulers (plain, affinity,
anti-affinity groups) on 20 hosts, with a random connection of the database killed
every ``--kill-every`` seconds (PostgreSQL ``pg_terminate_backend``, MariaDB ``KILL``),
on each backend in turn; then every invariant of
:func:`benchmarks.contention.check_invariants`. Prints writes, conflicts, retries,
give-ups, connections killed and invariants checked per backend; exits 1 on any
violation.

    python -m tests.reliability.soak --seconds 600 --backends postgresql,mysql
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from benchmarks.contention import Workload, markdown, run_backends


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 600))
    )
    parser.add_argument("--backends", default=os.environ.get("BACKENDS", "postgresql,mysql"))
    parser.add_argument("--kill-every", type=float, default=2.0)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--schedulers", type=int, default=8)
    parser.add_argument("--out", type=Path, help="also write the per-backend figures as JSON")
    args = parser.parse_args(argv)
    workload = Workload(
        writers=args.writers,
        schedulers=args.schedulers,
        seconds=args.seconds,
        kill_every=args.kill_every,
    )
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    runs, missing = run_backends(backends, workload)
    for backend, reason in missing.items():
        print(f"BACKEND MISSING — {backend}: {reason}", file=sys.stderr)
    summaries = [r.summary() for r in runs]
    print(json.dumps(summaries, indent=1))
    print("\n".join(markdown(summaries)))
    if args.out:
        args.out.write_text(json.dumps(summaries, indent=1))
    failed = [r for r in runs if r.violations]
    for run in failed:
        print(f"{run.backend}: {len(run.violations)} violation(s)", file=sys.stderr)
        for line in run.violations[:20]:
            print(f"  {line}", file=sys.stderr)
    return 1 if failed or missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
