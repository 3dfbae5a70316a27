"""Reshapes: move inventory and allocations between the providers of a tree in one atomic
step (Placement's ``POST /reshaper``, microversion 1.30; consumer types from 1.38).

The typical use splits a compute node: its VCPU and MEMORY_MB inventory moves from the
root provider to new NUMA children while the instances keep running, and their
allocations move to the children in the same transaction::

    reshape(db,
            inventories={root: ProviderInventories(5, {"DISK_GB": Inventory(500)}),
                         numa0: ProviderInventories(0, {"VCPU": Inventory(8), ...}),
                         numa1: ProviderInventories(0, {"VCPU": Inventory(8), ...})},
            allocations=[ConsumerAllocations(inst1, "proj", "user", "INSTANCE", 1,
                                             {numa0: {"VCPU": 2}, root: {"DISK_GB": 20}}),
                         ...])

One transaction (:func:`reshape`), in this order:

1. resource class names → ids; every provider named (and every provider the reshaped
   consumers hold allocations on now) resolved in one statement; unknown → ``NotFound``;
2. each inventory provider's generation compared with the caller's, then all of them
   raised by one conditional ``UPDATE`` (which also takes their row locks, so allocation
   writers on those providers queue behind the reshape or see the new generation);
3. usage and capacity of every touched provider read (the *before* state);
4. Placement's *interim* inventories written: the new ones over the old, the classes to
   be removed still there (:func:`rpquery.write.inventory.write_inventory_rows` with
   ``check_usage=False``: old and new inventory may briefly disagree with the allocations);
5. the consumers' allocations replaced by the write path
   (:func:`rpquery.write.allocations.write_consumer_allocations`: consumer generations, types,
   unit rules and capacity against the interim inventories; providers raised in step 2
   are not raised again);
6. the complete new inventories written (the removed classes go);
7. the *after* state read and checked: no allocation left on a class whose inventory is
   gone (``rpquery.reshape.inventory_in_use`` in Placement's words, also when the new
   allocations themselves use it — Placement's 409 ``placement.inventory.inuse``), and no
   (provider, class) over capacity unless its overage is not larger than before the
   reshape (the write path's rule).

Any error rolls everything back. Provider generation races (the conditional UPDATE
matched fewer rows) and deadlocks are retried by
:func:`rpquery.write.allocations.run_with_retry`; a stale generation given by the caller is not.

>>> body = {"inventories": {}, "allocations": {}}
>>> parse_reshape_body(body)
ReshapeRequest(inventories={}, allocations=())
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery._validation import check_int, check_uuid
from rpquery.db import Database
from rpquery.errors import (
    CapacityExceeded,
    ConcurrentUpdate,
    InUse,
    InvalidRequest,
    NotFound,
    invalid,
)
from rpquery.models import ConsumerAllocations, Inventory
from rpquery.store import catalog, dialects
from rpquery.store.tables import allocations, inventories, resource_classes, resource_providers
from rpquery.write import allocations as write_path
from rpquery.write.inventory import check_inventory, in_use_detail, write_inventory_rows

__all__ = [
    "BAD_BODY",
    "CAPACITY_EXCEEDED",
    "INVENTORY_IN_USE",
    "PROVIDER_NOT_FOUND",
    "STALE_PROVIDER",
    "ProviderInventories",
    "ReshapeRequest",
    "pair_usage_select",
    "parse_reshape_body",
    "providers_select",
    "render_reshape_body",
    "reshape_current",
    "reshape",
    "validate",
]

STALE_PROVIDER = "rpquery.reshape.provider_generation_conflict"
PROVIDER_NOT_FOUND = "rpquery.reshape.provider_not_found"
CAPACITY_EXCEEDED = "rpquery.reshape.capacity_exceeded"
INVENTORY_IN_USE = "rpquery.reshape.inventory_in_use"
BAD_BODY = "rpquery.reshape.bad_body"

_INV_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


# ---------------------------------------------------------------- values


@dataclass(frozen=True)
class ProviderInventories:
    """The complete new inventories of one provider, guarded by the generation the
    caller read. Classes not named are removed from the provider."""

    generation: int
    inventories: Mapping[str, Inventory] = field(default_factory=dict)


@dataclass(frozen=True)
class ReshapeRequest:
    """A parsed ``POST /reshaper`` body."""

    inventories: Mapping[str, ProviderInventories]
    allocations: tuple[ConsumerAllocations, ...]


@dataclass(frozen=True)
class _PairUsage:
    """Usage of one (provider, class) and its capacity (``None``: no inventory)."""

    resource_class: str
    used: int
    capacity: int | None

    @property
    def overage(self) -> int:
        return max(0, self.used - self.capacity) if self.capacity is not None else self.used


_Pairs = dict[tuple[int, int], _PairUsage]


# ---------------------------------------------------------------- validation (pure)


def validate(
    inventories: Mapping[str, ProviderInventories],
    allocations: Sequence[ConsumerAllocations],
) -> tuple[dict[str, ProviderInventories], list[ConsumerAllocations]]:
    """Check everything that needs no database; return canonical uuids.

    Raises ``InvalidRequest``: ``rpquery.provider.bad_uuid``,
    ``rpquery.provider.bad_generation``, ``rpquery.inventory.bad_<field>``,
    ``rpquery.resource_class.bad_name`` and every code of
    :func:`rpquery.write.allocations.validate_requests` (``rpquery.consumer.bad_type`` for a
    bad consumer type among them).
    """
    checked: dict[str, ProviderInventories] = {}
    for rp_uuid, provider in inventories.items():
        uuid = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
        if uuid in checked:
            raise InvalidRequest(
                "rpquery.reshape.duplicate_provider",
                f"provider {uuid} is named twice (in two forms of its uuid)",
                token=str(rp_uuid),
            )
        check_int(
            provider.generation,
            "rpquery.provider.bad_generation",
            "resource_provider_generation",
        )
        for rc, inv in provider.inventories.items():
            check_inventory(rc, inv)
        checked[uuid] = provider
    return checked, write_path.validate_requests(allocations)


# ---------------------------------------------------------------- statements (pure)


def providers_select(provider_uuids: Sequence[str], consumer_uuids: Sequence[str]) -> sa.Select:
    """Every provider the reshape touches: those named, plus those the reshaped consumers
    hold allocations on now.

    ``SELECT id, uuid, generation FROM resource_providers WHERE uuid IN (:p)
    OR id IN (SELECT resource_provider_id FROM allocations WHERE consumer_id IN (:c))``
    """
    rp = resource_providers
    held = sa.select(allocations.c.resource_provider_id).where(
        allocations.c.consumer_id.in_(sorted(consumer_uuids))
    )
    return (
        sa.select(rp.c.id, rp.c.uuid, sa.func.coalesce(rp.c.generation, 0).label("generation"))
        .where(sa.or_(rp.c.uuid.in_(sorted(provider_uuids)), rp.c.id.in_(held)))
        .order_by(rp.c.id)
    )


def pair_usage_select(provider_ids: Sequence[int]) -> sa.Select:
    """Usage per allocated (provider, class) of the given providers with the inventory
    that bounds it (NULLs when there is none)::

        SELECT a.resource_provider_id, a.resource_class_id, rc.name, SUM(a.used),
               inv.total, inv.reserved, inv.allocation_ratio
        FROM allocations a JOIN resource_classes rc ON rc.id = a.resource_class_id
        LEFT JOIN inventories inv ON (inv.rp, inv.rc) = (a.rp, a.rc)
        WHERE a.resource_provider_id IN (:ids)
        GROUP BY a.resource_provider_id, a.resource_class_id, rc.name,
                 inv.total, inv.reserved, inv.allocation_ratio
    """
    a, inv, rc = allocations, inventories, resource_classes
    keys = (
        a.c.resource_provider_id,
        a.c.resource_class_id,
        rc.c.name,
        inv.c.total,
        inv.c.reserved,
        inv.c.allocation_ratio,
    )
    return (
        sa.select(*keys, sa.func.sum(a.c.used).label("used"))
        .select_from(a)
        .join(rc, rc.c.id == a.c.resource_class_id)
        .outerjoin(
            inv,
            sa.and_(
                inv.c.resource_provider_id == a.c.resource_provider_id,
                inv.c.resource_class_id == a.c.resource_class_id,
            ),
        )
        .where(a.c.resource_provider_id.in_(sorted(provider_ids)))
        .group_by(*keys)
    )


# ---------------------------------------------------------------- the transaction


def reshape(
    db: Database,
    inventories: Mapping[str, ProviderInventories],
    allocations: Sequence[ConsumerAllocations],
) -> None:
    """Apply new inventories and allocations atomically: everything or nothing.

    Errors (nothing is written on any of them):

    - ``InvalidRequest``: bad input (see :func:`validate`), raised before any statement;
      unknown resource class (``rpquery.resource_class.not_found``);
    - ``NotFound`` ``rpquery.reshape.provider_not_found``: a named provider does not exist;
    - ``ConcurrentUpdate`` ``rpquery.reshape.provider_generation_conflict``: a provider's
      generation is not the one given; ``rpquery.consumer.generation_conflict``: a stale
      consumer generation;
    - ``CapacityExceeded`` ``rpquery.reshape.capacity_exceeded``: the final state is over
      capacity; ``rpquery.allocation.no_inventory`` / ``below_min_unit`` /
      ``above_max_unit`` / ``step_size``: an allocation the new inventory cannot take;
    - ``InUse`` ``rpquery.reshape.inventory_in_use``: an inventory was removed while
      allocations (of consumers not moved away) remain on it.
    """
    inv_map, batch = validate(inventories, allocations)
    write_path.run_with_retry(db, lambda conn: _reshape_on(conn, inv_map, batch))


#: What :func:`reshape_current` asks the caller for: the reshape, built on the current
#: generations (provider uuid -> generation) inside the transaction that holds them.
Builder = Callable[
    [Connection, Mapping[str, int]],
    tuple[Mapping[str, ProviderInventories], Sequence[ConsumerAllocations]],
]


def reshape_current(db: Database, provider_uuids: Sequence[str], build: Builder) -> None:
    """A reshape that cannot starve behind claimers: :func:`reshape` takes the
    generations its caller read, and claims on those providers raise them meanwhile (a
    reshape racing six claimers went through 1 time in 136 on PostgreSQL). Here one
    transaction locks the rows of ``provider_uuids`` first (``SELECT ... FOR UPDATE``,
    in id order as the write path takes them; SQLite's ``BEGIN IMMEDIATE``), reads their
    generations, calls ``build(conn, generations)`` for the reshape and applies it:
    claims queue behind it instead of invalidating it. A deadlock is retried
    (:func:`rpquery.write.allocations.run_with_retry`). Same errors as :func:`reshape`.
    """

    uuids = sorted({check_uuid(u, BAD_BODY, "provider") for u in provider_uuids})
    rp = resource_providers
    lock = (
        sa.select(rp.c.uuid, rp.c.generation)
        .where(rp.c.uuid.in_(uuids))
        .order_by(rp.c.id)
        .with_for_update()
    )

    def once(conn: Connection) -> None:
        current = {row.uuid: int(row.generation) for row in conn.execute(lock)}
        inventories, allocations = build(conn, current)
        _reshape_on(conn, *validate(inventories, allocations))

    write_path.run_with_retry(db, once)


def _reshape_on(
    conn: Connection,
    inv_map: Mapping[str, ProviderInventories],
    batch: Sequence[ConsumerAllocations],
) -> None:
    names = {rc for p in inv_map.values() for rc in p.inventories}
    names |= {rc for req in batch for _, rc, _ in req.resource_pairs()}
    rc_ids = catalog.require_resource_class_ids(conn, names) if names else {}
    wanted = set(inv_map) | {rp for req in batch for rp in req.allocations}
    ids = _resolve_providers(conn, wanted, [req.consumer_uuid for req in batch])
    _claim_generations(inv_map, ids)
    write_path.bump_provider_generations(
        conn, {ids[uuid][0]: p.generation for uuid, p in inv_map.items()}
    )
    touched = sorted(rp_id for rp_id, _ in ids.values())
    before = _pair_usages(conn, touched)
    emptied = [req.consumer_uuid for req in batch if req.is_empty]
    held = write_path.held_provider_ids(conn, emptied)
    for uuid, provider in inv_map.items():  # interim: the new inventories over the old
        write_inventory_rows(conn, ids[uuid][0], provider.inventories, rc_ids, check_usage=False)
    if batch:
        bumped = {ids[uuid][0] for uuid in inv_map}
        try:
            write_path.write_consumer_allocations(conn, batch, already_bumped=bumped)
        except CapacityExceeded as error:
            if error.code != "rpquery.allocation.capacity_exceeded":
                raise
            raise CapacityExceeded(
                CAPACITY_EXCEEDED,
                error.detail,
                token=error.token,
                provider=error.provider,
                resource_class=error.resource_class,
            ) from error
    for uuid, provider in inv_map.items():  # final: exactly the new inventories
        write_inventory_rows(
            conn, ids[uuid][0], provider.inventories, rc_ids, replace_all=True, check_usage=False
        )
    uuids = {rp_id: uuid for uuid, (rp_id, _) in ids.items()}
    _check_final(before, _pair_usages(conn, touched), uuids, [ids[uuid][0] for uuid in inv_map])
    _match_placement_generations(conn, inv_map, batch, ids, held)


def _match_placement_generations(
    conn: Connection,
    inv_map: Mapping[str, ProviderInventories],
    batch: Sequence[ConsumerAllocations],
    ids: Mapping[str, tuple[int, int]],
    held: set[int],
) -> None:
    """Raise generations to where Placement's reshaper leaves them, so clients that
    compare generations see the same values. Placement bumps a provider once for its
    interim inventory (when it has any), once in the allocation write (providers named
    in the new allocations, and those of consumers whose allocations are emptied) and
    once for its final inventory; the write above bumped each touched provider once."""
    in_allocs = {ids[rp][0] for req in batch for rp in req.allocations} | held
    extra: dict[int, int] = {}
    for uuid, provider in inv_map.items():
        rp_id = ids[uuid][0]
        extra[rp_id] = bool(provider.inventories) + (rp_id in in_allocs)
    rp = resource_providers
    for rp_id, more in sorted(extra.items()):
        if more:
            conn.execute(
                rp.update().where(rp.c.id == rp_id).values(generation=rp.c.generation + more)
            )


def _resolve_providers(
    conn: Connection, wanted: set[str], consumer_uuids: Sequence[str]
) -> dict[str, tuple[int, int]]:
    """``uuid -> (id, generation)`` of every touched provider; ``NotFound`` for the first
    (sorted) named provider that does not exist."""
    found = {
        row.uuid: (int(row.id), int(row.generation))
        for row in conn.execute(providers_select(sorted(wanted), consumer_uuids))
    }
    missing = sorted(wanted - found.keys())
    if missing:
        raise NotFound(PROVIDER_NOT_FOUND, f"no resource provider {missing[0]}", token=missing[0])
    return found


def _claim_generations(
    inv_map: Mapping[str, ProviderInventories], ids: Mapping[str, tuple[int, int]]
) -> None:
    for uuid, provider in inv_map.items():
        current = ids[uuid][1]
        if current != provider.generation:
            raise ConcurrentUpdate(
                STALE_PROVIDER,
                f"provider {uuid} is at generation {current}, not {provider.generation}",
                token=uuid,
                provider=uuid,
                expected_generation=provider.generation,
                actual_generation=current,
            )


def _pair_usages(conn: Connection, provider_ids: Sequence[int]) -> _Pairs:
    pairs: _Pairs = {}
    for row in conn.execute(pair_usage_select(provider_ids)):
        capacity = None
        if row.total is not None:
            ratio = dialects.backend(conn.dialect.name).ratio_as_written(
                float(row.allocation_ratio)
            )
            inv = Inventory(total=row.total, reserved=row.reserved, allocation_ratio=ratio)
            capacity = inv.capacity
        pairs[(row.resource_provider_id, row.resource_class_id)] = _PairUsage(
            row.name, int(row.used), capacity
        )
    return pairs


def _check_final(
    before: _Pairs, after: _Pairs, uuids: Mapping[int, str], order: Sequence[int]
) -> None:
    """The final state: no allocation without inventory (checked first, as Placement
    reports a removed inventory in use before any capacity problem: for the first
    provider of the request's inventories, in ``order``, with all its classes in use, in
    Placement's words); no overage larger than before."""
    for rp_id in order:
        lost = [
            p.resource_class
            for (rp, _), p in sorted(after.items())
            if rp == rp_id and p.capacity is None
        ]
        if lost:
            raise InUse(INVENTORY_IN_USE, in_use_detail(lost, uuids[rp_id]), token=lost[0])
    for (rp_id, rc_id), pair in sorted(after.items()):
        rc = pair.resource_class
        where = f"{rc} on provider {uuids.get(rp_id, rp_id)}"
        old = before.get((rp_id, rc_id))
        allowed = old.overage if old is not None and old.capacity is not None else 0
        if pair.overage > allowed:
            raise CapacityExceeded(
                CAPACITY_EXCEEDED,
                f"{where}: usage {pair.used} would exceed capacity {pair.capacity}",
                token=rc,
                provider=uuids.get(rp_id),
                resource_class=rc,
            )


# ---------------------------------------------------------------- Placement 1.38 body


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise invalid(BAD_BODY, f"{where} must be an object", where)
    return value


def _only_keys(
    value: Mapping[str, Any], where: str, required: set[str], allowed: set[str]
) -> None:
    for key in value:
        if key not in allowed:
            raise invalid(BAD_BODY, f"unexpected key {key!r} in {where}", f"{where}.{key}")
    for key in sorted(required - value.keys()):
        raise invalid(BAD_BODY, f"{where} lacks required key {key!r}", f"{where}.{key}")


def _parse_inventory(rc: str, spec: Any, where: str) -> Inventory:
    spec = _mapping(spec, where)
    _only_keys(spec, where, {"total"}, set(_INV_FIELDS))
    return Inventory(**spec)


_PROVIDER_KEYS = {"resource_provider_generation", "inventories"}


def _parse_provider(rp_uuid: str, spec: Any) -> ProviderInventories:
    where = f"inventories.{rp_uuid}"
    spec = _mapping(spec, where)
    _only_keys(spec, where, _PROVIDER_KEYS, _PROVIDER_KEYS)
    invs = _mapping(spec["inventories"], f"{where}.inventories")
    return ProviderInventories(
        spec["resource_provider_generation"],
        {rc: _parse_inventory(rc, inv, f"{where}.inventories.{rc}") for rc, inv in invs.items()},
    )


_CONSUMER_KEYS = {"allocations", "project_id", "user_id", "consumer_generation", "consumer_type"}


def _parse_consumer(consumer_uuid: str, spec: Any) -> ConsumerAllocations:
    where = f"allocations.{consumer_uuid}"
    spec = _mapping(spec, where)
    _only_keys(spec, where, _CONSUMER_KEYS, _CONSUMER_KEYS)
    resources: dict[str, Mapping[str, int]] = {}
    for rp_uuid, entry in _mapping(spec["allocations"], f"{where}.allocations").items():
        here = f"{where}.allocations.{rp_uuid}"
        entry = _mapping(entry, here)
        _only_keys(entry, here, {"resources"}, {"resources", "generation"})
        resources[rp_uuid] = dict(_mapping(entry["resources"], f"{here}.resources"))
    return ConsumerAllocations(
        consumer_uuid,
        spec["project_id"],
        spec["user_id"],
        spec["consumer_type"],
        spec["consumer_generation"],
        resources,
    )


def parse_reshape_body(body: Any) -> ReshapeRequest:
    """Placement 1.38 ``POST /reshaper`` body → :class:`ReshapeRequest`.

    Only the shape is checked here (``InvalidRequest`` ``rpquery.reshape.bad_body``, token
    = the dotted path of the offending key); values are checked by :func:`reshape`.
    """
    body = _mapping(body, "body")
    _only_keys(body, "body", {"inventories", "allocations"}, {"inventories", "allocations"})
    inv = {
        rp: _parse_provider(rp, spec)
        for rp, spec in _mapping(body["inventories"], "inventories").items()
    }
    allocs = tuple(
        _parse_consumer(c, spec)
        for c, spec in _mapping(body["allocations"], "allocations").items()
    )
    return ReshapeRequest(inv, allocs)


def render_reshape_body(
    inventories: Mapping[str, ProviderInventories],
    allocations: Sequence[ConsumerAllocations],
) -> dict[str, Any]:
    """:class:`ReshapeRequest` parts → Placement 1.38 ``POST /reshaper`` body (the inverse
    of :func:`parse_reshape_body`)."""
    return {
        "inventories": {
            rp: {
                "resource_provider_generation": p.generation,
                "inventories": {
                    rc: {name: getattr(inv, name) for name in _INV_FIELDS}
                    for rc, inv in p.inventories.items()
                },
            }
            for rp, p in inventories.items()
        },
        "allocations": {
            req.consumer_uuid: {
                "allocations": {
                    rp: {"resources": dict(rcs)} for rp, rcs in req.allocations.items()
                },
                "project_id": req.project_id,
                "user_id": req.user_id,
                "consumer_generation": req.consumer_generation,
                "consumer_type": req.consumer_type,
            }
            for req in allocations
        },
    }
