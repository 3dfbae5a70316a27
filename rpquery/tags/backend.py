"""The tag backend (Ganeti in Synnefo) as an interface, and fakes that obey its rules.

rpquery stores the clear-text tag; the backend stores ``prefix + encode(tag)``.
Writes submit *jobs*; the backend runs them asynchronously and reports one
:class:`JobOutcome` per job, which :mod:`rpquery.tags.outcomes` applies. Tags added on
the backend by other means arrive as outcomes of jobs rpquery never submitted.

>>> fake = FakeBackend(lag=True)
>>> fake.submit(TagJob("j1", "i-1", JobOp.ADD, ("cyclades:user:web",)))
>>> fake.instance_tags("i-1")
frozenset()
>>> fake.run_jobs()
1
>>> sorted(fake.instance_tags("i-1")), [o.succeeded for o in fake.collect_outcomes()]
(['cyclades:user:web'], [True])
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from rpquery.errors import RpqueryError

__all__ = [
    "GANETI_MAX_LENGTH",
    "GANETI_MAX_TAGS",
    "GANETI_TAG_RE",
    "FakeBackend",
    "JobOp",
    "JobOutcome",
    "TagBackend",
    "TagBackendError",
    "TagJob",
    "ganeti_rejects",
]

#: Ganeti's tag rule and limits.
GANETI_TAG_RE = re.compile(r"^[A-Za-z0-9_.+*/:@-]+$")
GANETI_MAX_LENGTH = 128
GANETI_MAX_TAGS = 4096


class TagBackendError(RpqueryError):
    """The backend refused a job submission or could not be reached."""

    default_code = "rpquery.tags.backend_unavailable"


class JobOp(StrEnum):
    ADD = "add"
    DELETE = "delete"


@dataclass(frozen=True)
class TagJob:
    """One backend job: add or delete ``tags`` (backend forms) on one instance."""

    job_id: str
    instance_uuid: str
    op: JobOp
    tags: tuple[str, ...]


@dataclass(frozen=True)
class JobOutcome:
    """The backend's report on a finished job (ours or anybody's)."""

    job_id: str
    instance_uuid: str
    op: JobOp
    tags: tuple[str, ...]
    succeeded: bool
    reason: str = ""


class TagBackend(Protocol):
    """What rpquery needs from a tag backend."""

    def submit(self, job: TagJob) -> None:
        """Queue ``job``; raise :class:`TagBackendError` when it cannot be queued."""

    def instance_tags(self, instance_uuid: str) -> frozenset[str]:
        """Every tag (backend form, any prefix) the backend holds for an instance."""

    def instances(self) -> frozenset[str]:
        """Every instance the backend holds tags for."""

    def pending_jobs(self) -> frozenset[str]:
        """Ids of submitted jobs that have not finished yet."""

    def collect_outcomes(self) -> list[JobOutcome]:
        """Outcomes of finished jobs not collected before, in completion order."""


def ganeti_rejects(tag: str) -> str | None:
    """Why Ganeti would refuse ``tag``, or ``None`` when it is acceptable."""
    if len(tag) > GANETI_MAX_LENGTH:
        return f"tag {tag!r} is longer than {GANETI_MAX_LENGTH} characters"
    if not GANETI_TAG_RE.fullmatch(tag):
        return f"tag {tag!r} has characters outside [A-Za-z0-9_.+*/:@-]"
    return None


class FakeBackend:
    """An in-process backend with Ganeti's rules that can lag and fail on demand.

    Jobs run in submission order, each atomically: an add fails as a whole when a
    tag breaks Ganeti's rule, the instance would exceed 4096 tags, or a failure was
    injected (:meth:`fail_next`, :meth:`fail_tags`). Deleting an absent tag
    succeeds. With ``lag=True`` jobs wait in the queue until :meth:`run_jobs`.
    Thread-safe.
    """

    def __init__(self, *, lag: bool = False) -> None:
        self.lag = lag
        self.unavailable = False
        self._lock = threading.RLock()
        self._tags: dict[str, set[str]] = {}
        self._queue: list[TagJob] = []
        self._outcomes: list[JobOutcome] = []
        self._fail_next = 0
        self._fail_tags: set[str] = set()
        self._external_ids = itertools.count(1)

    # ------------------------------------------------------------ interface

    def submit(self, job: TagJob) -> None:
        if self.unavailable:
            raise TagBackendError(detail=f"backend unavailable, job {job.job_id} not queued")
        with self._lock:
            self._queue.append(job)
            if not self.lag:
                self.run_jobs()

    def instance_tags(self, instance_uuid: str) -> frozenset[str]:
        with self._lock:
            return frozenset(self._tags.get(instance_uuid, ()))

    def instances(self) -> frozenset[str]:
        with self._lock:
            return frozenset(i for i, tags in self._tags.items() if tags)

    def pending_jobs(self) -> frozenset[str]:
        with self._lock:
            return frozenset(job.job_id for job in self._queue)

    def collect_outcomes(self) -> list[JobOutcome]:
        with self._lock:
            out, self._outcomes = self._outcomes, []
            return out

    # ------------------------------------------------------------ test controls

    @property
    def queued(self) -> tuple[TagJob, ...]:
        with self._lock:
            return tuple(self._queue)

    def run_jobs(self, count: int | None = None) -> int:
        """Run up to ``count`` queued jobs (all by default); returns how many ran."""
        with self._lock:
            todo = self._queue if count is None else self._queue[:count]
            self._queue = self._queue[len(todo) :]
            for job in todo:
                self._outcomes.append(self._run(job))
            return len(todo)

    def fail_next(self, count: int = 1) -> None:
        """Make the next ``count`` jobs to run fail."""
        with self._lock:
            self._fail_next += count

    def fail_tags(self, *tags: str) -> None:
        """Make every job touching one of these backend-form tags fail."""
        with self._lock:
            self._fail_tags.update(tags)

    def add_direct(self, instance_uuid: str, *tags: str, notify: bool = True) -> None:
        """Tags added on the backend outside rpquery; ``notify`` reports an outcome."""
        self._direct(instance_uuid, JobOp.ADD, tags, notify)

    def delete_direct(self, instance_uuid: str, *tags: str, notify: bool = False) -> None:
        """Tags removed on the backend outside rpquery."""
        self._direct(instance_uuid, JobOp.DELETE, tags, notify)

    # ------------------------------------------------------------ internals

    def _direct(self, instance_uuid: str, op: JobOp, tags: Iterable[str], notify: bool) -> None:
        with self._lock:
            job = TagJob(f"external-{next(self._external_ids)}", instance_uuid, op, tuple(tags))
            outcome = self._execute(job, None)
            if notify:
                self._outcomes.append(outcome)

    def _run(self, job: TagJob) -> JobOutcome:
        reason = None
        if self._fail_next:
            self._fail_next -= 1
            reason = "injected failure"
        elif self._fail_tags.intersection(job.tags):
            reason = "injected failure for tag"
        return self._execute(job, reason)

    def _execute(self, job: TagJob, reason: str | None) -> JobOutcome:
        current = self._tags.setdefault(job.instance_uuid, set())
        if reason is None and job.op is JobOp.ADD:
            reason = next(filter(None, map(ganeti_rejects, job.tags)), None)
            if reason is None and len(current | set(job.tags)) > GANETI_MAX_TAGS:
                reason = f"more than {GANETI_MAX_TAGS} tags on the instance"
        if reason is None:
            if job.op is JobOp.ADD:
                current.update(job.tags)
            else:
                current.difference_update(job.tags)
        return JobOutcome(
            job.job_id, job.instance_uuid, job.op, job.tags, reason is None, reason or ""
        )
