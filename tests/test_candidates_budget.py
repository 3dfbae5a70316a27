"""Requests that must not hang (issue 15, item 10), on every backend: many identical
granular groups with ``limit`` answer at once, the work is counted (steps of the
search) and bounded by a budget, and a request past it ends with its own error.

``excl_small`` has room for 32 VCPU in two NUMA nodes of 16, so 34 groups of VCPU:1
are a dead end there; ``incl_big`` has two nodes of 32 (``max_unit`` 32). Before,
34 such groups with ``limit=1`` walked every sequence of nodes on both hosts (2^34).
"""

from __future__ import annotations

import pytest

from rpquery.db import Database
from rpquery.errors import InvalidRequest, TooComplex
from rpquery.read.candidates import allocation_candidates
from tests.factories import Ref, provider
from tests.test_candidates_nested import mappings_by_name, requests_by_name


def identical_groups(n: int, *, in_tree: str | None = None, limit: int | None = None) -> str:
    tree = [f"&in_tree{i}={in_tree}" for i in range(n)] if in_tree else [""] * n
    groups = "&".join(f"resources{i}=VCPU:1{tree[i]}" for i in range(n))
    return groups + "&group_policy=none" + (f"&limit={limit}" if limit else "")


@pytest.fixture
def numa_hosts(db: Database) -> dict[str, Ref]:
    hosts = {}
    with db.begin() as conn:
        for name, vcpus in (("excl_small", 16), ("incl_big", 32)):
            host = provider(conn, name, inventory={"MEMORY_MB": 4096})
            for i in (0, 1):
                provider(conn, f"{name}_numa{i}", parent=host, inventory={"VCPU": vcpus})
            hosts[name] = host
    return hosts


def test_34_identical_groups_with_limit_1_answer(db: Database, numa_hosts: dict[str, Ref]) -> None:
    for budget in (None, 500):
        result = allocation_candidates(db, identical_groups(34, limit=1), max_search_steps=budget)
        (request,) = requests_by_name(result)
        assert request == (("incl_big_numa0", "VCPU", 32), ("incl_big_numa1", "VCPU", 2))


@pytest.mark.parametrize("n", [16, 18, 20])
def test_in_tree_identical_groups_cost_linear_work(
    db: Database, numa_hosts: dict[str, Ref], n: int
) -> None:
    """The issue's NUMA host with ``in_treeN``: 1.5 / 1.9 / 4.3 s for 16 / 18 / 20
    groups before. Now n picks and n providers placed for the first answer."""
    query = identical_groups(n, in_tree=numa_hosts["incl_big"].uuid, limit=1)
    result = allocation_candidates(db, query, max_search_steps=2 * n)
    assert len(result.allocation_requests) == 1
    with pytest.raises(TooComplex):  # the steps are really counted
        allocation_candidates(db, query, max_search_steps=2 * n - 1)


def test_a_request_past_its_budget_is_too_complex(
    db: Database, numa_hosts: dict[str, Ref], monkeypatch: pytest.MonkeyPatch
) -> None:
    query = identical_groups(20, in_tree=numa_hosts["incl_big"].uuid)  # 2^20 answers
    with pytest.raises(TooComplex) as info:
        allocation_candidates(db, query, max_search_steps=10_000)
    assert info.value.code == "rpquery.candidates.too_complex"
    assert "10000 steps" in info.value.detail
    with pytest.raises(TooComplex):
        allocation_candidates(Database(db.engine, max_search_steps=10_000), query)
    monkeypatch.setenv("RPQUERY_MAX_SEARCH_STEPS", "10000")
    with pytest.raises(TooComplex):
        allocation_candidates(db, query)
    small = identical_groups(3, in_tree=numa_hosts["incl_big"].uuid)
    assert len(allocation_candidates(db, small).allocation_requests) == 8


@pytest.mark.parametrize("bad", [0, -5, True, "many"])
def test_a_bad_budget_is_invalid(
    db: Database, numa_hosts: dict[str, Ref], monkeypatch: pytest.MonkeyPatch, bad: object
) -> None:
    with pytest.raises(InvalidRequest) as info:
        allocation_candidates(db, "resources=VCPU:1", max_search_steps=bad)  # type: ignore[arg-type]
    assert info.value.code == "rpquery.request.bad_max_search_steps"
    monkeypatch.setenv("RPQUERY_MAX_SEARCH_STEPS", str(bad))
    with pytest.raises(InvalidRequest) as info:
        allocation_candidates(db, "resources=VCPU:1")
    assert info.value.code == "rpquery.request.bad_max_search_steps"
    assert "RPQUERY_MAX_SEARCH_STEPS" in info.value.detail


def test_identical_groups_keep_every_mapping_as_placement(
    db: Database, numa_hosts: dict[str, Ref]
) -> None:
    """Placement 16.0 answers 3 groups of VCPU:1 on two NUMA nodes with 8 allocation
    requests: it compares merged allocations *and* mappings, and the arrangements of
    identical groups differ in their mappings. Walking each multiset once must not
    lose any of them."""
    query = identical_groups(3, in_tree=numa_hosts["incl_big"].uuid)
    result = allocation_candidates(db, query)
    maps = mappings_by_name(result)
    assert len(maps) == 8
    assert len({tuple(sorted(m.items())) for m in maps}) == 8
    assert requests_by_name(result) == {
        (("incl_big_numa0", "VCPU", 3),),
        (("incl_big_numa0", "VCPU", 2), ("incl_big_numa1", "VCPU", 1)),
        (("incl_big_numa0", "VCPU", 1), ("incl_big_numa1", "VCPU", 2)),
        (("incl_big_numa1", "VCPU", 3),),
    }
    limited = allocation_candidates(db, query + "&limit=5")
    limited_maps = mappings_by_name(limited)
    assert len({tuple(sorted(m.items())) for m in limited_maps}) == 5
    assert all(m in maps for m in limited_maps)
