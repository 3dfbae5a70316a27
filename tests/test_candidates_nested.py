"""Allocation candidates on nested trees and sharing providers, on every backend:
NUMA children, SR-IOV PF children, shared storage, granular groups (isolate / none),
same_subtree with resourceless groups, root_required, in_tree, aggregates on roots.

Modelled on Placement's ``test_allocation_candidates.py`` topologies; providers that
must appear are ``incl_*``, providers that must not are ``excl_*``.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rpquery.db import Database
from rpquery.read.candidates import AllocationCandidates, _render, allocation_candidates
from tests.factories import allocate, provider

AGG_S = "5a5a5a5a-0000-4000-8000-000000000001"
AGG_X = "5a5a5a5a-0000-4000-8000-000000000002"


def requests_by_name(result: AllocationCandidates) -> set[tuple[tuple[str, str, int], ...]]:
    """Each allocation request as sorted (provider name, class, amount) triples."""
    name = {u: s.name for u, s in result.provider_summaries.items()}
    return {
        tuple(
            sorted((name[u], rc, n) for u, res in ar.allocations.items() for rc, n in res.items())
        )
        for ar in result.allocation_requests
    }


def mappings_by_name(result: AllocationCandidates) -> list[dict[str, tuple[str, ...]]]:
    name = {u: s.name for u, s in result.provider_summaries.items()}
    return [
        {s: tuple(sorted(name[u] for u in us)) for s, us in ar.mappings.items()}
        for ar in result.allocation_requests
    ]


@pytest.fixture
def numa_pf(db: Database) -> Database:
    """cn1: root with MEMORY; two NUMA children with VCPU, each with one PF child.
    pf0 has CUSTOM_PHYSNET_A, pf1 CUSTOM_PHYSNET_B. cn2 (root AVX2) has no PFs."""
    with db.begin() as conn:
        cn1 = provider(conn, "incl_cn1", inventory={"MEMORY_MB": 4096}, aggregates=[AGG_X])
        for i in (0, 1):
            numa = provider(
                conn,
                f"incl_cn1_numa{i}",
                parent=cn1,
                inventory={"VCPU": 4},
                traits=["HW_NUMA_ROOT"],
            )
            provider(
                conn,
                f"incl_cn1_pf{i}",
                parent=numa,
                inventory={"SRIOV_NET_VF": 2},
                traits=[f"CUSTOM_PHYSNET_{'AB'[i]}"],
            )
        provider(
            conn, "excl_cn2", inventory={"VCPU": 8, "MEMORY_MB": 4096}, traits=["HW_CPU_X86_AVX2"]
        )
    return db


def test_numa_children_serve_unsuffixed_group_with_root(numa_pf: Database) -> None:
    got = allocation_candidates(numa_pf, "resources=VCPU:2,MEMORY_MB:512")
    assert requests_by_name(got) == {
        (("excl_cn2", "MEMORY_MB", 512), ("excl_cn2", "VCPU", 2)),
        (("incl_cn1", "MEMORY_MB", 512), ("incl_cn1_numa0", "VCPU", 2)),
        (("incl_cn1", "MEMORY_MB", 512), ("incl_cn1_numa1", "VCPU", 2)),
    }
    # summaries cover the whole tree of each returned candidate
    assert {s.name for s in got.provider_summaries.values()} >= {"incl_cn1_pf0", "incl_cn1_pf1"}


def test_root_required_and_forbidden(numa_pf: Database) -> None:
    got = allocation_candidates(numa_pf, "resources=VCPU:2&root_required=!HW_CPU_X86_AVX2")
    assert {n for r in requests_by_name(got) for n, _, _ in r} == {
        "incl_cn1_numa0",
        "incl_cn1_numa1",
    }
    got = allocation_candidates(numa_pf, "resources=VCPU:2&root_required=HW_CPU_X86_AVX2")
    assert requests_by_name(got) == {(("excl_cn2", "VCPU", 2),)}


def test_unsuffixed_traits_satisfied_collectively(numa_pf: Database) -> None:
    got = allocation_candidates(
        numa_pf, "resources=VCPU:1,SRIOV_NET_VF:1&required=HW_NUMA_ROOT,CUSTOM_PHYSNET_B"
    )
    assert {n for r in requests_by_name(got) for n, _, _ in r} == {
        "incl_cn1_numa0",
        "incl_cn1_numa1",
        "incl_cn1_pf1",
    }


def test_granular_sriov_isolate_and_none(numa_pf: Database) -> None:
    q = "resources_A=SRIOV_NET_VF:2&resources_B=SRIOV_NET_VF:1&group_policy="
    isolate = allocation_candidates(numa_pf, q + "isolate")
    assert mappings_by_name(isolate) and all(m["_A"] != m["_B"] for m in mappings_by_name(isolate))
    assert len(isolate.allocation_requests) == 2
    # none: the same PF may serve both only if its capacity holds the sum (2 + 1 > 2)
    none = allocation_candidates(numa_pf, q + "none")
    assert requests_by_name(none) == requests_by_name(isolate)
    small = allocation_candidates(
        numa_pf, "resources_A=SRIOV_NET_VF:1&resources_B=SRIOV_NET_VF:1&group_policy=none"
    )
    assert len(small.allocation_requests) == 4


def test_granular_required_trait_on_its_provider(numa_pf: Database) -> None:
    got = allocation_candidates(
        numa_pf,
        "resources=VCPU:1&resources_NET=SRIOV_NET_VF:1&required_NET=CUSTOM_PHYSNET_A",
    )
    assert {m["_NET"] for m in mappings_by_name(got)} == {("incl_cn1_pf0",)}


def test_same_subtree_with_resourceless_group(numa_pf: Database) -> None:
    got = allocation_candidates(
        numa_pf,
        "resources_CPU=VCPU:1&resources_NET=SRIOV_NET_VF:1&required_NET=CUSTOM_PHYSNET_B"
        "&required_NUMA=HW_NUMA_ROOT&same_subtree=_CPU,_NET,_NUMA&group_policy=none",
    )
    assert mappings_by_name(got) == [
        {"_CPU": ("incl_cn1_numa1",), "_NET": ("incl_cn1_pf1",), "_NUMA": ("incl_cn1_numa1",)}
    ]
    assert requests_by_name(got) == {
        (("incl_cn1_numa1", "VCPU", 1), ("incl_cn1_pf1", "SRIOV_NET_VF", 1))
    }


def test_in_tree_and_member_of_on_root(numa_pf: Database) -> None:
    cn1 = next(
        s.uuid
        for s in allocation_candidates(
            numa_pf, "resources=MEMORY_MB:1"
        ).provider_summaries.values()
        if s.name == "incl_cn1"
    )
    got = allocation_candidates(numa_pf, f"resources=VCPU:1&in_tree={cn1}")
    assert {n for r in requests_by_name(got) for n, _, _ in r} == {
        "incl_cn1_numa0",
        "incl_cn1_numa1",
    }
    # member_of on the root covers the NUMA children, which have no aggregate of their own
    got = allocation_candidates(numa_pf, f"resources=VCPU:1&member_of={AGG_X}")
    assert len(got.allocation_requests) == 2
    got = allocation_candidates(numa_pf, f"resources=VCPU:1&member_of=!{AGG_X}")
    assert requests_by_name(got) == {(("excl_cn2", "VCPU", 1),)}


@pytest.fixture
def shared_storage(db: Database) -> Database:
    """Two computes in AGG_S with a sharing DISK provider; cn3 outside it; a full
    second sharing provider."""
    with db.begin() as conn:
        provider(conn, "incl_cn1", inventory={"VCPU": 8}, aggregates=[AGG_S])
        provider(conn, "incl_cn2", inventory={"VCPU": 8, "DISK_GB": 10}, aggregates=[AGG_S])
        provider(conn, "excl_cn3", inventory={"VCPU": 8})
        provider(
            conn,
            "incl_ss",
            inventory={"DISK_GB": 1000},
            traits=["MISC_SHARES_VIA_AGGREGATE"],
            aggregates=[AGG_S],
        )
        full = provider(
            conn,
            "excl_ss_full",
            inventory={"DISK_GB": 100},
            traits=["MISC_SHARES_VIA_AGGREGATE"],
            aggregates=[AGG_S],
        )
        allocate(conn, "c-full", full, "DISK_GB", 100)
    return db


def test_sharing_provider_serves_trees_of_its_aggregate(shared_storage: Database) -> None:
    got = allocation_candidates(shared_storage, "resources=VCPU:1,DISK_GB:50")
    assert requests_by_name(got) == {
        (("incl_cn1", "VCPU", 1), ("incl_ss", "DISK_GB", 50)),
        (("incl_cn2", "VCPU", 1), ("incl_ss", "DISK_GB", 50)),
    }
    local = allocation_candidates(shared_storage, "resources=VCPU:1,DISK_GB:5")
    assert (("incl_cn2", "DISK_GB", 5), ("incl_cn2", "VCPU", 1)) in requests_by_name(local)


def test_sharing_only_request_and_forbidden_trait(shared_storage: Database) -> None:
    got = allocation_candidates(shared_storage, "resources=DISK_GB:50")
    assert requests_by_name(got) == {(("incl_ss", "DISK_GB", 50),)}
    assert all(ar.mappings == {"": ar.mappings[""]} for ar in got.allocation_requests)
    got = allocation_candidates(
        shared_storage, "resources=VCPU:1,DISK_GB:50&required=!MISC_SHARES_VIA_AGGREGATE"
    )
    assert got.allocation_requests == ()


def test_summed_amounts_across_groups_respect_capacity(db: Database) -> None:
    with db.begin() as conn:
        cn = provider(conn, "incl_cn", inventory={"VCPU": 4})
        allocate(conn, "c-1", cn, "VCPU", 1)
    ok = allocation_candidates(
        db, "resources=VCPU:1&resources_A=VCPU:1&resources_B=VCPU:1&group_policy=none"
    )
    assert requests_by_name(ok) == {(("incl_cn", "VCPU", 3),)}
    over = allocation_candidates(
        db, "resources=VCPU:2&resources_A=VCPU:1&resources_B=VCPU:1&group_policy=none"
    )
    assert over.allocation_requests == ()


def test_limit_on_nested_trees(numa_pf: Database) -> None:
    got = allocation_candidates(numa_pf, "resources=VCPU:1&limit=2")
    assert len(got.allocation_requests) == 2
    roots = {ar.root_uuid for ar in got.allocation_requests}
    assert {s.root_uuid for s in got.provider_summaries.values()} == roots


@pytest.mark.parametrize(
    "query",
    [
        "resources=VCPU:1,MEMORY_MB:512",  # several providers of one tree, one suffix
        "resources_A=SRIOV_NET_VF:1&resources_B=SRIOV_NET_VF:1&group_policy=none",  # merged
        "resources_CPU=VCPU:1&resources_NET=SRIOV_NET_VF:1&required_NUMA=HW_NUMA_ROOT"
        "&same_subtree=_CPU,_NET,_NUMA&group_policy=none",  # a resourceless group
    ],
)
def test_compact_rendering_equals_the_public_objects(numa_pf: Database, query: str) -> None:
    """``to_placement`` renders from the search's compact rows; it must match rendering
    the lazily built public dataclasses, key order included, and hand out fresh dicts."""
    got = allocation_candidates(numa_pf, query)
    body = got.to_placement()
    assert body["allocation_requests"]
    rebuilt = AllocationCandidates(got.allocation_requests, got.provider_summaries)
    assert list(body["provider_summaries"]) == sorted(body["provider_summaries"])
    assert repr(body) == repr(rebuilt.to_placement())
    assert got == rebuilt and got.allocation_requests is got.allocation_requests
    body["allocation_requests"][0]["mappings"].clear()
    next(iter(body["provider_summaries"].values()))["traits"].append("X")
    assert got.to_placement() == rebuilt.to_placement()
    with pytest.raises(AttributeError):
        got.allocation_requests = ()  # type: ignore[misc]


def _same_json(body: bytes, expected: Any) -> bool:
    """Equal content: lists in the same order, an object's keys in any order (a
    summary's resources come in the order the database wrote or returned them)."""
    return bool(orjson.loads(body) == expected)


@pytest.mark.parametrize(
    "query",
    [
        "resources=VCPU:1,MEMORY_MB:512",
        "resources_A=SRIOV_NET_VF:1&resources_B=SRIOV_NET_VF:1&group_policy=none",
        "resources_CPU=VCPU:1&resources_NET=SRIOV_NET_VF:1&required_NUMA=HW_NUMA_ROOT"
        "&same_subtree=_CPU,_NET,_NUMA&group_policy=none",
    ],
)
def test_json_body_equals_to_placement(numa_pf: Database, query: str) -> None:
    """``to_placement_json`` (one pass, shared parts, orjson) writes what ``to_placement``
    returns, from the compact rows and from the public objects alike; ``trait_key``
    orders each summary's traits, nothing else."""
    got = allocation_candidates(numa_pf, query)
    body = got.to_placement()
    assert body["allocation_requests"]
    assert _same_json(got.to_placement_json(), body)
    rebuilt = AllocationCandidates(got.allocation_requests, got.provider_summaries)
    assert _same_json(rebuilt.to_placement_json(), body)
    # the requests' templates write what the dicts with shared parts (the fallback for a
    # uuid that would need escaping) do
    text = _render.requests_json(got._request_rows)  # type: ignore[arg-type]
    assert text is not None
    shared = orjson.dumps(_render._shared_requests(got._request_rows))  # type: ignore[arg-type]
    assert _same_json(text.encode(), orjson.loads(shared))

    def custom_first(name: str) -> tuple[bool, str]:
        return not name.startswith("CUSTOM_"), name

    for summary in body["provider_summaries"].values():
        summary["traits"].sort(key=custom_first)
    assert any(s["traits"] for s in body["provider_summaries"].values())
    assert _same_json(got.to_placement_json(trait_key=custom_first), body)
    assert _same_json(rebuilt.to_placement_json(trait_key=custom_first), body)


def test_compact_rendering_with_sharing_providers(shared_storage: Database) -> None:
    for query in ("resources=VCPU:1,DISK_GB:50", "resources=DISK_GB:50"):
        got = allocation_candidates(shared_storage, query)
        rebuilt = AllocationCandidates(got.allocation_requests, got.provider_summaries)
        assert got.to_placement()["allocation_requests"]
        assert repr(got.to_placement()) == repr(rebuilt.to_placement())
        assert _same_json(got.to_placement_json(), got.to_placement())


def test_answers_leave_no_cyclic_garbage(numa_pf: Database) -> None:
    """Building and rendering an answer creates no reference cycles: everything is
    freed by reference counting (a cycle per anchor tree once made the cyclic GC
    collect ~95k objects after each whole-cloud answer)."""
    import gc

    query = (
        "resources=VCPU:1,MEMORY_MB:512&resources_NET=SRIOV_NET_VF:1"
        "&required_NET=CUSTOM_PHYSNET_A&group_policy=none"
    )
    allocation_candidates(numa_pf, query).to_placement()  # warm caches (statements, names)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        for _ in range(3):
            result = allocation_candidates(numa_pf, query)
            assert result.to_placement()["allocation_requests"]
            assert result.allocation_requests and result.provider_summaries
            del result
        assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()


def test_exclude_nested_keeps_one_provider_per_tree(db: Database) -> None:
    """Placement before 1.29 is blind to trees: a request taking from two providers of
    one tree goes, with the summaries only it used; a flat request on a root and a
    sharing provider stays."""
    from rpquery.read.candidates import exclude_nested
    from rpquery.write.providers import has_nested

    assert not has_nested(db)
    with db.begin() as conn:
        flat = provider(
            conn, "incl_flat", inventory={"VCPU": 4, "DISK_GB": 100}, aggregates=[AGG_S]
        )
        provider(
            conn,
            "incl_ss",
            inventory={"DISK_GB": 100},
            aggregates=[AGG_S],
            traits=["MISC_SHARES_VIA_AGGREGATE"],
        )
        tree = provider(conn, "excl_tree", inventory={"DISK_GB": 100})
        provider(conn, "excl_tree_numa", parent=tree, inventory={"VCPU": 4})
        assert flat.id != tree.id
    assert has_nested(db)
    full = allocation_candidates(db, "resources=VCPU:1,DISK_GB:10")
    assert ("excl_tree", "DISK_GB", 10) in {t for r in requests_by_name(full) for t in r}
    blind = exclude_nested(full)
    assert requests_by_name(blind) == {
        (("incl_flat", "DISK_GB", 10), ("incl_flat", "VCPU", 1)),
        (("incl_flat", "VCPU", 1), ("incl_ss", "DISK_GB", 10)),
    }
    assert {s.name for s in blind.provider_summaries.values()} == {"incl_flat", "incl_ss"}
    limited = exclude_nested(full, limit=1)
    assert len(limited.allocation_requests) == 1
    used = set(limited.allocation_requests[0].allocations)
    assert set(limited.provider_summaries) == used


def test_granular_member_of_is_the_providers_own(db: Database) -> None:
    """An aggregate on the root spans the tree for the unsuffixed group only; a granular
    group's member_of needs the provider itself in it (Placement bug 1792503)."""
    with db.begin() as conn:
        cn = provider(conn, "incl_cn", aggregates=[AGG_X])
        provider(conn, "incl_numa", parent=cn, inventory={"VCPU": 4})
    assert (
        len(allocation_candidates(db, f"resources=VCPU:1&member_of={AGG_X}").allocation_requests)
        == 1
    )
    granular = allocation_candidates(db, f"resources1=VCPU:1&member_of1={AGG_X}")
    assert granular.allocation_requests == ()


def test_isolate_counts_resourceless_groups(db: Database) -> None:
    """group_policy=isolate keeps every suffixed group on its own provider, resourceless
    ones too (Placement counts them)."""
    with db.begin() as conn:
        cn = provider(conn, "incl_cn")
        provider(
            conn, "incl_pf", parent=cn, inventory={"SRIOV_NET_VF": 8}, traits=["CUSTOM_PHYSNET1"]
        )
    query = "resources_A=SRIOV_NET_VF:1&required_B=CUSTOM_PHYSNET1&same_subtree=_A,_B"
    assert len(allocation_candidates(db, query + "&group_policy=none").allocation_requests) == 1
    assert allocation_candidates(db, query + "&group_policy=isolate").allocation_requests == ()
