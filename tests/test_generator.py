"""The cloud generator writes a schema-valid, seeded Placement database on every backend."""

from __future__ import annotations

import threading
import uuid as uuidlib
from typing import Any

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import Conflict, InvalidRequest
from rpquery.generator import SUMMARY_INSERT_TRIGGERS, CloudSpec, CloudSummary, load_cloud
from rpquery.models import ConsumerAllocations
from rpquery.store import dialects
from rpquery.store.tables import (
    allocations,
    consumer_counts,
    consumer_types,
    consumers,
    inventories,
    placement_aggregates,
    projects,
    provider_usages,
    resource_classes,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
    traits,
    usage_totals,
    users,
)
from rpquery.usage.provider_totals import verify_provider_usages
from rpquery.usage.summary import verify_usage_summary
from rpquery.write.allocations import replace_allocations
from tests.conftest import empty_database

SPEC = CloudSpec(hosts=40, sharing=2, seed=11, nested_ratio=0.5, gpu_ratio=0.2)


def _count(conn: sa.Connection, table: sa.Table) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def _fingerprint(db: Database) -> list[Any]:
    rp = resource_providers
    with db.connect() as conn:
        provs = conn.execute(sa.select(rp.c.uuid, rp.c.name).order_by(rp.c.name)).all()
        used = conn.execute(
            sa.select(rp.c.uuid, allocations.c.resource_class_id, sa.func.sum(allocations.c.used))
            .join(allocations, allocations.c.resource_provider_id == rp.c.id)
            .group_by(rp.c.uuid, allocations.c.resource_class_id)
            .order_by(rp.c.uuid, allocations.c.resource_class_id)
        ).all()
    return [tuple(r) for r in provs] + [(u, c, dialects.to_int(s)) for u, c, s in used]


@pytest.fixture
def loaded(db: Database) -> tuple[Database, CloudSummary]:
    stages: list[tuple[str, int, int]] = []
    summary = load_cloud(db, SPEC, progress=lambda *a: stages.append(a))
    assert {s[0] for s in stages} >= {"resource_providers", "inventories", "allocations"}
    assert [s for s in stages if s[0] == "allocations"][-1][1] == summary.allocations
    return db, summary


def test_counts_match_summary_and_trees_are_consistent(loaded) -> None:
    db, summary = loaded
    rp = resource_providers
    parent = rp.alias("parent")
    with db.connect() as conn:
        assert _count(conn, rp) == summary.providers == summary.rows["resource_providers"]
        assert _count(conn, allocations) == summary.allocations > 0
        assert _count(conn, consumers) == summary.consumers > 0
        roots = conn.execute(sa.select(rp.c.id).where(rp.c.parent_provider_id.is_(None))).all()
        assert len(roots) == SPEC.hosts + SPEC.sharing
        bad_roots = conn.execute(
            sa.select(rp.c.name).where(
                rp.c.parent_provider_id.is_(None), rp.c.root_provider_id != rp.c.id
            )
        ).all()
        bad_children = conn.execute(
            sa.select(rp.c.name)
            .join(parent, parent.c.id == rp.c.parent_provider_id)
            .where(rp.c.root_provider_id != parent.c.root_provider_id)
        ).all()
    assert bad_roots == [] and bad_children == []
    assert summary.providers > SPEC.hosts + SPEC.sharing  # nested children exist
    assert len(summary.sample_hosts) >= 1 and len(summary.host_aggregates) == 1


def test_no_provider_is_over_capacity_and_every_allocation_has_a_consumer(loaded) -> None:
    db, _ = loaded
    a, inv = allocations, inventories
    used = (
        sa.select(
            a.c.resource_provider_id, a.c.resource_class_id, sa.func.sum(a.c.used).label("u")
        )
        .group_by(a.c.resource_provider_id, a.c.resource_class_id)
        .subquery()
    )
    capacity = dialects.capacity_expr(inv.c.total, inv.c.reserved, inv.c.allocation_ratio)
    with db.connect() as conn:
        over = conn.execute(
            sa.select(used.c.resource_provider_id)
            .join(
                inv,
                sa.and_(
                    inv.c.resource_provider_id == used.c.resource_provider_id,
                    inv.c.resource_class_id == used.c.resource_class_id,
                ),
                isouter=True,
            )
            .where(sa.or_(inv.c.id.is_(None), used.c.u > capacity))
        ).all()
        orphans = conn.execute(
            sa.select(a.c.id)
            .join(consumers, consumers.c.uuid == a.c.consumer_id, isouter=True)
            .where(consumers.c.id.is_(None))
        ).all()
        types = conn.execute(
            sa.select(consumer_types.c.name)
            .select_from(consumers)
            .join(consumer_types, isouter=True)
            .distinct()
        ).scalars()
        assert set(types) == {"INSTANCE", "MIGRATION", None}
    assert over == [] and orphans == []


def test_sharing_providers_share_disk_with_hosts_that_have_none(loaded) -> None:
    db, summary = loaded
    rp, rpa, rpt = resource_providers, resource_provider_aggregates, resource_provider_traits
    with db.connect() as conn:
        sharing = conn.execute(
            sa.select(rp.c.id)
            .join(rpt, rpt.c.resource_provider_id == rp.c.id)
            .join(traits, traits.c.id == rpt.c.trait_id)
            .where(traits.c.name == "MISC_SHARES_VIA_AGGREGATE")
        ).scalars()
        sharing_ids = set(sharing)
        member_aggs = conn.execute(
            sa.select(placement_aggregates.c.uuid)
            .join(rpa, rpa.c.aggregate_id == placement_aggregates.c.id)
            .where(rpa.c.resource_provider_id.in_(sharing_ids))
        ).scalars()
        gpu_hosts = conn.execute(
            sa.select(sa.func.count())
            .select_from(rpt)
            .join(traits, traits.c.id == rpt.c.trait_id)
            .where(traits.c.name == "CUSTOM_GPU")
        ).scalar_one()
        used_on_sharing = conn.execute(
            sa.select(sa.func.count()).where(allocations.c.resource_provider_id.in_(sharing_ids))
        ).scalar_one()
    assert len(sharing_ids) == SPEC.sharing
    assert set(member_aggs) == set(summary.sharing_aggregates)
    assert 0 < gpu_hosts < SPEC.hosts
    assert used_on_sharing > 0


def test_same_spec_same_cloud_and_ids_continue_after_load(loaded) -> None:
    db, _ = loaded
    first = _fingerprint(db)
    empty_database(db)
    load_cloud(db, SPEC)
    assert _fingerprint(db) == first
    with db.begin() as conn:  # the id sequence moved past the explicit ids
        new_id = conn.execute(
            resource_providers.insert().values(uuid="incl-after-load", name="incl_after_load")
        ).inserted_primary_key[0]
        top = conn.execute(sa.select(sa.func.max(resource_providers.c.id))).scalar_one()
    assert new_id == top


def test_a_colliding_load_writes_nothing(loaded) -> None:
    db, summary = loaded
    with pytest.raises(Conflict):
        load_cloud(db, SPEC)
    with db.connect() as conn:
        assert _count(conn, resource_providers) == summary.providers
        assert _count(conn, allocations) == summary.allocations


def test_fill_zero_means_no_allocations(db: Database) -> None:
    summary = load_cloud(db, CloudSpec(hosts=5, nested=False, sharing=0, fill=0.0))
    assert summary.allocations == 0 and summary.providers == 5


@pytest.mark.parametrize(
    ("field", "value"), [("hosts", 0), ("fill", 1.5), ("sharing", -1), ("projects", 0)]
)
def test_bad_spec_names_the_field(field: str, value: Any) -> None:
    kwargs: dict[str, Any] = {"hosts": 10, field: value}
    with pytest.raises(InvalidRequest) as err:
        CloudSpec(**kwargs)
    assert err.value.code == "rpquery.generator.bad_spec"
    assert err.value.token == field


# ---------------------------------------------------------------- usage summaries


def _summaries(db: Database) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the three trigger-kept summary tables, zeros included, ids
    replaced by names and uuids (ids differ from one load to the next)."""
    p, u, t, rc, rp = projects, users, consumer_types, resource_classes, resource_providers

    def keyed(table: sa.Table) -> sa.Select[Any]:
        stmt = sa.select(p.c.external_id, u.c.external_id, sa.func.coalesce(t.c.name, "-"))
        return stmt.select_from(
            table.join(p, p.c.id == table.c.project_id)
            .join(u, u.c.id == table.c.user_id)
            .outerjoin(t, t.c.id == table.c.type_key)
        )

    totals = (
        keyed(usage_totals)
        .add_columns(rc.c.name, usage_totals.c.used, usage_totals.c.allocation_count)
        .join(rc, rc.c.id == usage_totals.c.resource_class_id)
    )
    counts = keyed(consumer_counts).add_columns(consumer_counts.c.consumer_count)
    per_provider = (
        sa.select(rp.c.uuid, rc.c.name, provider_usages.c.used)
        .join(rp, rp.c.id == provider_usages.c.resource_provider_id)
        .join(rc, rc.c.id == provider_usages.c.resource_class_id)
    )
    with db.connect() as conn:
        return {
            name: sorted(
                tuple(dialects.to_int(v) if not isinstance(v, str) else v for v in row)
                for row in conn.execute(stmt)
            )
            for name, stmt in (("totals", totals), ("counts", counts), ("usages", per_provider))
        }


def _existing_usage(db: Database, summary: CloudSummary, seed: int) -> None:
    """A consumer written by rpquery's write path in a project and user that a cloud of
    ``seed`` will load into: its summary rows exist before that load."""
    replace_allocations(
        db,
        ConsumerAllocations(
            str(uuidlib.uuid4()),
            f"project-{seed}-0000",
            f"user-{seed}-0000-0",
            "INSTANCE",
            None,
            {summary.sample_hosts[0]: {"DISK_GB": 7}},
        ),
    )


def _two_clouds(db: Database, summaries: str) -> list[CloudSummary]:
    first = load_cloud(db, SPEC, summaries=summaries)
    _existing_usage(db, first, seed=12)
    second = load_cloud(
        db, CloudSpec(hosts=30, seed=12, name_prefix="two", nested_ratio=0.6), summaries=summaries
    )
    return [first, second]


def test_grouped_load_leaves_exactly_the_summaries_the_triggers_leave(db: Database) -> None:
    """Two clouds loaded one after the other, with usage in the second cloud's first
    project already there (so the grouped pass adds to existing summary rows): the
    summary tables are identical whether the triggers or the grouped pass did the
    work, and equal to their recomputation."""
    indexes = _indexes(db)
    by_triggers = _two_clouds(db, "triggers")
    assert [s.summaries for s in by_triggers] == ["triggers", "triggers"]
    expected = _summaries(db)
    assert verify_usage_summary(db) == [] and verify_provider_usages(db) == []
    empty_database(db)
    grouped = _two_clouds(db, "grouped")
    # MySQL/MariaDB cannot suspend triggers inside a transaction: they do the work there
    mode = "triggers" if db.dialect_name == "mysql" else "grouped"
    assert [s.summaries for s in grouped] == [mode, mode]
    assert _summaries(db) == expected
    assert all(expected.values())  # every table has rows: the comparison means something
    assert _indexes(db) == indexes  # the first load deferred them on PostgreSQL
    assert verify_usage_summary(db) == [] and verify_provider_usages(db) == []


def _indexes(db: Database) -> list[tuple[str, str]]:
    """Every index of ``allocations`` and ``consumers`` with its definition."""
    with db.connect() as conn:
        inspector = sa.inspect(conn)
        return sorted(
            (table, str(sorted(ix.items())))
            for table in ("allocations", "consumers")
            for ix in inspector.get_indexes(table)
        )


class _Stop(Exception):
    pass


def _stop_at(stage: str) -> Any:
    def progress(at: str, done: int, total: int) -> None:
        if at == stage:
            raise _Stop(at)

    return progress


@pytest.mark.parametrize("stage", ["allocations", "usage summaries", "placement_aggregates"])
def test_a_load_failing_midway_leaves_nothing_and_the_triggers_on(
    db: Database, stage: str
) -> None:
    """A failure after allocations were written with the triggers suspended (or after
    the grouped pass) rolls everything back: no row, no summary, and the triggers
    still keep the summaries for the next writer."""
    if stage == "usage summaries" and db.dialect_name == "mysql":
        pytest.skip("MySQL/MariaDB loads have no grouped pass (the triggers do the work)")
    indexes = _indexes(db)
    with pytest.raises(_Stop):
        load_cloud(db, SPEC, progress=_stop_at(stage))
    assert _indexes(db) == indexes  # PostgreSQL drops the plain ones during the load
    with db.connect() as conn:
        for table in (resource_providers, allocations, consumers):
            assert _count(conn, table) == 0
    assert not any(_summaries(db).values())
    # the triggers fire again: a later load with them doing the work keeps things exact
    summary = load_cloud(db, CloudSpec(hosts=6, seed=3), summaries="triggers")
    assert summary.allocations > 0
    assert all(_summaries(db).values())
    assert verify_usage_summary(db) == [] and verify_provider_usages(db) == []
    if db.dialect_name == "postgresql":
        with db.connect() as conn:
            states = conn.execute(
                sa.text("SELECT tgname, tgenabled FROM pg_trigger WHERE tgname LIKE :like"),
                {"like": "rpq%insert"},
            ).all()
        assert sorted(states) == sorted(
            (name, "O") for names in SUMMARY_INSERT_TRIGGERS.values() for name in names
        )


def test_the_suspended_triggers_are_the_migrations_insert_triggers() -> None:
    from rpquery.schema.versions import rpq0006_usage_summary, rpq0007_provider_usages

    declared = {(name, table) for name, table in rpq0006_usage_summary.TRIGGERS} | {
        (name, "allocations") for name in rpq0007_provider_usages.TRIGGERS
    }
    inserts = {(n, t) for n, t in declared if n.endswith("_insert")}
    assert inserts == {
        (name, table) for table, names in SUMMARY_INSERT_TRIGGERS.items() for name in names
    }


def test_bad_summaries_option_is_refused(db: Database) -> None:
    with pytest.raises(InvalidRequest) as err:
        load_cloud(db, SPEC, summaries="later")
    assert (err.value.code, err.value.token) == ("rpquery.generator.bad_option", "summaries")


def test_postgresql_without_table_ownership_the_triggers_do_the_work(db: Database) -> None:
    """Suspending a trigger needs the table's owner on PostgreSQL: a loader with only
    read/write grants loads with the triggers on, and the summaries are exact."""
    if db.dialect_name != "postgresql":
        pytest.skip("table ownership is a PostgreSQL matter")
    role = f"rpq_loader_{uuidlib.uuid4().hex[:8]}"
    admin = db.engine.execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}"
        )
        conn.exec_driver_sql(
            f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {role}"
        )
    loader = Database(db.url.set(username=role))
    try:
        summary = load_cloud(loader, SPEC)
    finally:
        loader.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP OWNED BY {role}")
            conn.exec_driver_sql(f"DROP ROLE {role}")
    assert summary.summaries == "triggers" and summary.allocations > 0
    assert verify_usage_summary(db) == [] and verify_provider_usages(db) == []


def test_postgresql_defers_plain_indexes_only_while_the_tables_are_empty(db: Database) -> None:
    if db.dialect_name != "postgresql":
        pytest.skip("other backends keep their indexes during a load")
    before = _indexes(db)
    tables = ("allocations", "consumers")
    defer = dialects.backend(db.dialect_name).indexes_deferred
    with db.begin() as conn, defer(conn, tables) as deferred:
        left = {ix["name"] for t in tables for ix in sa.inspect(conn).get_indexes(t)}
        # the uuid lookups and covering indexes go; unique ones (consumers.uuid) stay
        assert "allocations_consumer_id_idx" in deferred
        assert "rpq_allocations_consumer_class_used_idx" in deferred
        assert not left & set(deferred) and "uniq_consumers0uuid" in left
    assert _indexes(db) == before
    load_cloud(db, CloudSpec(hosts=3, seed=9))
    with db.begin() as conn, defer(conn, tables) as deferred:
        assert deferred == []  # rows there: readers must not wait


def test_rows_built_ahead_keep_their_order_and_errors_and_stop_with_the_caller() -> None:
    from rpquery.generator import _built_ahead

    assert list(_built_ahead(iter(range(1000)))) == list(range(1000))

    def failing() -> Any:
        yield 1
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        list(_built_ahead(failing()))
    endless = _built_ahead(iter(range(10**9)))
    assert next(endless) == 0
    endless.close()  # the load failed: the generating thread ends too
    assert not any(t.name == "rpquery-generator" for t in threading.enumerate())
