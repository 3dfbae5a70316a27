"""Migrations rpq0009 and rpq0010: the candidates' group statement reads the covering
index ``rpq_inventories_capacity_idx`` (rpq0009 on SQLite, rpq0010 on PostgreSQL and
MariaDB) and, on SQLite, ``rpq_provider_usages`` as a WITHOUT ROWID table (its primary
key holding ``used``), never the tables' rows; up and down keep the stored usage."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.generator import CloudSpec, load_cloud
from rpquery.read.candidates import allocation_candidates
from rpquery.store import migrations
from tests.conftest import ALL_BACKENDS, _ran

INDEX = "rpq_inventories_capacity_idx"
QUERY = "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU&limit=20"


@pytest.fixture(params=ALL_BACKENDS)
def loaded(request, database_url):  # type: ignore[no-untyped-def]
    db = Database(database_url(request.param))
    _ran[request.param] += 1
    load_cloud(db, CloudSpec(hosts=12, sharing=1, seed=5))  # upgrades to head first
    yield db
    db.dispose()


def _usages(db: Database) -> list[tuple[int, int, int]]:
    with db.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT resource_provider_id, resource_class_id, used FROM rpq_provider_usages "
            "ORDER BY resource_provider_id, resource_class_id"
        )
        return [(int(a), int(b), int(c)) for a, b, c in rows]


def _has_index(db: Database) -> bool:
    with db.connect() as conn:
        return INDEX in {i["name"] for i in sa.inspect(conn).get_indexes("inventories")}


def _without_rowid(db: Database) -> bool:
    with db.connect() as conn:
        sql = conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE name = 'rpq_provider_usages'"
        ).scalar_one()
    return bool(sql.rstrip().upper().endswith("WITHOUT ROWID"))


def test_on_every_backend_and_usage_kept_down_and_up(loaded: Database) -> None:
    usages = _usages(loaded)
    assert usages  # the cloud has allocations: the rebuild has rows to keep
    sqlite = loaded.engine.dialect.name == "sqlite"
    assert _has_index(loaded)
    if sqlite:
        assert _without_rowid(loaded)
    migrations.downgrade(loaded, "rpq0009")  # rpq0010 made it on the servers only
    assert _has_index(loaded) is sqlite
    migrations.downgrade(loaded, "rpq0008")
    assert not _has_index(loaded)
    if sqlite:
        assert not _without_rowid(loaded)
    assert _usages(loaded) == usages
    migrations.upgrade(loaded)
    assert _has_index(loaded)
    assert _usages(loaded) == usages


def _group_statement(db: Database) -> tuple[str, Any]:
    """The group statement (the one reading ``inventories``) of :data:`QUERY`, as sent."""
    sent: list[tuple[str, Any]] = []

    def tracer(sql: str, params: Any) -> None:
        sent.append((sql, params))

    db.add_tracer(tracer)
    try:
        answer = allocation_candidates(db, QUERY)
    finally:
        db.remove_tracer(tracer)
    assert answer.allocation_requests
    return next((s, p) for s, p in sent if "FROM inventories AS inv" in s)


def _group_plan(db: Database) -> str:
    """SQLite's plan of the group statement."""
    sql, params = _group_statement(db)
    with db.connect() as conn:
        rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params).all()
    return "\n".join(row[-1] for row in rows)


def test_sqlite_group_statement_reads_indexes_alone(sqlite_db: Database) -> None:
    """``load`` leaves planner statistics (``ANALYZE``); going down and up again, the
    migration gives the new index its own, or SQLite keeps the unique index of
    ``inventories`` it has numbers for, and visits the table for every row."""
    load_cloud(sqlite_db, CloudSpec(hosts=12, sharing=1, seed=5))
    migrations.downgrade(sqlite_db, "rpq0008")
    before = _group_plan(sqlite_db)
    assert f"COVERING INDEX {INDEX}" not in before
    assert "SEARCH pu USING INDEX" in before  # the old rowid table: index, then row
    migrations.upgrade(sqlite_db)
    after = _group_plan(sqlite_db)
    assert f"SEARCH inv USING COVERING INDEX {INDEX} (resource_provider_id=?)" in after
    assert "SEARCH pu USING PRIMARY KEY (resource_provider_id=? AND resource_class_id=?)" in after


@pytest.mark.parametrize("backend", ["mysql"])
def test_mariadb_group_statement_reads_inventories_from_the_index(
    backend: str, database_url: Any
) -> None:
    """On InnoDB a row found by a secondary index is read again by the clustered key,
    unless the index holds every column the statement reads (``Using index``)."""
    db = Database(database_url(backend))
    _ran[backend] += 1
    try:
        load_cloud(db, CloudSpec(hosts=12, sharing=1, seed=5))
        sql, params = _group_statement(db)
        # MariaDB's per-statement settings prefix (SET STATEMENT ... FOR) is no query
        sql = sql[sql.index("SELECT") :] if sql.startswith("SET STATEMENT") else sql
        with db.connect() as conn:
            plan = conn.exec_driver_sql(f"EXPLAIN {sql}", params).mappings().all()
        inv = [row for row in plan if row["table"] == "inv"]
        assert inv, plan
        assert inv[0]["key"] == INDEX, plan
        assert "Using index" in (inv[0]["Extra"] or ""), plan
    finally:
        db.dispose()
