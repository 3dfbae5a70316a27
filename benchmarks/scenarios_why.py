"""Benchmark scenarios for the answers Placement cannot give (issue 20): rejection
reasons of a request no host fits (target ≤ 50 ms at 5,000 hosts) and per-host
headroom of a single-group request (target ≤ 200 ms).

Registered in :data:`benchmarks.scenarios.REGISTRY` when this module is imported. It also
runs on its own, loading its own cloud into scratch databases::

    .venv/bin/python -m benchmarks.scenarios_why --hosts 5000 \\
        --backends sqlite,postgresql,mysql --rounds 7

which prints the median and minimum of each scenario per backend and the statements
one call sends. No Placement twin: Placement has no such answer.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.scenarios import SRIOV_ISOLATE, Context, Prepared, scenario

#: Nobody has 200 VCPUs free: every host is rejected, most at ``no_capacity``, those
#: with the forbidden GPU trait at ``forbidden_trait``.
WHY_NOBODY = "resources=VCPU:200,MEMORY_MB:4096&required=!CUSTOM_GPU"
#: A request most hosts pass: the search runs on the survivors.
WHY_MOST_FIT = "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU"
WHY = ("rpquery.insight._why:explain_no_candidates",)


def _why(ctx: Context, query: str) -> Prepared:
    from rpquery.insight._why import explain_no_candidates

    def answer() -> Any:
        return explain_no_candidates(ctx.db, query)

    return Prepared(run=lambda: len(answer().reasons), answer=answer)


@scenario("why_no_host_fits", needs=WHY)
def why_no_host_fits(ctx: Context) -> Prepared:
    """Rejection reasons of a request no host fits (target ≤ 50 ms at 5,000 hosts)."""
    return _why(ctx, WHY_NOBODY)


@scenario("why_most_hosts_fit", needs=WHY)
def why_most_hosts_fit(ctx: Context) -> Prepared:
    """Rejection reasons of a request most hosts fit (the search runs on them all)."""
    return _why(ctx, WHY_MOST_FIT)


HEADROOM = ("rpquery.insight._headroom:headroom",)


def _headroom(ctx: Context, query: str) -> Prepared:
    from rpquery.insight._headroom import headroom

    def answer() -> Any:
        return headroom(ctx.db, query)

    return Prepared(run=lambda: len(answer().hosts), answer=answer)


@scenario("headroom_single_group", needs=HEADROOM)
def headroom_single_group(ctx: Context) -> Prepared:
    """Per-host headroom of one group (SQL; target ≤ 200 ms at 5,000 hosts)."""
    return _headroom(ctx, "resources=VCPU:2,MEMORY_MB:2048&required=!CUSTOM_GPU")


@scenario("headroom_sriov_two_groups", needs=HEADROOM)
def headroom_sriov_two_groups(ctx: Context) -> Prepared:
    """Headroom of an interacting request (the search and the packing per host)."""
    return _headroom(ctx, SRIOV_ISOLATE)


# ---------------------------------------------------------------- standalone run

BUILDERS: dict[str, Callable[[Context], Prepared]] = {
    "why_no_host_fits": why_no_host_fits,
    "why_most_hosts_fit": why_most_hosts_fit,
    "headroom_single_group": headroom_single_group,
    "headroom_sriov_two_groups": headroom_sriov_two_groups,
}


def _times_ms(fn: Callable[[], Any], rounds: int) -> tuple[float, float]:
    """Median and minimum of ``rounds`` calls, in ms."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, min(times) * 1000


def main(argv: list[str] | None = None) -> None:
    from benchmarks.config import scratch_database, standalone_setup
    from rpquery.generator import CloudSpec, load_cloud

    description = (__doc__ or "").splitlines()[0]
    args, urls = standalone_setup(description, argv)
    for backend, url in urls.items():
        with scratch_database(backend, url) as db:
            cloud = load_cloud(db, CloudSpec(hosts=args.hosts, seed=42))
            ctx = Context(db, cloud, backend)
            for name, build in BUILDERS.items():
                prepared = build(ctx)
                with db.count_statements() as counter:
                    prepared.run()  # warm-up
                ms, least = _times_ms(prepared.run, args.rounds)
                print(
                    f"{backend}: {args.hosts} hosts: {name} median {ms:.1f} ms "
                    f"(min {least:.1f}), {counter.count} statements per call",
                    flush=True,
                )


if __name__ == "__main__":
    main()
