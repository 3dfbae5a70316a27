"""The seven rules where rpquery used to answer differently from Placement 16.0 (issue
14), one regression test each, on every backend. Each expected answer is Placement's
own, asked of it on the same cloud (``.venv-placement``).

1. required vs forbidden traits with any-of sets (and no conflict check in lists);
2. ``member_of`` in provider lists: the provider's own aggregates, forbidden ones too;
3. ``member_of`` / ``!member_of`` on suffixed groups: the provider's own aggregates;
4. ``group_policy=isolate`` counts resourceless groups;
5. provider summaries: the trees the returned requests allocate from;
6. repeated ``member_of`` in the unsuffixed group: terms not split provider / root;
7. MariaDB's 32-bit ``allocation_ratio``: capacity from the ratio as written.

Plus the rules that go with 2, 3 and 6: a forbidden aggregate of the unsuffixed group
rules out an anchor for its sharing providers too, and a child sharing provider whose
root is in it for its own tree only (it still serves other trees).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rpquery.db import Database
from rpquery.errors import CapacityExceeded, InvalidRequest
from rpquery.models import ConsumerAllocations, Inventory
from rpquery.read.candidates import AllocationCandidates, allocation_candidates
from rpquery.read.providers import list_providers
from rpquery.write.allocations import replace_allocations
from rpquery.write.reshaper import ProviderInventories, reshape
from tests.factories import Ref, new_uuid, provider, trait_id

AGG_A = "aaaaaaaa-7777-4000-8000-000000000001"
AGG_B = "bbbbbbbb-7777-4000-8000-000000000002"
AGG_C = "cccccccc-7777-4000-8000-000000000003"
AGG_S = "5a5a5a5a-7777-4000-8000-000000000004"
SHARES = ["MISC_SHARES_VIA_AGGREGATE"]

Request = tuple[tuple[tuple[str, str, int], ...], tuple[tuple[str, tuple[str, ...]], ...]]


def by_name(db: Database, result: AllocationCandidates) -> set[Request]:
    """Each request as ((provider, class, amount) ..., (suffix, providers) ...)."""
    with db.connect() as conn:
        name = dict(conn.exec_driver_sql("SELECT uuid, name FROM resource_providers").all())
    return {
        (
            tuple(
                sorted(
                    (name[u], rc, n) for u, res in ar.allocations.items() for rc, n in res.items()
                )
            ),
            tuple(
                sorted((s, tuple(sorted(name[u] for u in us))) for s, us in ar.mappings.items())
            ),
        )
        for ar in result.allocation_requests
    }


def summarised(result: AllocationCandidates) -> set[str]:
    return {s.name or "" for s in result.provider_summaries.values()}


def listed(db: Database, query: str) -> list[str]:
    return [p.name or "" for p in list_providers(db, query)]


@dataclass(frozen=True)
class Cloud:
    db: Database
    refs: dict[str, Ref]


@pytest.fixture
def trees(db: Database) -> Cloud:
    """R (root, MEMORY_MB, in A, SSD) → C (VCPU, GPU, NUMA) → PF (VFs, BAR);
    R2 (root, VCPU + MEMORY_MB, in B, AVX2) → C2 (VCPU, in A);
    R3 (root, VCPU, in C and B) → C3 (VCPU, no aggregate)."""
    with db.begin() as conn:
        for t in ("CUSTOM_GPU", "CUSTOM_BAR"):
            trait_id(conn, t)
        refs = {}
        refs["R"] = provider(
            conn,
            "R",
            inventory={"MEMORY_MB": 1024},
            aggregates=[AGG_A],
            traits=["STORAGE_DISK_SSD"],
        )
        refs["C"] = provider(
            conn,
            "C",
            parent=refs["R"],
            inventory={"VCPU": 4},
            traits=["CUSTOM_GPU", "HW_NUMA_ROOT"],
        )
        refs["PF"] = provider(
            conn, "PF", parent=refs["C"], inventory={"SRIOV_NET_VF": 4}, traits=["CUSTOM_BAR"]
        )
        refs["R2"] = provider(
            conn,
            "R2",
            inventory={"VCPU": 4, "MEMORY_MB": 1024},
            aggregates=[AGG_B],
            traits=["HW_CPU_X86_AVX2"],
        )
        refs["C2"] = provider(
            conn, "C2", parent=refs["R2"], inventory={"VCPU": 4}, aggregates=[AGG_A]
        )
        refs["R3"] = provider(conn, "R3", inventory={"VCPU": 10}, aggregates=[AGG_C, AGG_B])
        refs["C3"] = provider(conn, "C3", parent=refs["R3"], inventory={"VCPU": 2})
    return Cloud(db, refs)


def vcpu_on(*names: str) -> set[Request]:
    return {(((n, "VCPU", 1),), (("", (n,)),)) for n in names}


# ------------------------------------------------------------------ rule 1


def test_rule1_any_of_set_partly_forbidden_is_valid(trees: Cloud) -> None:
    db = trees.db
    # has CUSTOM_GPU or SSD, has not SSD: CUSTOM_GPU (C); R has SSD but serves nothing
    got = allocation_candidates(
        db, "resources=VCPU:1&required=in:CUSTOM_GPU,STORAGE_DISK_SSD&required=!STORAGE_DISK_SSD"
    )
    assert by_name(db, got) == vcpu_on("C")
    got = allocation_candidates(
        db,
        "resources=VCPU:1&required=!CUSTOM_BAR,HW_CPU_X86_AVX2"
        "&required=in:CUSTOM_BAR,HW_CPU_X86_AVX2,HW_NUMA_ROOT",
    )
    assert by_name(db, got) == vcpu_on("R2")


@pytest.mark.parametrize(
    ("query", "token"),
    [
        ("required=CUSTOM_GPU,!CUSTOM_GPU", "CUSTOM_GPU"),  # a set of one, forbidden
        ("required=in:CUSTOM_GPU,CUSTOM_BAR&required=!CUSTOM_BAR,!CUSTOM_GPU", "CUSTOM_BAR"),
        ("required_X=CUSTOM_GPU&required_X=!CUSTOM_GPU&resources_X=VCPU:1", "CUSTOM_GPU"),
    ],
)
def test_rule1_every_trait_of_a_set_forbidden_is_a_conflict(
    trees: Cloud, query: str, token: str
) -> None:
    with pytest.raises(InvalidRequest) as err:
        allocation_candidates(trees.db, f"resources=MEMORY_MB:1&{query}")
    assert (err.value.code, err.value.token) == ("rpquery.trait.conflict", token)


def test_rule1_provider_lists_make_no_conflict_check(trees: Cloud) -> None:
    assert listed(trees.db, "required=CUSTOM_GPU,!CUSTOM_GPU") == []
    assert listed(
        trees.db, "required=in:CUSTOM_GPU,STORAGE_DISK_SSD&required=!STORAGE_DISK_SSD"
    ) == ["C"]


# ------------------------------------------------------------------ rule 2


def test_rule2_provider_list_member_of_is_own_aggregates(trees: Cloud) -> None:
    db = trees.db
    assert listed(db, f"member_of={AGG_A}") == ["R", "C2"]
    # R is in A, its children are not: they are listed
    assert listed(db, f"member_of=!{AGG_A}") == ["C", "PF", "R2", "R3", "C3"]
    assert listed(db, f"resources=VCPU:1&member_of=!in:{AGG_A},{AGG_B}") == ["C", "C3"]


# ------------------------------------------------------------------ rule 3


def test_rule3_suffixed_member_of_is_own_aggregates(trees: Cloud) -> None:
    db = trees.db
    # root R in A does not cover its child C for a suffixed group: only C2 (in A itself)
    got = allocation_candidates(db, f"resources_NET=VCPU:1&member_of_NET={AGG_A}")
    assert by_name(db, got) == {((("C2", "VCPU", 1),), (("_NET", ("C2",)),))}
    got = allocation_candidates(db, f"resources_NET=VCPU:1&member_of_NET=!{AGG_A}")
    assert {r[0][0][0] for r in by_name(db, got)} == {"C", "R2", "R3", "C3"}
    # the unsuffixed group keeps the root rule
    got = allocation_candidates(db, f"resources=VCPU:1&member_of={AGG_A}")
    assert by_name(db, got) == vcpu_on("C", "C2")
    got = allocation_candidates(db, f"resources=VCPU:1&member_of=!{AGG_A}")
    assert by_name(db, got) == vcpu_on("R2", "R3", "C3")


# ------------------------------------------------------------------ rule 4


def test_rule4_isolate_counts_resourceless_groups(trees: Cloud) -> None:
    db = trees.db
    query = "resourcesB=SRIOV_NET_VF:1&required1=CUSTOM_BAR&same_subtree=1,B&group_policy="
    # only PF has VFs and CUSTOM_BAR: isolate forbids groups 1 and B on it together
    assert allocation_candidates(db, query + "isolate").allocation_requests == ()
    got = allocation_candidates(db, query + "none")
    assert by_name(db, got) == {((("PF", "SRIOV_NET_VF", 1),), (("1", ("PF",)), ("B", ("PF",))))}
    # resourceless group on another provider of the subtree: fine under isolate
    got = allocation_candidates(
        db,
        "resourcesB=SRIOV_NET_VF:1&required1=HW_NUMA_ROOT&same_subtree=1,B&group_policy=isolate",
    )
    assert by_name(db, got) == {((("PF", "SRIOV_NET_VF", 1),), (("1", ("C",)), ("B", ("PF",))))}


# ------------------------------------------------------------------ rule 5


@pytest.fixture
def sharing(db: Database) -> Cloud:
    """cn1 (VCPU) and two sharing providers in S: ss1 (DISK_GB), ss2 (IPV4_ADDRESS);
    cn2 outside S."""
    with db.begin() as conn:
        refs = {
            "cn1": provider(conn, "cn1", inventory={"VCPU": 8}, aggregates=[AGG_S]),
            "ss1": provider(
                conn, "ss1", inventory={"DISK_GB": 100}, traits=SHARES, aggregates=[AGG_S]
            ),
            "ss2": provider(
                conn, "ss2", inventory={"IPV4_ADDRESS": 10}, traits=SHARES, aggregates=[AGG_S]
            ),
            "cn2": provider(conn, "cn2", inventory={"VCPU": 8}),
        }
    return Cloud(db, refs)


@pytest.mark.parametrize(
    ("query", "trees_summarised"),
    [
        ("resources=DISK_GB:10", {"ss1"}),
        ("resources=DISK_GB:10&limit=1", {"ss1"}),
        ("resources=DISK_GB:10,IPV4_ADDRESS:1", {"ss1", "ss2"}),
        ("resources=IPV4_ADDRESS:1&resources_D=DISK_GB:1&group_policy=none", {"ss1", "ss2"}),
        ("resources=VCPU:1,DISK_GB:10", {"cn1", "ss1"}),
    ],
)
def test_rule5_summaries_are_the_trees_allocated_from(
    sharing: Cloud, query: str, trees_summarised: set[str]
) -> None:
    got = allocation_candidates(sharing.db, query)
    assert got.allocation_requests
    assert summarised(got) == trees_summarised
    # every request still names its anchor, summarised or not, and renders
    anchors = {ar.root_uuid for ar in got.allocation_requests}
    assert anchors <= {ref.uuid for ref in sharing.refs.values()}
    assert len(got.to_placement()["allocation_requests"]) == len(got.allocation_requests)


# ------------------------------------------------------------------ rule 6


def test_rule6_repeated_member_of_is_not_split_between_provider_and_root(trees: Cloud) -> None:
    db = trees.db
    # C2 is in A, its root R2 in B: A and (B or C) is not met by either alone
    got = allocation_candidates(
        db, f"resources=VCPU:1&member_of={AGG_A}&member_of=in:{AGG_B},{AGG_C}"
    )
    assert got.allocation_requests == ()
    # R3 itself is in C and B: it and its child C3 (through its root) match
    got = allocation_candidates(
        db, f"resources=VCPU:1&member_of={AGG_B}&member_of=in:{AGG_A},{AGG_C}"
    )
    assert by_name(db, got) == vcpu_on("R3", "C3")


# ------------------------------------------------------------------ sharing and !member_of


def test_forbidden_aggregate_of_the_anchor_excludes_its_sharing_providers(db: Database) -> None:
    """In Placement's unsuffixed group a forbidden aggregate excludes a provider when
    it or its root is a member, and a sharing provider's root there is the anchor it
    serves: an anchor in a forbidden aggregate gets no candidate at all."""
    with db.begin() as conn:
        provider(
            conn,
            "cn1",
            inventory={"VCPU": 8},
            aggregates=[AGG_S, AGG_B],
            traits=["HW_CPU_X86_AVX2"],
        )
        provider(conn, "ss1", inventory={"DISK_GB": 100}, traits=SHARES, aggregates=[AGG_S])
        provider(conn, "cn2", inventory={"VCPU": 8}, aggregates=[AGG_S])
    only_cn1 = f"resources=DISK_GB:1&member_of=!{AGG_B}&root_required=HW_CPU_X86_AVX2"
    assert allocation_candidates(db, only_cn1).allocation_requests == ()
    got = allocation_candidates(db, f"resources=DISK_GB:1&member_of=!{AGG_B}&resources_1=VCPU:1")
    assert by_name(db, got) == {
        ((("cn2", "VCPU", 1), ("ss1", "DISK_GB", 1)), (("", ("ss1",)), ("_1", ("cn2",))))
    }


@pytest.mark.parametrize("limit", ["", "&limit=5"])
def test_forbidden_root_excludes_its_children_with_no_sharing_provider(
    db: Database, limit: str
) -> None:
    """A root in a forbidden aggregate of the unsuffixed group rules out its children,
    also when the roots are restricted (``root_required``, ``limit``) and no sharing
    provider takes part: the sharing providers' exemption from it is an empty list
    then. PostgreSQL and MariaDB once returned the child here (an empty expanding
    parameter rendered as ``IN`` where it stood for ``NOT IN``; differential seeds 23,
    65, 67). Placement 16.0 returns only ``cn2_numa``."""
    with db.begin() as conn:
        cn1 = provider(conn, "cn1", aggregates=[AGG_A], traits=["HW_CPU_X86_AVX2"])
        provider(conn, "cn1_numa", parent=cn1, inventory={"MEMORY_MB": 2048})
        cn2 = provider(conn, "cn2", aggregates=[AGG_B], traits=["HW_CPU_X86_AVX2"])
        provider(conn, "cn2_numa", parent=cn2, inventory={"MEMORY_MB": 2048})
    for qs in (
        f"resources=MEMORY_MB:512&member_of=!{AGG_A}&root_required=HW_CPU_X86_AVX2",
        f"resources=MEMORY_MB:512&member_of=!in:{AGG_C},{AGG_A}&root_required=HW_CPU_X86_AVX2",
        f"resources=MEMORY_MB:512&member_of=!{AGG_A}",
    ):
        got = allocation_candidates(db, qs + limit)
        assert by_name(db, got) == {((("cn2_numa", "MEMORY_MB", 512),), (("", ("cn2_numa",)),))}, (
            qs
        )


# ------------------------------------------------------------------ in_tree and sharing


@pytest.fixture
def shared(db: Database) -> Cloud:
    """cn1 (VCPU, MULTI_ATTACH) and ss1 (sharing DISK_GB) in S; P (VCPU, AVX2, in A)
    → P_ss (a child sharing DISK_GB through S2 only); cn2 (VCPU) in S2."""
    with db.begin() as conn:
        refs = {
            "cn1": provider(
                conn,
                "cn1",
                inventory={"VCPU": 8},
                traits=["COMPUTE_VOLUME_MULTI_ATTACH"],
                aggregates=[AGG_S],
            ),
            "ss1": provider(
                conn, "ss1", inventory={"DISK_GB": 100}, traits=SHARES, aggregates=[AGG_S]
            ),
            "P": provider(
                conn, "P", inventory={"VCPU": 8}, traits=["HW_CPU_X86_AVX2"], aggregates=[AGG_A]
            ),
        }
        refs["P_ss"] = provider(
            conn,
            "P_ss",
            parent=refs["P"],
            inventory={"DISK_GB": 100},
            traits=SHARES,
            aggregates=[AGG_B],
        )
        refs["cn2"] = provider(conn, "cn2", inventory={"VCPU": 8}, aggregates=[AGG_B])
    return Cloud(db, refs)


def disk_with(vcpu_on: str | None, disk_on: str, group: str = "_1") -> Request:
    """A candidate: 10 DISK_GB on ``disk_on`` for the unsuffixed group (or ``group``
    when ``vcpu_on`` is None: then VCPU is unsuffixed), VCPU on ``vcpu_on``."""
    if vcpu_on is None:
        return (((disk_on, "DISK_GB", 10),), (("", (disk_on,)),))
    allocs = tuple(sorted(((vcpu_on, "VCPU", 1), (disk_on, "DISK_GB", 10))))
    return allocs, (("", (disk_on,)), (group, (vcpu_on,)))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # in_tree=<sharing provider> anchors the unsuffixed group in that provider's
        # own tree: root_required is checked on ss1, which lacks the trait
        ("in_tree={ss1}&root_required=COMPUTE_VOLUME_MULTI_ATTACH", set()),
        ("in_tree={ss1}", {disk_with(None, "ss1")}),
        # ... and no other group may come from another tree: ss1 holds no VCPU
        ("in_tree={ss1}&resources_1=VCPU:1", set()),
        # a child sharing provider: its own tree (P) only, not cn2 it shares with
        ("in_tree={P_ss}&resources_1=VCPU:1", {disk_with("P", "P_ss")}),
        ("in_tree={P}&resources_1=VCPU:1", {disk_with("P", "P_ss")}),
    ],
)
def test_in_tree_of_the_unsuffixed_group_is_its_anchor_tree(
    shared: Cloud, query: str, expected: set[Request]
) -> None:
    """Found by the differential test (seeds 134, 169): Placement's answers."""
    uuids = {name: ref.uuid for name, ref in shared.refs.items()}
    got = allocation_candidates(shared.db, "resources=DISK_GB:10&" + query.format(**uuids))
    assert by_name(shared.db, got) == expected


def test_in_tree_of_a_suffixed_group_still_shares_with_other_trees(shared: Cloud) -> None:
    got = allocation_candidates(
        shared.db,
        f"resources=VCPU:1&resources_D=DISK_GB:10&in_tree_D={shared.refs['ss1'].uuid}"
        "&root_required=COMPUTE_VOLUME_MULTI_ATTACH",
    )
    assert by_name(shared.db, got) == {
        ((("cn1", "VCPU", 1), ("ss1", "DISK_GB", 10)), (("", ("cn1",)), ("_D", ("ss1",))))
    }


def test_child_sharing_provider_serves_other_trees_only_if_itself_in_member_of(
    shared: Cloud,
) -> None:
    """P_ss passes member_of=A through its root P only: Placement offers it to its own
    tree, not to cn2 it shares with (a sharing provider must itself be in the
    requested aggregates to serve another tree)."""
    db = shared.db
    query = f"resources=DISK_GB:10&member_of={AGG_A}&resources_1=VCPU:1"
    assert by_name(db, allocation_candidates(db, query)) == {disk_with("P", "P_ss")}
    no_p = query + "&root_required=!HW_CPU_X86_AVX2"
    assert by_name(db, allocation_candidates(db, no_p)) == set()
    # itself in S2: it serves P (its own tree) and cn2
    query = f"resources=DISK_GB:10&member_of={AGG_B}&resources_1=VCPU:1"
    assert by_name(db, allocation_candidates(db, query)) == {
        disk_with("P", "P_ss"),
        disk_with("cn2", "P_ss"),
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # P is in A, P_ss is not: P_ss still serves cn2 (not in A), as ss1 serves cn1
        ("", {disk_with("cn2", "P_ss"), disk_with("cn1", "ss1")}),
        ("&root_required=!COMPUTE_VOLUME_MULTI_ATTACH", {disk_with("cn2", "P_ss")}),
        (f"&member_of=!in:{AGG_A},{AGG_S}", {disk_with("cn2", "P_ss")}),
        (f"&member_of={AGG_B}", {disk_with("cn2", "P_ss")}),
        # ... but not its own tree: there its root's membership excludes it
        ("&root_required=HW_CPU_X86_AVX2", set()),
    ],
)
def test_child_sharing_provider_whose_root_is_forbidden_serves_other_trees(
    shared: Cloud, query: str, expected: set[Request]
) -> None:
    """``member_of=!A`` in the unsuffixed group: Placement judges a sharing provider
    serving another tree by its own aggregates and that tree's root, not by its own
    root. Placement 16.0 gives these answers, asked with ``resources_1`` first (with
    the unsuffixed group first it answers HTTP 500 here: P's tree has no candidate,
    difference 10 of docs/placement-differences.md)."""
    db = shared.db
    got = allocation_candidates(
        db, f"resources_1=VCPU:1&resources=DISK_GB:10&member_of=!{AGG_A}" + query
    )
    assert by_name(db, got) == expected


def test_child_sharing_provider_whose_root_is_forbidden_with_both_kinds_of_group(
    shared: Cloud,
) -> None:
    """P_ss serves cn2 in the unsuffixed group (beside cn2's VCPU) and in group 1 (its
    own aggregates only there): one candidate, as Placement 16.0 answers. Without
    ``member_of=!A`` it serves its own tree P too (Placement 16.0: the same two, with
    DISK_GB 21 instead of 11, difference 4 of docs/placement-differences.md)."""
    db = shared.db
    query = f"resources_1=DISK_GB:1&in_tree_1={shared.refs['P'].uuid}&resources=VCPU:1,DISK_GB:10"
    mappings = (("", ("P_ss", "cn2")), ("_1", ("P_ss",)))
    on_cn2 = ((("P_ss", "DISK_GB", 11), ("cn2", "VCPU", 1)), mappings)
    on_p = ((("P", "VCPU", 1), ("P_ss", "DISK_GB", 11)), (("", ("P", "P_ss")), ("_1", ("P_ss",))))
    assert by_name(db, allocation_candidates(db, f"{query}&member_of=!{AGG_A}")) == {on_cn2}
    assert by_name(db, allocation_candidates(db, query)) == {on_cn2, on_p}


def test_root_required_may_be_given_once(shared: Cloud) -> None:
    """Placement: 400 "Query parameter 'root_required' may only be specified once"."""
    with pytest.raises(InvalidRequest) as err:
        allocation_candidates(
            shared.db,
            "resources=VCPU:1&root_required=HW_CPU_X86_AVX2&root_required=!CUSTOM_GOLD",
        )
    assert (err.value.code, err.value.token) == (
        "rpquery.request.duplicate_parameter",
        "root_required",
    )


# ------------------------------------------------------------------ rule 7


@pytest.fixture
def ratio_07(db: Database) -> Cloud:
    """cn: 10 VCPU at allocation_ratio 0.7 (0.699999988 in MariaDB's 32-bit FLOAT)."""
    with db.begin() as conn:
        cn = provider(conn, "cn", inventory={"VCPU": {"total": 10, "allocation_ratio": 0.7}})
    return Cloud(db, {"cn": cn})


def test_rule7_capacity_from_the_ratio_as_written_on_the_read_path(ratio_07: Cloud) -> None:
    db = ratio_07.db
    got = allocation_candidates(db, "resources=VCPU:7")
    assert by_name(db, got) == {((("cn", "VCPU", 7),), (("", ("cn",)),))}
    (summary,) = got.provider_summaries.values()
    assert summary.resources["VCPU"].capacity == 7
    assert allocation_candidates(db, "resources=VCPU:8").allocation_requests == ()
    assert listed(db, "resources=VCPU:7") == ["cn"]
    assert listed(db, "resources=VCPU:8") == []
    got = allocation_candidates(db, "resources_G=VCPU:4&resources_H=VCPU:3&group_policy=none")
    assert by_name(db, got) == {((("cn", "VCPU", 7),), (("_G", ("cn",)), ("_H", ("cn",))))}


def _claim(cn: Ref, amount: int) -> ConsumerAllocations:
    return ConsumerAllocations(
        consumer_uuid=new_uuid(),
        project_id="p",
        user_id="u",
        consumer_type="INSTANCE",
        consumer_generation=None,
        allocations={cn.uuid: {"VCPU": amount}},
    )


def test_rule7_the_write_path_checks_the_same_capacity(ratio_07: Cloud) -> None:
    db, cn = ratio_07.db, ratio_07.refs["cn"]
    with pytest.raises(CapacityExceeded) as err:
        replace_allocations(db, _claim(cn, 8))
    assert err.value.code == "rpquery.allocation.capacity_exceeded"
    replace_allocations(db, _claim(cn, 7))  # the last unit fits: 10 x 0.7 = 7
    got = allocation_candidates(db, "resources=VCPU:1")
    assert got.allocation_requests == ()
    (full,) = list_providers(db, "")
    assert listed(db, "resources=VCPU:1") == [] and full.name == "cn"


def test_rule7_the_reshaper_checks_the_same_capacity(ratio_07: Cloud) -> None:
    db, cn = ratio_07.db, ratio_07.refs["cn"]
    new_inventory = {"VCPU": Inventory(total=10, allocation_ratio=0.7)}
    with pytest.raises(CapacityExceeded):
        reshape(db, {cn.uuid: ProviderInventories(0, new_inventory)}, [_claim(cn, 8)])
    reshape(db, {cn.uuid: ProviderInventories(0, new_inventory)}, [_claim(cn, 7)])
    assert allocation_candidates(db, "resources=VCPU:1").allocation_requests == ()


# ------------------------------------------------------------------ resourceless + sharing


def test_resourceless_groups_may_map_to_sharing_providers(db: Database) -> None:
    """Found by the differential test: as any suffixed group, a resourceless group is
    satisfied by a provider of the anchor tree or by a sharing provider sharing with
    it, even one with no inventory of the requested classes (Placement's answers)."""
    with db.begin() as conn:
        for t in ("CUSTOM_GOLD", "CUSTOM_SILVER"):
            trait_id(conn, t)
        cn = provider(conn, "cn", inventory={"VCPU": 8}, aggregates=[AGG_S])
        provider(conn, "cn_numa0", parent=cn, inventory={"VCPU": 4}, traits=["CUSTOM_GOLD"])
        provider(
            conn,
            "ss",
            inventory={"DISK_GB": 100},
            traits=[*SHARES, "CUSTOM_GOLD"],
            aggregates=[AGG_S],
        )
        provider(
            conn,
            "ss2",
            inventory={"IPV4_ADDRESS": 10},
            traits=[*SHARES, "CUSTOM_SILVER"],
            aggregates=[AGG_S],
        )
        provider(conn, "cn2", inventory={"VCPU": 8})
    got = allocation_candidates(
        db,
        "resources=VCPU:1&resources_D=DISK_GB:1&required_G=CUSTOM_GOLD"
        "&same_subtree=_D,_G&group_policy=none",
    )
    assert by_name(db, got) == {
        (
            (("cn", "VCPU", 1), ("ss", "DISK_GB", 1)),
            (("", ("cn",)), ("_D", ("ss",)), ("_G", ("ss",))),
        ),
        (
            (("cn_numa0", "VCPU", 1), ("ss", "DISK_GB", 1)),
            (("", ("cn_numa0",)), ("_D", ("ss",)), ("_G", ("ss",))),
        ),
    }
    assert summarised(got) == {"cn", "cn_numa0", "ss"}
    got = allocation_candidates(
        db,
        "resources=VCPU:1&required_A=CUSTOM_SILVER&required_B=CUSTOM_SILVER"
        "&same_subtree=_A,_B&group_policy=none",
    )
    assert by_name(db, got) == {
        ((("cn", "VCPU", 1),), (("", ("cn",)), ("_A", ("ss2",)), ("_B", ("ss2",)))),
        ((("cn_numa0", "VCPU", 1),), (("", ("cn_numa0",)), ("_A", ("ss2",)), ("_B", ("ss2",)))),
    }
    # ss2 only stands for the resourceless groups: it is not summarised
    assert summarised(got) == {"cn", "cn_numa0"}
