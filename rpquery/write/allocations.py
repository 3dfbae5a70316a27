"""Allocation writes: replace every allocation of one consumer (or of several consumers)
atomically, with Placement's capacity, unit and generation rules.

>>> from rpquery.models import ConsumerAllocations
>>> request = ConsumerAllocations(
...     consumer_uuid="30328d13-e299-4a93-a102-61e4ccabe474",
...     project_id="proj", user_id="user", consumer_type="INSTANCE",
...     consumer_generation=None,                   # a new consumer
...     allocations={"e10927c4-8bc9-465d-ac60-d2f79f7e4a00": {"VCPU": 2}})
>>> # replace_allocations(db, request)

One attempt of a write (:func:`write_consumer_allocations`) runs, in one transaction:

1. resource class names → ids (unknown → ``InvalidRequest``);
2. :func:`read_state`: *one* statement returning, for every affected provider (the
   requested ones and those the consumers hold allocations on now), its generation, its
   inventories and the usage of each class split into "by these consumers" and "by
   everyone else";
3. :func:`check_capacity` (pure): provider exists, inventory exists, min/max/step, and
   capacity — an over-capacity result is accepted only if it is not worse than before;
4. :func:`bump_provider_generations`: one conditional ``UPDATE`` raising, from the value
   read in step 2, the generation of the providers Placement raises
   (:func:`receiving_providers`: those named in the new allocations and those of emptied
   consumers, not those a consumer only leaves). This also takes their row locks first,
   in id order, so concurrent writers queue instead of deadlocking;
5. consumers: create (generation ``None``), bump (conditional ``UPDATE``) or delete
   (empty allocations), see :mod:`rpquery.write.consumers`;
6. delete the consumers' old allocations, insert the new ones.

:func:`replace_allocations` / :func:`replace_many` / :func:`delete_allocations` wrap that
in :func:`run_with_retry`: up to :data:`MAX_ATTEMPTS` attempts with jittered exponential
backoff (:mod:`rpquery.retry`), retried only on provider generation conflicts and
deadlocks/serialization failures, never on a consumer generation conflict.

The reshaper (one outer transaction for inventories *and* allocations) calls
:func:`write_consumer_allocations` with its own connection, and may wrap its whole
transaction in :func:`run_with_retry`.

``get_allocations`` lives in :mod:`rpquery.read.objects` and is re-exported here.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery._validation import check_external_id, check_int, check_uuid
from rpquery.db import Database
from rpquery.errors import CapacityExceeded, ConcurrentUpdate, InvalidRequest
from rpquery.models import (
    ConsumerAllocations,
    Inventory,
    check_consumer_type,
)
from rpquery.read.objects import INVENTORY_FIELDS, get_allocations
from rpquery.retry import ALLOCATION_WRITES, retrying
from rpquery.store import catalog, dialects
from rpquery.store.dialects import to_int
from rpquery.store.tables import allocations, inventories, resource_providers
from rpquery.write import consumers
from rpquery.write.generations import (
    PROVIDER_GENERATION_CONFLICT,
    bump_provider_generations,
    generation_bump,
    held_provider_ids,
)

__all__ = [
    "MAX_ATTEMPTS",
    "ConsumerAllocations",
    "PairState",
    "ProviderState",
    "WriteState",
    "bump_provider_generations",
    "check_capacity",
    "delete_allocations",
    "generation_bump",
    "get_allocations",
    "held_provider_ids",
    "read_state",
    "receiving_providers",
    "replace_allocations",
    "replace_many",
    "run_with_retry",
    "state_select",
    "usage_split_subquery",
    "validate_requests",
    "write_consumer_allocations",
]

#: Attempts of one allocation write before a provider conflict is given to the caller.
MAX_ATTEMPTS = ALLOCATION_WRITES.attempts

#: ``ConcurrentUpdate`` codes worth another attempt: a provider moved on, or the server
#: broke a deadlock / serialization failure (``rpquery.db`` maps those).
RETRYABLE_CODES = frozenset({PROVIDER_GENERATION_CONFLICT, "rpquery.concurrent_update"})

T = TypeVar("T")


# ---------------------------------------------------------------- values


@dataclass(frozen=True)
class ProviderState:
    """An affected provider as read at the start of the write."""

    id: int
    uuid: str
    generation: int


@dataclass(frozen=True)
class PairState:
    """One (provider, resource class) inventory with its current usage, split into the
    part held by the consumers being written and the part held by everyone else."""

    provider: ProviderState
    resource_class_id: int
    inventory: Inventory
    used_by_others: int
    used_by_writers: int


@dataclass(frozen=True)
class WriteState:
    """Everything an allocation write reads: providers by uuid, pairs by (uuid, class id)."""

    providers: Mapping[str, ProviderState]
    pairs: Mapping[tuple[str, int], PairState]


# ---------------------------------------------------------------- validation (pure)


def _check_request(req: ConsumerAllocations) -> ConsumerAllocations:
    consumer_uuid = check_uuid(req.consumer_uuid, "rpquery.consumer.bad_uuid", "consumer")
    check_external_id(req.project_id, "rpquery.consumer.bad_project", "project id")
    check_external_id(req.user_id, "rpquery.consumer.bad_user", "user id")
    if req.consumer_type is not None:
        check_consumer_type(req.consumer_type)
    if req.consumer_generation is not None and req.generation_checked:
        check_int(
            req.consumer_generation,
            "rpquery.consumer.bad_generation",
            "consumer_generation",
        )
    normalized: dict[str, dict[str, int]] = {}
    seen: set[str] = set()
    for rp_uuid, resources in req.allocations.items():
        rp = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
        if rp in seen:
            raise InvalidRequest(
                "rpquery.allocation.duplicate_provider",
                f"provider {rp} is named twice (in two forms of its uuid)",
                token=str(rp_uuid),
            )
        seen.add(rp)
        for rc, amount in resources.items():
            catalog.check_resource_class_name(rc)
            check_int(amount, "rpquery.allocation.bad_amount", f"amount of {rc}", minimum=1)
        if resources:
            normalized.setdefault(rp, {}).update(resources)
    return dataclasses.replace(req, consumer_uuid=consumer_uuid, allocations=normalized)


def validate_requests(requests: Iterable[ConsumerAllocations]) -> list[ConsumerAllocations]:
    """Check every field without the database and return the requests with canonical
    uuids. Raises ``InvalidRequest``: ``rpquery.consumer.bad_uuid``,
    ``rpquery.provider.bad_uuid``, ``rpquery.consumer.bad_type``,
    ``rpquery.consumer.bad_project``/``bad_user``, ``rpquery.consumer.bad_generation``,
    ``rpquery.resource_class.bad_name``, ``rpquery.allocation.bad_amount`` (amount not an
    int > 0) or ``rpquery.allocation.duplicate_consumer``."""
    checked = [_check_request(req) for req in requests]
    seen: set[str] = set()
    for req in checked:
        if req.consumer_uuid in seen:
            raise InvalidRequest(
                "rpquery.allocation.duplicate_consumer",
                f"consumer {req.consumer_uuid} appears twice in one write",
                token=req.consumer_uuid,
            )
        seen.add(req.consumer_uuid)
    return checked


# ---------------------------------------------------------------- reading state


def usage_split_subquery(in_play: sa.Subquery, writers: list[str]) -> sa.Subquery:
    """Usage per (provider, class) of the providers in play, split into the part held by
    ``writers`` (the consumers being rewritten) and the part held by everyone else."""
    alloc = allocations
    is_writer = alloc.c.consumer_id.in_(writers)
    return (
        sa.select(
            alloc.c.resource_provider_id,
            alloc.c.resource_class_id,
            sa.func.sum(sa.case((is_writer, 0), else_=alloc.c.used)).label("others"),
            sa.func.sum(sa.case((is_writer, alloc.c.used), else_=0)).label("writers"),
        )
        .select_from(alloc.join(in_play, in_play.c.id == alloc.c.resource_provider_id))
        .group_by(alloc.c.resource_provider_id, alloc.c.resource_class_id)
        .subquery("usage")
    )


def state_select(provider_uuids: Iterable[str], consumer_uuids: Iterable[str]) -> sa.Select:
    """Providers in play with their inventories and usage, in one statement.

    Sketch::

        SELECT rp.id, rp.uuid, rp.generation, inv.*, u.others, u.writers
        FROM (SELECT id FROM resource_providers WHERE uuid IN (:p)
              UNION
              SELECT resource_provider_id FROM allocations WHERE consumer_id IN (:c))
             AS in_play
        JOIN resource_providers rp ON rp.id = in_play.id
        LEFT JOIN inventories inv ON inv.resource_provider_id = rp.id
        LEFT JOIN <usage_split_subquery: allocations JOIN in_play ...> u
             ON (u.rp, u.rc) = (inv.rp, inv.rc)

    The providers in play are a ``UNION`` of two index lookups, not an ``OR``: with
    ``uuid IN (...) OR id IN (...)`` PostgreSQL can use neither index and scans
    ``allocations`` on every write (found by ``make bench``'s EXPLAIN of claims). And
    they are a derived table joined *from*, not ``rp.id IN (<union>)``: MariaDB ran that
    ``IN`` as a dependent subquery for every provider of the cloud (23 ms of a 25 ms
    claim at 5,000 hosts, found by the same EXPLAIN).
    """
    rp, inv, alloc = resource_providers, inventories, allocations
    writers = sorted(set(consumer_uuids))

    def in_play() -> sa.Subquery:
        return sa.union(
            sa.select(rp.c.id.label("id")).where(rp.c.uuid.in_(sorted(set(provider_uuids)))),
            sa.select(alloc.c.resource_provider_id.label("id")).where(
                alloc.c.consumer_id.in_(writers)
            ),
        ).subquery("in_play")

    providers = in_play()
    usage = usage_split_subquery(in_play(), writers)
    inventory_cols = [inv.c[name] for name in INVENTORY_FIELDS]
    return (
        sa.select(
            rp.c.id,
            rp.c.uuid,
            rp.c.generation,
            inv.c.resource_class_id,
            *inventory_cols,
            usage.c.others,
            usage.c.writers,
        )
        .select_from(providers.join(rp, rp.c.id == providers.c.id))
        .outerjoin(inv, inv.c.resource_provider_id == rp.c.id)
        .outerjoin(
            usage,
            sa.and_(
                usage.c.resource_provider_id == inv.c.resource_provider_id,
                usage.c.resource_class_id == inv.c.resource_class_id,
            ),
        )
        .order_by(rp.c.id, inv.c.resource_class_id)
    )


def read_state(
    conn: Connection, provider_uuids: Iterable[str], consumer_uuids: Iterable[str]
) -> WriteState:
    """Run :func:`state_select` and shape the rows (one round trip)."""
    providers: dict[str, ProviderState] = {}
    pairs: dict[tuple[str, int], PairState] = {}
    for row in conn.execute(state_select(provider_uuids, consumer_uuids)):
        prov = providers.get(row.uuid)
        if prov is None:
            prov = providers[row.uuid] = ProviderState(row.id, row.uuid, int(row.generation or 0))
        if row.resource_class_id is None:
            continue
        inventory = Inventory(
            row.total,
            row.reserved,
            row.min_unit,
            row.max_unit,
            row.step_size,
            dialects.backend(conn.dialect.name).ratio_as_written(float(row.allocation_ratio)),
        )
        pairs[(row.uuid, row.resource_class_id)] = PairState(
            prov, row.resource_class_id, inventory, to_int(row.others), to_int(row.writers)
        )
    return WriteState(providers, pairs)


# ---------------------------------------------------------------- capacity (pure)


def _requested_by_pair(
    requests: Sequence[ConsumerAllocations], rc_ids: Mapping[str, int]
) -> dict[tuple[str, int], list[tuple[str, int]]]:
    """``(provider uuid, class id) -> [(resource class name, amount), ...]`` per consumer."""
    wanted: dict[tuple[str, int], list[tuple[str, int]]] = defaultdict(list)
    for req in requests:
        for rp_uuid, rc, amount in req.resource_pairs():
            wanted[(rp_uuid, rc_ids[rc])].append((rc, amount))
    return wanted


def _check_units(rp_uuid: str, rc: str, amount: int, inv: Inventory) -> None:
    max_unit = inv.max_unit if inv.max_unit is not None else inv.total
    if amount < inv.min_unit:
        code, why = "rpquery.allocation.below_min_unit", f"below min_unit {inv.min_unit}"
    elif amount > max_unit:
        code, why = "rpquery.allocation.above_max_unit", f"above max_unit {max_unit}"
    elif amount % inv.step_size:
        code, why = "rpquery.allocation.step_size", f"not a multiple of step_size {inv.step_size}"
    else:
        return
    raise CapacityExceeded(
        code,
        f"{rc}={amount} on provider {rp_uuid}: {why}",
        token=rc,
        provider=rp_uuid,
        resource_class=rc,
    )


def check_capacity(
    state: WriteState,
    requests: Sequence[ConsumerAllocations],
    rc_ids: Mapping[str, int],
) -> None:
    """Raise unless every requested amount fits (docs/design.md#capacity).

    - provider unknown → ``InvalidRequest`` ``rpquery.allocation.provider_not_found``;
    - no inventory of the class → ``CapacityExceeded`` ``rpquery.allocation.no_inventory``;
    - min/max/step → ``rpquery.allocation.below_min_unit`` / ``above_max_unit`` /
      ``step_size``;
    - ``others + new > capacity`` and the new total is larger than the current one →
      ``rpquery.allocation.capacity_exceeded`` (the consumers' own previous allocations
      do not count; an existing overage may stay or shrink, never grow).

    >>> inv = Inventory(total=4)
    >>> prov = ProviderState(1, "rp", 0)
    >>> state = WriteState({"rp": prov}, {("rp", 0): PairState(prov, 0, inv, 3, 0)})
    >>> req = ConsumerAllocations("c", "p", "u", "T", None, {"rp": {"VCPU": 2}})
    >>> check_capacity(state, [req], {"VCPU": 0})
    Traceback (most recent call last):
    ...
    rpquery.errors.CapacityExceeded: ... (rpquery.allocation.capacity_exceeded)
    """
    for (rp_uuid, rc_id), amounts in sorted(_requested_by_pair(requests, rc_ids).items()):
        rc = amounts[0][0]
        if rp_uuid not in state.providers:
            raise InvalidRequest(
                "rpquery.allocation.provider_not_found",
                f"allocation against provider {rp_uuid}, which does not exist",
                token=rp_uuid,
            )
        pair = state.pairs.get((rp_uuid, rc_id))
        if pair is None:
            raise CapacityExceeded(
                "rpquery.allocation.no_inventory",
                f"provider {rp_uuid} has no inventory of {rc}",
                token=rc,
                provider=rp_uuid,
                resource_class=rc,
            )
        for _, amount in amounts:
            _check_units(rp_uuid, rc, amount, pair.inventory)
        new_total = pair.used_by_others + sum(amount for _, amount in amounts)
        old_total = pair.used_by_others + pair.used_by_writers
        if new_total > pair.inventory.capacity and new_total > old_total:
            raise CapacityExceeded(
                "rpquery.allocation.capacity_exceeded",
                f"{rc} on provider {rp_uuid}: {new_total} would exceed capacity "
                f"{pair.inventory.capacity}",
                token=rc,
                provider=rp_uuid,
                resource_class=rc,
            )


# ---------------------------------------------------------------- writing


def receiving_providers(
    conn: Connection, requests: Sequence[ConsumerAllocations], state: WriteState
) -> dict[int, int]:
    """``{provider id: generation read}`` of the providers whose generation the write
    raises, exactly Placement 16.0's (``_set_allocations`` bumps the providers of the
    allocation list it is given): every provider named in a consumer's new allocations,
    and every provider an *emptied* consumer holds now (its allocations are listed with
    ``used=0``). A provider a consumer only leaves for another keeps its generation —
    moving an instance from A to B raises B's, not A's — and so is not locked either:
    its usage only goes down, which cannot make a concurrent claim on it wrong.

    One more statement (:func:`held_provider_ids`) only when a consumer is emptied.
    """
    named = {rp for req in requests if not req.is_empty for rp in req.allocations}
    ids = {state.providers[rp].id for rp in named}
    ids |= held_provider_ids(conn, [req.consumer_uuid for req in requests if req.is_empty])
    return {p.id: p.generation for p in state.providers.values() if p.id in ids}


def _write_consumers(conn: Connection, requests: Sequence[ConsumerAllocations]) -> None:
    """Create, bump or delete each consumer row according to its generation."""
    live = [req for req in requests if not req.is_empty]
    owners = consumers.ensure_owner_ids(
        conn,
        projects={req.project_id for req in live},
        users={req.user_id for req in live},
        types={req.consumer_type for req in live if req.consumer_type is not None},
    )
    unchecked = [req.consumer_uuid for req in requests if not req.generation_checked]
    existing = consumers.existing_generations(conn, unchecked) if unchecked else {}
    for req in requests:
        gen = req.consumer_generation
        if not req.generation_checked:  # before 1.28: whatever generation it is at
            gen = existing.get(req.consumer_uuid)
        if req.is_empty:
            if gen is not None:
                consumers.delete_consumer(conn, req.consumer_uuid, gen)
            elif req.generation_checked:
                consumers.require_absent(conn, req.consumer_uuid)
            continue
        type_id = None if req.consumer_type is None else owners.types[req.consumer_type]
        ids = (owners.projects[req.project_id], owners.users[req.user_id], type_id)
        if gen is None:
            consumers.create_consumer(conn, req.consumer_uuid, *ids)
        else:
            consumers.update_consumer(conn, req.consumer_uuid, gen, *ids)


def _replace_rows(
    conn: Connection,
    requests: Sequence[ConsumerAllocations],
    rc_ids: Mapping[str, int],
    state: WriteState,
) -> None:
    conn.execute(
        allocations.delete().where(
            allocations.c.consumer_id.in_([req.consumer_uuid for req in requests])
        )
    )
    # In the order of the request (consumers, their providers, their classes), as
    # Placement inserts them: reads list allocations by id, so clients see that order.
    rows = [
        {
            "resource_provider_id": state.providers[rp_uuid].id,
            "consumer_id": req.consumer_uuid,
            "resource_class_id": rc_ids[rc],
            "used": amount,
        }
        for req in requests
        for rp_uuid, resources in req.allocations.items()
        for rc, amount in resources.items()
    ]
    if rows:
        conn.execute(allocations.insert(), rows)


def write_consumer_allocations(
    conn: Connection,
    requests: ConsumerAllocations | Sequence[ConsumerAllocations],
    *,
    already_bumped: Collection[int] = (),
) -> None:
    """One attempt at replacing the allocations of ``requests`` on ``conn``, inside the
    caller's transaction (no commit, no retry). See the module docstring for the steps.

    Use this to compose an allocation write with other writes (the reshaper); use
    :func:`replace_many` otherwise. Providers whose ids are in ``already_bumped`` were
    bumped (and so locked) by the caller earlier in this transaction: their generation
    is not raised a second time.
    """
    batch = validate_requests(
        [requests] if isinstance(requests, ConsumerAllocations) else requests
    )
    if not batch:
        return
    names = {rc for req in batch for _, rc, _ in req.resource_pairs()}
    rc_ids = catalog.require_resource_class_ids(conn, names) if names else {}
    state = read_state(
        conn,
        {rp for req in batch for rp in req.allocations},
        [req.consumer_uuid for req in batch],
    )
    check_capacity(state, batch, rc_ids)
    skip = set(already_bumped)
    bumped = receiving_providers(conn, batch, state)
    bump_provider_generations(conn, {k: v for k, v in bumped.items() if k not in skip})
    _write_consumers(conn, batch)
    _replace_rows(conn, batch, rc_ids, state)


def run_with_retry(
    db: Database, work: Callable[[Connection], T], *, attempts: int = MAX_ATTEMPTS
) -> T:
    """Run ``work(conn)`` in a fresh transaction, again (up to ``attempts`` times in all,
    with the jittered backoff of :data:`rpquery.retry.ALLOCATION_WRITES`) when it fails
    with a provider generation conflict or a deadlock/serialization failure. Any other
    error, consumer generation conflicts included, goes straight to the caller; so does
    the last conflict when attempts run out. Each retry and give-up is logged as a
    warning on ``rpquery.write``."""

    def once() -> T:
        with db.begin() as conn:
            return work(conn)

    return retrying(
        once,
        dataclasses.replace(ALLOCATION_WRITES, attempts=attempts),
        retry_if=_retryable,
        logger="rpquery.write",
        what="allocation write",
    )


def _retryable(error: Exception) -> bool:
    return isinstance(error, ConcurrentUpdate) and error.code in RETRYABLE_CODES


def replace_many(db: Database, requests: Sequence[ConsumerAllocations]) -> None:
    """Replace the allocations of several consumers atomically (Placement's
    ``POST /allocations``): all of them are written, or none."""
    batch = validate_requests(requests)
    run_with_retry(db, lambda conn: write_consumer_allocations(conn, batch))


def replace_allocations(db: Database, request: ConsumerAllocations) -> None:
    """Replace every allocation of one consumer (Placement's
    ``PUT /allocations/{consumer_uuid}``). Empty ``allocations`` delete the consumer."""
    replace_many(db, [request])


def delete_allocations(
    db: Database, consumer_uuid: str, *, consumer_generation: int | None
) -> None:
    """Delete every allocation of a consumer and the consumer itself, if it is still at
    ``consumer_generation`` (``None``: whatever its generation, as Placement's
    ``DELETE /allocations/{consumer_uuid}``). ``NotFound``
    (``rpquery.consumer.not_found``) if there is no such consumer.

    Provider generations stay as they are, as in Placement: freeing capacity cannot make
    a concurrent claim on those providers wrong, so it need not make them retry."""
    consumer_uuid = check_uuid(consumer_uuid, "rpquery.consumer.bad_uuid", "consumer")
    if consumer_generation is not None:
        check_int(
            consumer_generation,
            "rpquery.consumer.bad_generation",
            "consumer_generation",
        )

    def work(conn: Connection) -> None:
        consumers.require_present(conn, consumer_uuid)
        generation = consumer_generation
        if generation is None:
            generation = consumers.existing_generations(conn, [consumer_uuid]).get(
                consumer_uuid, -1
            )
        consumers.delete_consumer(conn, consumer_uuid, generation)
        conn.execute(allocations.delete().where(allocations.c.consumer_id == consumer_uuid))

    run_with_retry(db, work)
