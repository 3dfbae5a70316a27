"""The handlers of the API layer through the WSGI app, on every backend: resource
providers, inventories, resource classes, traits, aggregates — versioned shapes,
Placement's statuses, messages and error codes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rpquery.api import make_app
from tests.api_client import Result, WsgiClient
from tests.factories import allocate, new_uuid, provider

AGG = "11111111-2222-3333-4444-555555555555"


class Api:
    """A tiny client: ``api.call("POST", "/x", body, version="1.20")``."""

    def __init__(self, db: Any) -> None:
        self.client = WsgiClient(make_app(db))

    def call(
        self, method: str, path: str, body: Any = None, *, version: str = "latest", **headers: str
    ) -> Result:
        sent = {
            "x-auth-token": "admin",
            "accept": "application/json",
            "openstack-api-version": f"placement {version}",
        }
        if body is not None:
            sent["content-type"] = "application/json"
        sent.update(headers)
        data = json.dumps(body) if body is not None else None
        return self.client.simulate_request(method, path, body=data, headers=sent)


@pytest.fixture
def api(db):  # type: ignore[no-untyped-def]
    return Api(db)


def _detail(result: Result) -> str:
    return str(result.json["errors"][0]["detail"])


def test_create_provider_shapes_by_version(api) -> None:  # type: ignore[no-untyped-def]
    old = api.call("POST", "/resource_providers", {"name": "cn1"}, version="1.19")
    assert old.status_code == 201 and old.text == ""
    assert old.headers["location"].startswith("http://falconframework.org/resource_providers/")
    assert "content-type" not in old.headers
    new = api.call("POST", "/resource_providers", {"name": "cn2"}, version="1.20")
    assert new.status_code == 200
    assert new.headers["location"].endswith(f"/resource_providers/{new.json['uuid']}")
    assert new.json["root_provider_uuid"] == new.json["uuid"]
    rels = [link["rel"] for link in new.json["links"]]
    assert rels == ["self", "inventories", "usages", "aggregates", "traits", "allocations"]
    path = old.headers["location"].removeprefix("http://falconframework.org")
    shown = api.call("GET", path, version="1.13")
    assert shown.json["name"] == "cn1" and "root_provider_uuid" not in shown.json
    dup = api.call("POST", "/resource_providers", {"name": "cn1"})
    assert dup.status_code == 409
    assert dup.json["errors"][0]["code"] == "placement.duplicate_name"
    assert "Conflicting resource provider name: cn1 already exists" in _detail(dup)
    bad = api.call("POST", "/resource_providers", {"name": "x", "uuid": "pony"})
    assert bad.status_code == 400 and "JSON does not validate" in _detail(bad)


def test_provider_update_reparenting_by_version(api) -> None:  # type: ignore[no-untyped-def]
    root = api.call("POST", "/resource_providers", {"name": "root"}).json["uuid"]
    child = api.call(
        "POST", "/resource_providers", {"name": "child", "parent_provider_uuid": root}
    ).json["uuid"]
    body = {"name": "child", "parent_provider_uuid": None}
    refused = api.call("PUT", f"/resource_providers/{child}", body, version="1.36")
    assert refused.status_code == 400
    assert "un-parenting a provider is not currently allowed" in _detail(refused)
    done = api.call("PUT", f"/resource_providers/{child}", body, version="1.37")
    assert done.status_code == 200
    assert (done.json["parent_provider_uuid"], done.json["root_provider_uuid"]) == (None, child)
    missing = api.call("GET", "/resource_providers/" + "0" * 32)
    assert missing.status_code == 404 and "No resource provider with uuid" in _detail(missing)


def test_provider_list_filters(api, db) -> None:  # type: ignore[no-untyped-def]
    with db.begin() as conn:
        cn1 = provider(
            conn, "cn1", inventory={"VCPU": 8}, traits=["HW_CPU_X86_AVX2"], aggregates=[AGG]
        )
        provider(conn, "cn1_numa", parent=cn1, inventory={"VCPU": 2})
        provider(conn, "cn2", inventory={"VCPU": 1})

    def names(query: str, version: str = "latest") -> list[str]:
        r = api.call("GET", f"/resource_providers?{query}", version=version)
        assert r.status_code == 200, r.text
        return sorted(p["name"] for p in r.json["resource_providers"])

    assert names(f"in_tree={cn1.uuid}") == ["cn1", "cn1_numa"]
    assert names("resources=VCPU:2") == ["cn1", "cn1_numa"]
    assert names("required=HW_CPU_X86_AVX2") == ["cn1"]
    assert names("required=!HW_CPU_X86_AVX2") == ["cn1_numa", "cn2"]
    assert names(f"member_of={AGG}") == ["cn1"]
    # the provider's own aggregates only, as Placement (issue 14 rule 2): the child of
    # a member root is listed
    assert names(f"member_of=!{AGG}") == ["cn1_numa", "cn2"]
    too_old = api.call("GET", "/resource_providers?required=!HW_CPU_X86_AVX2", version="1.21")
    assert too_old.status_code == 400
    assert api.call("GET", "/resource_providers?in_tree=x", version="1.13").status_code == 400
    unknown = api.call("GET", "/resource_providers?resources=CUSTOM_NOPE:1")
    assert unknown.status_code == 400 and "Invalid resource class" in _detail(unknown)
    two = api.call("GET", f"/resource_providers?member_of={AGG}&member_of={AGG}", version="1.23")
    assert two.status_code == 400 and "Multiple member_of" in _detail(two)


def test_inventories(api, db) -> None:  # type: ignore[no-untyped-def]
    with db.begin() as conn:
        ref = provider(conn, "cn")
    rp = ref.uuid
    base = f"/resource_providers/{rp}/inventories"
    put = api.call(
        "PUT",
        base,
        {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8, "reserved": 8}}},
    )
    assert put.status_code == 200 and put.json["resource_provider_generation"] == 1
    assert put.json["inventories"]["VCPU"]["max_unit"] == 2**31 - 1
    stale = api.call("PUT", base, {"resource_provider_generation": 0, "inventories": {}})
    assert stale.status_code == 409
    assert stale.json["errors"][0]["code"] == "placement.concurrent_update"
    old = api.call(
        "POST", base, {"resource_class": "DISK_GB", "total": 10, "reserved": 10}, version="1.25"
    )
    assert old.status_code == 400 and "greater than or equal to total" in _detail(old)
    post = api.call("POST", base, {"resource_class": "DISK_GB", "total": 10})
    assert post.status_code == 201 and post.headers["location"].endswith(f"{base}/DISK_GB")
    again = api.call("POST", base, {"resource_class": "DISK_GB", "total": 10})
    assert again.status_code == 409
    one = api.call("GET", f"{base}/DISK_GB")
    assert one.json["total"] == 10 and one.json["resource_provider_generation"] == 2
    with db.begin() as conn:
        allocate(conn, new_uuid(), ref, "DISK_GB", 1)
    in_use = api.call("DELETE", f"{base}/DISK_GB")
    assert in_use.status_code == 409 and "in use" in _detail(in_use)
    assert api.call("DELETE", base, version="1.4").status_code == 405
    with db.begin() as conn:
        allocate(conn, new_uuid(), ref, "VCPU", 1)
    all_in_use = api.call("DELETE", base)
    assert all_in_use.status_code == 409
    assert f"Inventory for 'VCPU, DISK_GB' on resource provider '{rp}' in use" in _detail(
        all_in_use
    )
    assert all_in_use.json["errors"][0]["code"] == "placement.inventory.inuse"
    assert api.call("DELETE", f"{base}/VCPU").status_code == 409
    assert api.call("GET", f"{base}/VCPU").status_code == 200


def test_resource_classes(api) -> None:  # type: ignore[no-untyped-def]
    assert api.call("GET", "/resource_classes", version="1.1").status_code == 404
    created = api.call("POST", "/resource_classes", {"name": "CUSTOM_GOLD"})
    assert created.status_code == 201
    assert created.headers["location"] == "http://falconframework.org/resource_classes/CUSTOM_GOLD"
    assert api.call("POST", "/resource_classes", {"name": "CUSTOM_GOLD"}).status_code == 409
    renamed = api.call(
        "PUT", "/resource_classes/CUSTOM_GOLD", {"name": "CUSTOM_SILVER"}, version="1.6"
    )
    assert renamed.status_code == 200 and renamed.json["name"] == "CUSTOM_SILVER"
    assert api.call("PUT", "/resource_classes/CUSTOM_NEW", version="1.7").status_code == 201
    assert api.call("PUT", "/resource_classes/CUSTOM_NEW", version="1.7").status_code == 204
    assert api.call("PUT", "/resource_classes/VCPU", version="1.7").status_code == 400
    names = [rc["name"] for rc in api.call("GET", "/resource_classes").json["resource_classes"]]
    assert names[0] == "VCPU" and {"CUSTOM_SILVER", "CUSTOM_NEW"} <= set(names)
    assert api.call("DELETE", "/resource_classes/VCPU").status_code == 400
    assert api.call("DELETE", "/resource_classes/CUSTOM_NEW").status_code == 204
    assert api.call("GET", "/resource_classes/CUSTOM_NEW").status_code == 404


def test_traits_and_provider_traits(api) -> None:  # type: ignore[no-untyped-def]
    assert api.call("PUT", "/traits/CUSTOM_FAST").status_code == 201
    assert api.call("PUT", "/traits/CUSTOM_FAST").status_code == 204
    assert api.call("PUT", "/traits/fast").status_code == 400
    assert api.call("GET", "/traits/CUSTOM_FAST").status_code == 204
    listed = api.call("GET", "/traits?name=in:CUSTOM_FAST,HW_CPU_X86_AVX2").json["traits"]
    assert listed == ["CUSTOM_FAST", "HW_CPU_X86_AVX2"]
    rp = api.call("POST", "/resource_providers", {"name": "cn"}).json["uuid"]
    path = f"/resource_providers/{rp}/traits"
    put = api.call("PUT", path, {"resource_provider_generation": 0, "traits": ["CUSTOM_FAST"]})
    assert put.json == {"traits": ["CUSTOM_FAST"], "resource_provider_generation": 1}
    stale = api.call("PUT", path, {"resource_provider_generation": 0, "traits": []})
    assert stale.status_code == 409
    assert stale.json["errors"][0]["code"] == "placement.concurrent_update"
    unknown = api.call("PUT", path, {"resource_provider_generation": 1, "traits": ["CUSTOM_NO"]})
    assert unknown.status_code == 400 and "No such trait CUSTOM_NO" in _detail(unknown)
    assert api.call("GET", "/traits?associated=true").json["traits"] == ["CUSTOM_FAST"]
    assert api.call("DELETE", "/traits/CUSTOM_FAST").status_code == 409
    assert api.call("DELETE", path).status_code == 204
    assert api.call("GET", path).json == {"traits": [], "resource_provider_generation": 2}
    assert api.call("DELETE", "/traits/CUSTOM_FAST").status_code == 204
    assert api.call("GET", "/traits", version="1.5").status_code == 404


def test_aggregates_with_generation_from_1_19(api) -> None:  # type: ignore[no-untyped-def]
    rp = api.call("POST", "/resource_providers", {"name": "cn"}).json["uuid"]
    path = f"/resource_providers/{rp}/aggregates"
    legacy = api.call("PUT", path, [AGG], version="1.18")
    assert legacy.status_code == 200 and legacy.json == {"aggregates": [AGG]}
    generation = api.call("GET", f"/resource_providers/{rp}").json["generation"]
    stale = api.call("PUT", path, {"aggregates": [], "resource_provider_generation": 99})
    assert stale.status_code == 409
    done = api.call("PUT", path, {"aggregates": [], "resource_provider_generation": generation})
    assert done.json == {"aggregates": [], "resource_provider_generation": generation + 1}
    assert api.call("GET", path, version="1.0").status_code == 404
