"""Usage reads grouped by consumer type (docs/design.md#consumer-types) on every backend.

The scenario: project ``proj-p`` with users ``user-1`` and ``user-2`` and a mix of
INSTANCE, MIGRATION and untyped (legacy, NULL type) consumers on two compute nodes;
project ``proj-q`` holds one INSTANCE that must never leak into ``proj-p``'s numbers.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite

from rpquery.db import Database
from rpquery.errors import InvalidRequest, NotFound
from rpquery.models import ConsumerAllocations
from rpquery.usage import reads as usages
from rpquery.write.allocations import replace_allocations
from tests.factories import Ref, allocate, new_uuid, provider

P, Q, U1, U2 = "proj-p", "proj-q", "user-1", "user-2"
INVENTORY = {"VCPU": 64, "MEMORY_MB": 65536, "DISK_GB": 1000}

# consumer name -> (user, type, [(node, class, used), ...]) in project P
SCENARIO: dict[str, tuple[str, str | None, list[tuple[str, str, int]]]] = {
    "inst1": (U1, "INSTANCE", [("cn1", "VCPU", 1), ("cn1", "MEMORY_MB", 256)]),
    "inst2": (
        U1,
        "INSTANCE",
        [("cn2", "VCPU", 1), ("cn2", "MEMORY_MB", 256), ("cn2", "DISK_GB", 5)],
    ),
    "inst3": (
        U2,
        "INSTANCE",
        [("cn1", "VCPU", 2), ("cn1", "MEMORY_MB", 512), ("cn2", "DISK_GB", 10)],
    ),
    "mig1": (U1, "MIGRATION", [("cn2", "VCPU", 1), ("cn2", "MEMORY_MB", 256)]),
    "mig2": (U2, "MIGRATION", [("cn1", "VCPU", 2), ("cn1", "MEMORY_MB", 512)]),
    "legacy1": (U2, None, [("cn1", "VCPU", 4), ("cn1", "MEMORY_MB", 1024)]),
}

EXPECTED_BY_TYPE = {
    "usages": {
        "INSTANCE": {"consumer_count": 3, "VCPU": 4, "MEMORY_MB": 1024, "DISK_GB": 15},
        "MIGRATION": {"consumer_count": 2, "VCPU": 3, "MEMORY_MB": 768},
        "unknown": {"consumer_count": 1, "VCPU": 4, "MEMORY_MB": 1024},
    }
}


def build(db: Database) -> tuple[dict[str, str], dict[str, Ref]]:
    """The scenario; returns consumer name → uuid and node name → provider."""
    ids = {name: new_uuid() for name in SCENARIO}
    with db.begin() as conn:
        nodes = {n: provider(conn, f"incl_{n}", inventory=INVENTORY) for n in ("cn1", "cn2")}
        for name, (user, ctype, allocs) in SCENARIO.items():
            for node, rc, used in allocs:
                allocate(
                    conn, ids[name], nodes[node], rc, used,
                    project=P, user=user, consumer_type=ctype,
                )  # fmt: skip
        allocate(conn, new_uuid(), nodes["cn1"], "VCPU", 8, project=Q, user=U1)
    return ids, nodes


def test_usages_grouped_by_type(db: Database) -> None:
    build(db)
    with db.count_statements() as counter:
        report = usages.project_usages(db, P)
    assert counter.count == 1
    assert usages.render_project_usages(report) == EXPECTED_BY_TYPE
    assert [g.consumer_type for g in report.groups] == ["INSTANCE", "MIGRATION", "unknown"]


@pytest.mark.parametrize(
    ("ctype", "expected"),
    [
        ("INSTANCE", {"INSTANCE": EXPECTED_BY_TYPE["usages"]["INSTANCE"]}),
        ("MIGRATION", {"MIGRATION": EXPECTED_BY_TYPE["usages"]["MIGRATION"]}),
        ("unknown", {"unknown": EXPECTED_BY_TYPE["usages"]["unknown"]}),
        ("all", {"all": {"consumer_count": 6, "VCPU": 11, "MEMORY_MB": 2816, "DISK_GB": 15}}),
        ("UNKNOWN", {}),
        ("NO_SUCH_TYPE", {}),
    ],
)
def test_usages_filtered_by_type(db: Database, ctype: str, expected: dict) -> None:
    build(db)
    report = usages.project_usages(db, P, consumer_type=ctype)
    assert usages.render_project_usages(report) == {"usages": expected}


def test_usages_user_filter_and_totals(db: Database) -> None:
    build(db)
    u1 = usages.project_usages(db, P, user_id=U1)
    assert usages.render_project_usages(u1) == {
        "usages": {
            "INSTANCE": {"consumer_count": 2, "VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 5},
            "MIGRATION": {"consumer_count": 1, "VCPU": 1, "MEMORY_MB": 256},
        }
    }
    u2_all = usages.project_usages(db, P, user_id=U2, consumer_type="all")
    assert u2_all.group("all") == usages.UsageGroup(
        "all", 3, {"DISK_GB": 10, "MEMORY_MB": 2048, "VCPU": 8}
    )
    assert usages.project_usages_total(db, P) == {"DISK_GB": 15, "MEMORY_MB": 2816, "VCPU": 11}
    assert usages.render_total_usages(usages.project_usages_total(db, P, user_id=U1)) == {
        "usages": {"DISK_GB": 5, "MEMORY_MB": 768, "VCPU": 3}
    }
    assert usages.project_usages_total(db, Q) == {"VCPU": 8}


def test_unknown_project_or_user_gives_empty_result(db: Database) -> None:
    build(db)
    assert usages.project_usages(db, "no-such-project").groups == ()
    assert usages.project_usages(db, P, user_id="nobody", consumer_type="all").groups == ()
    assert usages.project_usages_total(db, "no-such-project") == {}


@pytest.mark.parametrize("bad", ["instance", "INST-ANCE", "", "All", " INSTANCE", "A" * 256])
def test_bad_consumer_type_rejected_before_the_database(sqlite_db: Database, bad: str) -> None:
    with sqlite_db.count_statements() as counter, pytest.raises(InvalidRequest) as err:
        usages.project_usages(sqlite_db, P, consumer_type=bad)
    assert err.value.code == "rpquery.consumer.bad_type"
    assert err.value.token == bad
    assert counter.count == 0


def test_empty_project_id_rejected(sqlite_db: Database) -> None:
    with pytest.raises(InvalidRequest) as err:
        usages.project_usages(sqlite_db, "")
    assert err.value.code == "rpquery.usages.bad_project_id"


def _retype(db: Database, consumer_uuid: str, new_type: str) -> None:
    """Rewrite a consumer's allocations unchanged but with another type, through the
    write path (one transaction): its usage must move between groups atomically."""
    view = usages.consumer_allocations(db, consumer_uuid)
    assert view.project_id is not None and view.user_id is not None
    request = ConsumerAllocations(
        consumer_uuid,
        view.project_id,
        view.user_id,
        new_type,
        view.generation,
        {rp: dict(pa.resources) for rp, pa in view.allocations.items()},
    )
    replace_allocations(db, request)


def test_consumer_type_change_moves_usage(db: Database) -> None:
    ids, _ = build(db)
    before = usages.project_usages(db, P, consumer_type="all")
    _retype(db, ids["mig1"], "INSTANCE")
    _retype(db, ids["legacy1"], "MIGRATION")
    report = usages.project_usages(db, P)
    assert usages.render_project_usages(report) == {
        "usages": {
            "INSTANCE": {"consumer_count": 4, "VCPU": 5, "MEMORY_MB": 1280, "DISK_GB": 15},
            "MIGRATION": {"consumer_count": 2, "VCPU": 6, "MEMORY_MB": 1536},
        }
    }
    assert usages.project_usages(db, P, consumer_type="all") == before
    view = usages.consumer_allocations(db, ids["legacy1"])
    assert (view.consumer_type, view.generation) == ("MIGRATION", 1)


def test_consumer_and_provider_views(db: Database) -> None:
    ids, nodes = build(db)
    with db.count_statements() as counter:
        view = usages.consumer_allocations(db, ids["inst3"])
        usages.provider_usages(db, nodes["cn1"].uuid)
        usages.provider_allocations(db, nodes["cn1"].uuid)
        usages.project_usages_total(db, P, user_id=U2)
    assert counter.count == 4  # one statement per question
    assert usages.render_consumer_allocations(view) == {
        "allocations": {
            nodes["cn1"].uuid: {"generation": 0, "resources": {"VCPU": 2, "MEMORY_MB": 512}},
            nodes["cn2"].uuid: {"generation": 0, "resources": {"DISK_GB": 10}},
        },
        "project_id": P,
        "user_id": U2,
        "consumer_generation": 0,
        "consumer_type": "INSTANCE",
    }
    assert usages.consumer_allocations(db, ids["legacy1"]).consumer_type == "unknown"
    missing = usages.consumer_allocations(db, new_uuid())
    assert usages.render_consumer_allocations(missing) == {"allocations": {}}
    assert usages.provider_usages(db, nodes["cn2"].uuid) == {
        "VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 15,
    }  # fmt: skip
    on_cn2 = usages.provider_allocations(db, nodes["cn2"].uuid)
    assert on_cn2.allocations[ids["inst3"]] == {"DISK_GB": 10}
    assert set(on_cn2.allocations) == {ids["inst2"], ids["inst3"], ids["mig1"]}
    with pytest.raises(NotFound):
        usages.provider_usages(db, new_uuid())
    with pytest.raises(NotFound):
        usages.provider_allocations(db, new_uuid())


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect(), mysql.dialect()])
def test_usage_statement_groups_only_selected_columns(dialect: sa.Dialect) -> None:
    """No database: every non-aggregate column of each SELECT is in its GROUP BY (the
    PostgreSQL GroupingError Placement hits cannot happen)."""
    sql = str(usages.project_usages_statement(P, user_id=U1).compile(dialect=dialect))
    assert "GROUP BY scoped.type_id, scoped.resource_class_id" in sql
    assert "GROUP BY scoped.type_id)" in sql
    assert sql.count("GROUP BY") == 2
    aggregation = sql.split("FROM (", 1)[1].split(") AS agg", 1)[0]
    assert "consumer_types.name" not in aggregation  # names joined onto grouped ids only
