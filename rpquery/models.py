"""Frozen value types of the write path: providers, inventories, consumer allocations.

These are plain values: building one never touches the database and never validates
against it. The write functions (:mod:`rpquery.write.providers`, :mod:`rpquery.write.inventory`,
:mod:`rpquery.write.allocations`) validate them before anything is sent to the server, so a
value read back from an odd Placement database can still be represented.

>>> inv = Inventory(total=8, reserved=2, allocation_ratio=4.0)
>>> (inv.max_unit, inv.capacity)
(8, 24)
>>> req = ConsumerAllocations(
...     "30328d13-e299-4a93-a102-61e4ccabe474", "proj", "user", "INSTANCE", None,
...     {"e10927c4-8bc9-465d-ac60-d2f79f7e4a00": {"VCPU": 2}})
>>> req.is_new_consumer, req.resource_pairs()
(True, [('e10927c4-8bc9-465d-ac60-d2f79f7e4a00', 'VCPU', 2)])
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rpquery._validation import matches
from rpquery.errors import InvalidRequest

__all__ = [
    "CONSUMER_TYPE_MAX_LENGTH",
    "CONSUMER_TYPE_RE",
    "Consumer",
    "ConsumerAllocations",
    "Inventory",
    "ResourceProvider",
    "check_consumer_type",
]


@dataclass(frozen=True)
class ResourceProvider:
    """One resource provider as stored, written (:mod:`rpquery.write.providers`) and
    listed (:func:`rpquery.read.providers.list_providers`): ``root_uuid`` is its own uuid
    for a root."""

    uuid: str
    name: str
    generation: int
    root_uuid: str
    parent_uuid: str | None = None

    @property
    def is_root(self) -> bool:
        return self.parent_uuid is None

    def to_placement(self) -> dict[str, Any]:
        """Placement's JSON of a provider as ``GET /resource_providers`` lists it."""
        return {
            "uuid": self.uuid,
            "name": self.name,
            "generation": self.generation,
            "root_provider_uuid": self.root_uuid,
            "parent_provider_uuid": self.parent_uuid,
        }


@dataclass(frozen=True)
class Inventory:
    """Inventory of one resource class on one provider.

    ``max_unit=None`` means "no per-allocation cap beyond the total": it is stored as
    ``total`` (what nova and Placement clients send in practice), so a value built with
    ``max_unit=None`` compares equal to the one read back.
    """

    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int | None = None
    step_size: int = 1
    allocation_ratio: float = 1.0

    def __post_init__(self) -> None:
        if self.max_unit is None:
            object.__setattr__(self, "max_unit", self.total)

    @property
    def capacity(self) -> int:
        """``(total - reserved) * allocation_ratio``, rounded down as Placement does."""
        return int((self.total - self.reserved) * self.allocation_ratio)


def _frozen_allocations(
    allocations: Mapping[str, Mapping[str, int]],
) -> Mapping[str, Mapping[str, int]]:
    if not isinstance(allocations, Mapping) or not all(
        isinstance(rcs, Mapping) for rcs in allocations.values()
    ):
        raise InvalidRequest(
            "rpquery.allocation.bad_allocations",
            "allocations must map provider uuids to {resource class: amount}",
            token=repr(allocations),
        )
    return MappingProxyType({rp: MappingProxyType(dict(rcs)) for rp, rcs in allocations.items()})


@dataclass(frozen=True)
class ConsumerAllocations:
    """Every allocation of one consumer, written as a whole.

    ``consumer_generation`` is the generation the caller last saw; ``None`` means
    "this consumer is new" (writing fails if it already exists). ``allocations`` maps a
    provider uuid to ``{resource class: amount}``; an empty mapping deletes the
    consumer's allocations and the consumer itself.

    Two relaxations serve Placement's older microversions: ``consumer_type=None`` gives a
    new consumer no type ("unknown", before 1.38) and leaves an existing consumer's type
    alone; ``generation_checked=False`` (before 1.28) ignores ``consumer_generation``:
    the consumer is created when absent and updated (or deleted) whatever its generation.
    """

    consumer_uuid: str
    project_id: str
    user_id: str
    consumer_type: str | None
    consumer_generation: int | None
    allocations: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    generation_checked: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocations", _frozen_allocations(self.allocations))

    def __hash__(self) -> int:
        return hash((self.consumer_uuid, self.consumer_generation))

    @property
    def is_new_consumer(self) -> bool:
        return self.consumer_generation is None

    @property
    def is_empty(self) -> bool:
        return not any(self.allocations.values())

    def resource_pairs(self) -> list[tuple[str, str, int]]:
        """``(provider uuid, resource class, amount)`` for every allocation, sorted."""
        return sorted(
            (rp, rc, amount) for rp, rcs in self.allocations.items() for rc, amount in rcs.items()
        )


@dataclass(frozen=True)
class Consumer:
    """A consumer row: its owner, type (``None`` = unknown) and generation."""

    uuid: str
    project_id: str
    user_id: str
    consumer_type: str | None
    generation: int


# ---------------------------------------------------------------- pure input checks

#: A consumer type name, the one rule (the writes, the usage reads and their filters
#: check it here; the API's schemas and the CLI's help write this pattern): ``[A-Z0-9_]``
#: characters as a whole, Placement's ``CONSUMER_TYPE_PATTERN``, and at most
#: :data:`CONSUMER_TYPE_MAX_LENGTH` of them.
CONSUMER_TYPE_RE = re.compile("^[A-Z0-9_]+$")
#: The longest consumer type name (the column's and Placement's schema's ``maxLength``).
CONSUMER_TYPE_MAX_LENGTH = 255


def check_consumer_type(name: object) -> str:
    """A consumer type name matches :data:`CONSUMER_TYPE_RE` as a whole, at most 255
    characters (``rpquery.consumer.bad_type``; docs/design.md#consumer-types).

    >>> check_consumer_type("INSTANCE")
    'INSTANCE'
    >>> check_consumer_type("instance")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rpquery.errors.InvalidRequest: invalid consumer type 'instance': must match ^[A-Z0-9_]+$ ...
    """
    if not (matches(CONSUMER_TYPE_RE, name) and len(str(name)) <= CONSUMER_TYPE_MAX_LENGTH):
        raise InvalidRequest(
            "rpquery.consumer.bad_type",
            f"invalid consumer type {name!r}: must match {CONSUMER_TYPE_RE.pattern}"
            f" (1-{CONSUMER_TYPE_MAX_LENGTH} characters)",
            token=str(name),
        )
    return str(name)
