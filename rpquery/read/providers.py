"""``GET /resource_providers``: providers matching name, uuid, tree, aggregate, trait and
capacity filters, in one statement.

Every filter applies to the provider itself: ``resources`` needs room on the provider
(capacity, ``min_unit``/``max_unit``/``step_size``), ``required`` its own traits
(forbidden ones as ``NOT EXISTS``), ``member_of`` and ``member_of=!`` its own
aggregates (as Placement: a root's membership does not cover its tree here). No trait
conflict check: a contradictory filter matches nothing.

>>> from rpquery.db import Database
>>> db = Database("sqlite://"); db.upgrade()
>>> list_providers(db, "resources=VCPU:1&required=!HW_GPU_API_VULKAN")
[]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Executable, Select

from rpquery.db import Database, reading
from rpquery.models import ResourceProvider
from rpquery.policies.base import HostPolicy
from rpquery.read import _clauses as clauses
from rpquery.read._filters import provider_filters
from rpquery.read._names import Names, resolve_names
from rpquery.read._policies import keep_and_weigh, where_clauses
from rpquery.read.request import Params, ProvidersRequest, as_providers_request
from rpquery.store import dialects
from rpquery.store.tables import inventories, resource_providers

__all__ = [
    "ResourceProvider",
    "list_providers",
    "provider_statements",
    "providers_stmt",
    "to_placement",
]


def to_placement(providers: Sequence[ResourceProvider]) -> dict[str, Any]:
    """The body of ``GET /resource_providers``: ``{"resource_providers": [...]}``."""
    return {"resource_providers": [p.to_placement() for p in providers]}


def _names(conn: Connection, req: ProvidersRequest) -> Names:
    """Ids of the request's classes and traits (:func:`rpquery.read._names.resolve_names`)."""
    return resolve_names(conn, req.filters.resources, req.trait_names())


def providers_stmt(
    req: ProvidersRequest, names: Names, policies: Sequence[HostPolicy] = ()
) -> Select:
    """``SELECT rp.uuid, rp.name, rp.generation, root.uuid, parent.uuid, rp.root_provider_id
    FROM resource_providers rp JOIN resource_providers root ... LEFT JOIN ... parent
    WHERE [rp.uuid = :u] [AND rp.name = :n] AND EXISTS (<inventory with room>) ...
    AND EXISTS (<required trait>) AND NOT EXISTS (<forbidden trait>) ... ORDER BY rp.id``
    """
    rp = resource_providers.alias("rp")
    root = resource_providers.alias("root")
    parent = resource_providers.alias("parent")
    g = req.filters
    where = provider_filters(g, names, rp, with_required=True, root_covers=False)
    for rc, amount in sorted(g.resources.items()):
        inv = inventories.alias(f"inv_{rc.lower()}")
        used = clauses.usage_subquery(inv.c.resource_provider_id, inv.c.resource_class_id)
        where.append(
            sa.exists().where(
                inv.c.resource_provider_id == rp.c.id,
                inv.c.resource_class_id == names.rc_ids[rc],
                clauses.capacity_fits(inv, amount, used),
            )
        )
    if req.uuid is not None:
        where.append(rp.c.uuid == req.uuid)
    if req.name is not None:
        where.append(dialects.exact_eq(rp.c.name, sa.literal(req.name, rp.c.name.type)))
    where.extend(where_clauses(policies, rp.c.root_provider_id))
    return (
        sa.select(
            rp.c.uuid,
            rp.c.name,
            rp.c.generation,
            root.c.uuid.label("root_uuid"),
            parent.c.uuid.label("parent_uuid"),
            rp.c.root_provider_id,
        )
        .select_from(
            rp.join(root, root.c.id == rp.c.root_provider_id).outerjoin(
                parent, parent.c.id == rp.c.parent_provider_id
            )
        )
        .where(*where)
        .order_by(rp.c.id)
    )


def list_providers(
    db: Database | Connection,
    request: ProvidersRequest | Params,
    *,
    policies: Sequence[HostPolicy] = (),
) -> list[ResourceProvider]:
    """Providers matching ``request``; policies filter (``where``, ``keep``) and order
    (``weigh``) by the provider's root."""
    req = as_providers_request(request)
    with reading(db) as conn:
        return _run(conn, req, policies)


def _run(
    conn: Connection, req: ProvidersRequest, policies: Sequence[HostPolicy]
) -> list[ResourceProvider]:
    dialects.read_session_setup(conn)
    rows = conn.execute(providers_stmt(req, _names(conn, req), policies)).all()
    if policies:
        rows = keep_and_weigh(conn, rows, _root_id, policies)
    # (by position: a provider list may have thousands of rows)
    return [
        ResourceProvider(uuid, name, int(generation or 0), root_uuid, parent_uuid)
        for uuid, name, generation, root_uuid, parent_uuid, _ in rows
    ]


def _root_id(row: Any) -> int:
    return int(row.root_provider_id)


def provider_statements(
    db_or_conn: Database | Connection, request: ProvidersRequest | Params
) -> list[Executable]:
    """The statement ``list_providers`` runs, for ``explain`` and benchmarks."""
    req = as_providers_request(request)
    with reading(db_or_conn) as conn:
        return [providers_stmt(req, _names(conn, req))]
