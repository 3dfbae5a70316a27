"""The backend state machine (success, failure, lag), outcome handling, adoption of
backend-side tags, and reconciliation in each direction, on every backend."""

from __future__ import annotations

import uuid

import pytest

from rpquery.db import Database
from rpquery.tags import (
    FakeBackend,
    JobOp,
    JobOutcome,
    TagBackendError,
    TagChange,
    TagStatus,
    add_tag,
    apply_outcomes,
    create_tags,
    delete_tag,
    list_tags,
    process_outcomes,
    reconcile,
    replace_tags,
)
from rpquery.tags.fake_db import DbFakeBackend

ACTIVE, PENDADD = TagStatus.ACTIVE, TagStatus.PENDADD
U = "cyclades:user:"


def new_vm() -> str:
    return str(uuid.uuid4())


def state(db: Database, vm: str, namespace: str = "user") -> dict[str, TagStatus]:
    return {t.tag: t.status for t in list_tags(db, vm, namespace)}


def test_add_with_lag_then_success(db: Database) -> None:
    fake, vm = FakeBackend(lag=True), new_vm()
    add_tag(db, fake, vm, "web")
    assert process_outcomes(db, fake).activated == ()
    assert state(db, vm) == {"web": PENDADD} and fake.instance_tags(vm) == frozenset()
    assert fake.run_jobs() == 1
    report = process_outcomes(db, fake)
    assert report.activated == (TagChange(vm, "user", "web"),)
    assert state(db, vm) == {"web": ACTIVE} and fake.instance_tags(vm) == {U + "web"}


def test_failed_add_deletes_the_row(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    fake.fail_next()
    create_tags(db, fake, vm, ["a", "b"])
    report = process_outcomes(db, fake)
    assert {c.tag for c in report.dropped} == {"a", "b"}
    assert state(db, vm) == {} and fake.instance_tags(vm) == frozenset()


def test_delete_removes_first_and_reinstates_on_failure(db: Database) -> None:
    fake, vm = FakeBackend(lag=True), new_vm()
    add_tag(db, fake, vm, "web")
    fake.run_jobs()
    process_outcomes(db, fake)
    delete_tag(db, fake, vm, "web")
    assert state(db, vm) == {}  # gone at once, job in flight
    fake.fail_next()
    fake.run_jobs()
    report = process_outcomes(db, fake)
    assert report.reinstated == (TagChange(vm, "user", "web"),)
    assert state(db, vm) == {"web": ACTIVE} and fake.instance_tags(vm) == {U + "web"}
    delete_tag(db, fake, vm, "web")
    fake.run_jobs()
    report = process_outcomes(db, fake)
    assert report.reinstated == () and report.removed == ()  # the row was already gone
    assert state(db, vm) == {} and fake.instance_tags(vm) == frozenset()


def test_readd_while_delete_in_flight_survives_the_delete_outcome(db: Database) -> None:
    fake, vm = FakeBackend(lag=True), new_vm()
    add_tag(db, fake, vm, "web")
    fake.run_jobs()
    process_outcomes(db, fake)
    delete_tag(db, fake, vm, "web")
    add_tag(db, fake, vm, "web")  # PENDADD again, delete job still queued
    fake.run_jobs()
    report = process_outcomes(db, fake)
    assert report.removed == () and report.activated == (TagChange(vm, "user", "web"),)
    assert state(db, vm) == {"web": ACTIVE} and fake.instance_tags(vm) == {U + "web"}


def test_backend_refusal_is_a_failed_job(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    fake.fail_tags(U + "bad")
    replace_tags(db, fake, vm, ["bad"])
    add_tag(db, fake, vm, "good")
    report = process_outcomes(db, fake)
    assert [c.tag for c in report.dropped] == ["bad"]
    assert [c.tag for c in report.activated] == ["good"]
    assert state(db, vm) == {"good": ACTIVE}


def test_unavailable_backend_leaves_nothing_written(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    fake.unavailable = True
    with pytest.raises(TagBackendError) as err:
        add_tag(db, fake, vm, "web")
    assert err.value.code == "rpquery.tags.backend_unavailable"
    assert state(db, vm) == {}
    fake.unavailable = False
    assert reconcile(db, fake, instances=[vm]).changed is False


def test_tags_added_on_the_backend_are_adopted(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    fake.add_direct(vm, U + "hand+made", "cyclades:system:ops", "ganeti:other", U + "x_y")
    report = process_outcomes(db, fake)
    assert {(c.namespace, c.tag) for c in report.adopted} == {
        ("user", "hand made"),
        ("system", "ops"),
    }
    assert set(report.ignored) == {"ganeti:other", U + "x_y"}
    assert state(db, vm) == {"hand made": ACTIVE}
    assert state(db, vm, "system") == {"ops": ACTIVE}


def test_outcomes_of_unknown_jobs_follow_the_backend(db: Database) -> None:
    vm = new_vm()
    outcomes = [
        JobOutcome("ext-1", vm, JobOp.ADD, (U + "a", U + "b"), True),
        JobOutcome("ext-2", vm, JobOp.DELETE, (U + "a",), True),
        JobOutcome("ext-3", vm, JobOp.ADD, (U + "c",), False),
    ]
    report = apply_outcomes(db, outcomes)
    assert [c.tag for c in report.adopted] == ["a", "b"]
    assert [c.tag for c in report.removed] == ["a"]
    assert state(db, vm) == {"b": ACTIVE}


# ------------------------------------------------------------------ reconciliation


def test_reconcile_backend_to_database(db: Database) -> None:
    fake, vm = FakeBackend(lag=True), new_vm()
    add_tag(db, fake, vm, "orphan")  # PENDADD whose job we lose
    fake.run_jobs()
    fake.collect_outcomes()  # outcome lost: the tag is on the backend, PENDADD here
    fake.add_direct(vm, U + "direct", "cyclades:system:sys", "foreign", notify=False)
    report = reconcile(db, fake)
    assert [c.tag for c in report.activated] == ["orphan"]
    assert {(c.namespace, c.tag) for c in report.created} == {
        ("user", "direct"),
        ("system", "sys"),
    }
    assert report.ignored == ("foreign",)
    assert state(db, vm) == {"direct": ACTIVE, "orphan": ACTIVE}
    assert reconcile(db, fake).changed is False  # idempotent


def test_reconcile_database_to_backend(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    create_tags(db, fake, vm, ["keep", "lost"])
    process_outcomes(db, fake)
    fake.delete_direct(vm, U + "lost")
    fake.lag = True
    add_tag(db, fake, vm, "flying")  # PENDADD, job in flight: left alone
    report = reconcile(db, fake, instances=[vm])
    assert report.deleted == (TagChange(vm, "user", "lost"),)
    assert report.in_flight == (TagChange(vm, "user", "flying"),)
    assert state(db, vm) == {"keep": ACTIVE, "flying": PENDADD}
    fake.run_jobs()
    process_outcomes(db, fake)
    assert state(db, vm) == {"keep": ACTIVE, "flying": ACTIVE}


def test_reconcile_drops_pending_rows_whose_job_is_gone(db: Database) -> None:
    fake, vm = FakeBackend(lag=True), new_vm()
    add_tag(db, fake, vm, "never-made")
    add_tag(db, fake, vm, "queued")
    assert fake.run_jobs(1) == 1
    lost = fake.collect_outcomes()  # the first job finished: outcome lost
    assert [o.succeeded for o in lost] == [True]
    fake.delete_direct(vm, U + "never-made")  # and someone removed it on the backend
    report = reconcile(db, fake, instances=[vm])
    assert report.dropped == (TagChange(vm, "user", "never-made"),)
    assert report.in_flight == (TagChange(vm, "user", "queued"),)
    assert state(db, vm) == {"queued": PENDADD}
    apply_outcomes(db, lost)  # a late outcome: the backend state already counted
    assert state(db, vm) == {"queued": PENDADD, "never-made": ACTIVE}
    assert reconcile(db, fake, instances=[vm]).deleted == (TagChange(vm, "user", "never-made"),)


def test_db_fake_backend_persists_between_loads(db: Database) -> None:
    vm = new_vm()
    fake = DbFakeBackend.load(db, lag=True)
    add_tag(db, fake, vm, "web")
    fake.save(db)
    again = DbFakeBackend.load(db)
    assert [j.tags for j in again.queued] == [(U + "web",)]
    again.run_jobs()
    again.save(db)
    third = DbFakeBackend.load(db)
    assert third.instance_tags(vm) == {U + "web"}
    assert process_outcomes(db, third).activated == (TagChange(vm, "user", "web"),)
    third.save(db)
    assert DbFakeBackend.load(db).collect_outcomes() == []
