"""Provider writes on every backend: create, rename, re-parent, un-parent, delete, and
bad input that leaves the table untouched."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate, Conflict, InUse, InvalidRequest, NotFound
from rpquery.models import Inventory
from rpquery.store.tables import (
    inventories,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
)
from rpquery.write import associations, inventory, providers
from tests.factories import allocate, new_uuid, provider


def provider_rows(db: Database) -> list[tuple[str, str | None, int | None]]:
    rp, parent = resource_providers, resource_providers.alias("p")
    with db.connect() as conn:
        return sorted(
            conn.execute(
                sa.select(rp.c.name, parent.c.name, rp.c.generation).outerjoin(
                    parent, parent.c.id == rp.c.parent_provider_id
                )
            ).all()
        )


def roots(db: Database) -> dict[str, str]:
    rp, root = resource_providers, resource_providers.alias("r")
    with db.connect() as conn:
        rows = conn.execute(
            sa.select(rp.c.name, root.c.name).join(root, root.c.id == rp.c.root_provider_id)
        )
        return dict(rows.all())


def test_create_root_and_child(db: Database) -> None:
    rp_uuid = new_uuid()
    cn = providers.create_provider(db, "cn1", uuid=rp_uuid.upper())
    numa = providers.create_provider(db, "cn1_numa0", parent_uuid=cn.uuid)
    assert cn.uuid == rp_uuid and cn.generation == 0 and cn.root_uuid == rp_uuid
    assert cn.is_root and not numa.is_root
    assert (numa.parent_uuid, numa.root_uuid) == (rp_uuid, rp_uuid)
    assert providers.get_provider(db, numa.uuid) == numa
    assert roots(db) == {"cn1": "cn1", "cn1_numa0": "cn1"}


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"name": ""}, "rpquery.provider.bad_name"),
        ({"name": "x" * 201}, "rpquery.provider.bad_name"),
        ({"name": "ok", "uuid": "not-a-uuid"}, "rpquery.provider.bad_uuid"),
        ({"name": "ok", "parent_uuid": "1234"}, "rpquery.provider.bad_uuid"),
        ({"name": "ok", "parent_uuid": new_uuid()}, "rpquery.provider.parent_not_found"),
    ],
)
def test_create_bad_input_writes_nothing(db: Database, kwargs: dict, code: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        providers.create_provider(db, **kwargs)
    assert err.value.code == code
    assert provider_rows(db) == []


def test_create_duplicate_name_or_uuid(db: Database) -> None:
    cn = providers.create_provider(db, "cn1")
    with pytest.raises(Conflict) as err:
        providers.create_provider(db, "cn1")
    assert err.value.code == "rpquery.provider.duplicate"
    with pytest.raises(Conflict):
        providers.create_provider(db, "other", uuid=cn.uuid)
    assert provider_rows(db) == [("cn1", None, 0)]


def test_get_missing_provider(db: Database) -> None:
    with pytest.raises(NotFound) as err:
        providers.get_provider(db, new_uuid())
    assert err.value.code == "rpquery.provider.not_found"


def test_rename_checks_generation(db: Database) -> None:
    cn = providers.create_provider(db, "cn1")
    providers.create_provider(db, "cn2")
    renamed = providers.rename_provider(db, cn.uuid, "cn1-new", generation=0)
    assert (renamed.name, renamed.generation) == ("cn1-new", 1)
    with pytest.raises(ConcurrentUpdate) as err:
        providers.rename_provider(db, cn.uuid, "stale", generation=0)
    assert err.value.code == "rpquery.provider.generation_conflict"
    stale = err.value
    assert (stale.provider, stale.expected_generation, stale.actual_generation) == (cn.uuid, 0, 1)
    with pytest.raises(Conflict) as dup:
        providers.rename_provider(db, cn.uuid, "cn2", generation=1)
    assert dup.value.code == "rpquery.provider.duplicate"
    with pytest.raises(InvalidRequest):
        providers.rename_provider(db, cn.uuid, "ok", generation=-1)
    assert provider_rows(db) == [("cn1-new", None, 1), ("cn2", None, 0)]


def test_reparent_moves_whole_subtree(db: Database) -> None:
    a = providers.create_provider(db, "a")
    b = providers.create_provider(db, "b", parent_uuid=a.uuid)
    providers.create_provider(db, "c", parent_uuid=b.uuid)
    providers.create_provider(db, "d", parent_uuid=a.uuid)
    x = providers.create_provider(db, "x")
    moved = providers.set_parent(db, b.uuid, x.uuid, generation=0)
    assert (moved.parent_uuid, moved.root_uuid, moved.generation) == (x.uuid, x.uuid, 1)
    assert roots(db) == {"a": "a", "b": "x", "c": "x", "d": "a", "x": "x"}
    providers.set_parent(db, b.uuid, None, generation=1)
    assert roots(db) == {"a": "a", "b": "b", "c": "b", "d": "a", "x": "x"}


def test_reparent_sends_one_root_update(db: Database) -> None:
    a = providers.create_provider(db, "a")
    b = providers.create_provider(db, "b", parent_uuid=a.uuid)
    for i in range(5):
        providers.create_provider(db, f"leaf{i}", parent_uuid=b.uuid)
    with db.count_statements() as counter:
        providers.set_parent(db, b.uuid, None, generation=0)
    updates = [s for s in counter.statements if s.lstrip().upper().startswith("UPDATE")]
    assert len(updates) == 2  # the generation bump and one root update for the subtree
    assert set(roots(db).values()) == {"a", "b"}


def test_reparent_refuses_cycles_and_stale_generation(db: Database) -> None:
    a = providers.create_provider(db, "a")
    b = providers.create_provider(db, "b", parent_uuid=a.uuid)
    c = providers.create_provider(db, "c", parent_uuid=b.uuid)
    before = provider_rows(db)
    for target in (a.uuid, c.uuid):
        with pytest.raises(InvalidRequest) as err:
            providers.set_parent(db, a.uuid, target, generation=0)
        assert err.value.code == "rpquery.provider.cycle"
    with pytest.raises(ConcurrentUpdate):
        providers.set_parent(db, c.uuid, a.uuid, generation=3)
    with pytest.raises(InvalidRequest) as missing:
        providers.set_parent(db, c.uuid, new_uuid(), generation=0)
    assert missing.value.code == "rpquery.provider.parent_not_found"
    assert provider_rows(db) == before


def test_delete_removes_links(db: Database) -> None:
    with db.begin() as conn:
        cn = provider(
            conn, "cn1", inventory={"VCPU": 4}, traits=["HW_CPU_X86_AVX"], aggregates=[new_uuid()]
        )
    providers.delete_provider(db, cn.uuid)
    assert provider_rows(db) == []
    with db.connect() as conn:
        for link in (inventories, resource_provider_traits, resource_provider_aggregates):
            assert conn.execute(sa.select(sa.func.count()).select_from(link)).scalar() == 0
    with pytest.raises(NotFound):
        providers.delete_provider(db, cn.uuid)


def test_delete_refused_with_children_or_allocations(db: Database) -> None:
    with db.begin() as conn:
        cn = provider(conn, "cn1", inventory={"VCPU": 4})
        provider(conn, "cn1_numa0", parent=cn)
        used = provider(conn, "cn2", inventory={"VCPU": 4})
        allocate(conn, new_uuid(), used, "VCPU", 1)
    with pytest.raises(InUse) as children:
        providers.delete_provider(db, cn.uuid)
    assert children.value.code == "rpquery.provider.has_children"
    with pytest.raises(InUse) as in_use:
        providers.delete_provider(db, used.uuid)
    assert in_use.value.code == "rpquery.provider.in_use"
    assert len(provider_rows(db)) == 3


BAD_UUID = "123e4567-e89b-12d3-a456-42661417400"  # one digit short
WRITERS = {
    "rename": lambda db, rp, gen: providers.rename_provider(db, rp, "n", generation=gen),
    "set_parent": lambda db, rp, gen: providers.set_parent(db, rp, None, generation=gen),
    "set_inventories": lambda db, rp, gen: inventory.set_inventories(
        db, rp, {"VCPU": Inventory(4)}, generation=gen
    ),
    "set_traits": lambda db, rp, gen: associations.set_provider_traits(
        db, rp, ["HW_CPU_X86_AVX"], generation=gen
    ),
    "set_aggregates": lambda db, rp, gen: associations.set_provider_aggregates(
        db, rp, [new_uuid()], generation=gen
    ),
}


@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS.keys())
def test_every_generation_guarded_write_checks_uuid_and_generation(db: Database, write) -> None:  # type: ignore[no-untyped-def]
    cn = providers.create_provider(db, "cn1")
    with pytest.raises(InvalidRequest) as bad_uuid:
        write(db, BAD_UUID, 0)
    assert (bad_uuid.value.code, bad_uuid.value.token) == ("rpquery.provider.bad_uuid", BAD_UUID)
    with pytest.raises(InvalidRequest) as bad_gen:
        write(db, cn.uuid, -1)
    assert bad_gen.value.code == "rpquery.provider.bad_generation"
    with pytest.raises(ConcurrentUpdate) as stale:
        write(db, cn.uuid, 5)
    assert stale.value.code == "rpquery.provider.generation_conflict"
    assert (stale.value.provider, stale.value.expected_generation) == (cn.uuid, 5)
    assert stale.value.actual_generation == 0
    with pytest.raises(NotFound) as missing:
        write(db, new_uuid(), 0)
    assert missing.value.code == "rpquery.provider.not_found"
    assert provider_rows(db) == [("cn1", None, 0)]
    with pytest.raises(InvalidRequest):
        providers.delete_provider(db, BAD_UUID)
