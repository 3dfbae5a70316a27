"""Mutually exclusive tags: keep the present one, reject two new ones; and listing
instances by tags with every filter and their combinations."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy.dialects import mysql, postgresql, sqlite

from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.tags import (
    ConflictRule,
    ConflictSkip,
    FakeBackend,
    TagStatus,
    add_tag,
    create_tags,
    list_conflicts,
    list_instances,
    list_tags,
    parse_filter,
    process_outcomes,
    replace_tags,
    set_conflicts,
)
from rpquery.tags.query import instances_query
from tests.factories import consumer

HA, HP = "high-availability", "high-performance"


def new_vm() -> str:
    return str(uuid.uuid4())


def tags_of(db: Database, vm: str, namespace: str = "system") -> set[str]:
    return {t.tag for t in list_tags(db, vm, namespace)}


def test_conflict_rules(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    rules = set_conflicts(db, "system", [(HP, HA), (HA, HP), ("ssd", "hdd")])
    assert (
        list_conflicts(db, "system")
        == rules
        == (
            ConflictRule("system", "hdd", "ssd"),
            ConflictRule("system", HA, HP),
        )
    )
    assert list_conflicts(db, "user") == ()  # rules are per namespace

    # Both new in one request: rejected, nothing written.
    with pytest.raises(InvalidRequest) as err:
        create_tags(db, fake, vm, [HA, "x", HP], namespace="system")
    assert err.value.code == "rpquery.tags.conflicting_tags"
    assert tags_of(db, vm) == set() and fake.queued == ()

    # One present: it stays, the other is not applied, and the result says so.
    create_tags(db, fake, vm, [HA], namespace="system")
    skipped = add_tag(db, fake, vm, HP, namespace="system")
    assert skipped.skipped == (ConflictSkip(HP, HA),) and skipped.added == ()
    replaced = replace_tags(db, fake, vm, [HA, HP, "ssd"], namespace="system")
    assert replaced.skipped == (ConflictSkip(HP, HA),) and replaced.added == ("ssd",)
    assert tags_of(db, vm) == {HA, "ssd"}

    # A present tag being replaced away does not block its rival.
    process_outcomes(db, fake)
    swapped = replace_tags(db, fake, vm, [HP, "hdd"], namespace="system")
    assert set(swapped.deleted) == {HA, "ssd"} and set(swapped.added) == {HP, "hdd"}

    # The same names in the user namespace are unconstrained.
    create_tags(db, fake, vm, [HA, HP], namespace="user")
    assert tags_of(db, vm, "user") == {HA, HP}

    set_conflicts(db, "system", [])
    assert list_conflicts(db, "system") == ()
    with pytest.raises(InvalidRequest) as bad:
        set_conflicts(db, "system", [("a", "a")])
    assert bad.value.code == "rpquery.tags.bad_conflict"


# ------------------------------------------------------------------ listing


def _cloud(db: Database) -> dict[str, str]:
    """incl/excl instances: name → uuid, tags ACTIVE unless the name says pending."""
    fake = FakeBackend()
    vms = {name: new_vm() for name in ("web_db", "web", "db", "cache", "bare", "pending_web")}
    with db.begin() as conn:
        consumer(conn, vms["bare"])
    for name, tags in (
        ("web_db", ["web", "db"]),
        ("web", ["web", "prod"]),
        ("db", ["db"]),
        ("cache", ["cache"]),
    ):
        create_tags(db, fake, vms[name], tags)
    create_tags(db, fake, vms["cache"], ["web"], namespace="system")  # other namespace
    process_outcomes(db, fake)
    fake.lag = True
    create_tags(db, fake, vms["pending_web"], ["web"])
    return vms


def _names(vms: dict[str, str], found: tuple[str, ...]) -> set[str]:
    back = {v: k for k, v in vms.items()}
    return {back[u] for u in found}


def test_list_instances_by_tags(db: Database) -> None:
    vms = _cloud(db)

    def q(**kw: str) -> set[str]:
        return _names(vms, list_instances(db, parse_filter(**kw)))

    assert q(tags="web") == {"web_db", "web"}
    assert q(tags="web,db") == {"web_db"}
    assert q(tags_any="db,cache") == {"web_db", "db", "cache"}
    assert q(not_tags="web,db") == {"web", "db", "cache", "bare", "pending_web"}
    assert q(not_tags_any="web,db") == {"cache", "bare", "pending_web"}
    assert q(tags="web", not_tags_any="prod") == {"web_db"}
    assert q(tags_any="web,cache", not_tags="web,db") == {"web", "cache"}
    assert q(tags="web", tags_any="db,prod", not_tags="web,prod", not_tags_any="cache") == {
        "web_db"
    }
    assert q(tags="nothing-has-this") == set()
    assert q() == set(vms)
    pending = parse_filter(tags="web", include_pending=True)
    assert _names(vms, list_instances(db, pending)) == {"web_db", "web", "pending_web"}
    system = list_instances(db, parse_filter(tags="web", namespace="system"), "system")
    assert _names(vms, system) == {"cache"}


def test_list_instances_is_one_statement(db: Database) -> None:
    _cloud(db)
    flt = parse_filter(tags="web,db", tags_any="db", not_tags="x,y", not_tags_any="cache")
    with db.count_statements() as counter:
        list_instances(db, flt)
    assert counter.count == 1


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect(), mysql.dialect()])
def test_filter_sql_uses_exists_and_having(dialect: object) -> None:
    flt = parse_filter(tags="a,b", tags_any="c", not_tags="d,e", not_tags_any="f")
    sql = str(instances_query("user", flt).compile(dialect=dialect))  # type: ignore[arg-type]
    assert sql.count("EXISTS") == 2 and sql.count("HAVING") == 2
    assert "LIKE" not in sql and "rpq_instance_tags.namespace" in sql


def test_filter_tags_are_validated() -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_filter(tags="ok,,x")
    assert err.value.code == "rpquery.tags.empty"
    with pytest.raises(InvalidRequest):
        parse_filter(not_tags_any="a/b")
    assert parse_filter(tags=["a", "a"]).tags == ("a",)
    assert TagStatus.ACTIVE == "ACTIVE"
