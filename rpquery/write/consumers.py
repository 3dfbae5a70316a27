"""Consumers and their owners: projects, users and consumer types, created on first use,
and the consumer generation (optimistic concurrency, conditional UPDATE).

Every function here takes a ``Connection`` and runs inside the caller's transaction, so
:mod:`rpquery.write.allocations` and the reshaper compose them into one atomic write.

Owners are looked up in one round trip (a ``UNION ALL`` over the three tables); the ones
missing are inserted with ``INSERT ... ON CONFLICT DO NOTHING`` / ``INSERT IGNORE`` (two
writers creating the same project both succeed) and read back::

    ids = ensure_owner_ids(conn, projects={"p1"}, users={"u1"}, types={"INSTANCE"})
    ids.projects["p1"], ids.types["INSTANCE"]

Consumer generation rules (Placement ≥ 1.28): a caller passing ``None`` claims the
consumer is new and fails if it exists; a caller passing an int must match the stored
generation. Both failures are :class:`ConcurrentUpdate` with code
``rpquery.consumer.generation_conflict`` and are *not* retried by the write path: the
caller must re-read.

The reads ``get_consumer`` and ``generations`` (``consumer_generations``) live in
:mod:`rpquery.read.objects` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection

from rpquery.errors import ConcurrentUpdate, Conflict, NotFound
from rpquery.read.objects import consumer_generations as generations
from rpquery.read.objects import get_consumer
from rpquery.store import dialects
from rpquery.store.tables import consumer_types, consumers, projects, users

__all__ = [
    "COLLATION_CONFLICT",
    "GENERATION_CONFLICT",
    "OwnerIds",
    "create_consumer",
    "delete_consumer",
    "ensure_owner_ids",
    "existing_generations",
    "generations",
    "get_consumer",
    "owner_ids_select",
    "require_absent",
    "require_present",
    "update_consumer",
]

GENERATION_CONFLICT = "rpquery.consumer.generation_conflict"
COLLATION_CONFLICT = "rpquery.owner.collation_conflict"

_OWNER_TABLES: dict[str, tuple[sa.Table, str]] = {
    "projects": (projects, "external_id"),
    "users": (users, "external_id"),
    "types": (consumer_types, "name"),
}


@dataclass(frozen=True)
class OwnerIds:
    """Database ids of projects, users (by external id) and consumer types (by name)."""

    projects: dict[str, int] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)
    types: dict[str, int] = field(default_factory=dict)


def owner_ids_select(wanted: dict[str, set[str]]) -> sa.Select | sa.CompoundSelect | None:
    """One statement returning ``(kind, key, id)`` for every wanted owner that exists.

    ``SELECT 'projects', external_id, id FROM projects WHERE external_id IN (...)
    UNION ALL SELECT 'users', ... UNION ALL SELECT 'types', name, id FROM consumer_types ...``
    """
    parts = []
    for kind, keys in wanted.items():
        if not keys:
            continue
        table, col = _OWNER_TABLES[kind]
        parts.append(
            sa.select(
                sa.literal(kind, sa.String(16)).label("kind"),
                sa.cast(table.c[col], sa.String(255)).label("key"),
                table.c.id,
            ).where(table.c[col].in_(sorted(keys)))
        )
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else sa.union_all(*parts)


def _read_owner_ids(conn: Connection, wanted: dict[str, set[str]]) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {kind: {} for kind in _OWNER_TABLES}
    stmt = owner_ids_select(wanted)
    if stmt is not None:
        for kind, key, owner_id in conn.execute(stmt):
            found[kind][key] = int(owner_id)
    return found


def ensure_owner_ids(
    conn: Connection,
    *,
    projects: Iterable[str] = (),
    users: Iterable[str] = (),
    types: Iterable[str] = (),
) -> OwnerIds:
    """Ids of the given projects, users and consumer types, creating the missing ones.

    One round trip when all exist; otherwise one insert per table with missing rows and
    one more read. Names must already be validated.
    """
    wanted = {"projects": set(projects), "users": set(users), "types": set(types)}
    found = _read_owner_ids(conn, wanted)
    missing = {kind: keys - found[kind].keys() for kind, keys in wanted.items()}
    if any(missing.values()):
        for kind, keys in missing.items():
            table, col = _OWNER_TABLES[kind]
            dialects.insert_ignore(conn, table, [{col: key} for key in sorted(keys)])
        for kind, ids in _read_created_owner_ids(conn, missing).items():
            found[kind].update(ids)
    return OwnerIds(found["projects"], found["users"], found["types"])


def _read_created_owner_ids(
    conn: Connection, missing: dict[str, set[str]]
) -> dict[str, dict[str, int]]:
    """Ids of owners just inserted, by this transaction or, concurrently, by another
    (its row made ``insert_ignore`` skip ours). A *locking* read (``FOR SHARE`` / ``LOCK
    IN SHARE MODE``), one statement per table: under MySQL/MariaDB's repeatable read a
    plain read answers from the transaction's snapshot, which may predate the other
    writer's commit, and the owner would be missing (found by eight racing writers
    creating the same project)."""
    found: dict[str, dict[str, int]] = {kind: {} for kind in _OWNER_TABLES}
    for kind, keys in missing.items():
        if not keys:
            continue
        table, col = _OWNER_TABLES[kind]
        stmt = sa.select(table.c[col], table.c.id).where(table.c[col].in_(sorted(keys)))
        for key, owner_id in conn.execute(stmt.with_for_update(read=True)):
            found[kind][str(key)] = int(owner_id)
        gone = sorted(keys - found[kind].keys())
        for key in gone:
            _refuse_collation_twin(conn, kind, key)
        if gone:  # inserted by a writer that then rolled back: a retry will create it
            raise ConcurrentUpdate(
                "rpquery.concurrent_update", f"{kind} changed concurrently: {', '.join(gone)}"
            )
    return found


def _refuse_collation_twin(conn: Connection, kind: str, key: str) -> None:
    """``Conflict`` (``rpquery.owner.collation_conflict``) when ``key`` could not be
    created because the column's collation takes it for an existing, different id
    (MySQL/MariaDB: ``PROJ``, ``Proj``, ``proj `` and ``prój`` are all ``proj`` to
    ``utf8mb4_general_ci``'s unique index). A permanent condition, so not a
    ``ConcurrentUpdate``: retrying cannot help."""
    table, col = _OWNER_TABLES[kind]
    twin = conn.execute(sa.select(table.c[col]).where(table.c[col] == key).limit(1)).scalar()
    if twin is None or twin == key:
        return
    found = dialects.backend(conn.dialect.name).column_collation(conn, table.name, col)
    collation = found or "its collation"
    what = {"projects": "project", "users": "user", "types": "consumer type"}[kind]
    raise Conflict(
        COLLATION_CONFLICT,
        f"{what} {key!r} cannot be stored: {table.name}.{col} compares with {collation}, "
        f"which takes it for the existing {what} {twin!r} (case, accents and trailing "
        f"spaces are ignored). Use {twin!r}, or convert the column to a binary NO PAD "
        f"collation (utf8mb4_nopad_bin on MariaDB, utf8mb4_0900_bin on MySQL) to keep both.",
        token=key,
    )


# ---------------------------------------------------------------- consumer rows


def existing_generations(conn: Connection, consumer_uuids: Iterable[str]) -> dict[str, int]:
    """``{uuid: generation}`` of those of ``consumer_uuids`` that exist (a locking read,
    so the generation read is the one the conditional write that follows sees)."""
    stmt = (
        sa.select(consumers.c.uuid, consumers.c.generation)
        .where(consumers.c.uuid.in_(sorted(set(consumer_uuids))))
        .with_for_update()
    )
    return {uuid: int(gen) for uuid, gen in conn.execute(stmt)}


def create_consumer(
    conn: Connection, consumer_uuid: str, project_id: int, user_id: int, type_id: int | None
) -> None:
    """Insert a new consumer at generation 1 (the generation after its first write);
    ``type_id=None``: no consumer type (Placement's "unknown").

    A concurrent creator of the same uuid makes the unique key fail: that is the
    "consumer is not new" conflict, reported as ``rpquery.consumer.generation_conflict``.
    """
    try:
        conn.execute(
            consumers.insert().values(
                uuid=consumer_uuid,
                project_id=project_id,
                user_id=user_id,
                consumer_type_id=type_id,
                generation=1,
            )
        )
    except exc.IntegrityError as error:
        raise ConcurrentUpdate(
            GENERATION_CONFLICT,
            f"consumer {consumer_uuid} already exists: expected generation None",
            token=consumer_uuid,
        ) from error


def update_consumer(
    conn: Connection,
    consumer_uuid: str,
    generation: int,
    project_id: int,
    user_id: int,
    type_id: int | None,
) -> None:
    """Bump the consumer's generation (and set its owner and type) if it is still at
    ``generation``: ``UPDATE consumers SET generation = generation + 1, ... WHERE uuid = :u
    AND generation = :g``. No row matched → ``rpquery.consumer.generation_conflict``.
    ``type_id=None`` leaves the consumer's type as it is."""
    values: dict[str, object] = {
        "generation": consumers.c.generation + 1,
        "project_id": project_id,
        "user_id": user_id,
    }
    if type_id is not None:
        values["consumer_type_id"] = type_id
    result = conn.execute(
        consumers.update()
        .where(consumers.c.uuid == consumer_uuid, consumers.c.generation == generation)
        .values(values)
    )
    if result.rowcount != 1:
        _raise_generation_conflict(conn, consumer_uuid, generation)


def delete_consumer(conn: Connection, consumer_uuid: str, generation: int) -> None:
    """Delete the consumer if it is still at ``generation`` (conditional DELETE)."""
    result = conn.execute(
        consumers.delete().where(
            consumers.c.uuid == consumer_uuid, consumers.c.generation == generation
        )
    )
    if result.rowcount != 1:
        _raise_generation_conflict(conn, consumer_uuid, generation)


def _raise_generation_conflict(conn: Connection, consumer_uuid: str, expected: int) -> None:
    actual = conn.execute(
        sa.select(consumers.c.generation).where(consumers.c.uuid == consumer_uuid)
    ).scalar()
    raise ConcurrentUpdate(
        GENERATION_CONFLICT,
        f"consumer generation conflict for {consumer_uuid}: expected {expected} "
        f"but the consumer {'does not exist' if actual is None else f'is at {actual}'}",
        token=consumer_uuid,
        consumer=consumer_uuid,
        expected_generation=expected,
        actual_generation=None if actual is None else int(actual),
    )


def require_absent(conn: Connection, consumer_uuid: str) -> None:
    """A caller passing generation ``None`` says the consumer is new: conflict if not."""
    found = conn.execute(
        sa.select(consumers.c.generation).where(consumers.c.uuid == consumer_uuid)
    ).scalar()
    if found is not None:
        raise ConcurrentUpdate(
            GENERATION_CONFLICT,
            f"consumer {consumer_uuid} exists at generation {found}: expected None",
            token=consumer_uuid,
            consumer=consumer_uuid,
            expected_generation=None,
            actual_generation=int(found),
        )


def require_present(conn: Connection, consumer_uuid: str) -> None:
    """``NotFound`` (``rpquery.consumer.not_found``) unless the consumer exists."""
    found = conn.execute(
        sa.select(consumers.c.id).where(consumers.c.uuid == consumer_uuid)
    ).scalar()
    if found is None:
        raise NotFound(
            "rpquery.consumer.not_found", f"no consumer {consumer_uuid}", token=consumer_uuid
        )
