"""End-to-end fuzz of every public input (issue 15, "also wanted"): arbitrary text and
JSON values go through the public write and read functions into a real database.

Each case puts one fuzzed value into one argument of one public call, the other
arguments valid. The call must either work or raise one of rpquery's own errors with a
code — never a bare Python error (``TypeError``, ``UnicodeEncodeError``,
``OverflowError``, ...) and never a driver error wrapped as ``rpquery.db.error`` (the
database refused what validation let through). After the examples of a case the
invariants of :mod:`benchmarks.invariants` must hold (capacity, no partial consumer,
summaries exact). The pure validators have their own property test; this one is about
what reaches the database.

Random examples: ``RPQUERY_FUZZ_EXAMPLES`` per case (default 3, kept short for CI;
``make soak`` runs more).
"""

from __future__ import annotations

import json
import os
import uuid as uuidlib
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.invariants import check_invariants
from rpquery.aggregate_metadata import metadata as am
from rpquery.db import Database
from rpquery.errors import RpqueryError
from rpquery.models import ConsumerAllocations, Inventory
from rpquery.read.candidates import allocation_candidates
from rpquery.read.providers import list_providers
from rpquery.server_groups import groups as sg
from rpquery.server_groups import scheduling
from rpquery.store import catalog
from rpquery.tags import store as tags
from rpquery.tags.fake_db import DbFakeBackend
from rpquery.usage import reads as usages
from rpquery.write import allocations, associations, inventory, providers

EXAMPLES = int(os.environ.get("RPQUERY_FUZZ_EXAMPLES", "3"))
A_UUID = "0f6e7c57-2f8e-4a4b-9a9c-0d1e2f3a4b5c"

#: Values that broke validation before (issue 15 items 1–7) or sit on a boundary: every
#: case tries each of them, then ``EXAMPLES`` random ones.
SPECIAL: list[Any] = [
        "", " ", "\x00", "a\x00b", "\ud800", "x\n", "CUSTOM_X\n", "INSTANCE\n", "a" * 300,
        "2147483648", "-1", "1e308", "nan", "inf", 2**31, 2**63, -(2**31) - 1, 1e308,
        float("inf"), float("nan"), -0.0, True, None, [], {}, A_UUID + "\n",
        A_UUID.upper(), f"urn:uuid:{A_UUID}", "{" + A_UUID + "}", A_UUID.replace("-", ""),
]  # fmt: skip
TEXT = st.text(st.characters(exclude_categories=()), max_size=30)
NUMBERS = st.integers(min_value=-(2**70), max_value=2**70) | st.floats()
JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=5,
)
VALUES = TEXT | NUMBERS | JSON


@dataclass
class World:
    """What the valid arguments name: a provider with inventory, a consumer on it, a
    server group with the consumer as member, an aggregate."""

    db: Database
    rp: str
    consumer: str
    group: str

    def generation(self) -> int:
        return providers.get_provider(self.db, self.rp).generation

    def consumer_generation(self) -> int | None:
        from rpquery.write.consumers import get_consumer

        return get_consumer(self.db, self.consumer).generation


def _world(db: Database) -> World:
    rp = providers.create_provider(db, "fuzz-cn")
    inventory.set_inventories(
        db, rp.uuid, {"VCPU": Inventory(total=64), "MEMORY_MB": Inventory(total=65536)},
        generation=rp.generation,
    )  # fmt: skip
    consumer = str(uuidlib.uuid4())
    allocations.replace_allocations(
        db, ConsumerAllocations(consumer, "p", "u", "INSTANCE", None, {rp.uuid: {"VCPU": 1}})
    )
    group = sg.create_group(db, "g", "anti-affinity", "p", "u")
    sg.add_members(db, group.uuid, [consumer])
    return World(db, rp.uuid, consumer, group.uuid)


def _key(value: Any) -> Any:
    """``value`` as a mapping key: JSON object keys are strings, never lists or maps."""
    return value if isinstance(value, Hashable) else json.dumps(value)


def _claim(w: World, **fields: Any) -> None:
    base: dict[str, Any] = {
        "consumer_uuid": str(uuidlib.uuid4()), "project_id": "p", "user_id": "u",
        "consumer_type": "INSTANCE", "consumer_generation": None,
        "allocations": {w.rp: {"VCPU": 1}},
    }  # fmt: skip
    allocations.replace_allocations(w.db, ConsumerAllocations(**{**base, **fields}))


def _inventory(w: World, **fields: Any) -> None:
    inv = Inventory(**{"total": 64, **fields})
    inventory.set_inventory(w.db, w.rp, "VCPU", inv, generation=w.generation())


Case = Callable[[World, Any], object]

CASES: dict[str, Case] = {
    "create_provider.name": lambda w, v: providers.create_provider(w.db, v),
    "create_provider.uuid": lambda w, v: providers.create_provider(w.db, "n", uuid=v),
    "create_provider.parent": lambda w, v: providers.create_provider(w.db, "c", parent_uuid=v),
    "get_provider": lambda w, v: providers.get_provider(w.db, v),
    "rename_provider.name": lambda w, v: providers.rename_provider(
        w.db, w.rp, v, generation=w.generation()
    ),
    "rename_provider.generation": lambda w, v: providers.rename_provider(
        w.db, w.rp, "r", generation=v
    ),
    "set_parent": lambda w, v: providers.set_parent(w.db, w.rp, v, generation=w.generation()),
    "delete_provider": lambda w, v: providers.delete_provider(w.db, v),
    "set_inventories.class": lambda w, v: inventory.set_inventories(
        w.db, w.rp, {_key(v): Inventory(total=8)}, generation=w.generation()
    ),
    "inventory.total": lambda w, v: _inventory(w, total=v),
    "inventory.reserved": lambda w, v: _inventory(w, reserved=v),
    "inventory.min_unit": lambda w, v: _inventory(w, min_unit=v),
    "inventory.max_unit": lambda w, v: _inventory(w, max_unit=v),
    "inventory.step_size": lambda w, v: _inventory(w, step_size=v),
    "inventory.allocation_ratio": lambda w, v: _inventory(w, allocation_ratio=v),
    "create_resource_class": lambda w, v: catalog.create_resource_class(w.db, v),
    "create_trait": lambda w, v: catalog.create_trait(w.db, v),
    "delete_trait": lambda w, v: catalog.delete_trait(w.db, v),
    "list_traits.prefix": lambda w, v: catalog.list_traits(w.db, prefix=v),
    "set_provider_traits": lambda w, v: associations.set_provider_traits(
        w.db, w.rp, [v], generation=w.generation()
    ),
    "set_provider_aggregates": lambda w, v: associations.set_provider_aggregates(
        w.db, w.rp, [v], generation=w.generation()
    ),
    "claim.consumer_uuid": lambda w, v: _claim(w, consumer_uuid=v),
    "claim.project_id": lambda w, v: _claim(w, project_id=v),
    "claim.user_id": lambda w, v: _claim(w, user_id=v),
    "claim.consumer_type": lambda w, v: _claim(w, consumer_type=v),
    "claim.consumer_generation": lambda w, v: _claim(w, consumer_generation=v),
    "claim.allocations": lambda w, v: _claim(w, allocations=v),
    "claim.provider": lambda w, v: _claim(w, allocations={_key(v): {"VCPU": 1}}),
    "claim.class": lambda w, v: _claim(w, allocations={w.rp: {_key(v): 1}}),
    "claim.amount": lambda w, v: _claim(w, allocations={w.rp: {"VCPU": v}}),
    "replace_existing.generation": lambda w, v: _claim(
        w, consumer_uuid=w.consumer, consumer_generation=v
    ),
    "delete_allocations.consumer": lambda w, v: allocations.delete_allocations(
        w.db, v, consumer_generation=0
    ),
    "delete_allocations.generation": lambda w, v: allocations.delete_allocations(
        w.db, w.consumer, consumer_generation=v
    ),
    "get_allocations": lambda w, v: allocations.get_allocations(w.db, v),
    "project_usages.project": lambda w, v: usages.project_usages(w.db, v),
    "project_usages.user": lambda w, v: usages.project_usages(w.db, "p", user_id=v),
    "project_usages.type": lambda w, v: usages.project_usages(w.db, "p", consumer_type=v),
    "candidates.params": lambda w, v: allocation_candidates(w.db, v),
    "candidates.resources": lambda w, v: allocation_candidates(w.db, {"resources": v}),
    "candidates.required": lambda w, v: allocation_candidates(
        w.db, {"resources": "VCPU:1", "required": v}
    ),
    "candidates.member_of": lambda w, v: allocation_candidates(
        w.db, {"resources": "VCPU:1", "member_of": v}
    ),
    "candidates.limit": lambda w, v: allocation_candidates(
        w.db, {"resources": "VCPU:1", "limit": v}
    ),
    "providers.params": lambda w, v: list_providers(w.db, v),
    "providers.name": lambda w, v: list_providers(w.db, {"name": v}),
    "providers.resources": lambda w, v: list_providers(w.db, {"resources": v}),
    "create_group.name": lambda w, v: sg.create_group(w.db, v, "affinity", "p", "u"),
    "create_group.policies": lambda w, v: sg.create_group(w.db, "g", v, "p", "u"),
    "create_group.project": lambda w, v: sg.create_group(w.db, "g", "affinity", v, "u"),
    "create_group.rules": lambda w, v: sg.create_group(w.db, "g", "anti-affinity", "p", "u", v),
    "create_group.max_server_per_host": lambda w, v: sg.create_group(
        w.db, "g", "anti-affinity", "p", "u", {"max_server_per_host": v}
    ),
    "add_members": lambda w, v: sg.add_members(w.db, w.group, [v]),
    "remove_members": lambda w, v: sg.remove_members(w.db, w.group, [v]),
    "show_group": lambda w, v: sg.show_group(w.db, v),
    "schedule.request": lambda w, v: scheduling.schedule(
        w.db, v, w.group, project_id="p", user_id="u", consumer_type="INSTANCE"
    ),
    "schedule.project": lambda w, v: scheduling.schedule(
        w.db, "resources=VCPU:1", w.group, project_id=v, user_id="u", consumer_type="INSTANCE"
    ),
    "schedule.count": lambda w, v: scheduling.schedule(
        w.db, "resources=VCPU:1", w.group, project_id="p", user_id="u",
        consumer_type="INSTANCE", count=v,
    ),  # fmt: skip
    "aggregate_metadata.aggregate": lambda w, v: am.set_metadata(w.db, v, {"k": "v"}),
    "aggregate_metadata.key": lambda w, v: am.set_metadata(w.db, A_UUID, {_key(v): "v"}),
    "aggregate_metadata.value": lambda w, v: am.set_metadata(w.db, A_UUID, {"k": v}),
    "tags.instance": lambda w, v: tags.add_tag(w.db, DbFakeBackend.load(w.db), v, "t"),
    "tags.tag": lambda w, v: tags.add_tag(w.db, DbFakeBackend.load(w.db), w.consumer, v),
    "tags.namespace": lambda w, v: tags.add_tag(
        w.db, DbFakeBackend.load(w.db), w.consumer, "t", namespace=v
    ),
}


def _outcome(call: Callable[[], object]) -> str:
    """``ok`` (a result or one of rpquery's own errors), else the kind of failure:
    ``bare <ExceptionName>`` or ``driver error``."""
    try:
        call()
    except RpqueryError as error:
        if error.code in ("rpquery.db.error", "rpquery.internal"):
            return "driver error"
        return "ok"
    except Exception as error:  # noqa: BLE001 - the finding
        return f"bare {type(error).__name__}"
    return "ok"


def _unexpected(case: str, value: Any, outcome: str) -> str | None:
    return None if outcome == "ok" else f"{case}({value!r}): {outcome}"


@pytest.mark.parametrize("phase", ["boundary values", "random values"])
def test_public_inputs_give_rpquery_errors_only(db: Database, phase: str) -> None:
    """Every case with every boundary value, then ``EXAMPLES`` random (case, value)
    pairs per case (derandomized, so a CI run is repeatable); then the invariants."""
    world = _world(db)
    findings: list[str] = []

    def attempt(case: str, value: Any) -> None:
        outcome = _outcome(lambda: CASES[case](world, value))
        finding = _unexpected(case, value, outcome)
        if finding is not None:
            findings.append(finding)

    if phase == "boundary values":
        for case in sorted(CASES):
            for value in SPECIAL:
                attempt(case, value)
    else:

        @settings(
            max_examples=EXAMPLES * len(CASES),
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.sampled_from(sorted(CASES)), VALUES)
        def run(case: str, value: Any) -> None:
            attempt(case, value)

        run()
    assert findings == []
    found = check_invariants(db, {}, {}, anti_affinity_limit=1)
    assert found.violations == []
