"""Library functions added for the API layer, on every backend: ``update_provider``
(Placement's PUT: no generation check, no bump, re-parent rules by microversion),
``update_resource_class``, ``list_traits`` filters, ``has_resource_class`` /
``has_trait``."""

from __future__ import annotations

import pytest

from rpquery.errors import Conflict, InvalidRequest, NotFound
from rpquery.store import catalog
from rpquery.write import providers
from tests.factories import provider


def test_update_provider_renames_and_moves_without_bumping(db) -> None:  # type: ignore[no-untyped-def]
    with db.begin() as conn:
        root = provider(conn, "root")
        other = provider(conn, "other")
        child = provider(conn, "child", parent=root)
        grandchild = provider(conn, "grandchild", parent=child)
    moved = providers.update_provider(db, child.uuid, name="kid", parent_uuid=other.uuid)
    assert (moved.name, moved.parent_uuid, moved.root_uuid, moved.generation) == (
        "kid",
        other.uuid,
        other.uuid,
        0,
    )
    assert providers.get_provider(db, grandchild.uuid).root_uuid == other.uuid
    rooted = providers.update_provider(db, child.uuid, parent_uuid=None)
    assert (rooted.parent_uuid, rooted.root_uuid) == (None, child.uuid)
    assert providers.get_provider(db, grandchild.uuid).root_uuid == child.uuid


def test_update_provider_reparent_rules(db) -> None:  # type: ignore[no-untyped-def]
    with db.begin() as conn:
        root = provider(conn, "root")
        other = provider(conn, "other")
        child = provider(conn, "child", parent=root)
        lone = provider(conn, "lone")
    for parent, code in ((other.uuid, "reparent_not_allowed"), (None, "unparent_not_allowed")):
        with pytest.raises(InvalidRequest) as info:
            providers.update_provider(db, child.uuid, parent_uuid=parent, allow_reparenting=False)
        assert info.value.code == f"rpquery.provider.{code}"
    adopted = providers.update_provider(
        db, lone.uuid, parent_uuid=root.uuid, allow_reparenting=False
    )
    assert adopted.root_uuid == root.uuid
    with pytest.raises(InvalidRequest) as info:
        providers.update_provider(db, root.uuid, parent_uuid=child.uuid)
    assert info.value.code == "rpquery.provider.cycle"
    with pytest.raises(Conflict):
        providers.update_provider(db, lone.uuid, name="root")
    assert providers.get_provider(db, child.uuid).parent_uuid == root.uuid


def test_update_resource_class(db) -> None:  # type: ignore[no-untyped-def]
    catalog.create_resource_class(db, "CUSTOM_A")
    catalog.create_resource_class(db, "CUSTOM_B")
    catalog.update_resource_class(db, "CUSTOM_A", "CUSTOM_C")
    assert catalog.has_resource_class(db, "CUSTOM_C")
    assert not catalog.has_resource_class(db, "CUSTOM_A")
    with pytest.raises(Conflict):
        catalog.update_resource_class(db, "CUSTOM_C", "CUSTOM_B")
    with pytest.raises(NotFound):
        catalog.update_resource_class(db, "CUSTOM_NOPE", "CUSTOM_D")
    with pytest.raises(InvalidRequest) as info:
        catalog.update_resource_class(db, "VCPU", "CUSTOM_D")
    assert info.value.code == "rpquery.resource_class.standard"


def test_list_traits_filters(db) -> None:  # type: ignore[no-untyped-def]
    catalog.create_trait(db, "CUSTOM_USED")
    catalog.create_trait(db, "CUSTOM_IDLE")
    with db.begin() as conn:
        provider(conn, "cn", traits=["CUSTOM_USED"])
    assert catalog.list_traits(db, names=["CUSTOM_USED", "CUSTOM_IDLE", "CUSTOM_X"]) == [
        "CUSTOM_IDLE",
        "CUSTOM_USED",
    ]
    assert catalog.list_traits(db, associated=True) == ["CUSTOM_USED"]
    idle = catalog.list_traits(db, associated=False, prefix="CUSTOM_")
    assert idle == ["CUSTOM_IDLE"]
    assert catalog.has_trait(db, "CUSTOM_IDLE") and not catalog.has_trait(db, "CUSTOM_X")
