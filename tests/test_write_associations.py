"""Provider traits and aggregates on every backend: replace the set under the provider
generation; bad input leaves the links untouched."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate, InvalidRequest, NotFound
from rpquery.store import catalog
from rpquery.store.tables import (
    placement_aggregates,
    resource_provider_aggregates,
    resource_provider_traits,
)
from rpquery.write import associations
from tests.factories import Ref, new_uuid, provider


@pytest.fixture
def cn(db: Database) -> Ref:
    with db.begin() as conn:
        return provider(conn, "cn1")


def link_count(db: Database) -> tuple[int, int]:
    with db.connect() as conn:
        count = sa.select(sa.func.count())
        return (
            conn.execute(count.select_from(resource_provider_traits)).scalar_one(),
            conn.execute(count.select_from(resource_provider_aggregates)).scalar_one(),
        )


def test_replace_traits(db: Database, cn: Ref) -> None:
    catalog.create_trait(db, "CUSTOM_GOLD")
    gen = associations.set_provider_traits(
        db, cn.uuid, ["HW_CPU_X86_AVX2", "CUSTOM_GOLD"], generation=0
    )
    assert gen == 1
    assert associations.get_provider_traits(db, cn.uuid) == {"HW_CPU_X86_AVX2", "CUSTOM_GOLD"}
    gen = associations.set_provider_traits(
        db, cn.uuid, ["CUSTOM_GOLD", "COMPUTE_VOLUME_MULTI_ATTACH"], generation=gen
    )
    assert associations.get_provider_traits(db, cn.uuid) == {
        "CUSTOM_GOLD",
        "COMPUTE_VOLUME_MULTI_ATTACH",
    }
    assert associations.set_provider_traits(db, cn.uuid, [], generation=gen) == 3
    assert associations.get_provider_traits(db, cn.uuid) == frozenset()


def test_replace_aggregates_creates_them(db: Database, cn: Ref) -> None:
    agg_a, agg_b = new_uuid(), new_uuid()
    gen = associations.set_provider_aggregates(db, cn.uuid, [agg_a, agg_b.upper()], generation=0)
    assert associations.get_provider_aggregates(db, cn.uuid) == {agg_a, agg_b}
    gen = associations.set_provider_aggregates(db, cn.uuid, [agg_b], generation=gen)
    assert associations.get_provider_aggregates(db, cn.uuid) == {agg_b}
    assert gen == 2
    with db.connect() as conn:  # aggregates stay, only the membership goes
        assert (
            conn.execute(sa.select(sa.func.count()).select_from(placement_aggregates)).scalar()
            == 2
        )


def test_aggregates_without_a_generation_leave_it(db: Database, cn: Ref) -> None:
    """Placement before microversion 1.19: no generation checked, none raised."""
    agg = new_uuid()
    assert associations.set_provider_aggregates(db, cn.uuid, [agg], generation=None) == 0
    assert associations.get_provider_aggregates(db, cn.uuid) == {agg}
    assert associations.set_provider_aggregates(db, cn.uuid, [], generation=None) == 0
    assert associations.get_provider_aggregates(db, cn.uuid) == frozenset()
    with pytest.raises(NotFound):
        associations.set_provider_aggregates(db, new_uuid(), [agg], generation=None)
    assert associations.set_provider_aggregates(db, cn.uuid, [agg], generation=0) == 1


@pytest.mark.parametrize(
    ("names", "code"),
    [
        (["HW_CPU_X86_AVX2", "lowercase"], "rpquery.trait.bad_name"),
        (["CUSTOM_gold"], "rpquery.trait.bad_name"),
        (["CUSTOM_NOT_CREATED"], "rpquery.trait.not_found"),
    ],
)
def test_bad_traits_write_nothing(db: Database, cn: Ref, names: list[str], code: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        associations.set_provider_traits(db, cn.uuid, names, generation=0)
    assert err.value.code == code
    assert link_count(db) == (0, 0)


def test_bad_aggregate_uuid_and_stale_generation(db: Database, cn: Ref) -> None:
    with pytest.raises(InvalidRequest) as err:
        associations.set_provider_aggregates(db, cn.uuid, [new_uuid(), "nope"], generation=0)
    assert (err.value.code, err.value.token) == ("rpquery.aggregate.bad_uuid", "nope")
    associations.set_provider_traits(db, cn.uuid, ["HW_CPU_X86_AVX"], generation=0)
    with pytest.raises(ConcurrentUpdate) as stale:
        associations.set_provider_aggregates(db, cn.uuid, [new_uuid()], generation=0)
    assert stale.value.code == "rpquery.provider.generation_conflict"
    with pytest.raises(ConcurrentUpdate):
        associations.set_provider_traits(db, cn.uuid, [], generation=0)
    assert link_count(db) == (1, 0)
    with db.connect() as conn:
        assert (
            conn.execute(sa.select(sa.func.count()).select_from(placement_aggregates)).scalar()
            == 0
        )


def test_missing_provider(db: Database) -> None:
    with pytest.raises(NotFound):
        associations.set_provider_traits(db, new_uuid(), ["HW_CPU_X86_AVX"], generation=0)
    with pytest.raises(NotFound):
        associations.get_provider_aggregates(db, new_uuid())
    with pytest.raises(InvalidRequest):
        associations.get_provider_traits(db, "bad")
