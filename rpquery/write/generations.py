"""Provider generations raised by allocation writes: the conditional bump and the
providers it applies to.

A provider's generation is its optimistic lock: a writer reads it, and its conditional
``UPDATE`` matches no row if someone else raised it meanwhile. Which providers an
allocation write raises is Placement's rule
(:func:`rpquery.write.allocations.receiving_providers`); this module holds the statements.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery.errors import ConcurrentUpdate
from rpquery.store.tables import allocations, resource_providers

__all__ = [
    "PROVIDER_GENERATION_CONFLICT",
    "bump_provider_generations",
    "generation_bump",
    "held_provider_ids",
]

PROVIDER_GENERATION_CONFLICT = "rpquery.provider.generation_conflict"


def generation_bump(generations: Mapping[int, int]) -> sa.Update:
    """One ``UPDATE`` raising each provider's generation if it is still the value read::

    UPDATE resource_providers SET generation = generation + 1
    WHERE (id = 1 AND generation = 5) OR (id = 7 AND generation = 0)
    """
    rp = resource_providers
    current = sa.func.coalesce(rp.c.generation, 0)
    matches = [
        sa.and_(rp.c.id == rp_id, current == gen) for rp_id, gen in sorted(generations.items())
    ]
    return rp.update().where(sa.or_(*matches)).values(generation=current + 1)


def bump_provider_generations(conn: Connection, generations: Mapping[int, int]) -> None:
    """Run :func:`generation_bump` for ``{provider id: generation read}``.

    Fewer rows than providers → someone else changed one of them since it was read:
    ``ConcurrentUpdate`` ``rpquery.provider.generation_conflict`` (retried by
    :func:`rpquery.write.allocations.run_with_retry`).
    """
    if not generations:
        return
    result = conn.execute(generation_bump(generations))
    if result.rowcount != len(generations):
        raise ConcurrentUpdate(
            PROVIDER_GENERATION_CONFLICT,
            "a resource provider changed while the allocations were being written",
        )


def held_provider_ids(conn: Connection, consumer_uuids: Collection[str]) -> set[int]:
    """Ids of the providers ``consumer_uuids`` hold allocations on now::

    SELECT resource_provider_id FROM allocations WHERE consumer_id IN (:c)
    """
    if not consumer_uuids:
        return set()
    stmt = sa.select(allocations.c.resource_provider_id).where(
        allocations.c.consumer_id.in_(sorted(consumer_uuids))
    )
    return {int(rp_id) for rp_id in conn.execute(stmt).scalars()}
