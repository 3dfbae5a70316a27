"""Rejection reasons (``explain_no_candidates``, ``rpquery why``) on every backend.

One scenario per reason: hosts that must fit are named ``incl_*``, hosts excluded for
a reason are named ``excl_<reason>*``; every test checks the counts add up to the
number of hosts and each host is counted under its first reason.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rpquery.aggregate_metadata.metadata import AggregateMetadataFilter, set_metadata
from rpquery.cli import main
from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.insight import _why as why
from rpquery.insight._why import Rejections, explain_no_candidates
from rpquery.read.candidates import allocation_candidates
from rpquery.store import dialects
from tests.factories import allocate, provider

AGG_A = "aaaaaaaa-0000-4000-8000-000000000001"
AGG_X = "dddddddd-0000-4000-8000-000000000004"
COMPUTE = {"VCPU": 8, "MEMORY_MB": 4096}


def by_code(answer: Rejections) -> dict[str, set[str]]:
    """Reason code → names of its example hosts (every test keeps counts ≤ examples)."""
    out: dict[str, set[str]] = {}
    for r in answer.reasons:
        assert r.count == len(r.examples)
        out.setdefault(r.code, set()).update(h.name or "" for h in r.examples)
    return out


def check_totals(answer: Rejections) -> None:
    assert answer.fit + sum(r.count for r in answer.reasons) == answer.hosts


def fitting(answer: Rejections) -> set[str]:
    return {h.name or "" for h in answer.fit_examples}


@pytest.fixture
def filters_cloud(db: Database) -> Database:
    """One host per single-group reason, for the request of :data:`FILTERS_QUERY`."""
    fast = ["CUSTOM_FAST"]
    with db.begin() as conn:
        provider(conn, "incl_cn", inventory=COMPUTE, aggregates=[AGG_A], traits=fast)
        provider(conn, "excl_member_of", inventory=COMPUTE, traits=fast)
        provider(conn, "excl_forbidden_aggregate", inventory=COMPUTE, aggregates=[AGG_A, AGG_X])
        provider(conn, "excl_required_trait", inventory=COMPUTE, aggregates=[AGG_A])
        provider(
            conn,
            "excl_forbidden_trait",
            inventory=COMPUTE,
            aggregates=[AGG_A],
            traits=["CUSTOM_FAST", "CUSTOM_SLOW"],
        )
        provider(conn, "excl_no_inventory", inventory={"VCPU": 8}, aggregates=[AGG_A], traits=fast)
        busy = provider(
            conn, "excl_no_capacity", inventory=COMPUTE, aggregates=[AGG_A], traits=fast
        )
        allocate(conn, "c-busy", busy, "VCPU", 7)
        provider(
            conn,
            "excl_unit_limits",
            inventory={"VCPU": {"total": 8, "step_size": 4}, "MEMORY_MB": 4096},
            aggregates=[AGG_A],
            traits=fast,
        )
        provider(
            conn,
            "excl_root_required",
            inventory=COMPUTE,
            aggregates=[AGG_A],
            traits=["CUSTOM_FAST", "CUSTOM_MAINT"],
        )
        # fails member_of and capacity: counted under member_of only
        other = provider(conn, "excl_member_of_and_full", inventory=COMPUTE, traits=fast)
        allocate(conn, "c-other", other, "VCPU", 8)
    return db


FILTERS_QUERY = (
    f"resources=VCPU:2,MEMORY_MB:512&member_of={AGG_A}&member_of=!{AGG_X}"
    "&required=CUSTOM_FAST,!CUSTOM_SLOW&root_required=!CUSTOM_MAINT"
)


def test_each_single_group_reason_in_filter_order(filters_cloud: Database) -> None:
    answer = explain_no_candidates(filters_cloud, FILTERS_QUERY)
    check_totals(answer)
    assert answer.hosts == 10 and answer.fit == 1
    assert fitting(answer) == {"incl_cn"}
    assert [r.code for r in answer.reasons] == [
        "member_of",
        "forbidden_aggregate",
        "required_trait",
        "forbidden_trait",
        "no_inventory",
        "no_capacity",
        "unit_limits",
        "root_required",
    ]
    codes = by_code(answer)
    assert codes["member_of"] == {"excl_member_of", "excl_member_of_and_full"}
    for code in codes.keys() - {"member_of"}:
        assert codes[code] == {f"excl_{code}"}
    reasons = {r.code: r for r in answer.reasons}
    assert reasons["no_inventory"].detail == "MEMORY_MB"
    assert reasons["no_capacity"].detail == "VCPU"
    assert reasons["no_capacity"].largest_free == 1
    assert reasons["root_required"].detail == "!CUSTOM_MAINT"


def test_fit_hosts_are_the_candidates_hosts(filters_cloud: Database) -> None:
    answer = explain_no_candidates(filters_cloud, FILTERS_QUERY, examples=100)
    result = allocation_candidates(filters_cloud, FILTERS_QUERY)
    roots = {ar.root_uuid for ar in result.allocation_requests}
    assert {h.uuid for h in answer.fit_examples} == roots


def test_host_without_the_classes_counts_under_its_first_failing_filter(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host with none of the requested classes is told apart by its providers'
    filters (member_of, required, forbidden come before no_inventory), counted in SQL
    and per host alike."""
    disk = {"DISK_GB": 100}
    fast = ["CUSTOM_FAST"]
    with db.begin() as conn:
        provider(conn, "incl_cn", inventory=COMPUTE, aggregates=[AGG_A], traits=fast)
        provider(conn, "excl_member_of", inventory=disk, traits=fast)
        provider(conn, "excl_required_trait", inventory=disk, aggregates=[AGG_A])
        provider(
            conn,
            "excl_forbidden_trait",
            inventory=disk,
            aggregates=[AGG_A],
            traits=["CUSTOM_FAST", "CUSTOM_SLOW"],
        )
        provider(conn, "excl_no_inventory", inventory=disk, aggregates=[AGG_A], traits=fast)
        # nothing anywhere in the tree; the child has the trait, the root the aggregate
        bare = provider(conn, "excl_no_inventory_nested", aggregates=[AGG_A])
        provider(conn, "excl_no_inventory_nested_child", parent=bare, traits=fast)
    query = f"resources=VCPU:1,MEMORY_MB:64&member_of={AGG_A}&required=CUSTOM_FAST,!CUSTOM_SLOW"
    answer = explain_no_candidates(db, query)
    check_totals(answer)
    assert answer.hosts == 6 and fitting(answer) == {"incl_cn"}
    codes = by_code(answer)
    assert codes.pop("no_inventory") == {"excl_no_inventory", "excl_no_inventory_nested"}
    assert codes == {c: {f"excl_{c}"} for c in ("member_of", "required_trait", "forbidden_trait")}
    assert {r.code: r.detail for r in answer.reasons}["no_inventory"] == "MEMORY_MB"
    monkeypatch.setattr(why, "counted_in_sql", lambda *_: False)
    assert explain_no_candidates(db, query) == answer


def test_in_tree_first(db: Database) -> None:
    with db.begin() as conn:
        incl = provider(conn, "incl_cn", inventory=COMPUTE)
        provider(conn, "excl_in_tree", inventory=COMPUTE, traits=["CUSTOM_SLOW"])
    answer = explain_no_candidates(db, f"resources=VCPU:1&in_tree={incl.uuid}")
    check_totals(answer)
    assert fitting(answer) == {"incl_cn"}
    assert by_code(answer) == {"in_tree": {"excl_in_tree"}}


def test_nested_unsuffixed_traits_are_collective(db: Database) -> None:
    """The required trait on the provider of VCPU, MEMORY_MB on its child: the host
    fits (the providers used have the trait between them)."""
    with db.begin() as conn:
        root = provider(conn, "incl_cn", inventory={"VCPU": 8}, traits=["CUSTOM_FAST"])
        provider(conn, "incl_cn_numa0", parent=root, inventory={"MEMORY_MB": 512})
        provider(conn, "excl_required_trait", inventory=COMPUTE)
    answer = explain_no_candidates(db, "resources=VCPU:1,MEMORY_MB:64&required=CUSTOM_FAST")
    check_totals(answer)
    assert fitting(answer) == {"incl_cn"}
    assert by_code(answer) == {"required_trait": {"excl_required_trait"}}


def test_no_single_provider_for_a_suffixed_group(db: Database) -> None:
    with db.begin() as conn:
        good = provider(conn, "incl_cn", inventory={"VCPU": 8})
        provider(conn, "incl_cn_gpu", parent=good, inventory={"VGPU": 2, "CUSTOM_VGPU_TYPE": 2})
        split = provider(conn, "excl_no_single_provider", inventory={"VCPU": 8})
        provider(conn, "excl_nsp_gpu", parent=split, inventory={"VGPU": 2})
        provider(conn, "excl_nsp_type", parent=split, inventory={"CUSTOM_VGPU_TYPE": 2})
    answer = explain_no_candidates(db, "resources=VCPU:1&resources_G=VGPU:1,CUSTOM_VGPU_TYPE:1")
    check_totals(answer)
    assert fitting(answer) == {"incl_cn"}
    assert by_code(answer) == {"no_single_provider": {"excl_no_single_provider"}}
    assert answer.reasons[0].group == "_G"


def test_group_policy_isolate_then_same_subtree(db: Database) -> None:
    """Two one-VF groups: isolate needs two NICs; same_subtree needs a NIC under the
    NUMA node the resourceless group picks."""
    with db.begin() as conn:
        ok = provider(conn, "incl_cn", inventory={"VCPU": 8})
        numa = provider(conn, "incl_cn_numa", parent=ok, traits=["CUSTOM_NUMA"])
        provider(conn, "incl_cn_nic0", parent=numa, inventory={"SRIOV_NET_VF": 4})
        provider(conn, "incl_cn_nic1", parent=numa, inventory={"SRIOV_NET_VF": 4})
        one = provider(conn, "excl_group_policy_isolate", inventory={"VCPU": 8})
        numa1 = provider(conn, "excl_isolate_numa", parent=one, traits=["CUSTOM_NUMA"])
        provider(conn, "excl_isolate_nic", parent=numa1, inventory={"SRIOV_NET_VF": 4})
        apart = provider(conn, "excl_same_subtree", inventory={"VCPU": 8})
        provider(conn, "excl_ss_numa", parent=apart, traits=["CUSTOM_NUMA"])
        provider(conn, "excl_ss_nic0", parent=apart, inventory={"SRIOV_NET_VF": 4})
        provider(conn, "excl_ss_nic1", parent=apart, inventory={"SRIOV_NET_VF": 4})
    query = (
        "resources=VCPU:1&resources_A=SRIOV_NET_VF:1&resources_B=SRIOV_NET_VF:1"
        "&required_N=CUSTOM_NUMA&same_subtree=_A,_B,_N&group_policy=isolate"
    )
    answer = explain_no_candidates(db, query)
    check_totals(answer)
    assert fitting(answer) == {"incl_cn"}
    assert by_code(answer) == {
        "group_policy_isolate": {"excl_group_policy_isolate"},
        "same_subtree": {"excl_same_subtree"},
    }


def test_groups_together_over_capacity(db: Database) -> None:
    with db.begin() as conn:
        provider(conn, "incl_cn", inventory={"VCPU": 8})
        provider(conn, "excl_groups_together", inventory={"VCPU": 3})
    answer = explain_no_candidates(db, "resources=VCPU:2&resources_1=VCPU:2&group_policy=none")
    check_totals(answer)
    assert fitting(answer) == {"incl_cn"}
    assert by_code(answer) == {"groups_together": {"excl_groups_together"}}


def test_sharing_provider_counts_for_its_hosts(db: Database) -> None:
    with db.begin() as conn:
        provider(conn, "incl_cn", inventory={"VCPU": 8}, aggregates=[AGG_A])
        provider(conn, "excl_no_inventory", inventory={"VCPU": 8})
        provider(
            conn,
            "ss",
            inventory={"DISK_GB": 100},
            aggregates=[AGG_A],
            traits=["MISC_SHARES_VIA_AGGREGATE"],
        )
    answer = explain_no_candidates(db, "resources=VCPU:1,DISK_GB:10")
    check_totals(answer)
    assert fitting(answer) == {"incl_cn"}
    assert by_code(answer) == {"no_inventory": {"excl_no_inventory", "ss"}}


def test_policy_after_everything_else(db: Database) -> None:
    with db.begin() as conn:
        provider(conn, "incl_cn", inventory={"VCPU": 8}, aggregates=[AGG_A])
        provider(conn, "excl_policy", inventory={"VCPU": 8})
        provider(conn, "excl_no_capacity", inventory={"VCPU": 1})
    set_metadata(db, AGG_A, {"ssd": "true"})
    policy = AggregateMetadataFilter({"aggregate_instance_extra_specs:ssd": "true"})
    answer = explain_no_candidates(db, "resources=VCPU:2", policies=[policy])
    check_totals(answer)
    assert fitting(answer) == {"incl_cn"}
    assert by_code(answer) == {
        "no_capacity": {"excl_no_capacity"},
        "policy": {"excl_policy"},
    }
    assert answer.reasons[-1].detail == "AggregateMetadataFilter"


def test_examples_are_capped_but_counts_are_not(db: Database) -> None:
    with db.begin() as conn:
        for i in range(5):
            provider(conn, f"excl_no_capacity{i}", inventory={"VCPU": 1})
    answer = explain_no_candidates(db, "resources=VCPU:2", examples=2)
    assert answer.fit == 0 and answer.reasons[0].count == 5
    assert len(answer.reasons[0].examples) == 2
    assert answer.summary() == "0/5 hosts fit: 5 no_capacity VCPU (largest free 1)"
    # the same request with more examples (a statement cached per request shape)
    assert len(explain_no_candidates(db, "resources=VCPU:2", examples=4).reasons[0].examples) == 4


def test_bad_request_is_invalid_request(db: Database) -> None:
    with pytest.raises(InvalidRequest) as exc:
        explain_no_candidates(db, "resources=VCPU:1&required=CUSTOM_NOPE")
    assert exc.value.code == "rpquery.trait.not_found"


def test_cli_why(filters_cloud: Database) -> None:
    url = filters_cloud.url.render_as_string(hide_password=False)
    runner = CliRunner()
    text = runner.invoke(main, ["--db", url, "why", FILTERS_QUERY])
    assert text.exit_code == 0, text.output
    assert "1/10 hosts fit" in text.output and "excl_unit_limits" in text.output
    js = runner.invoke(main, ["--db", url, "why", FILTERS_QUERY, "--json"])
    data = json.loads(js.output)
    assert data["fit"] == 1 and data["reasons"][0]["code"] == "member_of"


def test_statements_do_not_grow_with_hosts(db: Database) -> None:
    """One grouped statement per request group, whatever the number of hosts: the same
    statements for 3 hosts and for 30 (one group counted in SQL, and two groups)."""
    one = "resources=VCPU:4,MEMORY_MB:512&required=!CUSTOM_SLOW"
    two = one + "&resources_1=VCPU:1&group_policy=none"

    def statements(query: str) -> int:
        with db.count_statements() as counter:
            explain_no_candidates(db, query)
        return counter.count

    def add(first: int, last: int) -> None:
        with db.begin() as conn:
            for i in range(first, last):
                traits = ["CUSTOM_SLOW"] if i % 3 == 0 else []
                host = provider(conn, f"cn{i}", inventory={"VCPU": 2 + i % 4}, traits=traits)
                provider(conn, f"cn{i}_numa", parent=host, inventory={"MEMORY_MB": 1024})

    add(0, 3)
    small = statements(one), statements(two)
    add(3, 30)
    assert (statements(one), statements(two)) == small
    assert explain_no_candidates(db, one).hosts == 30


def test_every_statement_is_captured_and_explained(filters_cloud: Database) -> None:
    """``capture_selects`` sees the grouped statement (on MariaDB under ``SET STATEMENT
    ... FOR``) and each backend explains every statement sent
    (:func:`rpquery.store.dialects.explain_sql`)."""
    db = filters_cloud
    _, sent = db.capture_selects(lambda: explain_no_candidates(db, FILTERS_QUERY))
    assert any("FROM inventories AS inv LEFT OUTER JOIN" in sql for sql, _ in sent), sent
    with db.connect() as conn:
        for sql, params in sent:
            plan = conn.exec_driver_sql(dialects.explain_sql(db.dialect_name, sql), params)
            assert plan.all(), sql
