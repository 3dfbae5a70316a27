"""rpquery's request schemas are Placement 16.0's, key order included.

A JSON-schema error's text dumps the failing part of the schema in its own key order
(``jsonschema`` pretty-prints with ``sort_dicts=False``), and Placement's formatter keeps
that dump in the ``detail``: so equal texts need equal schemas *and* equal key order.
Placement's schema dicts are read in ``.venv-placement`` and compared, as JSON text, with
the ones rpquery validates against.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from benchmarks import side_by_side
from rpquery.api import schemas
from rpquery.api.handlers import allocation_candidates as candidates
from rpquery.api.handlers import allocations, usages
from tests.side_by_side_api import READY, SKIP_REASON

pytestmark = pytest.mark.skipif(not READY, reason=SKIP_REASON)

DUMP = """
import importlib, json, pkgutil
import placement.schemas as S
out = {}
for m in pkgutil.iter_modules(S.__path__):
    mod = importlib.import_module("placement.schemas." + m.name)
    out.update({m.name + "." + k: v for k, v in vars(mod).items()
                if k.isupper() and isinstance(v, dict)})
print(json.dumps(out))
"""

#: Placement's name (module.NAME in placement/schemas) → the schema rpquery uses there.
OURS: dict[str, Any] = {
    "resource_provider.POST_RESOURCE_PROVIDER_SCHEMA": schemas.POST_PROVIDER,
    "resource_provider.PUT_RESOURCE_PROVIDER_SCHEMA": schemas.PUT_PROVIDER,
    "resource_provider.POST_RP_SCHEMA_V1_14": schemas.POST_PROVIDER_1_14,
    "resource_provider.PUT_RP_SCHEMA_V1_14": schemas.PUT_PROVIDER_1_14,
    "resource_provider.GET_RPS_SCHEMA_1_0": schemas.LIST_PROVIDERS_1_0,
    "resource_provider.GET_RPS_SCHEMA_1_3": schemas.LIST_PROVIDERS_1_3,
    "resource_provider.GET_RPS_SCHEMA_1_4": schemas.LIST_PROVIDERS_1_4,
    "resource_provider.GET_RPS_SCHEMA_1_14": schemas.LIST_PROVIDERS_1_14,
    "resource_provider.GET_RPS_SCHEMA_1_18": schemas.LIST_PROVIDERS_1_18,
    "inventory.POST_INVENTORY_SCHEMA": schemas.POST_INVENTORY,
    "inventory.BASE_INVENTORY_SCHEMA": schemas.PUT_INVENTORY,
    "inventory.PUT_INVENTORY_RECORD_SCHEMA": schemas.PUT_INVENTORY_RECORD,
    "inventory.PUT_INVENTORY_SCHEMA": schemas.PUT_INVENTORIES,
    "resource_class.POST_RC_SCHEMA_V1_2": schemas.POST_RESOURCE_CLASS,
    "resource_class.PUT_RC_SCHEMA_V1_2": schemas.PUT_RESOURCE_CLASS,
    "trait.SET_TRAITS_FOR_RP_SCHEMA": schemas.PUT_PROVIDER_TRAITS,
    "trait.LIST_TRAIT_SCHEMA": schemas.LIST_TRAITS,
    "trait.CUSTOM_TRAIT": schemas.CUSTOM_TRAIT,
    "aggregate.PUT_AGGREGATES_SCHEMA_V1_1": schemas.PUT_AGGREGATES,
    "aggregate.PUT_AGGREGATES_SCHEMA_V1_19": schemas.PUT_AGGREGATES_1_19,
    "allocation.ALLOCATION_SCHEMA": allocations.SCHEMA_1_0,
    "allocation.ALLOCATION_SCHEMA_V1_8": allocations.SCHEMA_1_8,
    "allocation.ALLOCATION_SCHEMA_V1_12": allocations.SCHEMA_1_12,
    "allocation.ALLOCATION_SCHEMA_V1_28": allocations.SCHEMA_1_28,
    "allocation.ALLOCATION_SCHEMA_V1_34": allocations.SCHEMA_1_34,
    "allocation.ALLOCATION_SCHEMA_V1_38": allocations.SCHEMA_1_38,
    "allocation.POST_ALLOCATIONS_V1_13": allocations._post_schema(allocations.DELETABLE),
    "allocation.POST_ALLOCATIONS_V1_28": allocations._post_schema(allocations.SCHEMA_1_28),
    "allocation.POST_ALLOCATIONS_V1_34": allocations._post_schema(allocations.SCHEMA_1_34),
    "allocation.POST_ALLOCATIONS_V1_38": allocations._post_schema(allocations.SCHEMA_1_38),
    "usage.GET_USAGES_SCHEMA_1_9": usages.SCHEMA_1_9,
    "usage.GET_USAGES_SCHEMA_V1_38": usages.SCHEMA_1_38,
    **{
        f"allocation_candidate.GET_SCHEMA_{v}": getattr(candidates, f"SCHEMA_{v}")
        for v in ("1_10", "1_16", "1_17", "1_21", "1_25", "1_31", "1_33", "1_35", "1_36")
    },
}


@pytest.fixture(scope="module")
def placement_schemas() -> dict[str, Any]:
    done = subprocess.run(
        [str(side_by_side.PYTHON), "-c", DUMP], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


@pytest.mark.parametrize("name", sorted(OURS))
def test_the_schema_is_placements_in_its_order(name: str, placement_schemas: Any) -> None:
    assert json.dumps(OURS[name]) == json.dumps(placement_schemas[name])
