"""Small, direct builders for test topologies (plain Core inserts, no validation).

Read-path and policy tests describe clouds the way Placement's functional tests do::

    with db.begin() as conn:
        cn1 = provider(conn, "incl_cn1", inventory={"VCPU": 8, "MEMORY_MB": 4096},
                       traits=["HW_CPU_X86_AVX2"], aggregates=[AGG_A])
        numa0 = provider(conn, "incl_cn1_numa0", parent=cn1, inventory={"VCPU": 4})
        allocate(conn, CONSUMER, cn1, "VCPU", 2, consumer_type="INSTANCE")

These bypass the write path on purpose: scenario data must not depend on the code
under test. Tests of the write path itself use the public write functions.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery.db import Database
from rpquery.store.tables import (
    CUSTOM_RC_MIN_ID,
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

INVENTORY_DEFAULTS = {
    "reserved": 0,
    "min_unit": 1,
    "step_size": 1,
    "allocation_ratio": 1.0,
}


@dataclass(frozen=True)
class Ref:
    """A provider made by :func:`provider`."""

    id: int
    uuid: str
    name: str
    root_id: int


def new_uuid() -> str:
    return str(uuidlib.uuid4())


def _get_or_create(conn: Connection, table: sa.Table, col: str, value: str, **extra: Any) -> int:
    found = conn.execute(sa.select(table.c.id).where(table.c[col] == value)).scalar()
    if found is not None:
        return int(found)
    return int(conn.execute(table.insert().values({col: value, **extra})).inserted_primary_key[0])


def resource_class_id(conn: Connection, name: str) -> int:
    found = conn.execute(
        sa.select(resource_classes.c.id).where(resource_classes.c.name == name)
    ).scalar()
    if found is not None:
        return int(found)
    next_id = conn.execute(
        sa.select(sa.func.max(resource_classes.c.id)).where(
            resource_classes.c.id >= CUSTOM_RC_MIN_ID
        )
    ).scalar()
    rc_id = (next_id or CUSTOM_RC_MIN_ID - 1) + 1
    conn.execute(resource_classes.insert().values(id=rc_id, name=name))
    return rc_id


def trait_id(conn: Connection, name: str) -> int:
    return _get_or_create(conn, traits, "name", name)


def aggregate_id(conn: Connection, agg_uuid: str) -> int:
    return _get_or_create(conn, placement_aggregates, "uuid", agg_uuid)


def provider(
    conn: Connection,
    name: str,
    *,
    parent: Ref | None = None,
    uuid: str | None = None,
    inventory: Mapping[str, int | Mapping[str, Any]] | None = None,
    traits: Iterable[str] = (),
    aggregates: Iterable[str] = (),
) -> Ref:
    """Create a provider with inventory (``{"VCPU": 8}`` or ``{"VCPU": {"total": 8,
    "allocation_ratio": 16.0}}``; ``max_unit`` defaults to ``total``), traits and
    aggregate memberships (aggregate uuids, created as needed)."""
    rp_uuid = uuid or new_uuid()
    rp_id = int(
        conn.execute(
            resource_providers.insert().values(
                uuid=rp_uuid,
                name=name,
                generation=0,
                parent_provider_id=parent.id if parent else None,
            )
        ).inserted_primary_key[0]
    )
    root_id = parent.root_id if parent else rp_id
    conn.execute(
        resource_providers.update()
        .where(resource_providers.c.id == rp_id)
        .values(root_provider_id=root_id)
    )
    for rc, spec in (inventory or {}).items():
        fields = dict(INVENTORY_DEFAULTS)
        fields.update({"total": spec} if isinstance(spec, int) else dict(spec))
        fields.setdefault("max_unit", fields["total"])
        conn.execute(
            inventories.insert().values(
                resource_provider_id=rp_id, resource_class_id=resource_class_id(conn, rc), **fields
            )
        )
    for t in traits:
        conn.execute(
            resource_provider_traits.insert().values(
                resource_provider_id=rp_id, trait_id=trait_id(conn, t)
            )
        )
    for agg in aggregates:
        conn.execute(
            resource_provider_aggregates.insert().values(
                resource_provider_id=rp_id, aggregate_id=aggregate_id(conn, agg)
            )
        )
    return Ref(rp_id, rp_uuid, name, root_id)


def consumer(
    conn: Connection,
    consumer_uuid: str,
    *,
    project: str = "project-a",
    user: str = "user-a",
    consumer_type: str | None = "INSTANCE",
) -> int:
    """Create the consumer row (and its project, user and type) if missing."""
    found = conn.execute(
        sa.select(consumers.c.id).where(consumers.c.uuid == consumer_uuid)
    ).scalar()
    if found is not None:
        return int(found)
    type_id = (
        _get_or_create(conn, consumer_types, "name", consumer_type) if consumer_type else None
    )
    return int(
        conn.execute(
            consumers.insert().values(
                uuid=consumer_uuid,
                project_id=_get_or_create(conn, projects, "external_id", project),
                user_id=_get_or_create(conn, users, "external_id", user),
                generation=0,
                consumer_type_id=type_id,
            )
        ).inserted_primary_key[0]
    )


def allocate(
    conn: Connection,
    consumer_uuid: str,
    rp: Ref,
    rc: str,
    used: int,
    **consumer_kw: Any,
) -> None:
    """Record ``used`` units of ``rc`` on ``rp`` for ``consumer_uuid`` (consumer created
    with ``consumer_kw`` if missing)."""
    consumer(conn, consumer_uuid, **consumer_kw)
    conn.execute(
        allocations.insert().values(
            resource_provider_id=rp.id,
            consumer_id=consumer_uuid,
            resource_class_id=resource_class_id(conn, rc),
            used=used,
        )
    )


def first_flat_host(url: str) -> str:
    """The uuid of the first root provider with VCPU inventory of its own (no NUMA
    children) in the database at ``url`` (a cloud ``rpquery load`` wrote)."""
    rp, inv, rc = resource_providers, inventories, resource_classes
    stmt = (
        sa.select(rp.c.uuid)
        .join(inv, inv.c.resource_provider_id == rp.c.id)
        .join(rc, rc.c.id == inv.c.resource_class_id)
        .where(rc.c.name == "VCPU", rp.c.parent_provider_id.is_(None))
        .order_by(rp.c.id)
        .limit(1)
    )
    db = Database(url)
    try:
        with db.connect() as conn:
            return str(conn.execute(stmt).scalar_one())
    finally:
        db.dispose()
