"""``list_providers`` (``GET /resource_providers``) on every backend: uuid, name,
in_tree, member_of (all forms, the provider's own aggregates), required (all forms, no
conflict check), resources with capacity."""

from __future__ import annotations

import pytest

from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.read.providers import list_providers, provider_statements, to_placement
from tests.factories import Ref, allocate, provider

AGG_A = "aaaaaaaa-1111-4000-8000-000000000001"
AGG_B = "bbbbbbbb-1111-4000-8000-000000000002"


@pytest.fixture
def cloud(db: Database) -> dict[str, Ref]:
    with db.begin() as conn:
        cn1 = provider(conn, "cn1", inventory={"VCPU": 8}, aggregates=[AGG_A])
        numa = provider(
            conn, "cn1_numa0", parent=cn1, inventory={"VCPU": 4}, traits=["HW_NUMA_ROOT"]
        )
        cn2 = provider(
            conn,
            "cn2",
            inventory={"VCPU": 8, "MEMORY_MB": 1024},
            traits=["CUSTOM_GPU"],
            aggregates=[AGG_B],
        )
        allocate(conn, "c-1", cn2, "VCPU", 7)
        cn3 = provider(
            conn,
            "cn3",
            inventory={"VCPU": {"total": 8, "max_unit": 2}},
            traits=["HW_CPU_X86_AVX2"],
        )
    return {"cn1": cn1, "numa": numa, "cn2": cn2, "cn3": cn3}


def names(db: Database, query: str) -> list[str]:
    return [p.name or "" for p in list_providers(db, query)]


def test_all_providers_with_tree_links(db: Database, cloud: dict[str, Ref]) -> None:
    got = list_providers(db, "")
    assert [p.name for p in got] == ["cn1", "cn1_numa0", "cn2", "cn3"]
    numa = got[1]
    assert (numa.parent_uuid, numa.root_uuid) == (cloud["cn1"].uuid, cloud["cn1"].uuid)
    body = to_placement(got)
    assert body["resource_providers"][0]["root_provider_uuid"] == cloud["cn1"].uuid
    assert body["resource_providers"][0]["generation"] == 0


def test_uuid_name_in_tree(db: Database, cloud: dict[str, Ref]) -> None:
    assert names(db, f"uuid={cloud['cn2'].uuid}") == ["cn2"]
    assert names(db, "name=cn3") == ["cn3"]
    assert names(db, f"in_tree={cloud['numa'].uuid}") == ["cn1", "cn1_numa0"]


def test_required_forbidden_any_of(db: Database, cloud: dict[str, Ref]) -> None:
    assert names(db, "required=!CUSTOM_GPU") == ["cn1", "cn1_numa0", "cn3"]
    assert names(db, "required=HW_NUMA_ROOT") == ["cn1_numa0"]
    assert names(db, "required=in:CUSTOM_GPU,HW_CPU_X86_AVX2") == ["cn2", "cn3"]
    with pytest.raises(InvalidRequest) as err:  # unknown, even forbidden: Placement's 400
        names(db, "required=!CUSTOM_NEVER_SEEN")
    assert (err.value.code, err.value.token) == ("rpquery.trait.not_found", "CUSTOM_NEVER_SEEN")


def test_member_of_forms(db: Database, cloud: dict[str, Ref]) -> None:
    assert names(db, f"member_of={AGG_A}") == ["cn1"]
    assert names(db, f"member_of=in:{AGG_A},{AGG_B}") == ["cn1", "cn2"]
    assert names(db, f"member_of={AGG_A}&member_of={AGG_B}") == []
    # as in Placement, forbidden aggregates look at the provider's own aggregates only:
    # cn1 is in AGG_A, its NUMA child (no aggregate of its own) is listed
    assert names(db, f"member_of=!{AGG_A}") == ["cn1_numa0", "cn2", "cn3"]
    assert names(db, f"member_of=!in:{AGG_A},{AGG_B}") == ["cn1_numa0", "cn3"]


def test_resources_capacity_and_units(db: Database, cloud: dict[str, Ref]) -> None:
    assert names(db, "resources=VCPU:2") == ["cn1", "cn1_numa0", "cn3"]
    assert names(db, "resources=VCPU:3") == ["cn1", "cn1_numa0"]
    assert names(db, "resources=VCPU:1,MEMORY_MB:512") == ["cn2"]


def test_errors(db: Database, cloud: dict[str, Ref]) -> None:
    with pytest.raises(InvalidRequest) as err:
        list_providers(db, "resources=CUSTOM_MISSING:1")
    assert err.value.code == "rpquery.resource_class.not_found"
    with pytest.raises(InvalidRequest) as err:
        list_providers(db, "required=CUSTOM_MISSING")
    assert err.value.token == "CUSTOM_MISSING"


def test_statements_for_explain(db: Database, cloud: dict[str, Ref]) -> None:
    (stmt,) = provider_statements(db, "resources=VCPU:1&required=!CUSTOM_GPU")
    assert "NOT (EXISTS" in str(stmt.compile(db.engine))  # type: ignore[attr-defined]
