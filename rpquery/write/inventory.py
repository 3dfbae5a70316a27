"""Inventory writes: replace all of a provider's inventories, set one, delete one.

>>> from rpquery.models import Inventory
>>> # gen = set_inventories(db, rp_uuid, {"VCPU": Inventory(total=8, allocation_ratio=16.0),
>>> #                                     "MEMORY_MB": Inventory(total=4096, reserved=512)},
>>> #                       generation=0)          # returns 1, the new generation
>>> check_inventory("VCPU", Inventory(total=0))
Traceback (most recent call last):
...
rpquery.errors.InvalidRequest: ... (rpquery.inventory.bad_total)

Every write is guarded by the provider generation the caller read: the provider row is
bumped first with a conditional ``UPDATE`` (which also serialises it against allocation
writers, who bump the same row), then the current inventories and their usage are read
in one statement and checked:

- removing an inventory that has allocations → ``InUse`` ``rpquery.inventory.in_use``
  (Placement's rule), worded as Placement words it (:func:`in_use_detail`: nova matches
  the text);
- lowering capacity ``(total - reserved) * allocation_ratio`` below current usage →
  ``InUse`` ``rpquery.inventory.capacity_below_usage``. Placement only logs this; rpquery
  refuses it by default (issue 2). A provider that is already over capacity may still be
  updated as long as the update does not lower capacity further. A caller reporting what
  the hardware really has (nova's resource tracker through the API layer, which follows
  Placement) passes ``allow_below_usage=True``: the write lands, a warning is logged on
  ``rpquery.write``, and the provider is over capacity until allocations go away.

``get_inventories`` lives in :mod:`rpquery.read.objects` and is re-exported here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery._validation import check_int, check_ratio, check_uuid
from rpquery.db import Database
from rpquery.errors import InUse, NotFound, invalid
from rpquery.models import Inventory
from rpquery.read.objects import INVENTORY_FIELDS, get_inventories, inventory_from
from rpquery.store import catalog
from rpquery.store.dialects import to_int
from rpquery.store.tables import allocations, inventories, resource_classes
from rpquery.write import providers
from rpquery.write.providers import check_generation

__all__ = [
    "check_inventory",
    "current_select",
    "delete_inventory",
    "get_inventories",
    "in_use_detail",
    "set_inventories",
    "set_inventory",
    "write_inventory_rows",
]

_log = logging.getLogger("rpquery.write")


@dataclass(frozen=True)
class _Current:
    """An existing inventory row with the usage of its class on the provider."""

    row_id: int
    name: str
    inventory: Inventory
    used: int


# ---------------------------------------------------------------- validation (pure)


_CODES = {
    "total": "rpquery.inventory.bad_total",
    "reserved": "rpquery.inventory.bad_reserved",
    "min_unit": "rpquery.inventory.bad_min_unit",
    "max_unit": "rpquery.inventory.bad_max_unit",
    "step_size": "rpquery.inventory.bad_step_size",
    "allocation_ratio": "rpquery.inventory.bad_allocation_ratio",
}


def check_inventory(rc: str, inv: Inventory) -> Inventory:
    """Check one inventory without the database: total > 0, 0 <= reserved <= total,
    1 <= min_unit <= max_unit, step_size >= 1, all ints in 0..MAX_INT, allocation_ratio
    finite in (0, MAX_RATIO] (``InvalidRequest`` ``rpquery.inventory.bad_<field>``, token
    ``RC.field``).
    """
    catalog.check_resource_class_name(rc)
    for field in INVENTORY_FIELDS[:-1]:
        what = f"inventory of {rc}: {field}"
        check_int(
            getattr(inv, field), f"rpquery.inventory.bad_{field}", what, token=f"{rc}.{field}"
        )
    check_ratio(
        inv.allocation_ratio,
        _CODES["allocation_ratio"],
        f"inventory of {rc}: allocation_ratio",
        token=f"{rc}.allocation_ratio",
    )
    max_unit = inv.max_unit if inv.max_unit is not None else inv.total
    if inv.total < 1:
        detail = f"total must be > 0, got {inv.total}"
        raise invalid(_CODES["total"], f"inventory of {rc}: {detail}", f"{rc}.total")
    if inv.reserved > inv.total:
        detail = f"reserved {inv.reserved} exceeds total {inv.total}"
        raise invalid(_CODES["reserved"], f"inventory of {rc}: {detail}", f"{rc}.reserved")
    if inv.min_unit < 1 or inv.min_unit > max_unit:
        detail = f"min_unit {inv.min_unit} must be in 1..max_unit {max_unit}"
        raise invalid(_CODES["min_unit"], f"inventory of {rc}: {detail}", f"{rc}.min_unit")
    if inv.step_size < 1:
        detail = f"step_size must be >= 1, got {inv.step_size}"
        raise invalid(_CODES["step_size"], f"inventory of {rc}: {detail}", f"{rc}.step_size")
    return inv


# ---------------------------------------------------------------- statements


def current_select(rp_id: int) -> sa.Select:
    """The provider's inventories with class name and usage, in one statement::

    SELECT inv.*, rc.name, (SELECT SUM(used) FROM allocations a
                            WHERE a.resource_provider_id = inv.resource_provider_id
                              AND a.resource_class_id = inv.resource_class_id) AS used
    FROM inventories inv JOIN resource_classes rc ON rc.id = inv.resource_class_id
    WHERE inv.resource_provider_id = :rp
    """
    inv, alloc, rc = inventories, allocations, resource_classes
    used = (
        sa.select(sa.func.sum(alloc.c.used))
        .where(
            alloc.c.resource_provider_id == inv.c.resource_provider_id,
            alloc.c.resource_class_id == inv.c.resource_class_id,
        )
        .scalar_subquery()
    )
    fields = [inv.c[name] for name in INVENTORY_FIELDS]
    return (
        sa.select(inv.c.resource_class_id, inv.c.id, *fields, rc.c.name, used.label("used"))
        .join(rc, rc.c.id == inv.c.resource_class_id)
        .where(inv.c.resource_provider_id == rp_id)
    )


def _read_current(conn: Connection, rp_id: int) -> dict[int, _Current]:
    found = {}
    for row in conn.execute(current_select(rp_id)):
        found[row.resource_class_id] = _Current(
            row.id, row.name, inventory_from(row[2:8]), to_int(row.used)
        )
    return found


# ---------------------------------------------------------------- the write


def in_use_detail(classes: Sequence[str], rp_uuid: str) -> str:
    """Placement's text for removing inventories that hold allocations, which nova's
    ``InventoryInUse`` matches (``Inventory for '(.+)' on resource provider '(.+)' in
    use``); ``classes`` in class id order, as Placement lists them.

    >>> in_use_detail(["VCPU", "MEMORY_MB"], "c3a6c4e8")
    "Inventory for 'VCPU, MEMORY_MB' on resource provider 'c3a6c4e8' in use."
    """
    return f"Inventory for '{', '.join(classes)}' on resource provider '{rp_uuid}' in use."


def _refuse_removals_in_use(
    current: Mapping[int, _Current], plan: Mapping[int, tuple[str, Inventory | None]], rp: str
) -> None:
    """``InUse`` ``rpquery.inventory.in_use`` naming every class the plan removes that
    still has allocations (all of them, as Placement does)."""
    used = [
        rc
        for rc_id, (rc, new) in sorted(plan.items())
        if new is None and rc_id in current and current[rc_id].used > 0
    ]
    if used:
        raise InUse("rpquery.inventory.in_use", in_use_detail(used, rp), token=used[0])


def _check_usage(
    rc: str, old: _Current | None, new: Inventory | None, *, allow_below_usage: bool
) -> None:
    if old is None or old.used == 0 or new is None:
        return
    if new.capacity < old.used and new.capacity < old.inventory.capacity:
        if allow_below_usage:
            _log.warning(
                "capacity of %s drops to %s, below its usage %s: the provider is over "
                "capacity until allocations are removed",
                rc,
                new.capacity,
                old.used,
            )
            return
        raise InUse(
            "rpquery.inventory.capacity_below_usage",
            f"capacity of {rc} would drop to {new.capacity}, below its usage {old.used}",
            token=rc,
        )


def _values(inv: Inventory) -> dict[str, Any]:
    return {name: getattr(inv, name) for name in INVENTORY_FIELDS}


def _plan(
    current: Mapping[int, _Current],
    changes: Mapping[str, Inventory | None],
    rc_ids: Mapping[str, int],
    replace_all: bool,
) -> dict[int, tuple[str, Inventory | None]]:
    """``{class id: (name, new inventory or None)}`` for every class to write."""
    plan = {rc_ids[rc]: (rc, inv) for rc, inv in changes.items()}
    for rc_id, (rc, inv) in plan.items():
        if inv is None and rc_id not in current:
            raise NotFound(
                "rpquery.inventory.not_found", f"the provider has no inventory of {rc}", token=rc
            )
    if replace_all:
        for rc_id, old in current.items():
            plan.setdefault(rc_id, (old.name, None))
    return plan


def write_inventory_rows(
    conn: Connection,
    rp_id: int,
    changes: Mapping[str, Inventory | None],
    rc_ids: Mapping[str, int],
    *,
    replace_all: bool = False,
    check_usage: bool = True,
    allow_below_usage: bool = False,
    rp_uuid: str | None = None,
) -> None:
    """Write a provider's inventory rows inside the caller's transaction (no generation
    check: the caller claims it, e.g. with :func:`rpquery.write.providers.claim_generation`).

    ``changes`` maps class name → new inventory, or ``None`` to remove it
    (``rpquery.inventory.not_found`` if absent); with ``replace_all`` the classes not
    named are removed too. ``rc_ids`` maps every named class to its id. With
    ``check_usage`` the in-use and shrink rules apply (``allow_below_usage`` lifts the
    shrink rule: see the module docstring); a reshaper that moves allocations
    in the same transaction passes ``False`` and checks the final state itself.
    ``rp_uuid`` is only for the in-use message (the id stands in without it).
    One read, then at most one ``DELETE``, one ``UPDATE`` (executemany), one ``INSERT``.
    """
    current = _read_current(conn, rp_id)
    plan = _plan(current, changes, rc_ids, replace_all)
    if check_usage:
        _refuse_removals_in_use(current, plan, rp_uuid or str(rp_id))
    drop: list[int] = []
    update: list[dict[str, Any]] = []
    insert: list[dict[str, Any]] = []
    for rc_id, (rc, new) in sorted(plan.items()):
        old = current.get(rc_id)
        if check_usage:
            _check_usage(rc, old, new, allow_below_usage=allow_below_usage)
        if new is None and old is not None:
            drop.append(old.row_id)
        elif new is not None and old is None:
            insert.append({"resource_provider_id": rp_id, "resource_class_id": rc_id})
            insert[-1].update(_values(new))
        elif new is not None and old is not None and new != old.inventory:
            update.append({"row_id": old.row_id, **{f"v_{k}": v for k, v in _values(new).items()}})
    inv = inventories
    if drop:
        conn.execute(inv.delete().where(inv.c.id.in_(drop)))
    if update:
        stmt = (
            inv.update()
            .where(inv.c.id == sa.bindparam("row_id"))
            .values({name: sa.bindparam(f"v_{name}") for name in INVENTORY_FIELDS})
        )
        conn.execute(stmt, update)
    if insert:
        conn.execute(inv.insert(), insert)


def _write(
    db: Database,
    rp_uuid: str,
    changes: Mapping[str, Inventory | None],
    generation: int,
    *,
    replace_all: bool,
    allow_below_usage: bool = False,
) -> int:
    rp_uuid = check_uuid(rp_uuid, "rpquery.provider.bad_uuid", "provider")
    check_generation(generation)
    for rc, inv in changes.items():
        if inv is None:
            catalog.check_resource_class_name(rc)
        else:
            check_inventory(rc, inv)
    with db.begin() as conn:
        rc_ids = catalog.require_resource_class_ids(conn, changes)
        rp_id = providers.claim_generation(conn, rp_uuid, generation)
        write_inventory_rows(
            conn,
            rp_id,
            changes,
            rc_ids,
            replace_all=replace_all,
            allow_below_usage=allow_below_usage,
            rp_uuid=rp_uuid,
        )
    return generation + 1


# ---------------------------------------------------------------- public API


def set_inventories(
    db: Database,
    rp_uuid: str,
    inventories: Mapping[str, Inventory],
    *,
    generation: int,
    allow_below_usage: bool = False,
) -> int:
    """Replace all inventories of a provider (classes not named are removed); returns the
    new provider generation. Errors: see the module docstring and ``docs/writes.md``."""
    return _write(
        db,
        rp_uuid,
        dict(inventories),
        generation,
        replace_all=True,
        allow_below_usage=allow_below_usage,
    )


def set_inventory(
    db: Database,
    rp_uuid: str,
    rc: str,
    inv: Inventory,
    *,
    generation: int,
    allow_below_usage: bool = False,
) -> int:
    """Create or update the inventory of one class, leaving the others alone."""
    return _write(
        db, rp_uuid, {rc: inv}, generation, replace_all=False, allow_below_usage=allow_below_usage
    )


def delete_inventory(db: Database, rp_uuid: str, rc: str, *, generation: int) -> int:
    """Remove the inventory of one class (``rpquery.inventory.not_found`` if there is
    none, ``rpquery.inventory.in_use`` if it has allocations)."""
    return _write(db, rp_uuid, {rc: None}, generation, replace_all=False)
