"""Inventory writes on every backend: replace all, set one, delete one, validation,
generation guard, and Placement's in-use rules (plus rpquery's shrink rule)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate, InUse, InvalidRequest, NotFound
from rpquery.models import Inventory
from rpquery.store import catalog
from rpquery.store.tables import inventories, resource_providers
from rpquery.write import inventory as inv_api
from tests.factories import Ref, allocate, new_uuid, provider


@pytest.fixture
def cn(db: Database) -> Ref:
    with db.begin() as conn:
        return provider(conn, "cn1")


def generation(db: Database, rp: Ref) -> int:
    with db.connect() as conn:
        return int(
            conn.execute(
                sa.select(resource_providers.c.generation).where(resource_providers.c.id == rp.id)
            ).scalar_one()
        )


def inventory_rows(db: Database) -> list[tuple]:
    cols = [inventories.c[n] for n in ("resource_class_id", "total", "reserved", "max_unit")]
    with db.connect() as conn:
        return sorted(tuple(row) for row in conn.execute(sa.select(*cols)))


def test_set_get_replace_delete(db: Database, cn: Ref) -> None:
    vcpu = Inventory(total=8, allocation_ratio=16.0)
    mem = Inventory(total=4096, reserved=512, min_unit=256, max_unit=2048, step_size=256)
    assert (
        inv_api.set_inventories(db, cn.uuid, {"VCPU": vcpu, "MEMORY_MB": mem}, generation=0) == 1
    )
    assert inv_api.get_inventories(db, cn.uuid) == {"VCPU": vcpu, "MEMORY_MB": mem}
    assert inv_api.get_inventories(db, cn.uuid)["VCPU"].capacity == 128
    assert inv_api.set_inventory(db, cn.uuid, "DISK_GB", Inventory(total=100), generation=1) == 2
    assert set(inv_api.get_inventories(db, cn.uuid)) == {"VCPU", "MEMORY_MB", "DISK_GB"}
    assert inv_api.set_inventories(db, cn.uuid, {"DISK_GB": Inventory(200)}, generation=2) == 3
    assert inv_api.get_inventories(db, cn.uuid) == {"DISK_GB": Inventory(200)}
    assert inv_api.delete_inventory(db, cn.uuid, "DISK_GB", generation=3) == 4
    assert inv_api.get_inventories(db, cn.uuid) == {}
    assert generation(db, cn) == 4


def test_custom_class_inventory(db: Database, cn: Ref) -> None:
    catalog.create_resource_class(db, "CUSTOM_GPU")
    inv_api.set_inventory(db, cn.uuid, "CUSTOM_GPU", Inventory(total=2), generation=0)
    assert inv_api.get_inventories(db, cn.uuid) == {"CUSTOM_GPU": Inventory(2, max_unit=2)}


@pytest.mark.parametrize(
    ("inv", "code", "token"),
    [
        (Inventory(total=0), "rpquery.inventory.bad_total", "VCPU.total"),
        (Inventory(total=-4), "rpquery.inventory.bad_total", "VCPU.total"),
        (Inventory(total=4, reserved=-1), "rpquery.inventory.bad_reserved", "VCPU.reserved"),
        (Inventory(total=4, reserved=5), "rpquery.inventory.bad_reserved", "VCPU.reserved"),
        (Inventory(total=4, min_unit=0), "rpquery.inventory.bad_min_unit", "VCPU.min_unit"),
        (Inventory(4, min_unit=3, max_unit=2), "rpquery.inventory.bad_min_unit", "VCPU.min_unit"),
        (Inventory(total=4, max_unit=-1), "rpquery.inventory.bad_max_unit", "VCPU.max_unit"),
        (Inventory(total=4, step_size=0), "rpquery.inventory.bad_step_size", "VCPU.step_size"),
        (Inventory(4, allocation_ratio=0.0), "rpquery.inventory.bad_allocation_ratio", None),
        (Inventory(total=2**31), "rpquery.inventory.bad_total", "VCPU.total"),
        (Inventory(total=4.5), "rpquery.inventory.bad_total", "VCPU.total"),  # type: ignore[arg-type]
    ],
)
def test_bad_inventory_writes_nothing(
    db: Database, cn: Ref, inv: Inventory, code: str, token: str | None
) -> None:
    with pytest.raises(InvalidRequest) as err:
        inv_api.set_inventories(db, cn.uuid, {"VCPU": inv}, generation=0)
    assert err.value.code == code
    if token:
        assert err.value.token == token
    assert inventory_rows(db) == [] and generation(db, cn) == 0


@pytest.mark.parametrize(
    ("rp_uuid", "rc", "code"),
    [
        ("not-a-uuid", "VCPU", "rpquery.provider.bad_uuid"),
        (None, "CUSTOM_lower", "rpquery.resource_class.bad_name"),
        (None, "vcpu", "rpquery.resource_class.bad_name"),
        (None, "CUSTOM_NOT_THERE", "rpquery.resource_class.not_found"),
    ],
)
def test_bad_names_write_nothing(
    db: Database, cn: Ref, rp_uuid: str | None, rc: str, code: str
) -> None:
    for call in (
        lambda: inv_api.set_inventory(db, rp_uuid or cn.uuid, rc, Inventory(4), generation=0),
        lambda: inv_api.set_inventories(db, rp_uuid or cn.uuid, {rc: Inventory(4)}, generation=0),
        lambda: inv_api.delete_inventory(db, rp_uuid or cn.uuid, rc, generation=0),
    ):
        with pytest.raises(InvalidRequest) as err:
            call()
        assert err.value.code == code
    assert inventory_rows(db) == [] and generation(db, cn) == 0


def test_stale_generation_and_missing_things(db: Database, cn: Ref) -> None:
    inv_api.set_inventory(db, cn.uuid, "VCPU", Inventory(4), generation=0)
    with pytest.raises(ConcurrentUpdate) as err:
        inv_api.set_inventory(db, cn.uuid, "VCPU", Inventory(8), generation=0)
    assert err.value.code == "rpquery.provider.generation_conflict"
    with pytest.raises(NotFound) as missing_rp:
        inv_api.set_inventory(db, new_uuid(), "VCPU", Inventory(8), generation=0)
    assert missing_rp.value.code == "rpquery.provider.not_found"
    with pytest.raises(NotFound) as missing_inv:
        inv_api.delete_inventory(db, cn.uuid, "DISK_GB", generation=1)
    assert missing_inv.value.code == "rpquery.inventory.not_found"
    with pytest.raises(NotFound):
        inv_api.get_inventories(db, new_uuid())
    assert inventory_rows(db) == [(0, 4, 0, 4)] and generation(db, cn) == 1


def test_in_use_inventory_cannot_go(db: Database) -> None:
    with db.begin() as conn:
        cn = provider(conn, "cn1", inventory={"VCPU": 8, "DISK_GB": 100})
        allocate(conn, new_uuid(), cn, "VCPU", 6)
    before = inventory_rows(db)
    with pytest.raises(InUse) as err:
        inv_api.delete_inventory(db, cn.uuid, "VCPU", generation=0)
    assert (err.value.code, err.value.token) == ("rpquery.inventory.in_use", "VCPU")
    with pytest.raises(InUse):
        inv_api.set_inventories(db, cn.uuid, {"DISK_GB": Inventory(100)}, generation=0)
    assert inventory_rows(db) == before and generation(db, cn) == 0
    # the unused class can go
    assert inv_api.delete_inventory(db, cn.uuid, "DISK_GB", generation=0) == 1


def test_shrink_below_usage_refused(db: Database) -> None:
    with db.begin() as conn:
        cn = provider(conn, "cn1", inventory={"VCPU": 8})
        allocate(conn, new_uuid(), cn, "VCPU", 6)
    for shrunk in (Inventory(5), Inventory(8, reserved=3), Inventory(8, allocation_ratio=0.5)):
        with pytest.raises(InUse) as err:
            inv_api.set_inventory(db, cn.uuid, "VCPU", shrunk, generation=0)
        assert err.value.code == "rpquery.inventory.capacity_below_usage"
    assert inventory_rows(db) == [(0, 8, 0, 8)] and generation(db, cn) == 0
    # down to exactly the usage is fine
    assert inv_api.set_inventory(db, cn.uuid, "VCPU", Inventory(8, reserved=2), generation=0) == 1


def test_shrink_below_usage_allowed_when_asked(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """What the API layer does for nova's resource tracker (as Placement): the shrink
    lands, a warning names the class, and the provider is over capacity — no candidate."""
    from rpquery.read.candidates import allocation_candidates

    with db.begin() as conn:
        cn = provider(conn, "cn1", inventory={"VCPU": 8})
        allocate(conn, new_uuid(), cn, "VCPU", 6)
    with caplog.at_level("WARNING", logger="rpquery.write"):
        assert (
            inv_api.set_inventory(
                db, cn.uuid, "VCPU", Inventory(5), generation=0, allow_below_usage=True
            )
            == 1
        )
    assert inventory_rows(db) == [(0, 5, 0, 5)]
    assert [r.name for r in caplog.records] == ["rpquery.write"]
    assert "VCPU" in caplog.records[0].getMessage()
    assert not allocation_candidates(db, "resources=VCPU:1").allocation_requests
    # removing a class that has allocations stays refused
    with pytest.raises(InUse) as err:
        inv_api.set_inventories(db, cn.uuid, {}, generation=1, allow_below_usage=True)
    assert err.value.code == "rpquery.inventory.in_use"


def test_existing_overage_may_be_edited_without_shrinking(db: Database) -> None:
    with db.begin() as conn:
        cn = provider(conn, "cn1", inventory={"VCPU": 4})
        allocate(conn, new_uuid(), cn, "VCPU", 6)  # over capacity already
    inv_api.set_inventory(db, cn.uuid, "VCPU", Inventory(4, max_unit=2), generation=0)
    assert inv_api.get_inventories(db, cn.uuid)["VCPU"].max_unit == 2
    with pytest.raises(InUse):
        inv_api.set_inventory(db, cn.uuid, "VCPU", Inventory(3), generation=1)


def test_write_inventory_rows_inside_a_transaction(db: Database) -> None:
    """The connection-level piece: no generation check, usage rules optional."""
    with db.begin() as conn:
        cn = provider(conn, "cn1", inventory={"VCPU": 8, "DISK_GB": 100})
        allocate(conn, new_uuid(), cn, "VCPU", 6)
    with pytest.raises(InUse), db.begin() as conn:
        ids = catalog.require_resource_class_ids(conn, ["MEMORY_MB"])
        inv_api.write_inventory_rows(
            conn, cn.id, {"MEMORY_MB": Inventory(64)}, ids, replace_all=True
        )
    with db.begin() as conn:
        ids = catalog.require_resource_class_ids(conn, ["MEMORY_MB"])
        inv_api.write_inventory_rows(
            conn, cn.id, {"MEMORY_MB": Inventory(64)}, ids, replace_all=True, check_usage=False
        )
    assert inv_api.get_inventories(db, cn.uuid) == {"MEMORY_MB": Inventory(64)}
    assert generation(db, cn) == 0
