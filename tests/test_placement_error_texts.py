"""Error answers clients match on are Placement 16.0's: status, code and text.

nova matches texts (its ``InventoryInUse`` regex wants ``Inventory for '<rc>' on resource
provider '<uuid>' in use.``) and codes (a reshape removing an inventory in use must be
``placement.inventory.inuse``); osc-placement shows the last line of a ``detail``. The
same requests go to Placement and to rpquery, each on its own database of the backend,
and the whole error body must be equal (request ids aside).

JSON-schema errors are compared whole too (their text dumps the failing part of the
schema: tests/test_api_schemas.py keeps rpquery's schemas Placement's, key order
included). The deliberate exceptions (docs/placement-differences.md) are pinned at the
end: an error on a huge input quotes at most a few hundred characters of it, and an
amount no inventory can hold is refused.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import ALL_BACKENDS
from tests.side_by_side_api import READY, SKIP_REASON, BothApis, both_apis, comparable, req

pytestmark = pytest.mark.skipif(not READY, reason=SKIP_REASON)

A, B = "aaaaaaaa-0000-4000-8000-000000000001", "aaaaaaaa-0000-4000-8000-000000000002"
NOBODY = "eeeeeeee-0000-4000-8000-000000000001"
C1, C2 = "cccccccc-0000-4000-8000-000000000001", "cccccccc-0000-4000-8000-000000000002"
OWNER = {"project_id": "proj", "user_id": "user", "consumer_type": "INSTANCE"}
INVENTORY = {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}}


def setup() -> list[dict[str, Any]]:
    """A with VCPU and MEMORY_MB, C1 holding VCPU and MEMORY_MB on it; B empty."""
    return [
        req("POST", "/resource_providers", {"name": "a", "uuid": A}),
        req("POST", "/resource_providers", {"name": "b", "uuid": B}),
        req("PUT", f"/resource_providers/{A}/inventories",
            {"resource_provider_generation": 0, "inventories": INVENTORY}),
        req("PUT", f"/allocations/{C1}",
            {"allocations": {A: {"resources": {"VCPU": 2, "MEMORY_MB": 512}}},
             "consumer_generation": None, **OWNER}),
        req("PUT", "/traits/CUSTOM_GOLD"),
    ]  # fmt: skip


def inventory_in_use() -> list[dict[str, Any]]:
    """Removing inventories that hold allocations, each way Placement has."""
    return [
        req("PUT", f"/resource_providers/{A}/inventories",
            {"resource_provider_generation": 2, "inventories": {"MEMORY_MB": {"total": 4096}}}),
        req("PUT", f"/resource_providers/{A}/inventories",
            {"resource_provider_generation": 2, "inventories": {}}),
        req("DELETE", f"/resource_providers/{A}/inventories", version="1.5"),
        req("DELETE", f"/resource_providers/{A}/inventories/VCPU"),
        req("POST", "/reshaper", {
            "inventories": {A: {"resource_provider_generation": 2,
                                "inventories": {"MEMORY_MB": {"total": 4096}}}},
            "allocations": {}}),
        req("POST", "/reshaper", {
            "inventories": {A: {"resource_provider_generation": 2, "inventories": {}}},
            "allocations": {C2: {"allocations": {}, "consumer_generation": None, **OWNER}}}),
    ]  # fmt: skip


def not_found() -> list[dict[str, Any]]:
    """Unknown providers and inventories, on every path that names one."""
    rp = f"/resource_providers/{NOBODY}"
    return [
        req("GET", rp),
        req("DELETE", rp),
        req("PUT", rp, {"name": "x"}),
        req("GET", f"{rp}/inventories"),
        req("PUT", f"{rp}/inventories", {"resource_provider_generation": 0, "inventories": {}}),
        req("DELETE", f"{rp}/inventories", version="1.5"),
        req("POST", f"{rp}/inventories", {"resource_class": "VCPU", "total": 1}),
        req("GET", f"{rp}/inventories/VCPU"),
        req("PUT", f"{rp}/inventories/VCPU", {"resource_provider_generation": 0, "total": 1}),
        req("DELETE", f"{rp}/inventories/VCPU"),
        req("GET", f"/resource_providers/{B}/inventories/VCPU"),
        req("DELETE", f"/resource_providers/{B}/inventories/VCPU"),
        req("PUT", f"/resource_providers/{B}/inventories/VCPU",
            {"resource_provider_generation": 0, "total": 1}),
        req("GET", f"/resource_providers/{A}/inventories/CUSTOM_NOPE"),
        req("DELETE", f"/resource_providers/{A}/inventories/CUSTOM_NOPE"),
        req("GET", f"{rp}/usages"),
        req("GET", f"{rp}/allocations"),
        req("GET", f"{rp}/traits"),
        req("PUT", f"{rp}/traits", {"resource_provider_generation": 0, "traits": []}),
        req("DELETE", f"{rp}/traits"),
        req("GET", f"{rp}/aggregates"),
        req("PUT", f"{rp}/aggregates", {"resource_provider_generation": 0, "aggregates": []}),
        req("PUT", f"/allocations/{C2}",
            {"allocations": {NOBODY: {"resources": {"VCPU": 1}}},
             "consumer_generation": None, **OWNER}),
        req("GET", "/resource_classes/CUSTOM_NOPE"),
        req("GET", "/traits/CUSTOM_NOPE"),
        req("DELETE", "/allocations/" + C2),
    ]  # fmt: skip


def trait_conflicts() -> list[dict[str, Any]]:
    """A required trait also forbidden, in one group or several (Placement lists each)."""
    path = "/allocation_candidates?resources=VCPU:1"
    return [
        req("GET", f"{path}&required=CUSTOM_GOLD,!CUSTOM_GOLD"),
        req("GET", f"{path}&required=in:CUSTOM_GOLD,HW_CPU_X86_AVX&required=!CUSTOM_GOLD"
                   "&required=!HW_CPU_X86_AVX&resources1=MEMORY_MB:1"
                   "&required1=!CUSTOM_GOLD,CUSTOM_GOLD&group_policy=none"),
        req("GET", f"{path}&required=CUSTOM_GOLD&required=!CUSTOM_GOLD"),
        req("GET", f"{path}&required=in:CUSTOM_GOLD,HW_CPU_X86_AVX&required=!CUSTOM_GOLD"),
        req("GET", f"{path}&root_required=CUSTOM_GOLD,!CUSTOM_GOLD"),
    ]  # fmt: skip


def run(apis: BothApis, steps: list[dict[str, Any]], *, setup: bool = False) -> None:
    for step, (theirs, ours) in zip(steps, apis.ask_all(steps), strict=True):
        if setup:
            assert ours["status"] < 300 and theirs["status"] < 300, (step, theirs, ours)
            continue
        assert comparable(ours) == comparable(theirs), step


def reshape_onto_a_removed_inventory() -> list[dict[str, Any]]:
    """A reshape whose new allocations use the inventory it removes: Placement writes
    them against its interim inventory, then refuses the final one as in use."""
    return [
        req("POST", "/reshaper", {
            "inventories": {A: {"resource_provider_generation": 2,
                                "inventories": {"MEMORY_MB": {"total": 4096}}}},
            "allocations": {C1: {"allocations": {A: {"resources": {"VCPU": 1}}},
                                 "consumer_generation": 1, **OWNER}}}),
    ]  # fmt: skip


def detail_message(answer: dict[str, Any]) -> str:
    """The message part of an error's ``detail`` (after the status explanation)."""
    return str(answer["body"]["errors"][0]["detail"]).split("\n\n", 1)[1].strip()


def schema_errors() -> list[dict[str, Any]]:
    """JSON-schema errors, which Placement's formatter puts on one line (the OpenStack
    client shows the last line of a detail: a multi-line one showed only the input)."""
    return [
        req("POST", "/resource_classes", {"name": "NOT_CUSTOM"}),
        req("PUT", f"/resource_providers/{A}/inventories",
            {"resource_provider_generation": 2, "inventories": {"VCPU": {"total": 0}}}),
        req("POST", "/resource_providers", {"name": "x", "bogus": 1}),
        req("PUT", f"/allocations/{C2}", {"allocations": {A: {"resources": {"VCPU": 0}}},
                                          "consumer_generation": None, **OWNER}),
        req("GET", "/resource_providers?member_of=not-a-uuid"),
    ]  # fmt: skip


#: A body whose schema error would quote 100 KB of input.
HUGE = req(
    "PUT",
    f"/resource_providers/{A}/inventories",
    {"resource_provider_generation": 2, "inventories": {"VCPU": {"total": "9" * 100_000}}},
)


def check_huge(theirs: dict[str, Any], ours: dict[str, Any]) -> None:
    """Placement quotes the input twice (message and dump): over 200 KB. rpquery gives the
    same status and code, one line starting as Placement's, at most QUOTED characters of
    each quote with the length of the whole, and Placement's schema part."""
    assert (ours["status"], ours["body"]["errors"][0].get("code")) == (
        theirs["status"], theirs["body"]["errors"][0].get("code"))  # fmt: skip
    mine, placement = detail_message(ours), detail_message(theirs)
    assert len(placement) > 200_000 and "\n" not in mine and len(mine) < 1_500, len(mine)
    cuts = re.findall(r"…\((\d+) chars\)", mine)  # the quote of the message, of the dump
    assert mine.startswith(placement[:300]) and len(cuts) == 2, mine
    assert all(int(n) > 100_000 for n in cuts), cuts
    schema_part = placement[placement.index("  Failed validating") : placement.index("  On ")]
    assert schema_part in mine


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_error_texts_as_placement(backend: str, database_url: Any) -> None:
    with both_apis(database_url, backend) as apis:
        run(apis, setup(), setup=True)
        run(apis, inventory_in_use())
        run(apis, reshape_onto_a_removed_inventory())
        run(apis, not_found())
        run(apis, trait_conflicts())
        run(apis, schema_errors())
        check_huge(*apis.ask(HUGE))
        path = "/allocation_candidates?resources=VCPU:2147483648"
        theirs, ours = apis.ask(req("GET", path))
        assert theirs == {"status": 200, "body": {"allocation_requests": [],
                                                  "provider_summaries": {}}}  # fmt: skip
        assert ours["status"] == 400 and "'VCPU:2147483648'" in detail_message(ours)
