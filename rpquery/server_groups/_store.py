"""Server groups' storage (docs/server-groups.md): create, read, delete and show groups,
and membership changes guarded by the group's generation.

A member's *host* is the root provider of the providers its allocations use (sharing
providers are not hosts; :mod:`rpquery.server_groups._group_hosts` has the statements).
"""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery import _validation as validation
from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate, Conflict, NotFound
from rpquery.retry import LOCKED_WRITES, retrying
from rpquery.server_groups import _group_hosts as gh
from rpquery.server_groups._model import (
    BAD_UUID,
    GENERATION_CONFLICT,
    Host,
    Member,
    ServerGroup,
    ServerGroupDetail,
    validate_group,
)
from rpquery.store.tables import server_group_members, server_groups

__all__ = [
    "add_members",
    "add_members_conn",
    "bump_generation",
    "create_group",
    "delete_group",
    "get_group",
    "list_groups",
    "load_group",
    "locked_group",
    "remove_members",
    "show_group",
]


def _row_to_group(row: Any) -> ServerGroup:
    return ServerGroup(
        id=row.id,
        uuid=row.uuid,
        name=row.name,
        project_id=row.project_id,
        user_id=row.user_id,
        policy=row.policy,
        max_server_per_host=row.max_server_per_host,
        generation=row.generation,
    )


def load_group(conn: Connection, group_uuid: str) -> ServerGroup:
    """The group named by ``group_uuid``; ``NotFound`` (``rpquery.server_group.not_found``)."""
    row = conn.execute(
        sa.select(server_groups).where(
            server_groups.c.uuid == validation.check_uuid(group_uuid, BAD_UUID, "server group")
        )
    ).first()
    if row is None:
        raise NotFound(
            "rpquery.server_group.not_found", f"no server group {group_uuid}", token=group_uuid
        )
    return _row_to_group(row)


def locked_group(conn: Connection, group_uuid: str) -> ServerGroup:
    """The group, read after taking its row lock (``SELECT ... FOR UPDATE``; SQLite's
    ``BEGIN IMMEDIATE`` already excludes other writers): writers of one group (schedulers,
    membership changes) queue here instead of reading the same generation and failing
    at its check. Every writer that locks both a group and providers takes the group
    first. A locking read, so on MariaDB it fixes no snapshot for later reads."""
    fields = [f.name for f in dataclasses.fields(ServerGroup)]
    row = conn.execute(
        sa.select(*(server_groups.c[name] for name in fields))
        .where(server_groups.c.uuid == validation.check_uuid(group_uuid, BAD_UUID, "server group"))
        .with_for_update()
    ).first()
    if row is None:
        return load_group(conn, group_uuid)  # NotFound
    return ServerGroup(**row._mapping)


def create_group(
    db: Database,
    name: str,
    policies: str | Sequence[str],
    project_id: str,
    user_id: str,
    rules: Mapping[str, Any] | None = None,
    *,
    group_uuid: str | None = None,
) -> ServerGroup:
    """Validate and store a group; ``Conflict`` (``rpquery.server_group.exists``) when
    ``group_uuid`` is taken.

    >>> db = Database("sqlite://"); db.upgrade()
    >>> create_group(db, "web", ["soft-affinity"], "proj", "user").policy
    'soft-affinity'
    """
    spec = validate_group(name, policies, project_id, user_id, rules)
    new_uuid = (
        validation.check_uuid(group_uuid, BAD_UUID, "server group")
        if group_uuid
        else str(uuidlib.uuid4())
    )
    with db.begin() as conn:
        taken = conn.execute(
            sa.select(server_groups.c.id).where(server_groups.c.uuid == new_uuid)
        ).first()
        if taken is not None:
            raise Conflict(
                "rpquery.server_group.exists", f"server group {new_uuid} exists", token=new_uuid
            )
        conn.execute(
            server_groups.insert().values(
                uuid=new_uuid,
                name=spec.name,
                project_id=spec.project_id,
                user_id=spec.user_id,
                policy=spec.policy,
                max_server_per_host=spec.max_server_per_host,
                generation=0,
            )
        )
        return load_group(conn, new_uuid)


def get_group(db: Database, group_uuid: str) -> ServerGroup:
    with db.connect() as conn:
        return load_group(conn, group_uuid)


def list_groups(db: Database, *, project_id: str | None = None) -> list[ServerGroup]:
    """Every group (``project_id``: only that project's), ordered by name, then uuid.

    >>> db = Database("sqlite://"); db.upgrade()
    >>> _ = create_group(db, "web", ["affinity"], "p1", "u")
    >>> _ = create_group(db, "db", ["anti-affinity"], "p2", "u")
    >>> [g.name for g in list_groups(db)], [g.name for g in list_groups(db, project_id="p2")]
    (['db', 'web'], ['db'])
    """
    fields = [f.name for f in dataclasses.fields(ServerGroup)]
    stmt = sa.select(*(server_groups.c[name] for name in fields)).order_by(
        server_groups.c.name, server_groups.c.uuid
    )
    if project_id is not None:
        stmt = stmt.where(server_groups.c.project_id == project_id)
    with db.connect() as conn:
        return [ServerGroup(**row._mapping) for row in conn.execute(stmt)]


def delete_group(db: Database, group_uuid: str) -> None:
    """Delete a group and its memberships (allocations are not touched)."""
    with db.begin() as conn:
        group = load_group(conn, group_uuid)
        conn.execute(
            server_group_members.delete().where(server_group_members.c.group_id == group.id)
        )
        conn.execute(server_groups.delete().where(server_groups.c.id == group.id))


def bump_generation(conn: Connection, group: ServerGroup) -> ServerGroup:
    """Conditional ``generation + 1``; ``ConcurrentUpdate`` when someone changed the group
    since ``group`` was read."""
    done = conn.execute(
        server_groups.update()
        .where(server_groups.c.id == group.id, server_groups.c.generation == group.generation)
        .values(generation=group.generation + 1)
    )
    if done.rowcount != 1:
        raise ConcurrentUpdate(
            GENERATION_CONFLICT,
            f"server group {group.uuid} changed concurrently; re-read and retry",
            token=group.uuid,
        )
    return replace(group, generation=group.generation + 1)


def add_members_conn(
    conn: Connection, group: ServerGroup, instance_uuids: Iterable[str]
) -> ServerGroup:
    """Add members inside the caller's transaction, checking ``group.generation``.

    Instances already in this group are skipped; an instance of another group is a
    ``Conflict`` (``rpquery.server_group.member_conflict``).
    """
    wanted = sorted({validation.check_uuid(u, BAD_UUID, "instance") for u in instance_uuids})
    group = bump_generation(conn, group)
    if not wanted:
        return group
    rows = conn.execute(
        sa.select(server_group_members.c.instance_uuid, server_group_members.c.group_id).where(
            server_group_members.c.instance_uuid.in_(wanted)
        )
    ).all()
    for instance, group_id in rows:
        if group_id != group.id:
            raise Conflict(
                "rpquery.server_group.member_conflict",
                f"instance {instance} is a member of another server group",
                token=instance,
            )
    have = {instance for instance, _ in rows}
    new = [{"group_id": group.id, "instance_uuid": u} for u in wanted if u not in have]
    if new:
        conn.execute(server_group_members.insert(), new)
    return group


def add_members(db: Database, group_uuid: str, instance_uuids: Iterable[str]) -> ServerGroup:
    """Add instances to a group (idempotent for existing members). The group row is
    locked first (:func:`locked_group`), so schedulers of the group running meanwhile
    make it wait, not fail; a deadlock the server breaks is retried (:func:`_unguarded`)."""
    uuids = [validation.check_uuid(u, BAD_UUID, "instance") for u in instance_uuids]

    def once() -> ServerGroup:
        with db.begin() as conn:
            return add_members_conn(conn, locked_group(conn, group_uuid), uuids)

    return _unguarded(once, f"add members to server group {group_uuid}")


def remove_members(db: Database, group_uuid: str, instance_uuids: Iterable[str]) -> ServerGroup:
    """Remove instances from a group; instances that are not members are ignored. The
    group row is locked first, as :func:`add_members` does."""
    uuids = sorted({validation.check_uuid(u, BAD_UUID, "instance") for u in instance_uuids})

    def once() -> ServerGroup:
        with db.begin() as conn:
            group = bump_generation(conn, locked_group(conn, group_uuid))
            if uuids:
                conn.execute(
                    server_group_members.delete().where(
                        server_group_members.c.group_id == group.id,
                        server_group_members.c.instance_uuid.in_(uuids),
                    )
                )
            return group

    return _unguarded(once, f"remove members from server group {group_uuid}")


def _unguarded(work: Callable[[], ServerGroup], what: str) -> ServerGroup:
    """Run a membership change the caller gave no generation for: the generation it
    read in its own transaction went stale (another writer committed in between), or
    the server broke a deadlock — read again and retry, with the jittered backoff of
    :data:`rpquery.retry.LOCKED_WRITES`, logged on ``rpquery.server_group``."""
    return retrying(
        work,
        LOCKED_WRITES,
        retry_if=lambda e: (
            isinstance(e, ConcurrentUpdate)
            and e.code in (GENERATION_CONFLICT, "rpquery.concurrent_update")
        ),
        logger="rpquery.server_groups",
        what=what,
    )


def show_group(db: Database, group_uuid: str) -> ServerGroupDetail:
    """The group with its members and their hosts (two statements, one connection)."""
    with db.connect() as conn:
        group = load_group(conn, group_uuid)
        names = conn.execute(
            sa.select(server_group_members.c.instance_uuid)
            .where(server_group_members.c.group_id == group.id)
            .order_by(server_group_members.c.instance_uuid)
        ).scalars()
        hosts: dict[str, list[Host]] = {name: [] for name in names}
        for instance, host_id, host_uuid, host_name in conn.execute(
            gh.member_hosts_stmt(group.id)
        ):
            hosts[instance].append(Host(host_id, host_uuid, host_name))
    members = tuple(Member(i, tuple(h)) for i, h in hosts.items())
    return ServerGroupDetail(group, members)
