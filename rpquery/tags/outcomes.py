"""Applying backend job outcomes (Synnefo's dispatcher, ``process_op_status``).

For each tag of a finished job, in its (instance, namespace), under that pair's lock:

=============  =================================================================
add ok         row → ACTIVE; missing row → created ACTIVE (*adopted*: tags added
               on the backend directly, with one of our prefixes)
add failed     PENDADD row deleted (unless another add of it is still in flight)
delete ok      row deleted, unless it is a PENDADD re-add with a job in flight
delete failed  row reinstated (or set) ACTIVE
=============  =================================================================

Tags without one of our prefixes, or not a valid encoding, are ignored (reported).

>>> from rpquery.db import Database
>>> from rpquery.tags import store
>>> from rpquery.tags.backend import FakeBackend
>>> db = Database("sqlite://"); db.upgrade()
>>> fake, vm = FakeBackend(), "6f1c0a52-9f54-4d39-9d1c-1f0f5d3b2a11"
>>> _ = store.add_tag(db, fake, vm, "web")
>>> process_outcomes(db, fake).activated
(TagChange(instance_uuid='6f1c0a52-9f54-4d39-9d1c-1f0f5d3b2a11', namespace='user', tag='web'),)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy.engine import Connection

from rpquery.db import Database
from rpquery.tags import rows
from rpquery.tags.backend import JobOp, JobOutcome, TagBackend
from rpquery.tags.model import DEFAULT_CONFIG, TagConfig, TagStatus

__all__ = ["OutcomeReport", "TagChange", "apply_outcomes", "process_outcomes"]


@dataclass(frozen=True, order=True)
class TagChange:
    """One tag of one instance's namespace that an outcome or a reconciliation changed."""

    instance_uuid: str
    namespace: str
    tag: str


@dataclass(frozen=True)
class OutcomeReport:
    """What applying a batch of outcomes changed; ``ignored`` holds foreign tags."""

    activated: tuple[TagChange, ...] = ()
    adopted: tuple[TagChange, ...] = ()
    dropped: tuple[TagChange, ...] = ()
    removed: tuple[TagChange, ...] = ()
    reinstated: tuple[TagChange, ...] = ()
    ignored: tuple[str, ...] = ()


@dataclass
class _Acc:
    changes: dict[str, list[TagChange]] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)

    def note(self, kind: str, change: TagChange) -> None:
        self.changes.setdefault(kind, []).append(change)

    def report(self) -> OutcomeReport:
        kinds = ("activated", "adopted", "dropped", "removed", "reinstated")
        parts = {k: tuple(self.changes.get(k, ())) for k in kinds}
        return OutcomeReport(**parts, ignored=tuple(self.ignored))


def process_outcomes(
    db: Database, backend: TagBackend, config: TagConfig = DEFAULT_CONFIG
) -> OutcomeReport:
    """Collect the backend's finished jobs and apply them."""
    return apply_outcomes(db, backend.collect_outcomes(), config)


def apply_outcomes(
    db: Database, outcomes: Iterable[JobOutcome], config: TagConfig = DEFAULT_CONFIG
) -> OutcomeReport:
    """Apply outcomes in order, one transaction per (outcome, namespace)."""
    acc = _Acc()
    for outcome in outcomes:
        by_ns: dict[str, list[str]] = {}
        for form in outcome.tags:
            parsed = config.parse_backend_form(form)
            if parsed is None:
                acc.ignored.append(form)
            else:
                by_ns.setdefault(parsed[0], []).append(parsed[1])
        rows.ensure_lock_rows(db, [(outcome.instance_uuid, ns) for ns in by_ns])
        for namespace, tags in sorted(by_ns.items()):
            _apply_one(db, outcome, namespace, tags, acc)
    return acc.report()


def _apply_one(
    db: Database, outcome: JobOutcome, namespace: str, tags: list[str], acc: _Acc
) -> None:
    def once() -> _Acc:
        local = _Acc()
        with db.begin() as conn:
            rows.lock(conn, outcome.instance_uuid, namespace)
            rows.forget_job(conn, outcome.job_id, namespace, tags)
            _settle(conn, outcome, namespace, tags, local)
        return local

    local = rows.retried(once, f"apply job {outcome.job_id} to {outcome.instance_uuid}")
    for kind, changes in local.changes.items():
        acc.changes.setdefault(kind, []).extend(changes)


def _settle(
    conn: Connection, outcome: JobOutcome, namespace: str, tags: list[str], acc: _Acc
) -> None:
    instance = outcome.instance_uuid
    now = rows.current(conn, instance, namespace)
    flying = rows.jobs_in_flight(conn, instance, namespace)
    for tag in tags:
        status = now.get(tag)
        change = TagChange(instance, namespace, tag)
        re_adding = status is TagStatus.PENDADD and JobOp.ADD in flying.get(tag, set())
        if outcome.op is JobOp.ADD and outcome.succeeded:
            if status is None:
                rows.insert_tags(conn, instance, namespace, [tag], TagStatus.ACTIVE)
                acc.note("adopted", change)
            elif status is TagStatus.PENDADD:
                rows.set_status(conn, instance, namespace, [tag], TagStatus.ACTIVE)
                acc.note("activated", change)
        elif outcome.op is JobOp.ADD:
            if status is TagStatus.PENDADD and not re_adding:
                rows.delete_tags(conn, instance, namespace, [tag])
                acc.note("dropped", change)
        elif outcome.succeeded:
            if status is not None and not re_adding:
                rows.delete_tags(conn, instance, namespace, [tag])
                acc.note("removed", change)
        elif status is None:
            rows.insert_tags(conn, instance, namespace, [tag], TagStatus.ACTIVE)
            acc.note("reinstated", change)
        elif status is TagStatus.PENDADD:
            rows.set_status(conn, instance, namespace, [tag], TagStatus.ACTIVE)
            acc.note("reinstated", change)
