"""Statement builders and row helpers shared by tag writes, outcome handling and
reconciliation. Builders return Core constructs; the helpers run them on the
caller's connection (inside the caller's transaction).

Every change to an (instance, namespace) first locks its row in
``rpq_instance_tag_locks`` (:func:`lock`), so limit and conflict checks see a
stable set and backend jobs are submitted in commit order. The lock is a write
(``version = version + 1``), not a ``SELECT ... FOR UPDATE``: the same row lock on
one server, and a written row that a Galera cluster certifies, so two writers of one
instance on two nodes cannot both commit (docs/deployment.md).

>>> from sqlalchemy.dialects import sqlite
>>> sql = str(lock_query("i", "user").compile(dialect=sqlite.dialect()))
>>> sql.startswith("UPDATE rpq_instance_tag_locks SET"), "version + ?" in sql
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate
from rpquery.retry import LOCKED_WRITES, retrying
from rpquery.store import dialects
from rpquery.store.tables import instance_tag_jobs as jobs_t
from rpquery.store.tables import instance_tag_locks as locks_t
from rpquery.store.tables import instance_tags as tags_t
from rpquery.store.tables import utcnow
from rpquery.tags.backend import JobOp
from rpquery.tags.model import TagStatus

__all__ = [
    "current",
    "current_query",
    "delete_tags",
    "ensure_lock_rows",
    "forget_job",
    "forget_stale_jobs",
    "insert_tags",
    "jobs_in_flight",
    "lock",
    "lock_query",
    "record_job",
    "retried",
    "set_status",
]

T = TypeVar("T")


def lock_query(instance_uuid: str, namespace: str) -> sa.Update:
    return (
        sa.update(locks_t)
        .where(locks_t.c.instance_uuid == instance_uuid, locks_t.c.namespace == namespace)
        .values(version=locks_t.c.version + 1)
    )


def ensure_lock_rows(db: Database, pairs: Iterable[tuple[str, str]]) -> None:
    """Create missing lock rows in their own short transaction (never upgrading a
    shared lock to an exclusive one inside the write transaction)."""
    rows = [{"instance_uuid": i, "namespace": n} for i, n in sorted(set(pairs))]
    if not rows:
        return

    def once() -> None:
        with db.begin() as conn:
            dialects.insert_ignore(conn, locks_t, rows)

    retried(once, "create tag lock rows")


def retried(work: Callable[[], T], what: str) -> T:
    """Run one tag transaction, again after a deadlock or serialization failure, with
    the shared backoff (:data:`rpquery.retry.LOCKED_WRITES`, logged on ``rpquery.tags``)."""
    return retrying(
        work,
        LOCKED_WRITES,
        retry_if=lambda e: isinstance(e, ConcurrentUpdate),
        logger="rpquery.tags",
        what=what,
    )


def lock(conn: Connection, instance_uuid: str, namespace: str) -> None:
    """Block other writers of this (instance, namespace) until the transaction ends."""
    conn.execute(lock_query(instance_uuid, namespace))


def current_query(instance_uuid: str, namespace: str) -> sa.Select[Any]:
    """``SELECT tag, status FROM rpq_instance_tags WHERE instance_uuid = :i AND
    namespace = :ns ORDER BY tag`` — a caller only ever reads its own namespace."""
    return (
        sa.select(tags_t.c.tag, tags_t.c.status)
        .where(tags_t.c.instance_uuid == instance_uuid, tags_t.c.namespace == namespace)
        .order_by(tags_t.c.tag)
    )


def current(conn: Connection, instance_uuid: str, namespace: str) -> dict[str, TagStatus]:
    rows = conn.execute(current_query(instance_uuid, namespace))
    return {tag: TagStatus(status) for tag, status in rows}


def insert_tags(
    conn: Connection, instance_uuid: str, namespace: str, tags: Iterable[str], status: TagStatus
) -> None:
    rows = [
        {"instance_uuid": instance_uuid, "namespace": namespace, "tag": t, "status": str(status)}
        for t in tags
    ]
    if rows:
        conn.execute(tags_t.insert(), rows)


def set_status(
    conn: Connection, instance_uuid: str, namespace: str, tags: Iterable[str], status: TagStatus
) -> None:
    wanted = list(tags)
    if wanted:
        conn.execute(
            tags_t.update()
            .where(_rows(instance_uuid, namespace, wanted))
            .values(status=str(status), updated_at=utcnow())
        )


def delete_tags(conn: Connection, instance_uuid: str, namespace: str, tags: Iterable[str]) -> None:
    wanted = list(tags)
    if wanted:
        conn.execute(tags_t.delete().where(_rows(instance_uuid, namespace, wanted)))


def record_job(
    conn: Connection,
    job_id: str,
    instance_uuid: str,
    namespace: str,
    op: JobOp,
    tags: Iterable[str],
) -> None:
    rows = [
        {
            "job_id": job_id,
            "instance_uuid": instance_uuid,
            "namespace": namespace,
            "tag": t,
            "op": str(op),
        }
        for t in tags
    ]
    if rows:
        conn.execute(jobs_t.insert(), rows)


def forget_job(conn: Connection, job_id: str, namespace: str, tags: Iterable[str]) -> None:
    conn.execute(
        jobs_t.delete().where(
            jobs_t.c.job_id == job_id,
            jobs_t.c.namespace == namespace,
            jobs_t.c.tag.in_(list(tags)),
        )
    )


def jobs_in_flight(conn: Connection, instance_uuid: str, namespace: str) -> dict[str, set[JobOp]]:
    """Tag → operations of jobs still in flight for it."""
    query = sa.select(jobs_t.c.tag, jobs_t.c.op).where(
        jobs_t.c.instance_uuid == instance_uuid, jobs_t.c.namespace == namespace
    )
    out: dict[str, set[JobOp]] = {}
    for tag, op in conn.execute(query):
        out.setdefault(tag, set()).add(JobOp(op))
    return out


def forget_stale_jobs(
    conn: Connection, instance_uuid: str, namespace: str, pending: frozenset[str]
) -> None:
    """Drop job rows of this pair whose job the backend no longer runs."""
    conn.execute(
        jobs_t.delete().where(
            jobs_t.c.instance_uuid == instance_uuid,
            jobs_t.c.namespace == namespace,
            jobs_t.c.job_id.not_in(sorted(pending)),
        )
    )


def _rows(instance_uuid: str, namespace: str, tags: list[str]) -> sa.ColumnElement[bool]:
    return sa.and_(
        tags_t.c.instance_uuid == instance_uuid,
        tags_t.c.namespace == namespace,
        tags_t.c.tag.in_(tags),
    )
