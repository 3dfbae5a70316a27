"""Every tag operation on every backend, namespace isolation and the limits."""

from __future__ import annotations

import uuid

import pytest

from rpquery.db import Database
from rpquery.errors import Conflict, InvalidRequest, NotFound
from rpquery.tags import (
    FakeBackend,
    Tag,
    TagStatus,
    add_tag,
    check_tag,
    create_tags,
    delete_all_tags,
    delete_tag,
    list_tags,
    process_outcomes,
    replace_tags,
)

ACTIVE, PENDADD = TagStatus.ACTIVE, TagStatus.PENDADD


def new_vm() -> str:
    return str(uuid.uuid4())


def statuses(db: Database, vm: str, namespace: str = "user") -> dict[str, TagStatus]:
    return {t.tag: t.status for t in list_tags(db, vm, namespace)}


def test_every_operation(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    made = create_tags(db, fake, vm, ["web", "db", "web"])
    assert made.added == ("web", "db") and len(made.job_ids) == 1
    assert statuses(db, vm) == {"web": PENDADD, "db": PENDADD}
    process_outcomes(db, fake)
    assert statuses(db, vm) == {"web": ACTIVE, "db": ACTIVE}
    assert check_tag(db, vm, "web") == Tag("web", ACTIVE)
    assert check_tag(db, vm, "nope") is None

    added = add_tag(db, fake, vm, "cache")
    assert added.added == ("cache",) and check_tag(db, vm, "cache") == Tag("cache", PENDADD)
    again = add_tag(db, fake, vm, "cache")
    assert again.added == () and again.unchanged == ("cache",) and again.job_ids == ()

    gone = delete_tag(db, fake, vm, "db")
    assert gone.deleted == ("db",) and "db" not in statuses(db, vm)
    assert "cyclades:user:db" not in fake.instance_tags(vm)

    replaced = replace_tags(db, fake, vm, ["web", "new"])
    assert replaced.deleted == () and replaced.pending_kept == ("cache",)
    assert replaced.added == ("new",) and replaced.unchanged == ("web",)
    process_outcomes(db, fake)
    replaced = replace_tags(db, fake, vm, ["new"])
    assert set(replaced.deleted) == {"web", "cache"}
    process_outcomes(db, fake)
    assert statuses(db, vm) == {"new": ACTIVE}
    assert fake.instance_tags(vm) == {"cyclades:user:new"}

    add_tag(db, fake, vm, "late")  # stays PENDADD: delete-all leaves it
    cleared = delete_all_tags(db, fake, vm)
    assert cleared.deleted == ("new",) and cleared.pending_kept == ("late",)
    assert statuses(db, vm) == {"late": PENDADD}


def test_create_only_once_per_namespace(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    create_tags(db, fake, vm, ["a"], namespace="system")
    create_tags(db, fake, vm, ["a"], namespace="user")
    with pytest.raises(Conflict) as err:
        create_tags(db, fake, vm, ["b"], namespace="user")
    assert err.value.code == "rpquery.tags.already_created"
    assert create_tags(db, fake, new_vm(), []).tags == ()


def test_only_active_tags_are_deleted(db: Database) -> None:
    fake, vm = FakeBackend(lag=True), new_vm()
    add_tag(db, fake, vm, "web")
    with pytest.raises(Conflict) as err:
        delete_tag(db, fake, vm, "web")
    assert err.value.code == "rpquery.tags.not_active"
    with pytest.raises(NotFound) as missing:
        delete_tag(db, fake, vm, "nope")
    assert missing.value.code == "rpquery.tags.not_found" and missing.value.token == "nope"
    assert replace_tags(db, fake, vm, []).pending_kept == ("web",)
    assert statuses(db, vm) == {"web": PENDADD}


def test_tags_are_compared_exactly(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    variants = ["web", "Web", "web ", "wéb", "web\u0301"]
    create_tags(db, fake, vm, variants)
    process_outcomes(db, fake)
    assert set(statuses(db, vm)) == set(variants)
    assert check_tag(db, vm, "WEB") is None
    delete_tag(db, fake, vm, "web ")
    assert set(statuses(db, vm)) == set(variants) - {"web "}


# ------------------------------------------------------------------ namespaces


SNEAKY = ("secret", "cyclades:system:secret", "cyclades%3Asystem%3Asecret", "system:secret", "ha")


def test_user_cannot_read_count_replace_or_delete_system_tags(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    create_tags(db, fake, vm, ["secret", "ha"], namespace="system")
    process_outcomes(db, fake)
    system_before = statuses(db, vm, "system")

    assert list_tags(db, vm, "user") == ()
    for sneaky in SNEAKY:
        assert check_tag(db, vm, sneaky, "user") is None
        with pytest.raises(NotFound):
            delete_tag(db, fake, vm, sneaky, "user")
    with pytest.raises(InvalidRequest):  # an encoded form is refused, never decoded
        check_tag(db, vm, "cyclades/3Asystem/3Asecret", "user")
    assert delete_all_tags(db, fake, vm, "user").deleted == ()
    replaced = replace_tags(db, fake, vm, SNEAKY, "user")
    assert replaced.deleted == () and replaced.added == SNEAKY
    process_outcomes(db, fake)
    assert set(delete_all_tags(db, fake, vm, "user").deleted) == set(SNEAKY)
    # The count limit sees only the user's own tags: 50 fit next to the system ones.
    replace_tags(db, fake, vm, [f"u{i}" for i in range(50)], "user")
    process_outcomes(db, fake)

    assert statuses(db, vm, "system") == system_before
    assert {"cyclades:system:secret", "cyclades:system:ha"} <= fake.instance_tags(vm)
    assert len(list_tags(db, vm, "user")) == 50


def test_same_tag_in_two_namespaces_is_two_tags(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    add_tag(db, fake, vm, "x", "user")
    add_tag(db, fake, vm, "x", "system")
    process_outcomes(db, fake)
    delete_tag(db, fake, vm, "x", "user")
    process_outcomes(db, fake)
    assert check_tag(db, vm, "x", "system") == Tag("x", ACTIVE)
    assert fake.instance_tags(vm) == {"cyclades:system:x"}


# ------------------------------------------------------------------ limits


def test_count_limit_at_and_past_the_boundary(db: Database) -> None:
    fake, vm = FakeBackend(), new_vm()
    create_tags(db, fake, vm, [f"t{i}" for i in range(49)])
    assert add_tag(db, fake, vm, "t49").added == ("t49",)  # the 50th
    assert add_tag(db, fake, vm, "t0").unchanged == ("t0",)  # existing: fine at the limit
    with pytest.raises(Conflict) as err:
        add_tag(db, fake, vm, "t50")
    assert err.value.code == "rpquery.tags.limit_reached" and err.value.token == "t50"
    assert len(list_tags(db, vm)) == 50 and check_tag(db, vm, "t50") is None


def test_replace_keeps_pending_tags_within_the_limit(db: Database) -> None:
    fake, vm = FakeBackend(lag=True), new_vm()
    create_tags(db, fake, vm, ["pending"])
    with pytest.raises(Conflict) as err:
        replace_tags(db, fake, vm, [f"t{i}" for i in range(50)])
    assert err.value.code == "rpquery.tags.limit_reached"
    assert statuses(db, vm) == {"pending": PENDADD}
    assert len(replace_tags(db, fake, vm, [f"t{i}" for i in range(49)]).added) == 49


@pytest.mark.parametrize(
    ("tag", "code"),
    [
        ("", "rpquery.tags.empty"),
        ("x" * 61, "rpquery.tags.too_long"),
        ("a,b", "rpquery.tags.bad_character"),
        ("a/b", "rpquery.tags.bad_character"),
        ("ü" * 20, "rpquery.tags.backend_rejects"),
    ],
)
def test_bad_tags_never_reach_the_database(db: Database, tag: str, code: str) -> None:
    fake, vm = FakeBackend(), new_vm()
    with db.count_statements() as counter:
        with pytest.raises(InvalidRequest) as err:
            add_tag(db, fake, vm, tag)
        with pytest.raises(InvalidRequest):
            replace_tags(db, fake, vm, ["ok", tag])
    assert err.value.code == code and counter.count == 0 and fake.queued == ()
    assert add_tag(db, fake, vm, "x" * 60).added == ("x" * 60,)


def test_bad_instance_or_namespace(db: Database) -> None:
    fake = FakeBackend()
    with pytest.raises(InvalidRequest) as err:
        add_tag(db, fake, "not-a-uuid", "web")
    assert err.value.code == "rpquery.tags.bad_instance"
    with pytest.raises(InvalidRequest) as err:
        list_tags(db, new_vm(), "admin")
    assert err.value.code == "rpquery.tags.unknown_namespace" and err.value.token == "admin"
