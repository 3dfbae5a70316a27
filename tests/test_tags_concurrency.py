"""Concurrent writers of one instance's tags on PostgreSQL and MariaDB: the
per-(instance, namespace) lock keeps rows unique, limits exact, and the database in
step with the backend once every outcome is applied."""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable

import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import Conflict, NotFound
from rpquery.store.tables import instance_tag_jobs, instance_tags
from rpquery.tags import (
    FakeBackend,
    TagStatus,
    add_tag,
    create_tags,
    delete_tag,
    list_tags,
    process_outcomes,
)

THREADS = 6


def _run(workers: list[Callable[[], None]]) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(workers))

    def wrap(fn: Callable[[], None]) -> None:
        try:
            barrier.wait()
            fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_concurrent_add_delete_of_one_tag(server_db: Database) -> None:
    db, fake, vm = server_db, FakeBackend(), str(uuid.uuid4())
    create_tags(db, fake, vm, ["hot", "steady"])
    process_outcomes(db, fake)

    def worker(seed: int) -> Callable[[], None]:
        rng = random.Random(seed)

        def run() -> None:
            for _ in range(8):
                try:
                    if rng.random() < 0.5:
                        add_tag(db, fake, vm, "hot")
                    else:
                        delete_tag(db, fake, vm, "hot")
                except (NotFound, Conflict) as exc:
                    assert exc.code in ("rpquery.tags.not_found", "rpquery.tags.not_active")
                if rng.random() < 0.5:
                    process_outcomes(db, fake)

        return run

    assert _run([worker(i) for i in range(THREADS)]) == []
    process_outcomes(db, fake)

    with db.connect() as conn:
        rows = conn.execute(
            sa.select(instance_tags.c.tag, instance_tags.c.status).where(
                instance_tags.c.instance_uuid == vm
            )
        ).all()
        jobs_left = conn.execute(
            sa.select(sa.func.count()).select_from(instance_tag_jobs)
        ).scalar()
    names = [r.tag for r in rows]
    assert len(names) == len(set(names))  # no duplicates
    assert all(r.status == TagStatus.ACTIVE for r in rows) and jobs_left == 0
    # The database says exactly what the backend holds: no ACTIVE tag lost or invented.
    assert {f"cyclades:user:{n}" for n in names} == fake.instance_tags(vm)
    assert "steady" in names


def test_concurrent_adds_respect_the_limit(server_db: Database) -> None:
    db, fake, vm = server_db, FakeBackend(), str(uuid.uuid4())
    create_tags(db, fake, vm, [f"base{i}" for i in range(45)])
    added: list[str] = []

    def worker(n: int) -> Callable[[], None]:
        def run() -> None:
            for k in range(3):
                try:
                    added.extend(add_tag(db, fake, vm, f"t{n}-{k}").added)
                except Conflict as exc:
                    assert exc.code == "rpquery.tags.limit_reached"

        return run

    assert _run([worker(i) for i in range(THREADS)]) == []
    assert len(added) == 5
    assert len(list_tags(db, vm)) == 50
