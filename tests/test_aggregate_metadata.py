"""Aggregate metadata on every backend: storage and its validation, and the flavor
filter as a host policy (every example of its document, operators, several aggregates per
host, nova mode, what SQL decides vs. what Python decides, one statement in ``keep``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from sqlalchemy.dialects import mysql, postgresql, sqlite

from rpquery.aggregate_metadata.extra_specs import host_passes
from rpquery.aggregate_metadata.metadata import (
    AggregateMetadataFilter,
    get_metadata,
    list_metadata,
    policy_from_cli,
    replace_metadata,
    set_metadata,
    unset_metadata,
)
from rpquery.cli import main
from rpquery.db import Database
from rpquery.errors import InvalidRequest, NotFound
from rpquery.read.candidates import allocation_candidates
from rpquery.read.providers import list_providers
from rpquery.store.tables import aggregate_metadata, resource_providers
from tests.factories import new_uuid, provider
from tests.seed000_examples import EXAMPLES, FMC, Example

AGG = "6c1e2d4f-0000-4000-8000-000000000001"


def passing_hosts(db: Database, policy: AggregateMetadataFilter) -> set[str]:
    """Hosts (root providers) with allocation candidates for one VCPU under ``policy``."""
    found = allocation_candidates(db, "resources=VCPU:1", policies=[policy])
    summaries = found.provider_summaries
    return {summaries[ar.root_uuid].name or "" for ar in found.allocation_requests}


def roots_kept(db: Database, policy: AggregateMetadataFilter, *, push_down: bool) -> set[str]:
    """Every root provider the policy keeps, with or without its SQL clause (to check
    that the clause is only ever a necessary condition)."""
    rp = resource_providers
    stmt = sa.select(rp.c.id, rp.c.name).where(rp.c.id == rp.c.root_provider_id)
    clause = policy.where(rp.c.id) if push_down else None
    if clause is not None:
        stmt = stmt.where(clause)
    with db.connect() as conn:
        rows = conn.execute(stmt).all()
        kept = policy.keep(conn, [r.id for r in rows])
    return {r.name for r in rows if kept is None or r.id in kept}


def build(
    db: Database, aggregates: Mapping[str, Mapping[str, str]], hosts: Mapping[str, list[str]]
) -> dict[str, str]:
    """Aggregates (name → metadata, written through the public API) and hosts (name →
    aggregate names); returns aggregate name → uuid."""
    uuids = {name: new_uuid() for name in aggregates}
    for name, items in aggregates.items():
        if items:
            set_metadata(db, uuids[name], items)
    with db.begin() as conn:
        for host, aggs in hosts.items():
            provider(conn, host, inventory={"VCPU": 8}, aggregates=[uuids[a] for a in aggs])
    return uuids


# ------------------------------------------------------------------ the document


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_document_example(db: Database, example: Example) -> None:
    build(db, example.aggregates, {f"host in {a}": [a] for a in example.aggregates})
    for flavor, specs in example.flavors.items():
        got = passing_hosts(db, AggregateMetadataFilter(specs))
        assert got == {f"host in {a}" for a in example.passes[flavor]}, flavor


# ------------------------------------------------------------------ storage


def test_set_update_unset_replace(db: Database) -> None:
    set_metadata(db, AGG, {"ssd": "true", FMC: "true"})
    got = set_metadata(db, AGG, {"ssd": "false", "gpu": "a100"})
    assert dict(got.items) == {"ssd": "false", "gpu": "a100", FMC: "True"}
    assert get_metadata(db, AGG) == got
    assert dict(unset_metadata(db, AGG, ["gpu", FMC]).items) == {"ssd": "false"}
    assert dict(replace_metadata(db, AGG, {"a": "1"}).items) == {"a": "1"}
    assert [m.aggregate_uuid for m in list_metadata(db)] == [AGG]
    assert dict(replace_metadata(db, AGG, {}).items) == {}
    assert list_metadata(db) == []


def test_keys_and_values_are_exact_on_every_backend(db: Database) -> None:
    set_metadata(db, AGG, {"Key": "1", "key": "1 ", "KEY": "A"})
    assert dict(get_metadata(db, AGG).items) == {"Key": "1", "key": "1 ", "KEY": "A"}
    with db.begin() as conn:
        provider(conn, "incl_host", inventory={"VCPU": 8}, aggregates=[AGG])
    assert passing_hosts(db, AggregateMetadataFilter({"key": "1 "})) == {"incl_host"}
    assert passing_hosts(db, AggregateMetadataFilter({"key": "1"})) == set()
    assert passing_hosts(db, AggregateMetadataFilter({"kEY": "!"})) == {"incl_host"}
    assert passing_hosts(db, AggregateMetadataFilter({"KEY": "a"})) == set()


BAD_WRITES = [
    ({"key": "<or> ! <or> 1"}, "rpquery.aggregate_metadata.exclusive_sentinel"),
    ({"key": "<or> ~ <or> !"}, "rpquery.aggregate_metadata.exclusive_sentinel"),
    ({FMC: "yes"}, "rpquery.aggregate_metadata.bad_force_metadata_check"),
    ({FMC: ""}, "rpquery.aggregate_metadata.bad_force_metadata_check"),
    ({"": "1"}, "rpquery.aggregate_metadata.bad_key"),
    ({" key": "1"}, "rpquery.aggregate_metadata.bad_key"),
    ({"k" * 256: "1"}, "rpquery.aggregate_metadata.bad_key"),
    ({"key": "v" * 256}, "rpquery.aggregate_metadata.bad_value"),
    ({"key": "a\nb"}, "rpquery.aggregate_metadata.bad_value"),
    ({"key": 1}, "rpquery.aggregate_metadata.bad_value"),
    ({}, "rpquery.aggregate_metadata.empty"),
]


def test_bad_writes_rejected_and_nothing_written(db: Database) -> None:
    set_metadata(db, AGG, {"keep": "me"})
    for items, code in BAD_WRITES:
        good_and_bad = {"new": "1", **items}
        for items_to_write in (items, good_and_bad) if items else (items,):
            with pytest.raises(InvalidRequest) as err:
                set_metadata(db, AGG, items_to_write)  # type: ignore[arg-type]
            assert err.value.code == code, items
            with pytest.raises(InvalidRequest):
                replace_metadata(db, AGG, items_to_write or {"!bad": "<or> ! <or> 1"})  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest) as err:
        set_metadata(db, "not-a-uuid", {"a": "1"})
    assert err.value.code == "rpquery.aggregate_metadata.bad_uuid"
    with pytest.raises(NotFound) as nf:
        unset_metadata(db, AGG, ["keep", "missing"])
    assert (nf.value.code, nf.value.token) == (
        "rpquery.aggregate_metadata.key_not_found",
        "missing",
    )
    assert dict(get_metadata(db, AGG).items) == {"keep": "me"}
    with db.connect() as conn:
        assert (
            conn.execute(sa.select(sa.func.count()).select_from(aggregate_metadata)).scalar() == 1
        )


# ------------------------------------------------------------------ the policy


def test_operators_and_several_aggregates_per_host(db: Database) -> None:
    build(
        db,
        {
            "big": {"ram_gb": "512", "cpu": "avx512,avx2"},
            "small": {"ram_gb": "64", "cpu": "avx2"},
            "broken": {"ram_gb": "lots"},
            "ssd": {"disk": "ssd"},
            "forcing": {"gpu": "<or> a100 <or> h100", FMC: "True"},
        },
        {
            "incl_big_ssd": ["big", "ssd"],
            "incl_small": ["small"],
            "excl_broken": ["broken"],
            "incl_broken_and_big": ["broken", "big"],
            "incl_gpu": ["forcing", "ssd"],
        },
    )
    cases = {
        ">= 128": {"incl_big_ssd", "incl_broken_and_big"},
        "= 64": {"incl_big_ssd", "incl_small", "incl_broken_and_big"},
        "== 64": {"incl_small"},
        "!= 64": {"incl_big_ssd", "incl_broken_and_big"},
        "<= 64": {"incl_small"},
        "s== 64": {"incl_small"},
        "s!= 64": {"incl_big_ssd", "excl_broken", "incl_broken_and_big"},
        "s> 6": {"incl_small", "excl_broken", "incl_broken_and_big"},
        "s>= 64": {"incl_small", "excl_broken", "incl_broken_and_big"},
        "s< 6": {"incl_big_ssd", "incl_broken_and_big"},
        "s<= 512": {"incl_big_ssd", "incl_broken_and_big"},
        "<in> ot": {"excl_broken", "incl_broken_and_big"},
        "<or> 64 <or> lots": {"incl_small", "excl_broken", "incl_broken_and_big"},
    }
    for spec, expected in cases.items():
        assert passing_hosts(db, AggregateMetadataFilter({"ram_gb": spec})) == expected, spec
    avx = AggregateMetadataFilter({"cpu": "<all-in> avx512 avx2", "disk": "ssd"})
    assert passing_hosts(db, avx) == {"incl_big_ssd"}
    gpu = AggregateMetadataFilter({"gpu": "h100", "disk": "~"})
    assert passing_hosts(db, gpu) == set()  # the gpu host is in the ssd aggregate
    assert passing_hosts(db, AggregateMetadataFilter({"gpu": "h100"})) == {"incl_gpu"}
    assert "incl_gpu" not in passing_hosts(db, AggregateMetadataFilter({"disk": "ssd"}))


def test_nested_hosts_and_provider_list(db: Database) -> None:
    """The host is the root: its aggregates decide for its children's resources, and a
    child's own aggregates do not count."""
    uuids = build(db, {"ssd": {"disk": "ssd"}, "hdd": {"disk": "hdd"}}, {})
    with db.begin() as conn:
        incl = provider(conn, "incl_root", aggregates=[uuids["ssd"]])
        provider(conn, "incl_root_numa0", parent=incl, inventory={"VCPU": 4})
        excl = provider(conn, "excl_root", aggregates=[uuids["hdd"]])
        provider(
            conn, "excl_root_numa0", parent=excl, inventory={"VCPU": 4}, aggregates=[uuids["ssd"]]
        )
    policy = AggregateMetadataFilter({"disk": "ssd"})
    assert passing_hosts(db, policy) == {"incl_root"}
    listed = {p.name for p in list_providers(db, "", policies=[policy])}
    assert listed == {"incl_root", "incl_root_numa0"}


def test_nova_compatible_mode(db: Database) -> None:
    build(
        db,
        {"a": {"cpu": "avx, sse", "hw:cpu_policy": "dedicated"}, "b": {"key": "*"}},
        {"incl_a": ["a"], "incl_b": ["b"], "excl_none": []},
    )

    def nova(specs: dict[str, str]) -> set[str]:
        return passing_hosts(db, AggregateMetadataFilter(specs, nova_compat=True))

    assert nova({"cpu": "sse"}) == {"incl_a"}
    assert nova({"aggregate_instance_extra_specs:cpu": "<or> x <or> avx"}) == {"incl_a"}
    assert nova({"hw:cpu_policy": "shared"}) == {"incl_a", "incl_b", "excl_none"}
    assert nova({"key": "*"}) == {"incl_b"}  # literal, not a sentinel
    assert nova({"key": "~"}) == set()  # missing key fails
    assert nova({}) == {"incl_a", "incl_b", "excl_none"}
    assert AggregateMetadataFilter({}, nova_compat=True).needs_all_candidates is False


def test_keep_is_one_statement_and_where_never_loses_a_host(db: Database) -> None:
    """Random clouds: SQL + keep equals keep alone equals the pure function."""
    rng = random.Random(7)
    values = ["1", "2", "a", "<or> 1 <or> 2", "*", "!", "~", ">= 2", "<or> * <or> ~"]
    aggs: dict[str, dict[str, str]] = {}
    for i in range(6):
        keys = rng.sample(["k1", "k2", "hw:x"], rng.randint(0, 2))
        aggs[f"agg{i}"] = {k: rng.choice(values) for k in keys}
        if rng.random() < 0.4:
            aggs[f"agg{i}"][FMC] = rng.choice(["True", "False"])
    hosts = {f"host{i}": rng.sample(sorted(aggs), rng.randint(0, 2)) for i in range(12)}
    build(db, aggs, hosts)
    flavor_values = ["1", "2", "*", "~", "!", "<or> 1 <or> ~", ">= 2", "s== a", "<or> * <or> ~"]
    for _ in range(25):
        keys = rng.sample(["k1", "k2", "hw:x", "aggregate_instance_extra_specs:k1"], 2)
        specs = {k: rng.choice(flavor_values) for k in keys}
        policy = AggregateMetadataFilter(specs)
        expected = {h for h, a in hosts.items() if host_passes(specs, [aggs[n] for n in a])}
        with db.count_statements() as counter:
            assert roots_kept(db, policy, push_down=False) == expected, specs
        assert counter.count == 2  # the root query and keep's one statement
        assert roots_kept(db, policy, push_down=True) == expected, specs
        assert passing_hosts(db, policy) == expected, specs


def test_keep_with_a_dense_range_of_roots(db: Database) -> None:
    """Many candidate roots are fetched by id range; rows of other providers in the range
    (here a child in the aggregate, and roots not asked about) must not leak in."""
    uuids = build(db, {"a": {"key": "1"}}, {"incl_a": ["a"]})
    with db.begin() as conn:
        outside = provider(conn, "excl_not_asked", aggregates=[uuids["a"]])
        parent = provider(conn, "excl_parent")
        provider(conn, "excl_child", parent=parent, aggregates=[uuids["a"]])
        ids = conn.execute(sa.select(resource_providers.c.id, resource_providers.c.name)).all()
    by_name = {name: rp_id for rp_id, name in ids}
    skip = {outside.id, by_name["excl_child"]}  # keep is asked about roots only
    asked = [i for i in range(by_name["incl_a"], by_name["incl_a"] + 150) if i not in skip]
    with db.connect() as conn:
        assert AggregateMetadataFilter({"key": "1"}).keep(conn, asked) == {by_name["incl_a"]}
        absent = AggregateMetadataFilter({"key": "~"}).keep(conn, asked)
    assert absent == set(asked) - {by_name["incl_a"]}


def test_where_compiles_on_every_dialect() -> None:
    policy = AggregateMetadataFilter({"a": "*", "b": "!", "c": "1", "hw:d": "x", "e": ">= 2"})
    clause = policy.where(resource_providers.c.id)
    assert clause is not None
    for dialect in (sqlite.dialect(), postgresql.dialect(), mysql.dialect()):
        sql = str(sa.select(resource_providers.c.id).where(clause).compile(dialect=dialect))
        assert sql.count("resource_providers.id IN (SELECT") == 3  # hw:d: Python only
        assert sql.count("resource_providers.id NOT IN (SELECT") == 1
        assert "force_metadata_check" not in sql  # a bound parameter, not inlined
    assert (
        AggregateMetadataFilter({"a": "<or> * <or> ~", "hw:x": "1"}).where(resource_providers.c.id)
        is None
    )


def test_policy_from_cli() -> None:
    assert policy_from_cli(None, False) is None
    policy = policy_from_cli('{"ssd": "true"}', True)
    assert isinstance(policy, AggregateMetadataFilter) and policy.nova_compat
    for bad, code in [
        ("{", "rpquery.extra_specs.bad_json"),
        ("[1]", "rpquery.extra_specs.bad_type"),
        ('{"k": "<or> ! <or> 1"}', "rpquery.extra_specs.exclusive_sentinel"),
    ]:
        with pytest.raises(InvalidRequest) as err:
            policy_from_cli(bad, False)
        assert err.value.code == code


# ------------------------------------------------------------------ CLI


def test_cli_set_show_unset(db: Database) -> None:
    url = db.url.render_as_string(hide_password=False)
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str]:
        result = runner.invoke(main, ["--db", url, "aggregate-metadata", *args])
        return result.exit_code, result.output

    code, out = run("set", AGG, "ssd=true", "note=a=b", f"{FMC}=true", "--json")
    assert code == 0, out
    shown = {"aggregate_uuid": AGG, "metadata": {"ssd": "true", "note": "a=b", FMC: "True"}}
    assert json.loads(out) == shown
    assert json.loads(run("show", AGG, "--json")[1]) == shown
    assert json.loads(run("show", "--json")[1]) == [shown]
    assert run("unset", AGG, "note", FMC)[0] == 0
    code, out = run("set", AGG, "key=<or> ! <or> 1")
    assert code == 2 and "rpquery.aggregate_metadata.exclusive_sentinel" in out
    code, out = run("unset", AGG, "missing")
    assert code == 1 and "rpquery.aggregate_metadata.key_not_found" in out
    assert json.loads(run("show", AGG, "--json")[1])["metadata"] == {"ssd": "true"}


def test_cli_candidates_with_extra_specs(db: Database) -> None:
    """``rpquery candidates --extra-specs`` (the CLI engineer's command) goes through
    :func:`policy_from_cli`."""
    build(db, {"ssd": {"disk": "ssd"}}, {"incl_ssd": ["ssd"], "excl_plain": []})
    with db.connect() as conn:
        uuids = dict(
            conn.execute(sa.select(resource_providers.c.name, resource_providers.c.uuid)).all()
        )
    url = db.url.render_as_string(hide_password=False)
    runner = CliRunner()

    def candidates(*extra: str) -> tuple[int, str]:
        args = ["--db", url, "candidates", "resources=VCPU:1", "--json", *extra]
        result = runner.invoke(main, args)
        return result.exit_code, result.output

    code, out = candidates("--extra-specs", '{"disk": "ssd"}')
    assert code == 0, out
    roots = {rp for ar in json.loads(out)["allocation_requests"] for rp in ar["allocations"]}
    assert roots == {uuids["incl_ssd"]}
    code, out = candidates("--extra-specs", '{"disk": "ssd"}', "--nova-compat")
    assert code == 0 and uuids["excl_plain"] not in out
    code, out = candidates("--extra-specs", "{oops")
    assert code == 2 and "rpquery.extra_specs.bad_json" in out
