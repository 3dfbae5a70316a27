"""Usage per (provider, class) as the read path reads it: ``rpq_provider_usages``.

Migration ``rpq0007`` creates the table and triggers on ``allocations`` that keep it
equal to ``SUM(allocations.used)`` per (provider, class) whoever writes: rpquery, the
bulk generator or OpenStack Placement on the same database (docs/read-path.md). The
read path (allocation candidates, provider lists, summaries) joins one stored row per
inventory instead of aggregating ``allocations``. The write path never reads it: its
capacity checks sum ``allocations`` under their own locks.

Writes that fire no row trigger (``TRUNCATE allocations`` on MySQL/MariaDB, triggers
disabled by hand, one table restored from a dump) can leave it stale:
:func:`verify_provider_usages` finds that and :func:`rebuild_provider_usages` repairs it.

>>> from rpquery.db import Database
>>> db = Database("sqlite://"); db.upgrade()
>>> verify_provider_usages(db)
[]
>>> rebuild_provider_usages(db)
0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery.db import Database
from rpquery.store import dialects
from rpquery.store.dialects import to_int
from rpquery.store.tables import allocations, provider_usages

__all__ = [
    "UsageDrift",
    "add_new_allocations",
    "rebuild_provider_usages",
    "recomputed_select",
    "verify_provider_usages",
]


@dataclass(frozen=True)
class UsageDrift:
    """A (provider, class) whose stored usage differs from ``SUM(allocations.used)``."""

    resource_provider_id: int
    resource_class_id: int
    stored: int
    actual: int


def recomputed_select(*where: sa.ColumnElement[bool]) -> sa.Select[Any]:
    """``SELECT resource_provider_id, resource_class_id, SUM(used) FROM allocations
    [WHERE ...] GROUP BY resource_provider_id, resource_class_id``"""
    a = allocations
    key = (a.c.resource_provider_id, a.c.resource_class_id)
    return sa.select(*key, sa.func.sum(a.c.used)).where(*where).group_by(*key)


def add_new_allocations(conn: Connection, first_id: int, last_id: int) -> None:
    """Add the allocation rows with ids ``first_id..last_id`` to the stored usages in
    one grouped pass: what the insert trigger would have done, for rows written in
    this transaction with it suspended (the bulk loader,
    :func:`rpquery.generator.load_cloud`; other writers held off by
    the backend's ``triggers_suspended``, :mod:`rpquery.store.dialects`). Stored rows are
    added to."""
    dialects.insert_select_adding(
        conn,
        provider_usages,
        ["resource_provider_id", "resource_class_id", "used"],
        recomputed_select(allocations.c.id.between(first_id, last_id)),
        key=["resource_provider_id", "resource_class_id"],
        add=["used"],
    )


def verify_provider_usages(db: Database) -> list[UsageDrift]:
    """Every (provider, class) whose stored usage differs from a recomputation over
    ``allocations`` (a full scan); ``[]`` when exact. A stored 0 equals no row. One
    snapshot on PostgreSQL (repeatable read) and MariaDB, so concurrent writers do not
    show up as drift there."""
    pu = provider_usages
    with db.connect() as conn:
        dialects.one_snapshot(conn)
        stored = {
            (to_int(rp), to_int(rc)): to_int(used)
            for rp, rc, used in conn.execute(
                sa.select(pu.c.resource_provider_id, pu.c.resource_class_id, pu.c.used)
            )
        }
        actual = {
            (to_int(rp), to_int(rc)): to_int(used)
            for rp, rc, used in conn.execute(recomputed_select())
        }
    return [
        UsageDrift(rp, rc, stored.get((rp, rc), 0), actual.get((rp, rc), 0))
        for rp, rc in sorted(stored.keys() | actual.keys())
        if stored.get((rp, rc), 0) != actual.get((rp, rc), 0)
    ]


def rebuild_provider_usages(db: Database) -> int:
    """Replace the stored usages with a recomputation in one transaction (rows at 0
    are dropped); returns the number of rows stored. On PostgreSQL ``allocations`` is
    locked in SHARE mode meanwhile (writers wait, readers do not); on MariaDB the
    ``INSERT ... SELECT`` share-locks the rows it reads; SQLite writers queue anyway."""
    pu = provider_usages
    with db.begin() as conn:
        dialects.block_writers(conn, ["allocations"])
        conn.execute(pu.delete())
        conn.execute(
            pu.insert().from_select(
                ["resource_provider_id", "resource_class_id", "used"], recomputed_select()
            )
        )
        # (drivers disagree on rowcount for INSERT ... SELECT: count instead)
        return int(conn.execute(sa.select(sa.func.count()).select_from(pu)).scalar_one())
