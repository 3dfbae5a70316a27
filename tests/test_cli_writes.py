"""The write commands (``provider``, ``inventory``, ``trait``, ``aggregate``,
``allocation``) through click's runner on SQLite, PostgreSQL and MariaDB: osc-placement's
verbs and options, the library's errors and exit codes, and nothing half-written when a
write is refused (checked by reading the database back through the library)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from rpquery.cli import main
from rpquery.cli.allocations import parse_allocations
from rpquery.cli.writes import parse_resource
from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.usage.reads import consumer_allocations
from rpquery.write.associations import get_provider_aggregates, get_provider_traits
from rpquery.write.inventory import get_inventories
from rpquery.write.providers import get_provider

Invoke = Callable[..., Result]
CN1 = "4a8d51b6-5a8e-4bd2-9d5e-2f1b8f1b2a10"
CN2 = "5b9e62c7-6b9f-4ce3-8e6f-3f2c9f2c3b21"
NUMA = "6caf73d8-7ca0-4df4-9f70-4a3daa3d4c32"
AGG = "0b0c2a35-7d5e-4d7a-9a57-0c1f5f2d3e40"
AGG2 = "1c1d3b46-8e6f-4e8b-8b68-1d2a6a3e4f51"
CONSUMER = "9f2c0b5e-1d2a-4c3b-8e4f-5a6b7c8d9e01"
OWNER = ("--project-id", "p1", "--user-id", "u1", "--consumer-type", "INSTANCE")


@pytest.fixture
def cli(db: Database) -> Invoke:
    url = db.url.render_as_string(hide_password=False)

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(main, ["--db", url, *args], catch_exceptions=False)

    return invoke


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def refused(result: Result, exit_code: int, code: str, token: str | None = None) -> None:
    """Exit status, one ``error: ... [code]`` line naming the token, nothing on stdout."""
    assert result.exit_code == exit_code, result.output
    assert result.stderr.strip().endswith(f"[{code}]"), result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""
    if token is not None:
        assert token in result.stderr


@pytest.fixture
def host(cli: Invoke, db: Database) -> str:
    """cn1 with VCPU 8 (ratio 16) and MEMORY_MB 4096 reserved 512, one trait, one
    aggregate."""
    ok(cli("provider", "create", "cn1", "--uuid", CN1))
    ok(
        cli(
            "inventory",
            "set",
            CN1,
            "--resource",
            "VCPU=8",
            "--resource",
            "VCPU:allocation_ratio=16",
            "--resource",
            "MEMORY_MB=4096",
            "--resource",
            "MEMORY_MB:reserved=512",
        )
    )
    ok(cli("trait", "set", CN1, "--trait", "HW_CPU_X86_AVX2"))
    ok(cli("aggregate", "set", CN1, "--aggregate", AGG))
    return CN1


# ---------------------------------------------------------------- happy paths


def test_provider_create_set_show_delete(cli: Invoke, db: Database) -> None:
    made = json.loads(ok(cli("provider", "create", "cn1", "--uuid", CN1, "-f", "json")).stdout)
    assert made == {
        "uuid": CN1,
        "name": "cn1",
        "generation": 0,
        "root_provider_uuid": CN1,
        "parent_provider_uuid": None,
    }
    ok(cli("provider", "create", "cn2", "--uuid", CN2))
    child = ok(cli("provider", "create", "numa0", "--uuid", NUMA, "--parent-provider", CN1))
    assert CN1 in child.stdout
    moved = cli(
        "provider", "set", NUMA, "--name", "cn2_numa0", "--parent-provider", CN2, "-f", "json"
    )
    assert json.loads(ok(moved).stdout)["root_provider_uuid"] == CN2
    assert get_provider(db, NUMA).name == "cn2_numa0"
    renamed = ok(cli("provider", "set", CN1, "--name", "cn1-b", "-f", "value", "-c", "name"))
    assert renamed.stdout == "cn1-b\n"
    assert ok(cli("provider", "show", CN1, "-f", "value", "-c", "name")).stdout == "cn1-b\n"
    ok(cli("provider", "delete", CN1))
    refused(cli("provider", "show", CN1), 1, "rpquery.provider.not_found", CN1)


def test_inventory_set_replaces_amends_and_deletes(cli: Invoke, db: Database, host: str) -> None:
    inv = get_inventories(db, host)
    assert (inv["VCPU"].total, inv["VCPU"].allocation_ratio) == (8, 16.0)
    assert (inv["MEMORY_MB"].total, inv["MEMORY_MB"].reserved) == (4096, 512)
    rows = json.loads(
        ok(
            cli("inventory", "set", host, "--resource", "VCPU:reserved=1", "--amend", "-f", "json")
        ).stdout
    )
    assert [(r["resource_class"], r["reserved"], r["total"]) for r in rows] == [
        ("MEMORY_MB", 512, 4096),
        ("VCPU", 1, 8),
    ]
    ok(cli("inventory", "set", host, "--resource", "DISK_GB=100"))  # replaces every one
    assert set(get_inventories(db, host)) == {"DISK_GB"}
    ok(cli("inventory", "set", host, "--resource", "VCPU=4", "--resource", "DISK_GB=100"))
    ok(cli("inventory", "delete", host, "--resource-class", "DISK_GB"))
    assert set(get_inventories(db, host)) == {"VCPU"}
    listed = ok(cli("inventory", "list", host, "-f", "csv", "-c", "resource_class", "-c", "total"))
    assert listed.stdout == '"resource_class","total"\n"VCPU",4\n'
    ok(cli("inventory", "delete", host))
    assert get_inventories(db, host) == {}


def test_trait_set_replaces_the_traits(cli: Invoke, db: Database, host: str) -> None:
    out = ok(
        cli(
            "trait",
            "set",
            host,
            "--trait",
            "STORAGE_DISK_SSD",
            "--trait",
            "HW_CPU_X86_SSE42",
            "-f",
            "value",
        )
    )
    assert out.stdout.split() == ["HW_CPU_X86_SSE42", "STORAGE_DISK_SSD"]
    assert get_provider_traits(db, host) == {"HW_CPU_X86_SSE42", "STORAGE_DISK_SSD"}
    ok(cli("trait", "set", host))
    assert get_provider_traits(db, host) == frozenset()


def test_aggregate_set_with_and_without_generation(cli: Invoke, db: Database, host: str) -> None:
    generation = get_provider(db, host).generation
    out = ok(
        cli(
            "aggregate",
            "set",
            host,
            "--aggregate",
            AGG2,
            "--generation",
            str(generation),
            "-f",
            "json",
        )
    )
    assert json.loads(out.stdout) == [{"uuid": AGG2}]
    refused(
        cli("aggregate", "set", host, "--aggregate", AGG, "--generation", str(generation)),
        1,
        "rpquery.provider.generation_conflict",
    )
    assert get_provider_aggregates(db, host) == {AGG2}
    ok(cli("aggregate", "set", host, "--aggregate", AGG, "--aggregate", AGG2))
    assert get_provider_aggregates(db, host) == {AGG, AGG2}
    assert ok(cli("aggregate", "list", host, "-f", "value")).stdout.split() == sorted([AGG, AGG2])


def test_allocation_set_unset_show(cli: Invoke, db: Database, host: str) -> None:
    ok(cli("provider", "create", "cn2", "--uuid", CN2))
    ok(cli("inventory", "set", CN2, "--resource", "DISK_GB=100"))
    rows = json.loads(
        ok(
            cli(
                "allocation",
                "set",
                CONSUMER,
                "--allocation",
                f"rp={host},VCPU=2,MEMORY_MB=1024",
                "--allocation",
                f"rp={CN2},DISK_GB=10",
                *OWNER,
                "-f",
                "json",
            )
        ).stdout
    )
    assert {r["resource_provider"]: r["resources"] for r in rows} == {
        host: {"MEMORY_MB": 1024, "VCPU": 2},
        CN2: {"DISK_GB": 10},
    }
    assert {(r["project_id"], r["user_id"], r["consumer_type"]) for r in rows} == {
        ("p1", "u1", "INSTANCE")
    }
    ok(cli("allocation", "unset", CONSUMER, "--resource-class", "MEMORY_MB"))
    view = consumer_allocations(db, CONSUMER)
    assert {rp: pa.resources for rp, pa in view.allocations.items()} == {
        host: {"VCPU": 2},
        CN2: {"DISK_GB": 10},
    }
    assert view.consumer_type == "INSTANCE"
    ok(cli("allocation", "unset", CONSUMER, "--provider", CN2))
    shown = ok(cli("allocation", "show", CONSUMER, "-f", "value", "-c", "resources"))
    assert shown.stdout == "VCPU=2\n"
    ok(cli("allocation", "unset", CONSUMER))
    assert consumer_allocations(db, CONSUMER).generation is None  # the consumer is gone


# ---------------------------------------------------------------- refused, nothing written


def test_bad_resource_arguments_write_nothing(cli: Invoke, db: Database, host: str) -> None:
    before = get_inventories(db, host)
    refused(
        cli("inventory", "set", host, "--resource", "VCPU:total=x"),
        2,
        "rpquery.cli.bad_resource",
        "'x'",
    )
    refused(
        cli("inventory", "set", host, "--resource", "VCPU:totl=8"),
        2,
        "rpquery.cli.bad_resource",
        "totl",
    )
    refused(cli("inventory", "set", host, "--resource", "VCPU"), 2, "rpquery.cli.bad_resource")
    refused(
        cli("inventory", "set", host, "--resource", "DISK_GB:reserved=1"),
        2,
        "rpquery.cli.missing_total",
        "DISK_GB",
    )
    # the library's checks: a bad class or total among good ones
    refused(
        cli("inventory", "set", host, "--resource", "VCPU=16", "--resource", "BOGUS=1"),
        2,
        "rpquery.resource_class.bad_name",
        "BOGUS",
    )
    refused(
        cli("inventory", "set", host, "--resource", "VCPU=16", "--resource", "MEMORY_MB=0"),
        2,
        "rpquery.inventory.bad_total",
    )
    assert get_inventories(db, host) == before


def test_inventory_refused_while_allocated(cli: Invoke, db: Database, host: str) -> None:
    ok(cli("allocation", "set", CONSUMER, "--allocation", f"rp={host},MEMORY_MB=2048", *OWNER))
    before = get_inventories(db, host)
    refused(
        cli("inventory", "delete", host, "--resource-class", "MEMORY_MB"),
        1,
        "rpquery.inventory.in_use",
    )
    refused(cli("inventory", "set", host, "--resource", "VCPU=8"), 1, "rpquery.inventory.in_use")
    refused(
        cli("inventory", "set", host, "--resource", "MEMORY_MB=1024", "--amend"),
        1,
        "rpquery.inventory.capacity_below_usage",
    )
    refused(cli("provider", "delete", host), 1, "rpquery.provider.in_use")
    assert get_inventories(db, host) == before
    assert get_provider(db, host).uuid == host


def test_unknown_trait_and_bad_aggregate_write_nothing(
    cli: Invoke, db: Database, host: str
) -> None:
    refused(
        cli("trait", "set", host, "--trait", "STORAGE_DISK_SSD", "--trait", "CUSTOM_NOPE"),
        2,
        "rpquery.trait.not_found",
        "CUSTOM_NOPE",
    )
    refused(cli("trait", "set", host, "--trait", "lower_case"), 2, "rpquery.trait.bad_name")
    assert get_provider_traits(db, host) == {"HW_CPU_X86_AVX2"}
    refused(
        cli("aggregate", "set", host, "--aggregate", AGG2, "--aggregate", "not-a-uuid"),
        2,
        "rpquery.aggregate.bad_uuid",
        "not-a-uuid",
    )
    assert get_provider_aggregates(db, host) == {AGG}


def test_allocation_over_capacity_writes_nothing(cli: Invoke, db: Database, host: str) -> None:
    ok(cli("provider", "create", "cn2", "--uuid", CN2))
    ok(cli("inventory", "set", CN2, "--resource", "DISK_GB=100"))
    other = "0e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b"
    ok(cli("allocation", "set", other, "--allocation", f"rp={CN2},DISK_GB=95", *OWNER))
    generations = (get_provider(db, host).generation, get_provider(db, CN2).generation)
    # one provider has room, the other not: neither allocation is written
    result = cli(
        "allocation", "set", CONSUMER, "--allocation", f"rp={host},VCPU=2",
        "--allocation", f"rp={CN2},DISK_GB=10", *OWNER,
    )  # fmt: skip
    refused(result, 1, "rpquery.allocation.capacity_exceeded")
    assert consumer_allocations(db, CONSUMER).allocations == {}
    assert (get_provider(db, host).generation, get_provider(db, CN2).generation) == generations


def test_bad_allocation_arguments(cli: Invoke, db: Database, host: str) -> None:
    for text, token in [
        ("VCPU=1", "VCPU=1"),
        (f"rp={host}", f"rp={host}"),
        (f"rp={host},VCPU=two", "two"),
        (f"rp={host},VCPU", "VCPU"),
    ]:
        refused(
            cli("allocation", "set", CONSUMER, "--allocation", text, *OWNER),
            2,
            "rpquery.cli.bad_allocation",
            token,
        )
    refused(
        cli(
            "allocation",
            "set",
            CONSUMER,
            "--allocation",
            f"rp={host},VCPU=1",
            "--allocation",
            f"rp={host},VCPU=2",
            *OWNER,
        ),
        2,
        "rpquery.cli.bad_allocation",
    )
    refused(
        cli(
            "allocation",
            "set",
            CONSUMER,
            "--allocation",
            f"rp={host},VCPU=1",
            "--project-id",
            "p",
            "--user-id",
            "u",
            "--consumer-type",
            "instance",
        ),
        2,
        "rpquery.consumer.bad_type",
    )
    missing = cli("allocation", "set", CONSUMER, "--allocation", f"rp={host},VCPU=1")
    assert missing.exit_code == 2 and "--project-id" in missing.output
    assert consumer_allocations(db, CONSUMER).allocations == {}


def test_provider_errors(cli: Invoke, db: Database, host: str) -> None:
    refused(cli("provider", "create", "cn1"), 1, "rpquery.provider.duplicate", "cn1")
    refused(cli("provider", "create", "x", "--uuid", "nope"), 2, "rpquery.provider.bad_uuid")
    refused(
        cli("provider", "create", "x", "--parent-provider", CN2),
        2,
        "rpquery.provider.parent_not_found",
        CN2,
    )
    ok(cli("provider", "create", "numa0", "--uuid", NUMA, "--parent-provider", host))
    refused(
        cli("provider", "set", host, "--name", "cn1", "--parent-provider", NUMA),
        2,
        "rpquery.provider.cycle",
    )
    refused(cli("provider", "delete", host), 1, "rpquery.provider.has_children")
    assert get_provider(db, host).parent_uuid is None
    assert get_provider(db, NUMA).parent_uuid == host


def test_errors_as_json_with_f_json(cli: Invoke, host: str) -> None:
    result = cli("inventory", "set", host, "--resource", "VCPU:totl=8", "-f", "json")
    assert result.exit_code == 2 and result.stdout == ""
    (error,) = json.loads(result.stderr)["errors"]
    assert error["code"] == "rpquery.cli.bad_resource"


# ---------------------------------------------------------------- parsers (no database)


def test_parse_resource_and_allocations() -> None:
    assert parse_resource("MEMORY_MB:step_size=256") == ("MEMORY_MB", "step_size", 256)
    assert parse_resource("VCPU:allocation_ratio=1.5") == ("VCPU", "allocation_ratio", 1.5)
    with pytest.raises(InvalidRequest):
        parse_resource("VCPU:a:b=1")
    assert parse_allocations([f"rp={CN1},VCPU=1", f"rp={CN1},VCPU=1"]) == {CN1: {"VCPU": 1}}
