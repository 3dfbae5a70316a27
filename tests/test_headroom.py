"""Capacity headroom (``headroom``, ``rpquery headroom``) on every backend: per host
and in total, SQL for one group, the search where groups interact, sharing providers
that hosts compete for, ``root_required`` and policies, ``--group-by``.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rpquery.aggregate_metadata.metadata import AggregateMetadataFilter, set_metadata
from rpquery.cli import main
from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.insight._headroom import Headroom, headroom
from tests.factories import allocate, provider

AGG_A = "aaaaaaaa-0000-4000-8000-000000000001"
AGG_S = "5a5a5a5a-0000-4000-8000-000000000005"
SHARES = ["MISC_SHARES_VIA_AGGREGATE"]


def counts(answer: Headroom) -> dict[str, int]:
    return {h.name or h.uuid: h.count for h in answer.hosts}


def test_one_group_in_sql_counts_free_room_units_and_usage(db: Database) -> None:
    with db.begin() as conn:
        provider(conn, "incl_cn8", inventory={"VCPU": 8, "MEMORY_MB": 4096})
        used = provider(conn, "incl_cn8_used3", inventory={"VCPU": 8, "MEMORY_MB": 4096})
        allocate(conn, "c1", used, "VCPU", 3)
        provider(
            conn,
            "incl_cn_ratio",
            inventory={"VCPU": {"total": 4, "allocation_ratio": 2.0}, "MEMORY_MB": 512},
        )
        provider(
            conn,
            "excl_max_unit",
            inventory={"VCPU": {"total": 8, "max_unit": 1}, "MEMORY_MB": 4096},
        )
        provider(conn, "excl_no_memory", inventory={"VCPU": 8})
    answer = headroom(db, "resources=VCPU:2,MEMORY_MB:256")
    assert answer.method == "sql"
    assert counts(answer) == {"incl_cn8": 4, "incl_cn_ratio": 2, "incl_cn8_used3": 2}
    assert answer.total == 8


def test_nested_unsuffixed_group_sums_every_provider_of_the_tree(db: Database) -> None:
    with db.begin() as conn:
        root = provider(conn, "incl_cn", inventory={"MEMORY_MB": 1024})
        provider(conn, "incl_cn_numa0", parent=root, inventory={"VCPU": 3})
        provider(conn, "incl_cn_numa1", parent=root, inventory={"VCPU": 5})
    assert counts(headroom(db, "resources=VCPU:2,MEMORY_MB:128")) == {"incl_cn": 3}
    # a granular group takes all its classes from one provider
    granular = headroom(db, "resources_G=VCPU:2")
    assert granular.method == "sql" and counts(granular) == {"incl_cn": 3}


def test_interacting_groups_use_the_search_and_find_the_best_packing(db: Database) -> None:
    """Each instance takes VCPU:1 from the root, a VF for _A (physnet A: nic0 or nic1)
    and a VF for _B (physnet B: nic0 only). Taking the first candidate again and again
    puts both VFs on nic0 and stops at 2; the best packing puts _A on nic1: 4."""
    with db.begin() as conn:
        root = provider(conn, "incl_cn", inventory={"VCPU": 8})
        both = ["CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B"]
        provider(conn, "incl_nic0", parent=root, inventory={"SRIOV_NET_VF": 4}, traits=both)
        provider(
            conn,
            "incl_nic1",
            parent=root,
            inventory={"SRIOV_NET_VF": 4},
            traits=["CUSTOM_PHYSNET_A"],
        )
    query = (
        "resources=VCPU:1&resources_A=SRIOV_NET_VF:1&required_A=CUSTOM_PHYSNET_A"
        "&resources_B=SRIOV_NET_VF:1&required_B=CUSTOM_PHYSNET_B&group_policy=none"
    )
    answer = headroom(db, query)
    assert answer.method == "search"
    assert counts(answer) == {"incl_cn": 4}


def test_hosts_competing_for_a_sharing_provider_count_it_once(db: Database) -> None:
    """Three hosts with 4 VCPUs each and no disk share a pool of 5 x 10 GB: each host
    alone could take 4 instances, the cloud only 5."""
    with db.begin() as conn:
        for i in range(3):
            provider(conn, f"incl_cn{i}", inventory={"VCPU": 4}, aggregates=[AGG_S])
        provider(conn, "pool", inventory={"DISK_GB": 50}, aggregates=[AGG_S], traits=SHARES)
    answer = headroom(db, "resources=VCPU:1,DISK_GB:10")
    assert counts(answer) == {"incl_cn0": 4, "incl_cn1": 4, "incl_cn2": 4}
    assert answer.total == 5
    assert [h.in_total for h in sorted(answer.hosts, key=lambda h: h.name or "")] == [4, 1, 0]
    # the same through the search (two groups): the pool is still counted once
    two = headroom(db, "resources=VCPU:1,DISK_GB:10&resources_X=VCPU:1&group_policy=none")
    assert two.method == "search"
    assert counts(two) == {"incl_cn0": 2, "incl_cn1": 2, "incl_cn2": 2} and two.total == 5


def test_own_disk_first_then_the_pool(db: Database) -> None:
    with db.begin() as conn:
        provider(conn, "incl_local", inventory={"VCPU": 4, "DISK_GB": 20}, aggregates=[AGG_S])
        provider(conn, "incl_remote", inventory={"VCPU": 4}, aggregates=[AGG_S])
        provider(conn, "pool", inventory={"DISK_GB": 30}, aggregates=[AGG_S], traits=SHARES)
    answer = headroom(db, "resources=VCPU:1,DISK_GB:10")
    assert counts(answer) == {"incl_local": 4, "incl_remote": 3}
    # incl_local takes its own 2 then 2 of the pool's 3; incl_remote gets the last one
    assert answer.total == 5


def test_root_required_and_policies_leave_hosts_out(db: Database) -> None:
    with db.begin() as conn:
        provider(conn, "incl_cn", inventory={"VCPU": 4}, aggregates=[AGG_A])
        provider(conn, "excl_policy", inventory={"VCPU": 4})
        provider(
            conn, "excl_root", inventory={"VCPU": 4}, aggregates=[AGG_A], traits=["CUSTOM_MAINT"]
        )
    set_metadata(db, AGG_A, {"ssd": "true"})
    policy = AggregateMetadataFilter({"aggregate_instance_extra_specs:ssd": "true"})
    answer = headroom(db, "resources=VCPU:1&root_required=!CUSTOM_MAINT", policies=[policy])
    assert counts(answer) == {"incl_cn": 4} and answer.total == 4


def test_group_by_aggregate_and_trait(db: Database) -> None:
    with db.begin() as conn:
        provider(conn, "cn1", inventory={"VCPU": 4}, aggregates=[AGG_A], traits=["CUSTOM_FAST"])
        provider(conn, "cn2", inventory={"VCPU": 2}, aggregates=[AGG_A])
        provider(conn, "cn3", inventory={"VCPU": 1})
    by_agg = headroom(db, "resources=VCPU:1", group_by="aggregate")
    assert [(g.label, g.hosts, g.count) for g in by_agg.groups] == [
        (AGG_A, 2, 6),
        ("(none)", 1, 1),
    ]
    by_trait = headroom(db, "resources=VCPU:1", group_by="trait")
    assert [(g.label, g.hosts, g.count) for g in by_trait.groups] == [
        ("CUSTOM_FAST", 1, 4),
        ("(none)", 2, 3),
    ]


def test_bad_group_by_is_invalid_request(db: Database) -> None:
    with pytest.raises(InvalidRequest) as exc:
        headroom(db, "resources=VCPU:1", group_by="rack")
    assert exc.value.code == "rpquery.request.bad_group_by"


def test_cli_headroom(db: Database) -> None:
    with db.begin() as conn:
        provider(conn, "cn1", inventory={"VCPU": 4}, aggregates=[AGG_A])
        provider(conn, "cn2", inventory={"VCPU": 2})
    url = db.url.render_as_string(hide_password=False)
    runner = CliRunner()
    text = runner.invoke(
        main, ["--db", url, "headroom", "resources=VCPU:1", "--group-by", "aggregate"]
    )
    assert text.exit_code == 0, text.output
    assert "6 more instances fit" in text.output and AGG_A in text.output
    js = runner.invoke(main, ["--db", url, "headroom", "--resources", "VCPU:2", "--json"])
    data = json.loads(js.output)
    assert data["total"] == 3 and data["method"] == "sql"
    assert {h["name"]: h["count"] for h in data["hosts"]} == {"cn1": 2, "cn2": 1}


def test_one_group_is_one_statement_whatever_the_hosts(db: Database) -> None:
    """A one-group request without sharing providers: the same statements for 3 hosts
    and for 30 (the counts per host come from one statement)."""

    def statements() -> int:
        with db.count_statements() as counter:
            headroom(db, "resources=VCPU:1,MEMORY_MB:256")
        return counter.count

    def add(first: int, last: int) -> None:
        with db.begin() as conn:
            for i in range(first, last):
                provider(conn, f"cn{i}", inventory={"VCPU": 4, "MEMORY_MB": 1024})

    add(0, 3)
    small = statements()
    add(3, 30)
    assert statements() == small
    assert headroom(db, "resources=VCPU:1,MEMORY_MB:256").total == 30 * 4
