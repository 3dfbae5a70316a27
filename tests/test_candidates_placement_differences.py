"""Where Placement 16.0 is wrong, rpquery keeps its own answer: each deliberate
difference of docs/placement-differences.md pinned on every backend. Each docstring
says what Placement answers on the same cloud (asked of it in ``.venv-placement``).

The other deliberate differences are pinned elsewhere: the 32-bit ``allocation_ratio``
in ``tests/test_candidates_placement_rules.py::test_rule7_*``, usages grouped by
consumer type on PostgreSQL in ``tests/test_usages.py::test_usages_grouped_by_type``,
existing usage across request groups in
``tests/test_candidates_nested.py::test_summed_amounts_across_groups_respect_capacity``.
"""

from __future__ import annotations

import pytest

from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.read.candidates import allocation_candidates
from tests.factories import Ref, allocate, provider, trait_id
from tests.test_candidates_placement_rules import by_name

AGG_S = "5a5a5a5a-8888-4000-8000-000000000001"


@pytest.fixture
def cloud(db: Database) -> dict[str, Ref]:
    """cn (VCPU, MEMORY_MB, in S) → cn_numa0 (VCPU, NUMA root); cn2 (VCPU, GPU and NUMA
    root, in S); ss sharing DISK_GB through S."""
    with db.begin() as conn:
        trait_id(conn, "CUSTOM_GPU")
        cn = provider(conn, "cn", inventory={"VCPU": 8, "MEMORY_MB": 1024}, aggregates=[AGG_S])
        numa = provider(
            conn, "cn_numa0", parent=cn, inventory={"VCPU": 4}, traits=["HW_NUMA_ROOT"]
        )
        cn2 = provider(
            conn,
            "cn2",
            inventory={"VCPU": 8},
            traits=["CUSTOM_GPU", "HW_NUMA_ROOT"],
            aggregates=[AGG_S],
        )
        ss = provider(
            conn,
            "ss",
            inventory={"DISK_GB": 100},
            traits=["MISC_SHARES_VIA_AGGREGATE"],
            aggregates=[AGG_S],
        )
    return {"cn": cn, "numa": numa, "cn2": cn2, "ss": ss}


def test_resourceless_group_without_positive_filter(db: Database, cloud: dict[str, Ref]) -> None:
    """Placement: no candidate (the group's provider filter ends up empty). rpquery:
    every provider of the subtree without the forbidden trait."""
    got = allocation_candidates(
        db, "resources_A=VCPU:1&required_B=!CUSTOM_GPU&same_subtree=_A,_B&group_policy=none"
    )
    assert by_name(db, got) == {
        ((("cn", "VCPU", 1),), (("_A", ("cn",)), ("_B", ("cn",)))),
        ((("cn", "VCPU", 1),), (("_A", ("cn",)), ("_B", ("cn_numa0",)))),
        ((("cn_numa0", "VCPU", 1),), (("_A", ("cn_numa0",)), ("_B", ("cn",)))),
        ((("cn_numa0", "VCPU", 1),), (("_A", ("cn_numa0",)), ("_B", ("cn_numa0",)))),
    }


def test_in_tree_of_a_resourceless_group_applies(db: Database, cloud: dict[str, Ref]) -> None:
    """Placement ignores ``in_tree_B`` here and maps B to cn_numa0 in cn's tree; rpquery
    keeps B in cn2's tree, where only cn2 itself is a NUMA root."""
    query = (
        "resources_A=VCPU:1&required_B=HW_NUMA_ROOT&same_subtree=_A,_B&group_policy=none"
        f"&in_tree_B={cloud['cn2'].uuid}"
    )
    got = allocation_candidates(db, query)
    assert by_name(db, got) == {((("cn2", "VCPU", 1),), (("_A", ("cn2",)), ("_B", ("cn2",))))}


def test_every_anchor_of_a_sharing_allocation_is_kept(db: Database, cloud: dict[str, Ref]) -> None:
    """Placement keeps the sharing-only unsuffixed part ({ss: DISK_GB 1}) for one
    arbitrary anchor (its AllocationRequest equality ignores the anchor), so only that
    anchor's tree is combined with group 1: cn and cn_numa0, never cn2. rpquery combines
    it with every anchor it is shared with."""
    got = allocation_candidates(db, "resources=DISK_GB:1&resources_1=VCPU:1")
    assert {r[0] for r in by_name(db, got)} == {
        (("cn", "VCPU", 1), ("ss", "DISK_GB", 1)),
        (("cn_numa0", "VCPU", 1), ("ss", "DISK_GB", 1)),
        (("cn2", "VCPU", 1), ("ss", "DISK_GB", 1)),
    }


def test_same_class_in_unsuffixed_and_granular_group(db: Database, cloud: dict[str, Ref]) -> None:
    """The unsuffixed group takes VCPU 2 (with cn's MEMORY_MB), group 1 VCPU 1. Where
    they land on different providers, Placement answers 1 + 3 instead of 1 + 2 (it
    adds group 1's amount into a request object the unsuffixed group's other
    candidates share)."""
    got = allocation_candidates(
        db, "resources=VCPU:2,MEMORY_MB:1&resources_1=VCPU:1&group_policy=isolate"
    )
    assert by_name(db, got) == {
        ((("cn", "MEMORY_MB", 1), ("cn", "VCPU", 3)), (("", ("cn",)), ("_1", ("cn",)))),
        (
            (("cn", "MEMORY_MB", 1), ("cn_numa0", "VCPU", 3)),
            (("", ("cn", "cn_numa0")), ("_1", ("cn_numa0",))),
        ),
        # Placement: cn_numa0 VCPU 3 here
        (
            (("cn", "MEMORY_MB", 1), ("cn", "VCPU", 1), ("cn_numa0", "VCPU", 2)),
            (("", ("cn", "cn_numa0")), ("_1", ("cn",))),
        ),
        # Placement: cn VCPU 3 here
        (
            (("cn", "MEMORY_MB", 1), ("cn", "VCPU", 2), ("cn_numa0", "VCPU", 1)),
            (("", ("cn",)), ("_1", ("cn_numa0",))),
        ),
    }


def test_forbidden_trait_on_nested_trees(db: Database) -> None:
    """Placement answers HTTP 500 on PostgreSQL here (its forbidden-trait tree query
    compares an integer with a string); rpquery answers on every backend."""
    with db.begin() as conn:
        cn = provider(conn, "cn", inventory={"VCPU": 8, "MEMORY_MB": 1024})
        provider(conn, "cn_numa0", parent=cn, inventory={"VCPU": 4}, traits=["HW_NUMA_ROOT"])
        gpu = provider(
            conn, "cn2", inventory={"VCPU": 8, "MEMORY_MB": 1024}, traits=["CUSTOM_GPU"]
        )
        allocate(conn, "c-1", gpu, "VCPU", 6)
    got = allocation_candidates(db, "resources=VCPU:1&required=!CUSTOM_GPU")
    assert {r[0] for r in by_name(db, got)} == {
        (("cn", "VCPU", 1),),
        (("cn_numa0", "VCPU", 1),),
    }


def test_child_sharing_provider_for_another_tree_alone(db: Database) -> None:
    """A sharing provider that is a child (P_ss under P) serves cn2, sharing S with it,
    while P's own tree has no candidate (root_required rules P out): Placement answers
    HTTP 500 on every backend (it looks up the summary of P_ss, which it only builds
    for the trees of the group's own providers: ``KeyError``). rpquery answers."""
    with db.begin() as conn:
        p = provider(conn, "P", inventory={"VCPU": 8}, traits=["HW_CPU_X86_AVX2"])
        provider(
            conn,
            "P_ss",
            parent=p,
            inventory={"DISK_GB": 100},
            traits=["MISC_SHARES_VIA_AGGREGATE"],
            aggregates=[AGG_S],
        )
        provider(conn, "cn2", inventory={"VCPU": 8}, aggregates=[AGG_S])
    got = allocation_candidates(
        db, "resources=DISK_GB:10&resources_1=VCPU:1&root_required=!HW_CPU_X86_AVX2"
    )
    assert by_name(db, got) == {
        ((("P_ss", "DISK_GB", 10), ("cn2", "VCPU", 1)), (("", ("P_ss",)), ("_1", ("cn2",))))
    }


@pytest.mark.parametrize(
    ("group", "code"),
    [
        ("resources_X=VCPU:1&required_X=CUSTOM_NOPE", "rpquery.trait.not_found"),
        ("resources_X=CUSTOM_NOPE:1", "rpquery.resource_class.not_found"),
    ],
)
def test_unknown_name_in_a_later_group_is_refused(
    db: Database, cloud: dict[str, Ref], group: str, code: str
) -> None:
    """Placement resolves names group by group and stops at the first group without
    candidates: here (no provider has 100 VCPU) it answers 200 with nothing, though the
    same unknown name in a request it reads to the end is a 400. rpquery checks every
    name first and always refuses it."""
    with pytest.raises(InvalidRequest) as err:
        allocation_candidates(db, f"resources=VCPU:100&{group}&group_policy=none")
    assert (err.value.code, err.value.token) == (code, "CUSTOM_NOPE")
