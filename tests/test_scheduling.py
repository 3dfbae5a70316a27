"""Scheduling with server groups (docs/server-groups.md) through the candidate query and
the write path: the functional scenarios of the soft-affinity blueprint
(docs/design.md#origins), hard policies, moves, concurrency and the CLI."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest
from click.testing import CliRunner

from rpquery.cli import main
from rpquery.db import Database
from rpquery.errors import Conflict, InvalidRequest, NotFound
from rpquery.read.candidates import allocation_candidates
from rpquery.server_groups import groups as sg
from rpquery.server_groups import scheduling
from rpquery.server_groups import weighers as w
from rpquery.write.allocations import get_allocations
from tests.factories import Ref, allocate, new_uuid, provider

ONE_VCPU = "resources=VCPU:1"
OWNER = {"project_id": "proj", "user_id": "user", "consumer_type": "INSTANCE"}


def _hosts(db: Database, *vcpus: int) -> list[Ref]:
    with db.begin() as conn:
        return [provider(conn, f"cn{i}", inventory={"VCPU": n}) for i, n in enumerate(vcpus)]


def _group(db: Database, policy: str, **rules: int) -> str:
    return sg.create_group(db, f"g-{policy}", [policy], "proj", "user", rules or None).uuid


def _schedule(db: Database, group: str, count: int, query: str = ONE_VCPU, **kw: object) -> list:
    placed = scheduling.schedule(db, query, group, count=count, **OWNER, **kw)  # type: ignore[arg-type]
    return [p.host.name for p in placed]


def _member_hosts(db: Database, group: str) -> Counter[str]:
    detail = sg.show_group(db, group)
    return Counter(h.name for m in detail.members for h in m.hosts)


# ---------------------------------------------------------------- the blueprint's scenarios


def test_soft_affinity_two_servers_with_room_on_one_host_share_it(db: Database) -> None:
    _hosts(db, 4, 4, 4)
    group = _group(db, "soft-affinity")
    first, second = _schedule(db, group, 2)
    assert first == second
    assert _member_hosts(db, group) == Counter({first: 2})


def test_soft_affinity_second_server_goes_elsewhere_when_the_host_is_full(db: Database) -> None:
    _hosts(db, 2, 2)
    group = _group(db, "soft-affinity")
    first, second = _schedule(db, group, 2, "resources=VCPU:2")
    assert first != second


def test_soft_affinity_follows_an_existing_member(db: Database) -> None:
    hosts = _hosts(db, 4, 4, 4)
    group = _group(db, "soft-affinity")
    vm = new_uuid()
    with db.begin() as conn:
        allocate(conn, vm, hosts[2], "VCPU", 1)
    sg.add_members(db, group, [vm])
    assert _schedule(db, group, 2) == ["cn2", "cn2"]


def test_soft_anti_affinity_two_hosts_two_servers_spread(db: Database) -> None:
    _hosts(db, 4, 4)
    group = _group(db, "soft-anti-affinity")
    assert sorted(_schedule(db, group, 2)) == ["cn0", "cn1"]


def test_soft_anti_affinity_single_host_takes_both(db: Database) -> None:
    _hosts(db, 4)
    group = _group(db, "soft-anti-affinity")
    assert _schedule(db, group, 2) == ["cn0", "cn0"]


def test_zero_multiplier_ignores_the_group(db: Database) -> None:
    _hosts(db, 4, 4)
    group = _group(db, "soft-anti-affinity")
    zero = w.WeigherConfig.build(w.KNOWN_WEIGHERS, {w.SOFT_ANTI_AFFINITY: 0})
    first, second = _schedule(db, group, 2, weighers=zero)
    assert first == second  # plain candidate order, no spreading


def test_bad_count_is_rejected_before_the_database(db: Database) -> None:
    group = _group(db, "affinity")
    for count, code in ((0, "bad_count"), (True, "bad_count")):
        with db.count_statements() as counter, pytest.raises(InvalidRequest) as info:
            _schedule(db, group, count)  # type: ignore[arg-type]
        assert info.value.code == f"rpquery.schedule.{code}" and counter.count == 0
    with db.count_statements() as counter, pytest.raises(InvalidRequest) as bad_type:
        scheduling.schedule(db, ONE_VCPU, group, project_id="p", user_id="u",
                            consumer_type="instance")  # fmt: skip
    assert bad_type.value.code == "rpquery.consumer.bad_type" and counter.count == 0
    with pytest.raises(InvalidRequest) as dup:
        vm = new_uuid()
        scheduling.schedule(db, ONE_VCPU, group, count=2, instance_uuids=[vm, vm], **OWNER)
    assert dup.value.code == "rpquery.schedule.bad_instances"


def test_given_instance_uuids_are_used(db: Database) -> None:
    _hosts(db, 4)
    group = _group(db, "affinity")
    vms = [new_uuid(), new_uuid()]
    placed = scheduling.schedule(db, ONE_VCPU, group, count=2, instance_uuids=vms, **OWNER)
    assert [p.instance_uuid for p in placed] == vms
    assert {m.instance_uuid for m in sg.show_group(db, group).members} == set(vms)


def test_missing_weigher_rejects_before_any_write(db: Database) -> None:
    _hosts(db, 4)
    group = _group(db, "soft-affinity")
    only_anti = w.WeigherConfig.build([w.SOFT_ANTI_AFFINITY])
    with pytest.raises(InvalidRequest) as info:
        _schedule(db, group, 1, weighers=only_anti)
    assert info.value.code == "rpquery.weigher.not_enabled"
    assert not sg.show_group(db, group).members


# ---------------------------------------------------------------- moves


def _three_members(db: Database, policy: str) -> tuple[str, dict[str, str]]:
    """Members a (cn0), b and c (cn1); cn2 empty. Returns the group and instance uuids."""
    hosts = _hosts(db, 4, 4, 4)
    group = _group(db, policy)
    vms = {"a": new_uuid(), "b": new_uuid(), "c": new_uuid()}
    with db.begin() as conn:
        for name, host in (("a", hosts[0]), ("b", hosts[1]), ("c", hosts[1])):
            allocate(conn, vms[name], host, "VCPU", 1, project="proj", user="user")
    sg.add_members(db, group, vms.values())
    return group, vms


@pytest.mark.parametrize("action", ["migrate", "evacuate"])
@pytest.mark.parametrize(
    ("policy", "expected"), [("soft-affinity", "cn1"), ("soft-anti-affinity", "cn2")]
)
def test_migrate_and_evacuate_leave_the_current_host(
    db: Database, action: scheduling.MoveAction, policy: str, expected: str
) -> None:
    group, vms = _three_members(db, policy)
    moved = scheduling.move(db, ONE_VCPU, vms["a"], action)
    assert moved.host.name == expected
    after = Counter({"cn1": 2}) + Counter({expected: 1})
    assert _member_hosts(db, group) == after
    assert list(get_allocations(db, vms["a"])) == [moved.host.uuid]


@pytest.mark.parametrize("policy", ["soft-affinity", "soft-anti-affinity"])
def test_rebuild_stays_on_its_host(db: Database, policy: str) -> None:
    group, vms = _three_members(db, policy)
    before = get_allocations(db, vms["b"])
    rebuilt = scheduling.move(db, ONE_VCPU, vms["b"], "rebuild")
    assert rebuilt.host.name == "cn1"
    assert get_allocations(db, vms["b"]) == before
    assert _member_hosts(db, group) == Counter({"cn0": 1, "cn1": 2})


def test_rebuild_under_anti_affinity_does_not_count_itself(db: Database) -> None:
    hosts = _hosts(db, 4, 4)
    group = _group(db, "anti-affinity")
    vm, intruder = new_uuid(), new_uuid()
    with db.begin() as conn:
        allocate(conn, vm, hosts[0], "VCPU", 1, project="proj", user="user")
    sg.add_members(db, group, [vm])
    assert scheduling.move(db, ONE_VCPU, vm, "rebuild").host.name == "cn0"
    with db.begin() as conn:  # a second member forced onto cn0 breaks the policy there
        allocate(conn, intruder, hosts[0], "VCPU", 1)
    sg.add_members(db, group, [intruder])
    with pytest.raises(Conflict) as info:
        scheduling.move(db, ONE_VCPU, vm, "rebuild")
    assert info.value.code == scheduling.NO_VALID_HOST


def test_moving_a_non_member_is_not_found(db: Database) -> None:
    with pytest.raises(NotFound) as info:
        scheduling.move(db, ONE_VCPU, new_uuid(), "migrate")
    assert info.value.code == "rpquery.server_group.not_a_member"


# ---------------------------------------------------------------- hard policies


def test_affinity_fills_one_host_then_has_no_valid_host(db: Database) -> None:
    _hosts(db, 3, 8)
    group = _group(db, "affinity")
    placed = _schedule(db, group, 3)
    assert len(set(placed)) == 1
    host = placed[0]
    room = 3 if host == "cn0" else 8
    with pytest.raises(Conflict) as info:
        _schedule(db, group, room - 3 + 1)
    assert info.value.code == scheduling.NO_VALID_HOST
    assert _member_hosts(db, group) == Counter({host: 3})  # the failed call left nothing


@pytest.mark.parametrize("limit", [1, 3])
def test_anti_affinity_max_server_per_host(db: Database, limit: int) -> None:
    _hosts(db, 8, 8)
    group = _group(db, "anti-affinity", max_server_per_host=limit)
    placed = _schedule(db, group, 2 * limit)
    assert Counter(placed) == Counter({"cn0": limit, "cn1": limit})
    with pytest.raises(Conflict) as info:
        _schedule(db, group, 1)
    assert info.value.code == scheduling.NO_VALID_HOST


def test_all_or_nothing_releases_earlier_picks(db: Database) -> None:
    _hosts(db, 8, 8)
    group = _group(db, "anti-affinity")
    with pytest.raises(Conflict):
        _schedule(db, group, 3)
    assert not sg.show_group(db, group).members
    assert _schedule(db, group, 2)  # the room was given back


# ---------------------------------------------------------------- read path integration


def test_candidates_ordered_by_group_with_one_extra_statement(db: Database) -> None:
    hosts = _hosts(db, 4, 4, 4)
    group = _group(db, "soft-anti-affinity")
    vms = [new_uuid() for _ in range(3)]
    with db.begin() as conn:
        for vm, host in zip(vms, (hosts[0], hosts[0], hosts[1]), strict=True):
            allocate(conn, vm, host, "VCPU", 1)
    sg.add_members(db, group, vms)
    policy = sg.policy_for_group(db, group)

    with db.count_statements() as plain:
        allocation_candidates(db, ONE_VCPU)
    with db.count_statements() as weighed:
        found = allocation_candidates(db, ONE_VCPU, policies=[policy])

    assert [r.root_uuid for r in found.allocation_requests] == [
        hosts[2].uuid,
        hosts[1].uuid,
        hosts[0].uuid,
    ]
    assert weighed.count == plain.count + 1


def test_hard_policy_is_pushed_into_sql(db: Database) -> None:
    hosts = _hosts(db, 4, 4, 4)
    group = _group(db, "anti-affinity")
    vm = new_uuid()
    with db.begin() as conn:
        allocate(conn, vm, hosts[1], "VCPU", 1)
    sg.add_members(db, group, [vm])
    policy = sg.policy_for_group(db, group)
    with db.count_statements() as filtered:
        found = allocation_candidates(db, ONE_VCPU, policies=[policy])
    assert {r.root_uuid for r in found.allocation_requests} == {hosts[0].uuid, hosts[2].uuid}
    touching = [s for s in filtered.statements if "rpq_server_group_members" in s]
    # The filter rides inside the candidate statements; the policy runs none of its own.
    assert touching and all("NOT IN (SELECT" in s for s in touching)
    assert not policy.needs_all_candidates


# ---------------------------------------------------------------- concurrency


@pytest.mark.parametrize("policy", ["anti-affinity", "soft-anti-affinity"])
def test_concurrent_schedulers_count_each_others_picks(server_db: Database, policy: str) -> None:
    _hosts(server_db, 8, 8, 8, 8)
    group = _group(server_db, policy)
    errors: list[BaseException] = []

    def one() -> None:
        try:
            _schedule(server_db, group, 1)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _member_hosts(server_db, group) == Counter({"cn0": 1, "cn1": 1, "cn2": 1, "cn3": 1})


# ---------------------------------------------------------------- command line


def test_cli_schedule_and_show(sqlite_db: Database) -> None:
    _hosts(sqlite_db, 4, 4)
    group = _group(sqlite_db, "soft-anti-affinity")
    url = sqlite_db.url.render_as_string(hide_password=False)
    run = CliRunner().invoke(
        main,
        ["--db", url, "schedule", ONE_VCPU, "--server-group", group, "--project", "p",
         "--user", "u", "--consumer-type", "INSTANCE", "--count", "2", "--json"],
        catch_exceptions=False,
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    placed = json.loads(run.stdout)
    assert sorted(p["host"]["name"] for p in placed) == ["cn0", "cn1"]
    shown = CliRunner().invoke(main, ["--db", url, "server-group", "show", group, "--json"])
    members = {m["instance_uuid"] for m in json.loads(shown.stdout)["members"]}
    assert members == {p["instance_uuid"] for p in placed}
    refused = CliRunner().invoke(
        main,
        ["--db", url, "schedule", ONE_VCPU, "--server-group", group, "--project", "p",
         "--user", "u", "--weigher", w.SOFT_AFFINITY, "--json"],
    )  # fmt: skip
    assert refused.exit_code == 2
    assert json.loads(refused.stderr)["errors"][0]["code"] == "rpquery.weigher.not_enabled"
