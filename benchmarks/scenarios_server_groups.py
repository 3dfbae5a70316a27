"""Benchmark scenarios for server groups (docs/server-groups.md): the candidate query for a
soft-anti-affinity group of 500 members, against the same query without the group.

Registered in :data:`benchmarks.scenarios.REGISTRY` when this module is imported. It also
runs on its own, loading its own cloud into scratch databases::

    .venv/bin/python -m benchmarks.scenarios_server_groups --hosts 5000 --members 500 \\
        --backends sqlite,postgresql,mysql --rounds 7

which prints the median of each query and the group's overhead over the plain query.
The policy adds one grouped statement (member counts over the candidate hosts) and an
in-memory sort; it must not cost more than 25 % over the plain query.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import sqlalchemy as sa

from benchmarks.scenarios import Context, Prepared, candidates, scenario
from rpquery.db import Database
from rpquery.store.tables import allocations, server_group_members, server_groups

QUERY = "resources=VCPU:1,MEMORY_MB:512"
GROUP_NAME = "bench-soft-anti-affinity"
MEMBERS = 500
NEEDS = (
    "rpquery.read.candidates:allocation_candidates",
    "rpquery.server_groups.groups:policy_for_group",
)


def ensure_group(db: Database, members: int = MEMBERS) -> str:
    """The benchmark's soft-anti-affinity group, created once per database with
    ``members`` consumers that hold allocations (the first ones by uuid)."""
    from rpquery.server_groups import groups as sg

    with db.connect() as conn:
        found = conn.execute(
            sa.select(server_groups.c.uuid).where(server_groups.c.name == GROUP_NAME)
        ).scalar()
        if found is not None:
            return str(found)
        taken = sa.select(server_group_members.c.instance_uuid)
        instances = list(
            conn.execute(
                sa.select(allocations.c.consumer_id)
                .where(allocations.c.consumer_id.not_in(taken))
                .distinct()
                .order_by(allocations.c.consumer_id)
                .limit(members)
            ).scalars()
        )
    group = sg.create_group(db, GROUP_NAME, ["soft-anti-affinity"], "bench", "bench")
    sg.add_members(db, group.uuid, instances)
    return group.uuid


@scenario("candidates_soft_anti_affinity_500", needs=NEEDS)
def candidates_soft_anti_affinity_500(ctx: Context) -> Prepared:
    """Candidates ordered by a soft-anti-affinity group of 500 members (no limit)."""
    from rpquery.server_groups.groups import policy_for_group

    policy = policy_for_group(ctx.db, ensure_group(ctx.db))
    return candidates(ctx, QUERY, policies=(policy,))


@scenario("candidates_plain_server_group_twin", needs=NEEDS[:1])
def candidates_plain_server_group_twin(ctx: Context) -> Prepared:
    """The same query without the group: the baseline of the overhead."""
    return candidates(ctx, QUERY)


# ---------------------------------------------------------------- standalone run


def _median_ms(fn: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def measure(ctx: Context, rounds: int) -> dict[str, float]:
    """Median ms of the plain and the grouped query (interleaved), and the overhead."""
    plain = candidates_plain_server_group_twin(ctx)
    grouped = candidates_soft_anti_affinity_500(ctx)
    plain.run(), grouped.run()  # warm-up
    p_times, g_times = [], []
    for _ in range(rounds):
        p_times.append(_median_ms(plain.run, 1))
        g_times.append(_median_ms(grouped.run, 1))
    p, g = statistics.median(p_times), statistics.median(g_times)
    return {"plain_ms": p, "group_ms": g, "overhead_pct": 100.0 * (g - p) / p}


def main(argv: list[str] | None = None) -> None:
    from benchmarks.config import scratch_database, standalone_setup
    from rpquery.generator import CloudSpec, load_cloud

    description = (__doc__ or "").splitlines()[0]
    args, urls = standalone_setup(description, argv, members=(int, MEMBERS))
    for backend, url in urls.items():
        with scratch_database(backend, url) as db:
            cloud = load_cloud(db, CloudSpec(hosts=args.hosts, seed=42))
            ensure_group(db, args.members)
            got = measure(Context(db, cloud, backend), args.rounds)
            print(
                f"{backend}: {args.hosts} hosts, {args.members} members: plain "
                f"{got['plain_ms']:.1f} ms, soft-anti-affinity {got['group_ms']:.1f} ms, "
                f"overhead {got['overhead_pct']:+.1f} %"
            )


if __name__ == "__main__":
    main()
