"""Benchmark scenarios for the aggregate-metadata flavor filter (docs/aggregate-metadata.md):
allocation candidates with a 4-key extra-spec filter against the same query without it.

Registered in :data:`benchmarks.scenarios.REGISTRY` when this module is imported. It also
runs on its own, loading a cloud of ``--hosts`` hosts in ``--aggregates`` host aggregates
(each with metadata, a tenth of them with ``force_metadata_check``) into scratch
databases::

    .venv/bin/python -m benchmarks.scenarios_aggregate_metadata --hosts 5000 \\
        --aggregates 50 --backends sqlite,postgresql,mysql --rounds 7

which prints the median of each query and the filter's overhead. The filter adds SQL
clauses (``EXISTS`` / ``NOT EXISTS``) and one statement that fetches the candidate hosts'
metadata; the target is at most 20 % over the plain query.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import sqlalchemy as sa

from benchmarks.scenarios import Context, Prepared, candidates, scenario
from rpquery.db import Database
from rpquery.store.tables import aggregate_metadata

QUERY = "resources=VCPU:1,MEMORY_MB:512"
AGGREGATES = 50
#: The flavor: one literal, one numeric operator, one ``<or>``, one namespaced key.
EXTRA_SPECS = {
    "ssd": "true",
    "cpu_gen": ">= 3",
    "tier": "<or> gold <or> silver",
    "hw:cpu_policy": "shared",
}
#: A 4-key flavor every host with metadata passes: the cost of the machinery alone.
EXTRA_SPECS_ALL_PASS = {
    "ssd": "<or> true <or> false",
    "cpu_gen": ">= 1",
    "tier": "<or> gold <or> silver <or> bronze",
    "hw:cpu_policy": "<or> shared <or> dedicated",
}
NEEDS = (
    "rpquery.read.candidates:allocation_candidates",
    "rpquery.aggregate_metadata.metadata:AggregateMetadataFilter",
)


def metadata_for(i: int) -> dict[str, str]:
    """Deterministic metadata of the ``i``-th aggregate: about a third of the
    aggregates pass :data:`EXTRA_SPECS`; every tenth forces the metadata check."""
    items = {
        "ssd": "true" if i % 3 else "false",
        "cpu_gen": str(1 + i % 5),
        "tier": ("gold", "silver", "bronze")[i % 3 - 1 if i % 7 else 2],
        "rack": f"r{i % 8}",
        "owner": f"team-{i % 4}",
    }
    if i % 2:
        items["hw:cpu_policy"] = "shared" if i % 4 == 1 else "dedicated"
    if i % 10 == 0:
        items["force_metadata_check"] = "True"
        items["ssd"] = "<or> true <or> false"
        items["cpu_gen"] = "*"
        items["tier"] = "<or> gold <or> silver <or> ~"
        del items["rack"], items["owner"]
    return items


def ensure_metadata(db: Database, aggregate_uuids: tuple[str, ...], count: int) -> int:
    """Write metadata on the first ``count`` aggregates (once per database)."""
    from rpquery.aggregate_metadata.metadata import set_metadata

    with db.connect() as conn:
        if conn.execute(sa.select(sa.func.count()).select_from(aggregate_metadata)).scalar():
            return count
    for i, agg in enumerate(aggregate_uuids[:count]):
        set_metadata(db, agg, metadata_for(i))
    return min(count, len(aggregate_uuids))


@scenario("candidates_extra_specs_4_keys", needs=NEEDS)
def candidates_extra_specs_4_keys(ctx: Context) -> Prepared:
    """Candidates filtered by a 4-key flavor over aggregates with metadata (no limit)."""
    from rpquery.aggregate_metadata.metadata import AggregateMetadataFilter

    ensure_metadata(ctx.db, ctx.cloud.host_aggregates, AGGREGATES)
    return candidates(ctx, QUERY, policies=(AggregateMetadataFilter(EXTRA_SPECS),))


@scenario("candidates_extra_specs_4_keys_all_pass", needs=NEEDS)
def candidates_extra_specs_4_keys_all_pass(ctx: Context) -> Prepared:
    """The same with a 4-key flavor that every host with metadata passes."""
    from rpquery.aggregate_metadata.metadata import AggregateMetadataFilter

    ensure_metadata(ctx.db, ctx.cloud.host_aggregates, AGGREGATES)
    return candidates(ctx, QUERY, policies=(AggregateMetadataFilter(EXTRA_SPECS_ALL_PASS),))


@scenario("candidates_plain_extra_specs_twin", needs=NEEDS[:1])
def candidates_plain_extra_specs_twin(ctx: Context) -> Prepared:
    """The same query without the filter: the baseline of the overhead."""
    return candidates(ctx, QUERY)


# ---------------------------------------------------------------- standalone run


def _time_ms(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def measure(ctx: Context, rounds: int) -> dict[str, float]:
    """Median ms of the plain, the selective and the all-pass filtered query
    (interleaved), and the overhead of each filter over the plain query."""
    runs = {
        "plain": candidates_plain_extra_specs_twin(ctx).run,
        "filtered": candidates_extra_specs_4_keys(ctx).run,
        "all_pass": candidates_extra_specs_4_keys_all_pass(ctx).run,
    }
    got: dict[str, float] = {f"{name}_rows": run() for name, run in runs.items()}  # warm-up
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            times[name].append(_time_ms(run))
    for name in runs:
        got[f"{name}_ms"] = statistics.median(times[name])
    for name in ("filtered", "all_pass"):
        got[f"{name}_overhead_pct"] = 100.0 * (got[f"{name}_ms"] / got["plain_ms"] - 1)
    return got


def main(argv: list[str] | None = None) -> None:
    from benchmarks.config import scratch_database, standalone_setup
    from rpquery.generator import CloudSpec, load_cloud

    description = (__doc__ or "").splitlines()[0]
    args, urls = standalone_setup(description, argv, aggregates=(int, AGGREGATES))
    per_aggregate = math.ceil(args.hosts / args.aggregates)
    spec = CloudSpec(hosts=args.hosts, seed=42, hosts_per_aggregate=per_aggregate)
    for backend, url in urls.items():
        with scratch_database(backend, url) as db:
            cloud = load_cloud(db, spec)
            ensure_metadata(db, cloud.host_aggregates, args.aggregates)
            got = measure(Context(db, cloud, backend), args.rounds)
            print(
                f"{backend}: {args.hosts} hosts in {len(cloud.host_aggregates)} aggregates: "
                f"plain {got['plain_ms']:.1f} ms ({got['plain_rows']:.0f} candidates), "
                f"4-key filter {got['filtered_ms']:.1f} ms ({got['filtered_rows']:.0f}, "
                f"{got['filtered_overhead_pct']:+.1f} %), all-pass 4-key filter "
                f"{got['all_pass_ms']:.1f} ms ({got['all_pass_rows']:.0f}, "
                f"{got['all_pass_overhead_pct']:+.1f} %)"
            )


if __name__ == "__main__":
    main()
