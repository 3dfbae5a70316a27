"""Custom resource classes and traits on every backend: standard ones present, custom
ones created and deleted, names checked, in-use ones kept."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import Conflict, InUse, InvalidRequest, NotFound
from rpquery.store import catalog
from rpquery.store.tables import CUSTOM_RC_MIN_ID, resource_classes, traits
from tests.factories import allocate, new_uuid, provider


def custom_rows(db: Database) -> tuple[list[tuple[int, str]], list[str]]:
    with db.connect() as conn:
        rcs = conn.execute(
            sa.select(resource_classes.c.id, resource_classes.c.name)
            .where(resource_classes.c.id >= CUSTOM_RC_MIN_ID)
            .order_by(resource_classes.c.id)
        )
        names = conn.execute(
            sa.select(traits.c.name).where(traits.c.name.like("CUSTOM%")).order_by(traits.c.name)
        )
        return [tuple(r) for r in rcs], list(names.scalars())


def test_standard_names_present(db: Database) -> None:
    names = catalog.list_resource_classes(db)
    assert names[:3] == list(catalog.STANDARD_RESOURCE_CLASSES[:3])
    assert set(catalog.list_traits(db)) == catalog.STANDARD_TRAITS
    assert all(t.startswith("HW_CPU_") for t in catalog.list_traits(db, prefix="HW_CPU_"))


def test_custom_resource_class_lifecycle(db: Database) -> None:
    assert catalog.create_resource_class(db, "CUSTOM_FPGA") == CUSTOM_RC_MIN_ID
    assert catalog.create_resource_class(db, "CUSTOM_GPU_A100") == CUSTOM_RC_MIN_ID + 1
    assert catalog.list_resource_classes(db)[-2:] == ["CUSTOM_FPGA", "CUSTOM_GPU_A100"]
    with pytest.raises(Conflict) as dup:
        catalog.create_resource_class(db, "CUSTOM_FPGA")
    assert dup.value.code == "rpquery.resource_class.exists"
    catalog.delete_resource_class(db, "CUSTOM_FPGA")
    assert custom_rows(db)[0] == [(CUSTOM_RC_MIN_ID + 1, "CUSTOM_GPU_A100")]
    with pytest.raises(NotFound):
        catalog.delete_resource_class(db, "CUSTOM_FPGA")


@pytest.mark.parametrize("name", ["CUSTOM_gpu", "GPU", "CUSTOM_", "CUSTOM-X", "VCPU", ""])
def test_bad_custom_names_write_nothing(db: Database, name: str) -> None:
    with pytest.raises(InvalidRequest) as rc_err:
        catalog.create_resource_class(db, name)
    assert rc_err.value.code == "rpquery.resource_class.bad_name"
    with pytest.raises(InvalidRequest) as trait_err:
        catalog.create_trait(db, name)
    assert trait_err.value.code == "rpquery.trait.bad_name"
    assert custom_rows(db) == ([], [])


def test_standard_ones_cannot_be_deleted(db: Database) -> None:
    with pytest.raises(InvalidRequest) as rc_err:
        catalog.delete_resource_class(db, "VCPU")
    assert rc_err.value.code == "rpquery.resource_class.standard"
    with pytest.raises(InvalidRequest) as trait_err:
        catalog.delete_trait(db, "HW_CPU_X86_AVX2")
    assert trait_err.value.code == "rpquery.trait.standard"
    assert "VCPU" in catalog.list_resource_classes(db)
    assert "HW_CPU_X86_AVX2" in catalog.list_traits(db)


def test_in_use_class_is_kept(db: Database) -> None:
    catalog.create_resource_class(db, "CUSTOM_INV")
    catalog.create_resource_class(db, "CUSTOM_ALLOC")
    with db.begin() as conn:
        rp = provider(conn, "cn1", inventory={"CUSTOM_INV": 2, "CUSTOM_ALLOC": 2})
        allocate(conn, new_uuid(), rp, "CUSTOM_ALLOC", 1)
    for name in ("CUSTOM_INV", "CUSTOM_ALLOC"):
        with pytest.raises(InUse) as err:
            catalog.delete_resource_class(db, name)
        assert err.value.code == "rpquery.resource_class.in_use"
    assert len(custom_rows(db)[0]) == 2


def test_trait_lifecycle_and_in_use(db: Database) -> None:
    assert catalog.create_trait(db, "CUSTOM_GOLD") is True
    assert catalog.create_trait(db, "CUSTOM_GOLD") is False
    catalog.create_trait(db, "CUSTOM_SILVER")
    assert catalog.list_traits(db, prefix="CUSTOM_") == ["CUSTOM_GOLD", "CUSTOM_SILVER"]
    with db.begin() as conn:
        provider(conn, "cn1", traits=["CUSTOM_GOLD"])
    with pytest.raises(InUse) as err:
        catalog.delete_trait(db, "CUSTOM_GOLD")
    assert err.value.code == "rpquery.trait.in_use"
    catalog.delete_trait(db, "CUSTOM_SILVER")
    assert custom_rows(db)[1] == ["CUSTOM_GOLD"]
    with pytest.raises(NotFound) as missing:
        catalog.delete_trait(db, "CUSTOM_SILVER")
    assert missing.value.code == "rpquery.trait.not_found"


def test_prefix_is_literal(db: Database) -> None:
    catalog.create_trait(db, "CUSTOM_A_B")
    catalog.create_trait(db, "CUSTOM_AXB")
    assert catalog.list_traits(db, prefix="CUSTOM_A_") == ["CUSTOM_A_B"]


def test_delete_with_malformed_names(db: Database) -> None:
    with pytest.raises(InvalidRequest) as rc_err:
        catalog.delete_resource_class(db, "CUSTOM_lower")
    assert rc_err.value.code == "rpquery.resource_class.bad_name"
    with pytest.raises(InvalidRequest) as trait_err:
        catalog.delete_trait(db, "custom_lower")
    assert trait_err.value.code == "rpquery.trait.bad_name"
