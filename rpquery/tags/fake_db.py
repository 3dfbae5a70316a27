"""A :class:`~rpquery.tags.backend.FakeBackend` whose state lives in the database, so
successive CLI commands (separate processes) see one backend.

:meth:`DbFakeBackend.load` reads the fake's tags, queued jobs and uncollected
outcomes; :meth:`DbFakeBackend.save` writes them back in one transaction. It is a
demo device: one CLI command at a time, no locking between processes.

>>> from rpquery.db import Database
>>> db = Database("sqlite://"); db.upgrade()
>>> fake = DbFakeBackend.load(db)
>>> fake.add_direct("i-1", "cyclades:user:web", notify=False)
>>> fake.save(db)
>>> sorted(DbFakeBackend.load(db).instance_tags("i-1"))
['cyclades:user:web']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from rpquery.db import Database
from rpquery.store.tables import fake_backend_jobs as jobs_t
from rpquery.store.tables import fake_backend_tags as tags_t
from rpquery.tags.backend import FakeBackend, JobOp, JobOutcome, TagJob

__all__ = ["DbFakeBackend"]

_QUEUED = "queued"
_SUCCEEDED = "succeeded"
_FAILED = "failed"


class DbFakeBackend(FakeBackend):
    """The fake backend, persisted in ``rpq_fake_backend_*``."""

    @classmethod
    def load(cls, db: Database, *, lag: bool = False) -> DbFakeBackend:
        fake = cls(lag=lag)
        with db.connect() as conn:
            for instance_uuid, tag in conn.execute(
                sa.select(tags_t.c.instance_uuid, tags_t.c.tag)
            ):
                fake._tags.setdefault(instance_uuid, set()).add(tag)
            rows = conn.execute(sa.select(jobs_t).order_by(jobs_t.c.id)).mappings().all()
        for job_id, group in _group(rows):
            first = group[0]
            job = TagJob(
                job_id, first["instance_uuid"], JobOp(first["op"]), tuple(r["tag"] for r in group)
            )
            if first["status"] == _QUEUED:
                fake._queue.append(job)
            else:
                ok = first["status"] == _SUCCEEDED
                fake._outcomes.append(
                    JobOutcome(
                        job.job_id, job.instance_uuid, job.op, job.tags, ok, "" if ok else "failed"
                    )
                )
        return fake

    def save(self, db: Database) -> None:
        rows = [(job, _QUEUED) for job in self._queue] + [
            (o, _SUCCEEDED if o.succeeded else _FAILED) for o in self._outcomes
        ]
        with db.begin() as conn:
            conn.execute(tags_t.delete())
            conn.execute(jobs_t.delete())
            tag_rows = [
                {"instance_uuid": i, "tag": t} for i, tags in self._tags.items() for t in tags
            ]
            if tag_rows:
                conn.execute(tags_t.insert(), tag_rows)
            job_rows = [
                {
                    "job_id": j.job_id,
                    "instance_uuid": j.instance_uuid,
                    "op": str(j.op),
                    "tag": t,
                    "status": status,
                }
                for j, status in rows
                for t in j.tags
            ]
            if job_rows:
                conn.execute(jobs_t.insert(), job_rows)


def _group(rows: Iterable[Any]) -> list[tuple[str, list[Any]]]:
    groups: dict[str, list[Any]] = {}
    for row in rows:
        groups.setdefault(row["job_id"], []).append(row)
    return list(groups.items())
