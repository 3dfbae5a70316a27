"""The usage summary behind :func:`rpquery.usage.reads.project_usages`: check it against the
allocations it summarises, and rebuild it.

Migration ``rpq0006`` creates two tables (``rpq_usage_totals``, ``rpq_consumer_counts``)
and triggers on ``allocations`` and ``consumers`` that keep them exact whoever writes
(docs/usages.md). Nothing in rpquery writes them directly except
:func:`rebuild_usage_summary`. Writes that bypass row triggers (``TRUNCATE`` on
MySQL/MariaDB, an ``ALTER TABLE ... DISABLE TRIGGER``, a restore of one table from a
dump) can leave them stale: :func:`verify_usage_summary` finds that, and
:func:`rebuild_usage_summary` repairs it.

>>> from rpquery.db import Database
>>> db = Database("sqlite://"); db.upgrade()
>>> verify_usage_summary(db)
[]
>>> rebuild_usage_summary(db)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery.db import Database
from rpquery.store import dialects
from rpquery.store.dialects import to_int
from rpquery.store.tables import allocations, consumer_counts, consumers, usage_totals

__all__ = [
    "COUNTS",
    "NO_TYPE",
    "TOTALS",
    "SummaryDifference",
    "add_new_consumers",
    "rebuild_usage_summary",
    "recomputed_counts_select",
    "recomputed_totals_select",
    "verify_usage_summary",
]

#: ``type_key`` of consumers with no type (``consumer_type_id`` NULL; ids start at 1).
NO_TYPE = 0

TOTALS = "totals"
COUNTS = "counts"


@dataclass(frozen=True)
class SummaryDifference:
    """One summary row that differs from the recomputation. ``key`` is ``(project_id,
    user_id, type_key, resource_class_id)`` for ``totals`` and ``(project_id, user_id,
    type_key)`` for ``counts``; ``stored``/``expected`` are ``(used, allocation_count)``
    or ``(consumer_count,)``, ``None`` when there is no (non-empty) row."""

    table: str
    key: tuple[int, ...]
    stored: tuple[int, ...] | None
    expected: tuple[int, ...] | None


def _type_key(c: sa.Table) -> sa.ColumnElement[int]:
    return sa.func.coalesce(c.c.consumer_type_id, NO_TYPE)


def recomputed_totals_select(*where: sa.ColumnElement[bool]) -> sa.Select[Any]:
    """``(project_id, user_id, type_key, resource_class_id, used, allocation_count)``
    recomputed from every allocation whose consumer row exists (and ``where``, on
    ``consumers`` and ``allocations``, holds)::

        SELECT c.project_id, c.user_id, COALESCE(c.consumer_type_id, 0),
               a.resource_class_id, SUM(a.used), COUNT(*)
        FROM allocations a JOIN consumers c ON c.uuid = a.consumer_id
        GROUP BY 1, 2, 3, 4
    """
    a, c = allocations, consumers
    key = (c.c.project_id, c.c.user_id, _type_key(c), a.c.resource_class_id)
    return (
        sa.select(*key, sa.func.sum(a.c.used), sa.func.count())
        .select_from(a.join(c, c.c.uuid == a.c.consumer_id))
        .where(*where)
        .group_by(*key)
    )


def recomputed_counts_select(*where: sa.ColumnElement[bool]) -> sa.Select[Any]:
    """``(project_id, user_id, type_key, consumer_count)``: consumers with at least one
    allocation row (and ``where``, on ``consumers``, holds), per key."""
    a, c = allocations, consumers
    key = (c.c.project_id, c.c.user_id, _type_key(c))
    has_rows = sa.exists().where(a.c.consumer_id == c.c.uuid)
    return sa.select(*key, sa.func.count()).where(has_rows, *where).group_by(*key)


def _stored_totals() -> sa.Select[Any]:
    t = usage_totals
    return sa.select(
        t.c.project_id, t.c.user_id, t.c.type_key, t.c.resource_class_id, t.c.used,
        t.c.allocation_count,
    ).where(t.c.allocation_count != 0)  # fmt: skip


def _stored_counts() -> sa.Select[Any]:
    t = consumer_counts
    return sa.select(t.c.project_id, t.c.user_id, t.c.type_key, t.c.consumer_count).where(
        t.c.consumer_count != 0
    )


def _by_key(rows: Iterable[Any], width: int) -> dict[tuple[int, ...], tuple[int, ...]]:
    return {
        tuple(to_int(v) for v in row[:width]): tuple(to_int(v) for v in row[width:])
        for row in rows
    }


def _compare(
    table: str,
    stored: dict[tuple[int, ...], tuple[int, ...]],
    expected: dict[tuple[int, ...], tuple[int, ...]],
) -> list[SummaryDifference]:
    return [
        SummaryDifference(table, key, stored.get(key), expected.get(key))
        for key in sorted(stored.keys() | expected.keys())
        if stored.get(key) != expected.get(key)
    ]


def verify_usage_summary(db: Database) -> list[SummaryDifference]:
    """Recompute the summary from ``allocations`` and ``consumers`` (a full scan of
    both) and list every row that differs; ``[]`` when the summary is exact. Empty
    stored rows (counts at 0) count as absent. Reads one snapshot on PostgreSQL and
    MariaDB (repeatable read), so concurrent writers do not produce false
    differences there."""
    with db.connect() as conn:
        dialects.one_snapshot(conn)
        totals = _compare(
            TOTALS,
            _by_key(conn.execute(_stored_totals()), 4),
            _by_key(conn.execute(recomputed_totals_select()), 4),
        )
        counts = _compare(
            COUNTS,
            _by_key(conn.execute(_stored_counts()), 3),
            _by_key(conn.execute(recomputed_counts_select()), 3),
        )
    return totals + counts


def rebuild_usage_summary(db: Database) -> None:
    """Replace the summary with a recomputation, in one transaction (empty rows are
    dropped). On PostgreSQL ``allocations`` and ``consumers`` are locked in SHARE mode
    meanwhile (writers wait, readers do not); on MariaDB the ``INSERT ... SELECT``
    share-locks the rows it reads; SQLite writers queue anyway."""
    with db.begin() as conn:
        _rebuild(conn)


def add_new_consumers(conn: Connection, first_id: int, last_id: int) -> None:
    """Add to the summary, in one grouped pass per table, what its insert triggers
    would have added for the consumers with ids ``first_id..last_id`` and their
    allocation rows, written in this transaction with those triggers suspended (the
    bulk loader, :func:`rpquery.generator.load_cloud`).

    The consumers must be new (they counted nowhere before) and every allocation row
    written with them must belong to one of them; other writers must be held off
    (the backend's ``triggers_suspended`` in :mod:`rpquery.store.dialects` does).
    Existing summary rows are added to, so loading into a non-empty database stays
    exact."""
    new = consumers.c.id.between(first_id, last_id)
    dialects.insert_select_adding(
        conn,
        usage_totals,
        ["project_id", "user_id", "type_key", "resource_class_id", "used", "allocation_count"],
        recomputed_totals_select(new),
        key=["project_id", "user_id", "type_key", "resource_class_id"],
        add=["used", "allocation_count"],
    )
    dialects.insert_select_adding(
        conn,
        consumer_counts,
        ["project_id", "user_id", "type_key", "consumer_count"],
        recomputed_counts_select(new),
        key=["project_id", "user_id", "type_key"],
        add=["consumer_count"],
    )


def _rebuild(conn: Connection) -> None:
    dialects.block_writers(conn, ["allocations", "consumers"])
    conn.execute(usage_totals.delete())
    conn.execute(consumer_counts.delete())
    t, c = usage_totals, consumer_counts
    conn.execute(
        t.insert().from_select(
            ["project_id", "user_id", "type_key", "resource_class_id", "used", "allocation_count"],
            recomputed_totals_select(),
        )
    )
    conn.execute(
        c.insert().from_select(
            ["project_id", "user_id", "type_key", "consumer_count"], recomputed_counts_select()
        )
    )
