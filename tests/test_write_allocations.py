"""Allocation writes on every backend: consumers and their generations, capacity, unit
constraints, overage, atomic multi-consumer writes, and bad input that writes nothing."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection

from rpquery.db import Database
from rpquery.errors import CapacityExceeded, ConcurrentUpdate, InvalidRequest, NotFound
from rpquery.store.tables import (
    allocations,
    consumer_types,
    consumers,
    projects,
    resource_providers,
)
from rpquery.write import allocations as alloc_api
from rpquery.write import consumers as consumer_api
from rpquery.write.allocations import ConsumerAllocations
from rpquery.write.providers import subtree_ids
from tests.factories import Ref, allocate, new_uuid, provider

C1, C2 = new_uuid(), new_uuid()


def req(
    consumer: str, allocs: dict[str, dict[str, Any]], gen: int | None = None, **kw: Any
) -> ConsumerAllocations:
    fields = {"project_id": "proj", "user_id": "user", "consumer_type": "INSTANCE"}
    fields.update(kw)
    return ConsumerAllocations(consumer, consumer_generation=gen, allocations=allocs, **fields)


def snapshot(db: Database) -> dict[str, list[tuple]]:
    """Everything an allocation write may touch."""
    tables = {
        "allocations": sa.select(
            allocations.c.consumer_id, allocations.c.resource_provider_id, allocations.c.used
        ),
        "consumers": sa.select(consumers.c.uuid, consumers.c.generation),
        "projects": sa.select(projects.c.external_id),
        "types": sa.select(consumer_types.c.name),
        "generations": sa.select(resource_providers.c.name, resource_providers.c.generation),
    }
    with db.connect() as conn:
        return {k: sorted(tuple(r) for r in conn.execute(s)) for k, s in tables.items()}


def gens(db: Database) -> dict[str, int]:
    return dict(snapshot(db)["generations"])


@pytest.fixture
def cn(db: Database) -> Ref:
    with db.begin() as conn:
        return provider(
            conn,
            "cn1",
            inventory={
                "VCPU": 4,
                "MEMORY_MB": {"total": 4096, "min_unit": 256, "max_unit": 2048, "step_size": 256},
            },
        )


def test_new_consumer_then_replace(db: Database, cn: Ref) -> None:
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 2, "MEMORY_MB": 512}}))
    assert alloc_api.get_allocations(db, C1) == {cn.uuid: {"VCPU": 2, "MEMORY_MB": 512}}
    consumer = consumer_api.get_consumer(db, C1)
    assert (consumer.project_id, consumer.consumer_type, consumer.generation) == (
        "proj",
        "INSTANCE",
        1,
    )
    assert gens(db) == {"cn1": 1}
    alloc_api.replace_allocations(
        db, req(C1, {cn.uuid: {"VCPU": 4}}, gen=1, consumer_type="MIGRATION", user_id="u2")
    )
    assert alloc_api.get_allocations(db, C1) == {cn.uuid: {"VCPU": 4}}
    consumer = consumer_api.get_consumer(db, C1)
    assert (consumer.user_id, consumer.consumer_type, consumer.generation) == (
        "u2",
        "MIGRATION",
        2,
    )
    assert snapshot(db)["types"] == [("INSTANCE",), ("MIGRATION",)]


def test_consumer_generation_conflicts_write_nothing(db: Database, cn: Ref) -> None:
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 1}}))
    before = snapshot(db)
    for bad in (
        req(C1, {cn.uuid: {"VCPU": 2}}),  # claims new, exists
        req(C1, {cn.uuid: {"VCPU": 2}}, gen=0),  # stale
        req(C2, {cn.uuid: {"VCPU": 2}}, gen=3),  # does not exist
        req(C1, {}),  # empty, claims new
    ):
        with pytest.raises(ConcurrentUpdate) as err:
            alloc_api.replace_allocations(db, bad)
        assert err.value.code == "rpquery.consumer.generation_conflict"
    assert snapshot(db) == before


BAD_INPUT = [
    ("consumer", {"consumer": "nope"}, "rpquery.consumer.bad_uuid"),
    ("provider", {"rp": "1234"}, "rpquery.provider.bad_uuid"),
    ("negative", {"amount": -1}, "rpquery.allocation.bad_amount"),
    ("zero", {"amount": 0}, "rpquery.allocation.bad_amount"),
    ("float", {"amount": 1.5}, "rpquery.allocation.bad_amount"),
    ("bool", {"amount": True}, "rpquery.allocation.bad_amount"),
    ("unknown-rc", {"rc": "CUSTOM_NOPE"}, "rpquery.resource_class.not_found"),
    ("lowercase-rc", {"rc": "CUSTOM_gpu"}, "rpquery.resource_class.bad_name"),
    ("type-lower", {"consumer_type": "instance"}, "rpquery.consumer.bad_type"),
    ("type-missing", {"consumer_type": ""}, "rpquery.consumer.bad_type"),
    ("project", {"project_id": ""}, "rpquery.consumer.bad_project"),
    ("generation", {"gen": -1}, "rpquery.consumer.bad_generation"),
    ("no-provider", {"rp": "9d4c0a43-7b3c-4c39-9f3d-a4b8e1f0c0de"}, None),
]


@pytest.mark.parametrize(("case", "change", "code"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_writes_nothing(
    db: Database, cn: Ref, case: str, change: dict[str, Any], code: str | None
) -> None:
    change = dict(change)
    rp = change.pop("rp", cn.uuid)
    rc = change.pop("rc", "VCPU")
    amount = change.pop("amount", 1)
    consumer = change.pop("consumer", C1)
    gen = change.pop("gen", None)
    before = snapshot(db)
    with pytest.raises(InvalidRequest) as err:
        alloc_api.replace_allocations(db, req(consumer, {rp: {rc: amount}}, gen=gen, **change))
    assert err.value.code == (code or "rpquery.allocation.provider_not_found")
    assert err.value.token is not None
    assert snapshot(db) == before


@pytest.mark.parametrize(
    ("resources", "code"),
    [
        ({"DISK_GB": 1}, "rpquery.allocation.no_inventory"),
        ({"MEMORY_MB": 128}, "rpquery.allocation.below_min_unit"),
        ({"MEMORY_MB": 4096}, "rpquery.allocation.above_max_unit"),
        ({"MEMORY_MB": 300}, "rpquery.allocation.step_size"),
    ],
)
def test_capacity_and_units(db: Database, cn: Ref, resources: dict[str, int], code: str) -> None:
    before = snapshot(db)
    with pytest.raises(CapacityExceeded) as err:
        alloc_api.replace_allocations(db, req(C1, {cn.uuid: resources}))
    assert err.value.code == code
    assert snapshot(db) == before


def test_own_previous_allocations_do_not_count(db: Database, cn: Ref) -> None:
    with db.begin() as conn:
        allocate(conn, C2, cn, "VCPU", 1)
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 3}}))
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 3}}, gen=1))  # not 6
    before = snapshot(db)
    with pytest.raises(CapacityExceeded) as err:
        alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 4}}, gen=2))
    assert (err.value.code, err.value.token) == ("rpquery.allocation.capacity_exceeded", "VCPU")
    assert snapshot(db) == before


def test_overage_may_stay_or_shrink_but_not_grow(db: Database) -> None:
    with db.begin() as conn:
        over = provider(conn, "excl_over", inventory={"VCPU": 4})
        allocate(conn, C1, over, "VCPU", 4)
        allocate(conn, C2, over, "VCPU", 2)  # 6 used of 4: inventory was shrunk behind us
    alloc_api.replace_allocations(db, req(C1, {over.uuid: {"VCPU": 4}}, gen=0))  # same
    alloc_api.replace_allocations(db, req(C1, {over.uuid: {"VCPU": 3}}, gen=1))  # better
    with pytest.raises(CapacityExceeded):
        alloc_api.replace_allocations(db, req(C1, {over.uuid: {"VCPU": 4}}, gen=2))  # worse
    assert alloc_api.get_allocations(db, C1) == {over.uuid: {"VCPU": 3}}


def test_moving_bumps_the_new_provider_only(db: Database, cn: Ref) -> None:
    """As Placement 16.0: a provider a consumer only leaves keeps its generation; one an
    emptied consumer held is raised (tests/test_placement_generations.py asks Placement)."""
    with db.begin() as conn:
        other = provider(conn, "cn2", inventory={"VCPU": 4})
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 2}}))
    assert gens(db) == {"cn1": 1, "cn2": 0}
    alloc_api.replace_allocations(db, req(C1, {other.uuid: {"VCPU": 2}}, gen=1))
    assert gens(db) == {"cn1": 1, "cn2": 1}
    assert alloc_api.get_allocations(db, C1) == {other.uuid: {"VCPU": 2}}
    alloc_api.replace_allocations(db, req(C2, {cn.uuid: {"VCPU": 1}}))
    assert gens(db) == {"cn1": 2, "cn2": 1}
    # C1 emptied (cn2 raised), C2 leaves cn1 for cn2 (cn1 kept): one batch
    alloc_api.replace_many(db, [req(C1, {}, gen=2), req(C2, {other.uuid: {"VCPU": 1}}, gen=1)])
    assert gens(db) == {"cn1": 2, "cn2": 2}


def test_empty_allocations_delete_the_consumer(db: Database, cn: Ref) -> None:
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 2}}))
    alloc_api.replace_allocations(db, req(C1, {}, gen=1))
    assert snapshot(db)["allocations"] == [] and snapshot(db)["consumers"] == []
    assert gens(db) == {"cn1": 2}
    with pytest.raises(NotFound):
        consumer_api.get_consumer(db, C1)


def test_delete_allocations(db: Database, cn: Ref) -> None:
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 2}}))
    with pytest.raises(ConcurrentUpdate):
        alloc_api.delete_allocations(db, C1, consumer_generation=0)
    with pytest.raises(NotFound) as missing:
        alloc_api.delete_allocations(db, C2, consumer_generation=0)
    assert missing.value.code == "rpquery.consumer.not_found"
    with pytest.raises(InvalidRequest):
        alloc_api.delete_allocations(db, "bad", consumer_generation=0)
    assert len(snapshot(db)["allocations"]) == 1
    alloc_api.delete_allocations(db, C1, consumer_generation=1)
    assert snapshot(db)["allocations"] == [] and snapshot(db)["consumers"] == []


def consumer_row(db: Database, consumer: str) -> tuple[int, str | None, str]:
    """(generation, type name or None, project) of one consumer."""
    stmt = (
        sa.select(consumers.c.generation, consumer_types.c.name, projects.c.external_id)
        .select_from(consumers)
        .outerjoin(consumer_types, consumer_types.c.id == consumers.c.consumer_type_id)
        .join(projects, projects.c.id == consumers.c.project_id)
        .where(consumers.c.uuid == consumer)
    )
    with db.connect() as conn:
        row = conn.execute(stmt).one()
    return int(row[0]), row[1], row[2]


def test_no_consumer_type_gives_none_and_keeps_an_existing_one(db: Database, cn: Ref) -> None:
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 1}}, consumer_type=None))
    assert consumer_row(db, C1) == (1, None, "proj")  # Placement's "unknown" type
    alloc_api.replace_allocations(db, req(C2, {cn.uuid: {"VCPU": 1}}, consumer_type="MIGRATION"))
    alloc_api.replace_allocations(db, req(C2, {cn.uuid: {"VCPU": 2}}, gen=1, consumer_type=None))
    assert consumer_row(db, C2) == (2, "MIGRATION", "proj")


def test_unchecked_generation_creates_updates_and_deletes(db: Database, cn: Ref) -> None:
    """Before microversion 1.28 writes ignore the consumer generation."""

    def legacy(allocs: dict[str, dict[str, int]], gen: int | None, **kw: Any) -> None:
        request = req(C1, allocs, gen=gen, consumer_type=None, **kw)
        alloc_api.replace_allocations(db, dataclasses.replace(request, generation_checked=False))

    legacy({cn.uuid: {"VCPU": 1}}, gen=7)  # absent: created, whatever generation is passed
    assert consumer_row(db, C1) == (1, None, "proj")
    legacy({cn.uuid: {"VCPU": 2}}, gen=None, project_id="other")  # exists: updated anyway
    assert consumer_row(db, C1) == (2, None, "other")
    assert alloc_api.get_allocations(db, C1) == {cn.uuid: {"VCPU": 2}}
    legacy({}, gen=None)
    assert snapshot(db)["consumers"] == [] and snapshot(db)["allocations"] == []
    legacy({}, gen=None)  # nothing to delete: no error either


def test_delete_allocations_without_generation(db: Database, cn: Ref) -> None:
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 2}}))
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 3}}, gen=1))
    assert gens(db) == {"cn1": 2}
    alloc_api.delete_allocations(db, C1, consumer_generation=None)
    assert snapshot(db)["allocations"] == [] and snapshot(db)["consumers"] == []
    assert gens(db) == {"cn1": 2}  # as Placement: a delete bumps no provider generation
    with pytest.raises(NotFound):
        alloc_api.delete_allocations(db, C1, consumer_generation=None)


def test_replace_many_is_atomic(db: Database, cn: Ref) -> None:
    with pytest.raises(CapacityExceeded):  # 3 + 2 > 4: summed over the batch
        alloc_api.replace_many(
            db, [req(C1, {cn.uuid: {"VCPU": 3}}), req(C2, {cn.uuid: {"VCPU": 2}})]
        )
    assert snapshot(db)["allocations"] == []
    alloc_api.replace_many(
        db,
        [
            req(C1, {cn.uuid: {"VCPU": 3}}),
            req(C2, {cn.uuid: {"VCPU": 1}}, consumer_type="MIGRATION"),
        ],
    )
    assert gens(db) == {"cn1": 1}  # one bump for the whole batch
    with pytest.raises(InvalidRequest) as dup:
        alloc_api.replace_many(db, [req(C1, {}, gen=1), req(C1, {}, gen=1)])
    assert dup.value.code == "rpquery.allocation.duplicate_consumer"
    # a move between consumers in one batch: C1 gives back 3, C2 takes 4
    alloc_api.replace_many(db, [req(C1, {}, gen=1), req(C2, {cn.uuid: {"VCPU": 4}}, gen=1)])
    assert alloc_api.get_allocations(db, C2) == {cn.uuid: {"VCPU": 4}}
    assert alloc_api.get_allocations(db, C1) == {}


def test_write_uses_few_statements(db: Database, cn: Ref) -> None:
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 1}}))
    with db.count_statements() as counter:
        alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 2, "MEMORY_MB": 512}}, gen=1))
    # class ids, state, provider bump, owners, consumer bump, delete, insert
    assert counter.count <= 7, counter.statements


def test_composes_inside_an_outer_transaction(db: Database, cn: Ref) -> None:
    class Abort(Exception):
        pass

    with pytest.raises(Abort), db.begin() as conn:
        alloc_api.write_consumer_allocations(conn, req(C1, {cn.uuid: {"VCPU": 2}}))
        assert conn.execute(sa.select(sa.func.count()).select_from(allocations)).scalar() == 1
        raise Abort
    assert snapshot(db)["allocations"] == []


def test_retry_only_on_provider_conflicts(db: Database) -> None:
    calls: list[str] = []

    def flaky(code: str) -> Any:
        def work(conn: Connection) -> int:
            calls.append(code)
            if len(calls) < 3:
                raise ConcurrentUpdate(code)
            return len(calls)

        return work

    assert alloc_api.run_with_retry(db, flaky("rpquery.provider.generation_conflict")) == 3
    calls.clear()
    with pytest.raises(ConcurrentUpdate):
        alloc_api.run_with_retry(db, flaky("rpquery.consumer.generation_conflict"))
    assert len(calls) == 1
    calls.clear()
    with pytest.raises(ConcurrentUpdate):
        alloc_api.run_with_retry(db, flaky("rpquery.concurrent_update"), attempts=2)
    assert len(calls) == 2


# ---------------------------------------------------------------- builders, no database

DIALECTS = {
    "sqlite": sqlite.dialect(),
    "postgresql": postgresql.dialect(),
    "mysql": mysql.dialect(),
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_builders_compile_on_every_dialect(dialect: str) -> None:
    compiled = {
        "state": str(
            alloc_api.state_select([new_uuid()], [C1]).compile(dialect=DIALECTS[dialect])
        ),
        "bump": str(alloc_api.generation_bump({3: 1, 1: 7}).compile(dialect=DIALECTS[dialect])),
        "subtree": str(
            resource_providers.update()
            .where(resource_providers.c.id.in_(subtree_ids(1)))
            .values(root_provider_id=2)
            .compile(dialect=DIALECTS[dialect])
        ),
    }
    # one statement: outer select, usage subquery, and twice the providers in play as a
    # UNION of two index lookups (named providers, providers the consumers hold)
    assert compiled["state"].count("SELECT") == 6
    assert compiled["state"].count("UNION") == 2
    assert " OR " not in compiled["state"]
    assert "GROUP BY" in compiled["state"]
    assert compiled["bump"].startswith("UPDATE resource_providers")
    assert compiled["bump"].count(" OR ") == 1  # both providers in one statement
    # the recursive CTE sits inside the UPDATE's WHERE, in a derived table
    assert compiled["subtree"].startswith("UPDATE")
    assert "WITH RECURSIVE" in compiled["subtree"]


def test_docs_example_runs(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example in docs/writes.md runs as written (on an embedded SQLite file)."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).parent.parent / "docs" / "writes.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(code.group(1), "docs/writes.md", "exec"), namespace)  # noqa: S102
    db = namespace["db"]
    try:
        assert alloc_api.get_allocations(db, "30328d13-e299-4a93-a102-61e4ccabe474") == {
            namespace["cn"].uuid: {"VCPU": 2, "MEMORY_MB": 512}
        }
    finally:
        db.dispose()


def test_already_bumped_providers_are_not_bumped_twice(db: Database, cn: Ref) -> None:
    with db.begin() as conn:
        other = provider(conn, "cn2", inventory={"VCPU": 4})
    with db.begin() as conn:
        conn.execute(
            resource_providers.update()
            .where(resource_providers.c.id == cn.id)
            .values(generation=resource_providers.c.generation + 1)
        )
        alloc_api.write_consumer_allocations(
            conn,
            req(C1, {cn.uuid: {"VCPU": 1}, other.uuid: {"VCPU": 1}}),
            already_bumped={cn.id},
        )
    assert gens(db) == {"cn1": 1, "cn2": 1}


def test_generations_of_existing_consumers(db: Database, cn: Ref) -> None:
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 1}}))
    alloc_api.replace_allocations(db, req(C1, {cn.uuid: {"VCPU": 2}}, gen=1))
    assert consumer_api.generations(db, [C1, C2]) == {C1: 2}
    assert consumer_api.generations(db, []) == {}
