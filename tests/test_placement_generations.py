"""Provider and consumer generations move exactly as in OpenStack Placement 16.0.

Clients cache generations (nova's report client keeps each provider's, osc-placement
passes them back) and get a 409 when they are stale, so a generation rpquery raises where
Placement does not is a conflict Placement would not give. The same requests go to
Placement and to rpquery, each on its own database of the backend; after every request
both are asked for every provider and every consumer, and the answers must be equal.

Placement's rules (``placement/objects/allocation.py`` ``_set_allocations``,
``placement/objects/reshaper.py``, ``placement/handlers/aggregate.py``):

- an allocation write raises the providers of the allocations written, and the providers
  an emptied consumer (``"allocations": {}``) held; a provider a consumer only *leaves*
  keeps its generation;
- ``DELETE /allocations/{consumer}`` raises none;
- ``PUT /resource_providers/{uuid}/aggregates`` raises it from microversion 1.19 only;
- a reshape raises a provider once for its interim inventory (if it has any), once if it
  is in the allocation write, and once for its final inventory.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import ALL_BACKENDS
from tests.side_by_side_api import READY, SKIP_REASON, BothApis, both_apis, comparable, req

pytestmark = pytest.mark.skipif(not READY, reason=SKIP_REASON)

A, B, C = (f"aaaaaaaa-0000-4000-8000-00000000000{n}" for n in (1, 2, 3))
ROOT, NUMA = "bbbbbbbb-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"
CONSUMERS = [f"cccccccc-0000-4000-8000-00000000000{n}" for n in range(1, 10)]
C1, C2, C3, C4, C5, C6, C7, C8, C9 = CONSUMERS
AGG = "dddddddd-0000-4000-8000-000000000001"
OWNER = {"project_id": "proj", "user_id": "user"}
INVENTORY = {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}}


def put_allocs(consumer: str, allocs: dict[str, int], gen: int | None) -> dict[str, Any]:
    """``PUT /allocations/{consumer}`` (1.39): ``allocs`` is ``{provider: VCPU}``."""
    body = {
        "allocations": {rp: {"resources": {"VCPU": n}} for rp, n in allocs.items()},
        "consumer_generation": gen,
        "consumer_type": "INSTANCE",
        **OWNER,
    }
    return req("PUT", f"/allocations/{consumer}", body)


def post_allocs(spec: dict[str, tuple[dict[str, int], int | None]]) -> dict[str, Any]:
    """``POST /allocations`` (1.39): ``{consumer: ({provider: VCPU}, generation)}``."""
    body = {
        consumer: {
            "allocations": {rp: {"resources": {"VCPU": n}} for rp, n in allocs.items()},
            "consumer_generation": gen,
            "consumer_type": "INSTANCE",
            **OWNER,
        }
        for consumer, (allocs, gen) in spec.items()
    }
    return req("POST", "/allocations", body)


def setup() -> list[dict[str, Any]]:
    """Providers A, B, C and a ROOT with a NUMA child, each with VCPU and MEMORY_MB."""
    steps = [req("POST", "/resource_providers", {"name": n, "uuid": u})
             for n, u in (("a", A), ("b", B), ("c", C), ("root", ROOT))]
    steps.append(req("POST", "/resource_providers",
                     {"name": "numa", "uuid": NUMA, "parent_provider_uuid": ROOT}))
    steps += [req("PUT", f"/resource_providers/{u}/inventories",
                  {"resource_provider_generation": 0, "inventories": INVENTORY})
              for u in (A, B, C, ROOT, NUMA)]
    return steps  # fmt: skip


def allocation_steps() -> list[dict[str, Any]]:
    """PUT, POST, emptying and DELETE of allocations, each touching A, B, C differently."""
    return [
        put_allocs(C1, {A: 2}, None),
        put_allocs(C1, {B: 2}, 1),  # a move: B raised, A (left) not
        post_allocs({C1: ({C: 1}, 2), C2: ({A: 1}, None)}),  # C and A raised, B not
        post_allocs({C1: ({}, 3), C2: ({B: 1}, 1)}),  # C (emptied) and B; A (left) not
        put_allocs(C3, {A: 1, C: 1}, None),
        put_allocs(C3, {}, 1),  # emptied by PUT: A and C raised
        put_allocs(C4, {A: 1}, None),
        put_allocs(C5, {A: 1}, None),
        # A held by an emptied consumer and left by another in one batch: raised once
        post_allocs({C4: ({}, 1), C5: ({B: 1}, 1)}),
        put_allocs(C6, {C: 1}, None),
        req("DELETE", f"/allocations/{C6}"),  # no provider raised
        # before 1.28 (no consumer generation) and before 1.12 (list form): same rules
        req("PUT", f"/allocations/{C2}",
            {"allocations": {A: {"resources": {"VCPU": 1}}}, **OWNER}, version="1.27"),
        req("PUT", f"/allocations/{C2}",
            {"allocations": [{"resource_provider": {"uuid": C}, "resources": {"VCPU": 1}}]},
            version="1.7"),
    ]  # fmt: skip


def aggregate_steps() -> list[dict[str, Any]]:
    """Aggregates before 1.19 (no generation given or raised) and from 1.19."""
    path = f"/resource_providers/{A}/aggregates"
    return [
        req("PUT", path, [AGG], version="1.1"),
        req("PUT", path, [], version="1.18"),
        req("GET", path, version="1.19"),
    ]


def reshape(inventories: dict[str, Any], allocations: dict[str, Any]) -> dict[str, Any]:
    return req("POST", "/reshaper", {"inventories": inventories, "allocations": allocations})


def consumer_body(allocs: dict[str, dict[str, int]], gen: int) -> dict[str, Any]:
    return {
        "allocations": {rp: {"resources": res} for rp, res in allocs.items()},
        "consumer_generation": gen,
        "consumer_type": "INSTANCE",
        **OWNER,
    }


def snapshot(step: dict[str, Any]) -> list[dict[str, Any]]:
    """What both sides are asked after a step: every provider, and every consumer the
    step names (its allocations carry the consumer's and the providers' generations)."""
    named = [c for c in CONSUMERS if c in json.dumps(step)]
    return [req("GET", "/resource_providers"), *(req("GET", f"/allocations/{c}") for c in named)]


def run(apis: BothApis, steps: list[dict[str, Any]]) -> None:
    """Each step on both sides, then the snapshot; every answer must be equal."""
    for n, step in enumerate(steps):
        batch = [step, *snapshot(step)]
        for item, (theirs, ours) in zip(batch, apis.ask_all(batch), strict=True):
            where = f"after step {n} {step['method']} {step['path']} {step.get('body')}"
            assert comparable(ours) == comparable(theirs), (where, item["path"])


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_generations_as_placement(backend: str, database_url: Any) -> None:
    with both_apis(database_url, backend) as apis:
        run(apis, setup())
        run(apis, allocation_steps())
        run(apis, aggregate_steps())
        listed = apis.ours(req("GET", "/resource_providers"))["body"]["resource_providers"]
        gens = {rp["uuid"]: rp["generation"] for rp in listed}
        run(apis, [
            req("PUT", f"/resource_providers/{A}/aggregates",
                {"aggregates": [AGG], "resource_provider_generation": gens[A]}, version="1.19"),
            put_allocs(C7, {ROOT: 2}, None),
            put_allocs(C8, {ROOT: 1}, None),
            put_allocs(C9, {B: 1}, None),
            # C7 moves from ROOT to NUMA (ROOT not in the inventories: left, not raised),
            # C8 is emptied (ROOT raised), C9 moves B → NUMA (B left: not raised)
            reshape(
                {NUMA: {"resource_provider_generation": gens[NUMA], "inventories": INVENTORY}},
                {C7: consumer_body({NUMA: {"VCPU": 2}}, 1), C8: consumer_body({}, 1),
                 C9: consumer_body({NUMA: {"VCPU": 1}}, 1)},
            ),
        ])  # fmt: skip
