"""Reads of single objects by uuid: a provider, its inventories, traits and aggregates, a
consumer, its allocations, consumers' generations. Each is one statement on a read
connection (``db.connect()``); the write path builds on the same pieces
(:func:`provider_select`, :func:`load_provider`, :data:`INVENTORY_FIELDS`) inside its
transactions.

>>> # get_provider(db, rp_uuid).generation
>>> # get_inventories(db, rp_uuid)["VCPU"].capacity
>>> # get_allocations(db, consumer_uuid)
>>> # {'e10927c4-8bc9-465d-ac60-d2f79f7e4a00': {'VCPU': 2, 'MEMORY_MB': 512}}

A provider that does not exist is ``NotFound`` ``rpquery.provider.not_found`` (an empty
set of inventories, traits or aggregates is a value, ``{}`` or ``frozenset()``); an
unknown consumer is ``NotFound`` ``rpquery.consumer.not_found`` for :func:`get_consumer`
and ``{}`` for :func:`get_allocations`.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery._validation import check_uuid
from rpquery.db import Database
from rpquery.errors import NotFound
from rpquery.models import Consumer, Inventory, ResourceProvider
from rpquery.store.tables import (
    allocations,
    consumer_types,
    consumers,
    inventories,
    placement_aggregates,
    projects,
    resource_classes,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
    traits,
    users,
)

__all__ = [
    "INVENTORY_FIELDS",
    "consumer_generations",
    "get_allocations",
    "get_consumer",
    "get_inventories",
    "get_provider",
    "get_provider_aggregates",
    "get_provider_traits",
    "inventory_from",
    "load_provider",
    "provider_select",
]

#: Inventory columns, in :class:`Inventory` field order.
INVENTORY_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


# ---------------------------------------------------------------- providers


def provider_select() -> sa.Select:
    """Providers with their parent's and root's uuids (filter with ``.where``)."""
    rp = resource_providers
    parent, root = rp.alias("parent"), rp.alias("root")
    return (
        sa.select(rp.c.id, rp.c.uuid, rp.c.name, rp.c.generation, root.c.uuid, parent.c.uuid)
        .select_from(rp)
        .outerjoin(parent, parent.c.id == rp.c.parent_provider_id)
        .outerjoin(root, root.c.id == rp.c.root_provider_id)
    )


@functools.cache
def _provider_by_uuid() -> sa.Select:
    """:func:`provider_select` of the provider whose uuid is the bound ``rp_uuid``, built
    once: building it (two aliases and their column collections) took longer than SQLite
    takes to answer it (~0.25 of a ``GET /resource_providers/{uuid}``'s ~0.4 ms)."""
    uuid = resource_providers.c.uuid
    return provider_select().where(uuid == sa.bindparam("rp_uuid", type_=uuid.type))


def _to_provider(row: sa.Row) -> ResourceProvider:
    _, rp_uuid, name, generation, root_uuid, parent_uuid = row
    return ResourceProvider(rp_uuid, name, int(generation or 0), root_uuid or rp_uuid, parent_uuid)


def _provider_not_found(rp_uuid: str) -> NotFound:
    return NotFound("rpquery.provider.not_found", f"no provider {rp_uuid}", token=rp_uuid)


def load_provider(conn: Connection, rp_uuid: str) -> tuple[int, ResourceProvider]:
    """``(id, provider)`` of the provider ``rp_uuid`` on ``conn`` (a write path's
    transaction or a read connection); ``NotFound`` if there is none."""
    row = conn.execute(_provider_by_uuid(), {"rp_uuid": rp_uuid}).first()
    if row is None:
        raise _provider_not_found(rp_uuid)
    return int(row[0]), _to_provider(row)


def get_provider(db: Database, rp_uuid: str) -> ResourceProvider:
    """The provider with uuid ``rp_uuid``; ``NotFound`` (``rpquery.provider.not_found``)."""
    rp_uuid = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
    with db.connect() as conn:
        return load_provider(conn, rp_uuid)[1]


# ---------------------------------------------------------------- inventories


def inventory_from(values: Sequence[Any]) -> Inventory:
    """An :class:`Inventory` from the six columns in :data:`INVENTORY_FIELDS` order."""
    total, reserved, min_unit, max_unit, step_size, ratio = values
    return Inventory(total, reserved, min_unit, max_unit, step_size, float(ratio))


def get_inventories(db: Database, rp_uuid: str) -> dict[str, Inventory]:
    """``{resource class: Inventory}`` of a provider (``{}`` if it has none);
    ``NotFound`` ``rpquery.provider.not_found`` if the provider does not exist."""
    rp_uuid = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
    rp, inv, rc = resource_providers, inventories, resource_classes
    stmt = (
        sa.select(rp.c.id, rc.c.name, *(inv.c[name] for name in INVENTORY_FIELDS))
        .select_from(rp)
        .outerjoin(inv, inv.c.resource_provider_id == rp.c.id)
        .outerjoin(rc, rc.c.id == inv.c.resource_class_id)
        .where(rp.c.uuid == rp_uuid)
    )
    with db.connect() as conn:
        rows = conn.execute(stmt).all()
    if not rows:
        raise _provider_not_found(rp_uuid)
    return {row[1]: inventory_from(row[2:8]) for row in rows if row[1] is not None}


# ---------------------------------------------------------------- traits and aggregates


def _linked_names(db: Database, rp_uuid: str, link: sa.Table, target: sa.Column) -> frozenset[str]:
    """``target`` of the rows ``link`` ties to the provider; one outer join so that a
    provider with no link is one row of ``NULL`` and an unknown provider none."""
    rp_uuid = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
    rp = resource_providers
    owner = target.table
    id_column = link.c.trait_id if link is resource_provider_traits else link.c.aggregate_id
    stmt = (
        sa.select(rp.c.id, target)
        .select_from(rp)
        .outerjoin(link, link.c.resource_provider_id == rp.c.id)
        .outerjoin(owner, owner.c.id == id_column)
        .where(rp.c.uuid == rp_uuid)
    )
    with db.connect() as conn:
        rows = conn.execute(stmt).all()
    if not rows:
        raise _provider_not_found(rp_uuid)
    return frozenset(row[1] for row in rows if row[1] is not None)


def get_provider_traits(db: Database, rp_uuid: str) -> frozenset[str]:
    """The provider's trait names (empty if none; ``NotFound`` if no such provider)."""
    return _linked_names(db, rp_uuid, resource_provider_traits, traits.c.name)


def get_provider_aggregates(db: Database, rp_uuid: str) -> frozenset[str]:
    """The uuids of the provider's aggregates (empty if none)."""
    return _linked_names(db, rp_uuid, resource_provider_aggregates, placement_aggregates.c.uuid)


# ---------------------------------------------------------------- consumers and allocations


def get_allocations(db: Database, consumer_uuid: str) -> dict[str, dict[str, int]]:
    """``{provider uuid: {resource class: used}}`` of one consumer; ``{}`` if none."""
    consumer_uuid = check_uuid(consumer_uuid, "rpquery.consumer.bad_uuid", "consumer")
    stmt = (
        sa.select(resource_providers.c.uuid, resource_classes.c.name, allocations.c.used)
        .select_from(allocations)
        .join(resource_providers, resource_providers.c.id == allocations.c.resource_provider_id)
        .join(resource_classes, resource_classes.c.id == allocations.c.resource_class_id)
        .where(allocations.c.consumer_id == consumer_uuid)
    )
    found: dict[str, dict[str, int]] = defaultdict(dict)
    with db.connect() as conn:
        for rp_uuid, rc, used in conn.execute(stmt):
            found[rp_uuid][rc] = int(used)
    return dict(found)


def get_consumer(db: Database, consumer_uuid: str) -> Consumer:
    """The consumer with its owner, type and generation; ``NotFound``
    (``rpquery.consumer.not_found``) if it has none."""
    consumer_uuid = check_uuid(consumer_uuid, "rpquery.consumer.bad_uuid", "consumer")
    stmt = (
        sa.select(
            consumers.c.uuid,
            projects.c.external_id,
            users.c.external_id,
            consumer_types.c.name,
            consumers.c.generation,
        )
        .select_from(consumers)
        .join(projects, projects.c.id == consumers.c.project_id)
        .join(users, users.c.id == consumers.c.user_id)
        .outerjoin(consumer_types, consumer_types.c.id == consumers.c.consumer_type_id)
        .where(consumers.c.uuid == consumer_uuid)
    )
    with db.connect() as conn:
        row = conn.execute(stmt).first()
    if row is None:
        raise NotFound(
            "rpquery.consumer.not_found", f"no consumer {consumer_uuid}", token=consumer_uuid
        )
    return Consumer(row[0], row[1], row[2], row[3], int(row[4]))


def consumer_generations(db: Database, consumer_uuids: Iterable[str]) -> dict[str, int]:
    """``{uuid: generation}`` of those of ``consumer_uuids`` that exist (one statement;
    :func:`rpquery.write.consumers.existing_generations` is its locking twin)."""
    stmt = sa.select(consumers.c.uuid, consumers.c.generation).where(
        consumers.c.uuid.in_(sorted(set(consumer_uuids)))
    )
    with db.connect() as conn:
        return {uuid: int(gen) for uuid, gen in conn.execute(stmt)}
