"""Issue 15, items 1-7: inputs that used to get past validation and then were refused,
stored differently or turned into a bare Python error by the database. Each one is now
``InvalidRequest`` before any statement, the same on SQLite, PostgreSQL and MariaDB,
and nothing is written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from rpquery import associations, catalog, reshaper
from rpquery import inventory as inv_api
from rpquery.allocations import replace_allocations
from rpquery.candidates import allocation_candidates
from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.models import ConsumerAllocations, Inventory
from rpquery.provider_list import list_providers
from rpquery.request import ProvidersRequest, RequestGroup
from rpquery.tables import consumers, inventories, placement_aggregates, traits
from tests.factories import Ref, new_uuid, provider

MAX_INT = 2**31 - 1


@pytest.fixture
def cn(db: Database) -> Ref:
    with db.begin() as conn:
        return provider(conn, "cn1", inventory={"VCPU": 8, "MEMORY_MB": 4096})


def refused(code: str, call: Callable[[], Any]) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as err:
        call()
    assert err.value.code == code
    return err.value


def count(db: Database, table: sa.Table) -> int:
    with db.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


# ------------------------------------------------------------ 1. allocation_ratio


@pytest.mark.parametrize("ratio", [float("inf"), float("nan"), 1e308, 3.5e38, -1.0, 0.0])
def test_1_ratio_out_of_range_is_refused_by_inventory_writes(
    db: Database, cn: Ref, ratio: float
) -> None:
    before = count(db, inventories)
    err = refused(
        "rpquery.inventory.bad_allocation_ratio",
        lambda: inv_api.set_inventory(
            db, cn.uuid, "DISK_GB", Inventory(total=10, allocation_ratio=ratio), generation=0
        ),
    )
    assert err.token == "DISK_GB.allocation_ratio"
    assert count(db, inventories) == before
    # candidates still answer (no OverflowError from a stored inf)
    assert allocation_candidates(db, "resources=VCPU:1").allocation_requests


@pytest.mark.parametrize("ratio", [float("inf"), 1e308])
def test_1_ratio_out_of_range_is_refused_by_the_reshaper(
    db: Database, cn: Ref, ratio: float
) -> None:
    body = {
        cn.uuid: reshaper.ProviderInventories(
            0, {"VCPU": Inventory(total=8, allocation_ratio=ratio)}
        )
    }
    refused("rpquery.inventory.bad_allocation_ratio", lambda: reshaper.reshape(db, body, []))
    assert inv_api.get_inventories(db, cn.uuid)["VCPU"].allocation_ratio == 1.0


def test_1_largest_32_bit_float_ratio_is_accepted(db: Database, cn: Ref) -> None:
    inv = Inventory(total=10, allocation_ratio=3.4e38)
    inv_api.set_inventory(db, cn.uuid, "DISK_GB", inv, generation=0)
    assert inv_api.get_inventories(db, cn.uuid)["DISK_GB"].allocation_ratio == pytest.approx(
        3.4e38, rel=1e-6
    )


# ------------------------------------------------------------ 2. integers


@pytest.mark.parametrize("amount", [MAX_INT + 1, 2**63, 10**18])
def test_2_amounts_above_max_int_are_refused_in_reads(db: Database, cn: Ref, amount: int) -> None:
    err = refused(
        "rpquery.request.bad_amount",
        lambda: allocation_candidates(db, f"resources=VCPU:{amount}"),
    )
    assert str(amount) in err.token
    refused(
        "rpquery.request.bad_amount",
        lambda: list_providers(db, f"resources=VCPU:{amount}"),
    )


def test_2_amount_of_max_int_is_a_question_every_backend_answers(db: Database, cn: Ref) -> None:
    assert not allocation_candidates(db, f"resources=VCPU:{MAX_INT}").allocation_requests
    assert list_providers(db, f"resources=VCPU:{MAX_INT}") == []


@pytest.mark.parametrize("generation", [MAX_INT + 1, 2**63])
def test_2_consumer_generation_above_max_int_is_refused(
    db: Database, cn: Ref, generation: int
) -> None:
    req = ConsumerAllocations(new_uuid(), "p", "u", "INSTANCE", generation, {cn.uuid: {"VCPU": 1}})
    refused("rpquery.consumer.bad_generation", lambda: replace_allocations(db, req))
    assert count(db, consumers) == 0


@pytest.mark.parametrize("amount", [MAX_INT + 1, 2**63])
def test_2_allocation_amount_above_max_int_is_refused(db: Database, cn: Ref, amount: int) -> None:
    req = ConsumerAllocations(new_uuid(), "p", "u", "INSTANCE", None, {cn.uuid: {"VCPU": amount}})
    refused("rpquery.allocation.bad_amount", lambda: replace_allocations(db, req))
    assert count(db, consumers) == 0


def test_2_provider_generation_above_max_int_is_refused(db: Database, cn: Ref) -> None:
    refused(
        "rpquery.provider.bad_generation",
        lambda: inv_api.set_inventory(db, cn.uuid, "DISK_GB", Inventory(10), generation=2**31),
    )


# ------------------------------------------------------------ 5. trailing newline


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda db: catalog.create_trait(db, "CUSTOM_X\n"), "rpquery.trait.bad_name"),
        (
            lambda db: catalog.create_resource_class(db, "CUSTOM_X\n"),
            "rpquery.resource_class.bad_name",
        ),
    ],
)
def test_5_names_with_a_trailing_newline_are_refused(db: Database, call: Any, code: str) -> None:
    before = count(db, traits)
    refused(code, lambda: call(db))
    assert count(db, traits) == before
    assert "CUSTOM_X\n" not in catalog.list_resource_classes(db)


def test_5_consumer_type_with_a_trailing_newline_is_refused(db: Database, cn: Ref) -> None:
    req = ConsumerAllocations(new_uuid(), "p", "u", "INSTANCE\n", None, {cn.uuid: {"VCPU": 1}})
    refused("rpquery.consumer.bad_type", lambda: replace_allocations(db, req))
    assert count(db, consumers) == 0


def test_5_aggregate_uuid_with_a_trailing_newline_is_refused(db: Database, cn: Ref) -> None:
    agg = new_uuid()
    refused(
        "rpquery.aggregate.bad_uuid",
        lambda: associations.set_provider_aggregates(db, cn.uuid, [agg + "\n"], generation=0),
    )
    assert count(db, placement_aggregates) == 0
    refused(
        "rpquery.request.bad_aggregate",
        lambda: list_providers(
            db, ProvidersRequest(filters=RequestGroup(member_of=[[agg + "\n"]]))
        ),
    )
    refused(
        "rpquery.trait.bad_name",
        lambda: RequestGroup(resources={"VCPU": 1}, required=[["CUSTOM_X\n"]]),
    )


# ------------------------------------------------------------ 7. one uuid rule


def test_7_upper_and_lower_case_aggregate_uuid_are_one_aggregate(db: Database, cn: Ref) -> None:
    agg = new_uuid()
    gen = associations.set_provider_aggregates(db, cn.uuid, [agg.upper()], generation=0)
    associations.set_provider_aggregates(db, cn.uuid, [agg, agg.upper()], generation=gen)
    assert associations.get_provider_aggregates(db, cn.uuid) == frozenset({agg})
    assert count(db, placement_aggregates) == 1
    for form in (agg, agg.upper(), agg.replace("-", ""), f"urn:uuid:{agg}", f"{{{agg}}}"):
        assert [p.uuid for p in list_providers(db, {"member_of": form})] == [cn.uuid]
        answer = allocation_candidates(db, {"resources": "VCPU:1", "member_of": form})
        assert len(answer.allocation_requests) == 1
        typed = ProvidersRequest(filters=RequestGroup(member_of=[[form]]))
        assert [p.uuid for p in list_providers(db, typed)] == [cn.uuid]


def test_7_upper_case_provider_uuid_names_the_stored_provider(db: Database, cn: Ref) -> None:
    gen = inv_api.set_inventory(db, cn.uuid.upper(), "DISK_GB", Inventory(10), generation=0)
    assert gen == 1
    assert "DISK_GB" in inv_api.get_inventories(db, f"urn:uuid:{cn.uuid}")
    assert [p.uuid for p in list_providers(db, {"uuid": cn.uuid.upper()})] == [cn.uuid]
