"""``GET /allocations/{consumer}`` lists providers (and their classes) in Placement
16.0's order: the order they were allocated in (by allocation id), which is the order of
the request that wrote them. osc-placement prints rows in that order and its functional
tests depend on it; JSON objects compared as dicts would not see it, so the answers are
compared as JSON text, key order included.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import ALL_BACKENDS
from tests.side_by_side_api import READY, SKIP_REASON, both_apis, comparable, req

pytestmark = pytest.mark.skipif(not READY, reason=SKIP_REASON)

#: Body order C, A, B on purpose: neither sorted nor the creation order.
A, B, C = (f"{c * 8}-0000-4000-8000-000000000001" for c in "abc")
C1, C2 = "cccccccc-0000-4000-8000-000000000001", "cccccccc-0000-4000-8000-000000000002"
OWNER = {"project_id": "proj", "user_id": "user", "consumer_type": "INSTANCE"}
INVENTORY = {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}, "DISK_GB": {"total": 100}}


def setup() -> list[dict[str, Any]]:
    steps = [req("POST", "/resource_providers", {"name": u[:1], "uuid": u}) for u in (B, A, C)]
    return steps + [
        req("PUT", f"/resource_providers/{u}/inventories",
            {"resource_provider_generation": 0, "inventories": INVENTORY})
        for u in (A, B, C)
    ]  # fmt: skip


def writes() -> list[dict[str, Any]]:
    """PUT in the order C, A, B with classes out of id order; a POST moving C1 and
    writing C2 in another order; a pre-1.12 list."""
    first = {C: {"resources": {"DISK_GB": 1, "VCPU": 1}}, A: {"resources": {"MEMORY_MB": 64}},
             B: {"resources": {"VCPU": 2, "MEMORY_MB": 32}}}
    moved = {B: {"resources": {"MEMORY_MB": 16}}, C: {"resources": {"VCPU": 1}}}
    return [
        req("PUT", f"/allocations/{C1}", {"allocations": first, "consumer_generation": None,
                                          **OWNER}),
        req("POST", "/allocations", {
            C1: {"allocations": moved, "consumer_generation": 1, **OWNER},
            C2: {"allocations": {A: {"resources": {"VCPU": 1}}, C: {"resources": {"VCPU": 1}}},
                 "consumer_generation": None, **OWNER}}),
        req("PUT", f"/allocations/{C2}", {"allocations": [
            {"resource_provider": {"uuid": B}, "resources": {"VCPU": 1}},
            {"resource_provider": {"uuid": A}, "resources": {"DISK_GB": 2, "VCPU": 1}}]},
            version="1.7"),
    ]  # fmt: skip


def reads() -> list[dict[str, Any]]:
    return [req("GET", f"/allocations/{c}", version=v)
            for c in (C1, C2) for v in ("1.0", "1.12", "1.28", "1.38")]  # fmt: skip


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_providers_in_the_order_they_were_allocated(backend: str, database_url: Any) -> None:
    with both_apis(database_url, backend) as apis:
        for step, (theirs, ours) in zip(setup(), apis.ask_all(setup()), strict=True):
            assert theirs["status"] < 300 and ours["status"] < 300, (step, theirs, ours)
        for write in writes():
            batch = [write, *reads()]
            for item, (theirs, ours) in zip(batch, apis.ask_all(batch), strict=True):
                mine, placement = json.dumps(comparable(ours)), json.dumps(comparable(theirs))
                assert mine == placement, (write["path"], item["path"], item["version"])


SHARED, AGG = "00000000-0000-4000-8000-000000000001", "dddddddd-0000-4000-8000-000000000001"


def shared_storage() -> list[dict[str, Any]]:
    """Shared DISK_GB in an aggregate with A and B (uuid order puts it first)."""
    return [
        req("POST", "/resource_providers", {"name": "ss", "uuid": SHARED}),
        req("PUT", f"/resource_providers/{SHARED}/inventories",
            {"resource_provider_generation": 0, "inventories": {"DISK_GB": {"total": 1000}}}),
        req("PUT", f"/resource_providers/{SHARED}/traits",
            {"resource_provider_generation": 1, "traits": ["MISC_SHARES_VIA_AGGREGATE"]}),
        req("PUT", f"/resource_providers/{SHARED}/aggregates", [AGG], version="1.1"),
        req("PUT", f"/resource_providers/{A}/aggregates", [AGG], version="1.1"),
        req("PUT", f"/resource_providers/{B}/aggregates", [AGG], version="1.1"),
    ]  # fmt: skip


def requests_in_a_set(answer: dict[str, Any]) -> str:
    """The answer as JSON text with its list of allocation requests sorted (Placement
    builds it from a Python set: its order changes from process to process), the order
    inside each request kept."""
    body = dict(answer["body"])
    body["allocation_requests"] = sorted(json.dumps(ar) for ar in body["allocation_requests"])
    body.pop("provider_summaries")
    return json.dumps({"status": answer["status"], "body": body})


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_candidates_list_their_providers_as_placement(backend: str, database_url: Any) -> None:
    """Before 1.12 an allocation request is a list: Placement puts a provider where its
    first class (by class id) comes, its classes in id order — the compute node's
    VCPU and MEMORY_MB before the shared DISK_GB, whatever the uuids or the query say."""
    with both_apis(database_url, backend) as apis:
        for step, (theirs, ours) in zip(
            setup() + shared_storage(), apis.ask_all(setup() + shared_storage()), strict=True
        ):
            assert theirs["status"] < 300 and ours["status"] < 300, (step, theirs, ours)
        path = "/allocation_candidates?resources=DISK_GB:80,MEMORY_MB:1024,VCPU:1"
        for version in ("1.10", "1.12"):
            theirs, ours = apis.ask(req("GET", path, version=version))
            assert requests_in_a_set(ours) == requests_in_a_set(theirs), version
