"""Server groups (docs/server-groups.md): validation, storage, member hosts, hard filters
and soft weights.

Scheduling through the candidate query and the write path is in ``test_scheduling.py``;
here the policy is exercised on its own, against topologies built with the factories.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result
from sqlalchemy.dialects import mysql, postgresql, sqlite

from rpquery.cli import main
from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate, Conflict, InvalidRequest, NotFound
from rpquery.server_groups import groups as sg
from rpquery.server_groups import weighers as w
from rpquery.store.tables import resource_providers as rp
from tests.factories import Ref, allocate, new_uuid, provider


def _hosts(db: Database, n: int, vcpu: int = 8) -> list[Ref]:
    with db.begin() as conn:
        return [provider(conn, f"cn{i}", inventory={"VCPU": vcpu}) for i in range(n)]


def _place(db: Database, group: sg.ServerGroup, *pairs: tuple[str, Ref]) -> None:
    """Allocate one VCPU for each (instance, host) and make the instances members."""
    with db.begin() as conn:
        for instance, host in pairs:
            allocate(conn, instance, host, "VCPU", 1)
    sg.add_members(db, group.uuid, [i for i, _ in pairs])


def _passing(db: Database, policy: sg.ServerGroupPolicy, hosts: Sequence[Ref]) -> list[str]:
    """Names of the hosts the policy's ``where`` clause lets through."""
    clause = policy.where(rp.c.id)
    stmt = sa.select(rp.c.name).where(rp.c.id.in_([h.id for h in hosts])).order_by(rp.c.name)
    if clause is not None:
        stmt = stmt.where(clause)
    with db.connect() as conn:
        return list(conn.execute(stmt).scalars())


def _group(db: Database, policy: str, **rules: int) -> sg.ServerGroup:
    return sg.create_group(db, f"g-{policy}", [policy], "proj", "user", rules or None)


# ---------------------------------------------------------------- validation (no database)


@pytest.mark.parametrize(
    ("policies", "rules", "code", "token"),
    [
        ([], None, "no_policy", ""),
        (["affinity", "anti-affinity"], None, "multiple_policies", "anti-affinity"),
        (["soft-affinity", "soft-affinity"], None, "multiple_policies", "soft-affinity"),
        (["affinty"], None, "unknown_policy", "affinty"),
        (["affinity", "spread"], None, "unknown_policy", "spread"),
        (["affinity"], {"max_server_per_host": 2}, "rule_not_allowed", "max_server_per_host"),
        (["soft-anti-affinity"], {"max_server_per_host": 2}, "rule_not_allowed", None),
        (["anti-affinity"], {"max_servers": 2}, "unknown_rule", "max_servers"),
        (["anti-affinity"], {"max_server_per_host": 0}, "bad_rule_value", "0"),
        (["anti-affinity"], {"max_server_per_host": "two"}, "bad_rule_value", "two"),
        (["anti-affinity"], {"max_server_per_host": True}, "bad_rule_value", "True"),
    ],
)
def test_invalid_groups_are_rejected(policies, rules, code, token) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidRequest) as info:
        sg.validate_group("g", policies, "proj", "user", rules)
    assert info.value.code == f"rpquery.server_group.{code}"
    if token is not None:
        assert info.value.token == token


def test_valid_groups_and_defaults() -> None:
    assert sg.validate_group("g", "anti-affinity", "p", "u").max_server_per_host == 1
    spec = sg.validate_group("g", ["anti-affinity"], "p", "u", {"max_server_per_host": "3"})
    assert spec.max_server_per_host == 3
    assert sg.validate_group(" g ", ["soft-affinity"], "p", "u").max_server_per_host is None
    with pytest.raises(InvalidRequest) as info:
        sg.validate_group("  ", ["affinity"], "p", "u")
    assert info.value.code == "rpquery.server_group.bad_name"


def test_hard_filters_compile_on_every_dialect() -> None:
    group = sg.ServerGroup(7, new_uuid(), "g", "p", "u", "anti-affinity", 3, 0)
    policy = sg.ServerGroupPolicy(group, moving_instance=new_uuid(), exclude_hosts=(new_uuid(),))
    clause = policy.where(rp.c.id)
    assert clause is not None
    for dialect in (sqlite.dialect(), postgresql.dialect(), mysql.dialect()):
        sql = str(sa.select(rp.c.id).where(clause).compile(dialect=dialect))
        assert "NOT IN" in sql and "HAVING count(DISTINCT" in sql
    assert not policy.needs_all_candidates


# ---------------------------------------------------------------- storage


def test_create_show_and_member_hosts(db: Database) -> None:
    vm = new_uuid()
    with db.begin() as conn:
        cn1 = provider(conn, "incl_cn1", inventory={"VCPU": 8})
        numa = provider(conn, "incl_cn1_numa0", parent=cn1, inventory={"VCPU": 4})
        shared = provider(conn, "excl_shared_disk", inventory={"DISK_GB": 100},
                          traits=["MISC_SHARES_VIA_AGGREGATE"])  # fmt: skip
        allocate(conn, vm, numa, "VCPU", 1)
        allocate(conn, vm, shared, "DISK_GB", 10)
    group = _group(db, "anti-affinity", max_server_per_host=3)
    unplaced = new_uuid()
    sg.add_members(db, group.uuid, [vm, unplaced])

    detail = sg.show_group(db, group.uuid)

    assert detail.group.rules == {"max_server_per_host": 3}
    by_instance = {m.instance_uuid: [h.name for h in m.hosts] for m in detail.members}
    assert by_instance == {vm: ["incl_cn1"], unplaced: []}
    data = detail.as_dict()
    assert data["policy"] == "anti-affinity" and len(data["members"]) == 2


def test_membership_changes(db: Database) -> None:
    group = _group(db, "soft-affinity")
    other = _group(db, "affinity")
    vm1, vm2 = new_uuid(), new_uuid()
    assert sg.add_members(db, group.uuid, [vm1]).generation == 1
    assert sg.add_members(db, group.uuid, [vm1, vm2]).generation == 2  # idempotent for vm1
    with pytest.raises(Conflict) as info:
        sg.add_members(db, other.uuid, [vm2])
    assert info.value.code == "rpquery.server_group.member_conflict" and info.value.token == vm2
    sg.remove_members(db, group.uuid, [vm1, new_uuid()])
    assert [m.instance_uuid for m in sg.show_group(db, group.uuid).members] == [vm2]
    with db.begin() as conn, pytest.raises(ConcurrentUpdate):
        sg.add_members_conn(conn, group, [new_uuid()])  # stale generation
    sg.delete_group(db, group.uuid)
    with pytest.raises(NotFound) as missing:
        sg.get_group(db, group.uuid)
    assert missing.value.code == "rpquery.server_group.not_found"


def test_create_rejects_taken_uuid_and_bad_input_before_the_database(db: Database) -> None:
    group = _group(db, "affinity")
    with pytest.raises(Conflict) as info:
        sg.create_group(db, "again", ["affinity"], "p", "u", group_uuid=group.uuid)
    assert info.value.code == "rpquery.server_group.exists"
    with db.count_statements() as counter, pytest.raises(InvalidRequest):
        sg.create_group(db, "bad", ["affinity", "soft-affinity"], "p", "u")
    assert counter.count == 0


# ---------------------------------------------------------------- member counts


def test_member_counts_are_one_grouped_statement(db: Database) -> None:
    hosts = _hosts(db, 4)
    group = _group(db, "soft-anti-affinity")
    vms = [new_uuid() for _ in range(4)]
    _place(
        db, group, (vms[0], hosts[0]), (vms[1], hosts[0]), (vms[2], hosts[1]), (vms[3], hosts[3])
    )
    candidates = [h.id for h in hosts[:3]]
    with db.connect() as conn, db.count_statements() as counter:
        counts = sg.member_counts(conn, group.id, candidates)
        moving = sg.member_counts(conn, group.id, candidates, exclude_instance=vms[0])
        unbound = sg.member_counts(conn, group.id, candidates, bind_up_to=0)
    assert counter.count == 3
    assert counts == unbound == {hosts[0].id: 2, hosts[1].id: 1}
    assert moving == {hosts[0].id: 1, hosts[1].id: 1}
    assert "IN (" not in counter.statements[2].upper().split("WHERE", 1)[1]


# ---------------------------------------------------------------- hard policies


def test_affinity_first_member_anywhere_then_only_its_host(db: Database) -> None:
    hosts = _hosts(db, 3)
    group = _group(db, "affinity")
    assert _passing(db, sg.ServerGroupPolicy(group), hosts) == ["cn0", "cn1", "cn2"]
    vm = new_uuid()
    _place(db, group, (vm, hosts[1]))
    assert _passing(db, sg.ServerGroupPolicy(group), hosts) == ["cn1"]
    # The sole member moving: its own host does not bind it; migrate excludes it.
    moving = sg.ServerGroupPolicy(group, moving_instance=vm, exclude_hosts=(hosts[1].uuid,))
    assert _passing(db, moving, hosts) == ["cn0", "cn2"]


@pytest.mark.parametrize(("limit", "expected"), [(1, ["cn2"]), (3, ["cn1", "cn2"])])
def test_anti_affinity_max_server_per_host(db: Database, limit: int, expected: list[str]) -> None:
    hosts = _hosts(db, 3)
    group = _group(db, "anti-affinity", max_server_per_host=limit)
    vms = [new_uuid() for _ in range(5)]
    # cn0 holds 3 members, cn1 holds 1, cn2 none.
    _place(
        db,
        group,
        (vms[0], hosts[0]),
        (vms[1], hosts[0]),
        (vms[2], hosts[0]),
        (vms[3], hosts[1]),
    )
    assert _passing(db, sg.ServerGroupPolicy(group), hosts) == expected
    # Moving one of cn0's members: it no longer counts there.
    moving = _passing(db, sg.ServerGroupPolicy(group, moving_instance=vms[0]), hosts)
    assert moving == (["cn2"] if limit == 1 else ["cn0", "cn1", "cn2"])


# ---------------------------------------------------------------- soft weights


def _weights(db: Database, policy: sg.ServerGroupPolicy, hosts: Sequence[Ref]) -> list[float]:
    with db.connect() as conn:
        weights = policy.weigh(conn, [h.id for h in hosts]) or {}
    return [round(weights.get(h.id, 0.0), 6) for h in hosts]


def test_soft_weights_normalised_and_multiplied(db: Database) -> None:
    hosts = _hosts(db, 4)
    affinity = _group(db, "soft-affinity")
    anti = _group(db, "soft-anti-affinity")
    a = [new_uuid() for _ in range(3)]
    b = [new_uuid() for _ in range(3)]
    _place(db, affinity, (a[0], hosts[0]), (a[1], hosts[0]), (a[2], hosts[1]))
    _place(db, anti, (b[0], hosts[0]), (b[1], hosts[0]), (b[2], hosts[1]))

    assert _weights(db, sg.ServerGroupPolicy(affinity), hosts) == [1.0, 0.5, 0.0, 0.0]
    assert _weights(db, sg.ServerGroupPolicy(anti), hosts) == [0.0, 0.5, 1.0, 1.0]
    doubled = w.WeigherConfig.build(w.KNOWN_WEIGHERS, {w.SOFT_ANTI_AFFINITY: 2})
    assert _weights(db, sg.ServerGroupPolicy(anti, doubled), hosts) == [0.0, 1.0, 2.0, 2.0]
    # Only the candidate hosts take part in the min–max.
    assert _weights(db, sg.ServerGroupPolicy(affinity), hosts[1:]) == [1.0, 0.0, 0.0]


def test_equal_counts_and_zero_multiplier_give_no_preference(db: Database) -> None:
    hosts = _hosts(db, 3)
    group = _group(db, "soft-affinity")
    _place(db, group, *((new_uuid(), h) for h in hosts))  # one member on every host
    assert _weights(db, sg.ServerGroupPolicy(group), hosts) == [0.0, 0.0, 0.0]
    zero = w.WeigherConfig.build(w.KNOWN_WEIGHERS, {w.SOFT_AFFINITY: 0})
    policy = sg.ServerGroupPolicy(group, zero)
    assert not policy.needs_all_candidates  # limit can stay in SQL
    with db.connect() as conn:
        assert policy.weigh(conn, [h.id for h in hosts]) is None


def test_soft_policy_needs_its_weigher(db: Database) -> None:
    group = _group(db, "soft-anti-affinity")
    only_affinity = w.WeigherConfig.build([w.SOFT_AFFINITY])
    with pytest.raises(InvalidRequest) as info:
        sg.policy_for_group(db, group.uuid, only_affinity)
    assert info.value.code == "rpquery.weigher.not_enabled"
    assert info.value.token == w.SOFT_ANTI_AFFINITY
    assert sg.policy_for_group(db, group.uuid).needs_all_candidates


@pytest.mark.parametrize(
    ("enabled", "multipliers", "code"),
    [
        (["ServerGroupSoftAffinityWeigher", "RAMWeigher"], {}, "rpquery.weigher.unknown"),
        ([w.SOFT_AFFINITY], {w.SOFT_AFFINITY: -1}, "rpquery.weigher.bad_multiplier"),
        ([w.SOFT_AFFINITY], {w.SOFT_AFFINITY: "nan"}, "rpquery.weigher.bad_multiplier"),
        ([w.SOFT_AFFINITY], {"Other": 1}, "rpquery.weigher.unknown"),
    ],
)
def test_weigher_config_validation(enabled, multipliers, code) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidRequest) as info:
        w.WeigherConfig.build(enabled, multipliers)
    assert info.value.code == code


# ---------------------------------------------------------------- command line


def _cli(db: Database, *args: str) -> Result:
    url = db.url.render_as_string(hide_password=False)
    return CliRunner().invoke(main, ["--db", url, *args], catch_exceptions=False)


def test_cli_create_and_show(sqlite_db: Database) -> None:
    host = _hosts(sqlite_db, 1)[0]
    made = _cli(sqlite_db, "server-group", "create", "--name", "db", "--policy",
                "anti-affinity", "--max-server-per-host", "3", "--project", "p",
                "--user", "u")  # fmt: skip
    assert made.exit_code == 0, made.output
    group_uuid = made.output.strip()
    vm = new_uuid()
    _place(sqlite_db, sg.get_group(sqlite_db, group_uuid), (vm, host))

    shown = _cli(sqlite_db, "server-group", "show", group_uuid, "--json")

    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["rules"] == {"max_server_per_host": 3}
    assert data["members"] == [
        {"instance_uuid": vm, "hosts": [{"uuid": host.uuid, "name": "cn0"}]}
    ]


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--policy", "affinity", "--policy", "soft-affinity"], "multiple_policies"),
        ([], "no_policy"),
        (["--policy", "soft-affinity", "--max-server-per-host", "2"], "rule_not_allowed"),
    ],
)
def test_cli_create_rejects_bad_policies(sqlite_db: Database, args: list[str], code: str) -> None:
    result = _cli(sqlite_db, "server-group", "create", "--name", "g", "--project", "p",
                  "--user", "u", "--json", *args)  # fmt: skip
    assert result.exit_code == 2
    assert result.stdout == ""
    errors = json.loads(result.stderr)["errors"]
    assert errors[0]["code"] == f"rpquery.server_group.{code}"
