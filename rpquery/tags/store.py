"""Tag operations of one caller's namespace: set at creation, list, check, add,
delete, replace all, delete all.

Reads see only the caller's namespace. Each write is one transaction that locks the
(instance, namespace), plans the change (:mod:`rpquery.tags.plan`, with the conflict
rules read in the same transaction), writes the rows and the jobs in flight, and
submits the backend jobs just before committing — so jobs reach the backend in the
order their writes commit. Should the commit fail after a submission, the job's
outcome arrives for an unknown job and is applied like any backend-side change, so
the backend stays the single source of truth.

>>> from rpquery.db import Database
>>> from rpquery.tags.backend import FakeBackend
>>> db = Database("sqlite://"); db.upgrade()
>>> fake = FakeBackend()
>>> vm = "6f1c0a52-9f54-4d39-9d1c-1f0f5d3b2a11"
>>> add_tag(db, fake, vm, "web").added
('web',)
>>> check_tag(db, vm, "web")
Tag(tag='web', status=<TagStatus.PENDADD: 'PENDADD'>)
>>> sorted(fake.instance_tags(vm))
['cyclades:user:web']
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from sqlalchemy.engine import Connection

from rpquery.db import Database
from rpquery.errors import Conflict
from rpquery.tags import conflicts, plan, rows
from rpquery.tags.backend import JobOp, TagBackend, TagJob
from rpquery.tags.model import (
    DEFAULT_CONFIG,
    Tag,
    TagConfig,
    TagStatus,
    TagWriteResult,
    validate_instance,
    validate_namespace,
    validate_tag,
    validate_tags,
)

__all__ = [
    "Planner",
    "add_tag",
    "check_tag",
    "create_tags",
    "delete_all_tags",
    "delete_tag",
    "list_tags",
    "replace_tags",
]

Planner = Callable[[Connection, dict[str, TagStatus]], plan.Plan]


# ------------------------------------------------------------------ reads


def list_tags(
    db: Database, instance_uuid: str, namespace: str = "user", config: TagConfig = DEFAULT_CONFIG
) -> tuple[Tag, ...]:
    """Every tag of the namespace with its status, sorted by tag."""
    instance_uuid = validate_instance(instance_uuid)
    validate_namespace(config, namespace)
    with db.connect() as conn:
        return _as_tags(rows.current(conn, instance_uuid, namespace))


def check_tag(
    db: Database,
    instance_uuid: str,
    tag: str,
    namespace: str = "user",
    config: TagConfig = DEFAULT_CONFIG,
) -> Tag | None:
    """The tag with its status, or ``None`` when it is not set in the namespace."""
    instance_uuid = validate_instance(instance_uuid)
    validate_tag(config, namespace, tag)
    with db.connect() as conn:
        status = rows.current(conn, instance_uuid, namespace).get(tag)
    return None if status is None else Tag(tag, status)


# ------------------------------------------------------------------ writes


def create_tags(
    db: Database,
    backend: TagBackend,
    instance_uuid: str,
    tags: Iterable[str],
    namespace: str = "user",
    config: TagConfig = DEFAULT_CONFIG,
) -> TagWriteResult:
    """Tags given when the instance is created; ``rpquery.tags.already_created`` when
    the namespace already holds tags for it."""
    wanted = validate_tags(config, namespace, tags)

    def planner(conn: Connection, now: dict[str, TagStatus]) -> plan.Plan:
        if now:
            raise Conflict(
                "rpquery.tags.already_created",
                f"instance {instance_uuid} already has {namespace} tags",
                token=instance_uuid,
            )
        rules = conflicts.load_rules(conn, namespace, wanted)
        return plan.plan_set(now, wanted, rules, config, replace=False)

    return _write(db, backend, instance_uuid, namespace, config, planner)


def add_tag(
    db: Database,
    backend: TagBackend,
    instance_uuid: str,
    tag: str,
    namespace: str = "user",
    config: TagConfig = DEFAULT_CONFIG,
) -> TagWriteResult:
    """Add one tag (PENDADD until the backend confirms). Adding a present tag is a
    no-op, even at the limit; a tag excluded by a present one is skipped."""
    wanted = (validate_tag(config, namespace, tag),)

    def planner(conn: Connection, now: dict[str, TagStatus]) -> plan.Plan:
        rules = conflicts.load_rules(conn, namespace, wanted) if tag not in now else frozenset()
        return plan.plan_set(now, wanted, rules, config, replace=False)

    return _write(db, backend, instance_uuid, namespace, config, planner)


def replace_tags(
    db: Database,
    backend: TagBackend,
    instance_uuid: str,
    tags: Iterable[str],
    namespace: str = "user",
    config: TagConfig = DEFAULT_CONFIG,
) -> TagWriteResult:
    """Make ``tags`` the namespace's set: ACTIVE tags not listed are deleted, PENDADD
    ones are kept (reported in ``pending_kept``)."""
    wanted = validate_tags(config, namespace, tags)

    def planner(conn: Connection, now: dict[str, TagStatus]) -> plan.Plan:
        rules = conflicts.load_rules(conn, namespace, [*wanted, *now])
        return plan.plan_set(now, wanted, rules, config, replace=True)

    return _write(db, backend, instance_uuid, namespace, config, planner)


def delete_tag(
    db: Database,
    backend: TagBackend,
    instance_uuid: str,
    tag: str,
    namespace: str = "user",
    config: TagConfig = DEFAULT_CONFIG,
) -> TagWriteResult:
    """Delete one ACTIVE tag (``rpquery.tags.not_found`` / ``rpquery.tags.not_active``)."""
    validate_tag(config, namespace, tag)
    return _write(
        db,
        backend,
        instance_uuid,
        namespace,
        config,
        lambda c, now: plan.plan_delete_one(now, tag),
    )


def delete_all_tags(
    db: Database,
    backend: TagBackend,
    instance_uuid: str,
    namespace: str = "user",
    config: TagConfig = DEFAULT_CONFIG,
) -> TagWriteResult:
    """Delete every ACTIVE tag of the namespace; PENDADD ones stay."""
    return _write(
        db, backend, instance_uuid, namespace, config, lambda c, now: plan.plan_delete_all(now)
    )


# ------------------------------------------------------------------ executor


def _write(
    db: Database,
    backend: TagBackend,
    instance_uuid: str,
    namespace: str,
    config: TagConfig,
    planner: Planner,
) -> TagWriteResult:
    instance_uuid = validate_instance(instance_uuid)
    validate_namespace(config, namespace)
    rows.ensure_lock_rows(db, [(instance_uuid, namespace)])

    def once() -> TagWriteResult:
        with db.begin() as conn:
            rows.lock(conn, instance_uuid, namespace)
            todo = planner(conn, rows.current(conn, instance_uuid, namespace))
            job_ids = _apply(conn, backend, instance_uuid, namespace, config, todo)
            after = rows.current(conn, instance_uuid, namespace)
        return TagWriteResult(
            instance_uuid,
            namespace,
            _as_tags(after),
            todo.add,
            todo.delete,
            todo.unchanged,
            todo.pending_kept,
            todo.skipped,
            job_ids,
        )

    return rows.retried(once, f"tag write of {instance_uuid} in {namespace}")


def _apply(
    conn: Connection,
    backend: TagBackend,
    instance_uuid: str,
    namespace: str,
    config: TagConfig,
    todo: plan.Plan,
) -> tuple[str, ...]:
    rows.delete_tags(conn, instance_uuid, namespace, todo.delete)
    rows.insert_tags(conn, instance_uuid, namespace, todo.add, TagStatus.PENDADD)
    jobs = []
    for op, tags in ((JobOp.DELETE, todo.delete), (JobOp.ADD, todo.add)):
        if tags:
            job_id = f"rpq-{uuid.uuid4().hex}"
            rows.record_job(conn, job_id, instance_uuid, namespace, op, tags)
            forms = tuple(config.backend_form(namespace, t) for t in tags)
            jobs.append(TagJob(job_id, instance_uuid, op, forms))
    for job in jobs:
        backend.submit(job)
    return tuple(job.job_id for job in jobs)


def _as_tags(now: dict[str, TagStatus]) -> tuple[Tag, ...]:
    return tuple(Tag(t, s) for t, s in sorted(now.items()))
