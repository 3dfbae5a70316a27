"""A provider's traits and aggregate memberships: replace the whole set, guarded by the
provider generation (Placement's ``PUT /resource_providers/{uuid}/traits`` and
``.../aggregates``).

>>> # gen = set_provider_traits(db, rp_uuid, ["HW_CPU_X86_AVX2", "CUSTOM_GOLD"], generation=0)
>>> # gen = set_provider_aggregates(db, rp_uuid, [agg_uuid], generation=gen)
>>> # get_provider_traits(db, rp_uuid)
>>> # frozenset({'CUSTOM_GOLD', 'HW_CPU_X86_AVX2'})

Each write validates the names without the database, resolves them (traits must
exist; aggregates are created in ``placement_aggregates`` as needed), claims the
provider generation with a conditional ``UPDATE`` and then applies only the difference
(one ``DELETE`` and one ``INSERT``). It returns the new generation.

The reads, ``get_provider_traits`` and ``get_provider_aggregates``, live in
:mod:`rpquery.read.objects` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery._validation import check_uuid
from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate, NotFound
from rpquery.read.objects import get_provider_aggregates, get_provider_traits
from rpquery.store import catalog, dialects
from rpquery.store.tables import (
    placement_aggregates,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
)
from rpquery.write import providers

__all__ = [
    "aggregate_ids",
    "get_provider_aggregates",
    "get_provider_traits",
    "set_provider_aggregates",
    "set_provider_traits",
]


def _replace_links(
    conn: Connection, link: sa.Table, rp_id: int, column: str, wanted: set[int]
) -> None:
    """Make the ``column`` ids linked to ``rp_id`` in ``link`` exactly ``wanted``."""
    have = set(
        conn.execute(sa.select(link.c[column]).where(link.c.resource_provider_id == rp_id))
        .scalars()
        .all()
    )
    if have - wanted:
        conn.execute(
            link.delete().where(
                link.c.resource_provider_id == rp_id, link.c[column].in_(sorted(have - wanted))
            )
        )
    if wanted - have:
        rows = [{"resource_provider_id": rp_id, column: i} for i in sorted(wanted - have)]
        conn.execute(link.insert(), rows)


def set_provider_traits(
    db: Database, rp_uuid: str, names: Iterable[str], *, generation: int
) -> int:
    """Replace the provider's traits with ``names``; returns the new generation.

    Errors: ``rpquery.provider.bad_uuid``, ``rpquery.trait.bad_name`` (malformed),
    ``rpquery.trait.not_found`` (InvalidRequest: no such trait),
    ``rpquery.provider.not_found``, ``rpquery.provider.generation_conflict``.
    """
    rp_uuid = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
    wanted = {catalog.check_trait_name(name) for name in names}
    providers.check_generation(generation)
    with db.begin() as conn:
        ids = catalog.require_trait_ids(conn, wanted)
        rp_id = providers.claim_generation(conn, rp_uuid, generation)
        _replace_links(conn, resource_provider_traits, rp_id, "trait_id", set(ids.values()))
    return generation + 1


def aggregate_ids(conn: Connection, agg_uuids: set[str]) -> dict[str, int]:
    """Ids of the given aggregate uuids, inserting the ones not yet known."""
    agg = placement_aggregates
    if not agg_uuids:
        return {}

    def read(locking: bool) -> dict[str, int]:
        stmt = sa.select(agg.c.uuid, agg.c.id).where(agg.c.uuid.in_(sorted(agg_uuids)))
        if locking:  # see rpquery.write.consumers._read_created_owner_ids: MySQL's snapshot
            stmt = stmt.with_for_update(read=True)  # may predate another writer's row
        return {agg_uuid: int(agg_id) for agg_uuid, agg_id in conn.execute(stmt)}

    found = read(False)
    if len(found) < len(agg_uuids):
        dialects.insert_ignore(conn, agg, [{"uuid": u} for u in sorted(agg_uuids - found.keys())])
        found = read(True)
        if len(found) < len(agg_uuids):  # inserted by a writer that then rolled back
            raise ConcurrentUpdate(
                "rpquery.concurrent_update", "aggregates changed concurrently; retry"
            )
    return found


def set_provider_aggregates(
    db: Database, rp_uuid: str, agg_uuids: Iterable[str], *, generation: int | None
) -> int:
    """Replace the provider's aggregate memberships; returns the new generation.

    ``generation=None`` is Placement's ``PUT .../aggregates`` before microversion 1.19:
    no generation is checked and none is raised (the provider row is only locked while
    the links change); the provider's current generation is returned.

    Errors: ``rpquery.provider.bad_uuid``, ``rpquery.aggregate.bad_uuid``,
    ``rpquery.provider.not_found``, ``rpquery.provider.generation_conflict``.
    """
    rp_uuid = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
    wanted = {check_uuid(agg, "rpquery.aggregate.bad_uuid", "aggregate") for agg in agg_uuids}
    if generation is not None:
        providers.check_generation(generation)
    with db.begin() as conn:
        if generation is None:
            rp_id, current = _lock_provider(conn, rp_uuid)
        else:
            rp_id, current = providers.claim_generation(conn, rp_uuid, generation), generation + 1
        ids = aggregate_ids(conn, wanted)
        _replace_links(
            conn, resource_provider_aggregates, rp_id, "aggregate_id", set(ids.values())
        )
    return current


def _lock_provider(conn: Connection, rp_uuid: str) -> tuple[int, int]:
    """``(id, generation)`` of a provider, its row locked (``FOR UPDATE``; SQLite's
    write transaction is the lock there); ``NotFound`` if there is none."""
    rp = resource_providers
    row = conn.execute(
        sa.select(rp.c.id, rp.c.generation).where(rp.c.uuid == rp_uuid).with_for_update()
    ).first()
    if row is None:
        raise NotFound("rpquery.provider.not_found", f"no provider {rp_uuid}", token=rp_uuid)
    return int(row.id), int(row.generation or 0)
