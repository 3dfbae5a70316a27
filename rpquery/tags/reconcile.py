"""Reconciliation: the backend is the single source of truth.

Per instance and namespace, under the pair's lock, with the backend's tags read while
the lock is held, and leaving alone every tag with a job in flight (a job the backend
still lists as pending; records of finished jobs whose outcome never arrived are
dropped, the backend's tags already tell what they did):

- on the backend, missing here → **created** ACTIVE;
- on the backend, PENDADD here → **activated**;
- ACTIVE here, absent from the backend → **deleted**;
- PENDADD here with no job in flight, absent from the backend → **dropped** (its
  add never reached the backend);
- PENDADD or deleted-with-job-in-flight → **left alone** (``in_flight``).

Backend tags without one of our prefixes, or not a valid encoding, are reported in
``ignored`` and never touched.

>>> from rpquery.db import Database
>>> from rpquery.tags.backend import FakeBackend
>>> db = Database("sqlite://"); db.upgrade()
>>> fake, vm = FakeBackend(), "6f1c0a52-9f54-4d39-9d1c-1f0f5d3b2a11"
>>> fake.add_direct(vm, "cyclades:system:ha", "other-tool:x", notify=False)
>>> report = reconcile(db, fake)
>>> [c.tag for c in report.created], report.ignored
(['ha'], ('other-tool:x',))
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery.db import Database
from rpquery.store.tables import instance_tags as tags_t
from rpquery.tags import rows
from rpquery.tags.backend import TagBackend
from rpquery.tags.model import DEFAULT_CONFIG, TagConfig, TagStatus, validate_instance
from rpquery.tags.outcomes import TagChange

__all__ = ["ReconcileReport", "reconcile"]


@dataclass(frozen=True)
class ReconcileReport:
    created: tuple[TagChange, ...] = ()
    activated: tuple[TagChange, ...] = ()
    deleted: tuple[TagChange, ...] = ()
    dropped: tuple[TagChange, ...] = ()
    in_flight: tuple[TagChange, ...] = ()
    ignored: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.created or self.activated or self.deleted or self.dropped)


def reconcile(
    db: Database,
    backend: TagBackend,
    config: TagConfig = DEFAULT_CONFIG,
    instances: Iterable[str] | None = None,
) -> ReconcileReport:
    """Make the database match the backend for ``instances`` (default: every instance
    either side knows), in every configured namespace."""
    if instances is None:
        todo = sorted(backend.instances() | _known_instances(db))
    else:
        todo = sorted({validate_instance(i) for i in instances})
    parts: dict[str, list[TagChange]] = {}
    ignored: list[str] = []
    pairs = [(i, ns) for i in todo for ns in sorted(config.prefixes)]
    rows.ensure_lock_rows(db, pairs)
    for instance_uuid, namespace in pairs:
        found = _reconcile_pair(db, backend, config, instance_uuid, namespace)
        for kind, change in found:
            if kind == "ignored":
                if change.tag not in ignored:
                    ignored.append(change.tag)
            else:
                parts.setdefault(kind, []).append(change)
    kinds = ("created", "activated", "deleted", "dropped", "in_flight")
    return ReconcileReport(**{k: tuple(parts.get(k, ())) for k in kinds}, ignored=tuple(ignored))


def _known_instances(db: Database) -> set[str]:
    with db.connect() as conn:
        return set(conn.execute(sa.select(tags_t.c.instance_uuid).distinct()).scalars())


def _reconcile_pair(
    db: Database, backend: TagBackend, config: TagConfig, instance_uuid: str, namespace: str
) -> list[tuple[str, TagChange]]:
    def once() -> list[tuple[str, TagChange]]:
        with db.begin() as conn:
            rows.lock(conn, instance_uuid, namespace)
            rows.forget_stale_jobs(conn, instance_uuid, namespace, backend.pending_jobs())
            remote, foreign = _remote(backend, config, instance_uuid, namespace)
            found = _settle(conn, instance_uuid, namespace, remote)
        return found + [("ignored", TagChange(instance_uuid, "", f)) for f in foreign]

    return rows.retried(once, f"reconcile tags of {instance_uuid} in {namespace}")


def _remote(
    backend: TagBackend, config: TagConfig, instance_uuid: str, namespace: str
) -> tuple[set[str], list[str]]:
    mine: set[str] = set()
    foreign: list[str] = []
    for form in sorted(backend.instance_tags(instance_uuid)):
        parsed = config.parse_backend_form(form)
        if parsed is None:
            foreign.append(form)
        elif parsed[0] == namespace:
            mine.add(parsed[1])
    return mine, foreign


def _settle(
    conn: Connection, instance_uuid: str, namespace: str, remote: set[str]
) -> list[tuple[str, TagChange]]:
    now = rows.current(conn, instance_uuid, namespace)
    flying = rows.jobs_in_flight(conn, instance_uuid, namespace)
    out: list[tuple[str, TagChange]] = []
    for tag in sorted(remote | set(now) | set(flying)):
        change = TagChange(instance_uuid, namespace, tag)
        status = now.get(tag)
        if tag in flying:
            out.append(("in_flight", change))
        elif tag in remote and status is None:
            rows.insert_tags(conn, instance_uuid, namespace, [tag], TagStatus.ACTIVE)
            out.append(("created", change))
        elif tag in remote and status is TagStatus.PENDADD:
            rows.set_status(conn, instance_uuid, namespace, [tag], TagStatus.ACTIVE)
            out.append(("activated", change))
        elif tag not in remote and status is not None:
            rows.delete_tags(conn, instance_uuid, namespace, [tag])
            out.append(("deleted" if status is TagStatus.ACTIVE else "dropped", change))
    return out
