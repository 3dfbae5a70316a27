"""The cloud generator writes a schema-valid, seeded Placement database on every backend."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import Conflict, InvalidRequest
from rpquery.generator import CloudSpec, CloudSummary, load_cloud
from rpquery.store import dialects
from rpquery.store.tables import (
    allocations,
    consumer_types,
    consumers,
    inventories,
    placement_aggregates,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
    traits,
)
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
    assert stages[-1][1] == summary.allocations
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
