"""Result dataclasses of the allocation-candidate read path, with Placement 1.39 renderers.

>>> AllocationRequest({"rp-1": {"VCPU": 1}}, {"": ("rp-1",)}, "rp-1").to_placement()
{'allocations': {'rp-1': {'resources': {'VCPU': 1}}}, 'mappings': {'': ['rp-1']}}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ResourceSummary:
    capacity: int
    used: int


@dataclass(frozen=True)
class ProviderSummary:
    """One provider of a returned tree: every inventory's capacity and usage, traits."""

    uuid: str
    name: str | None
    parent_uuid: str | None
    root_uuid: str
    resources: Mapping[str, ResourceSummary]
    traits: frozenset[str]

    def to_placement(self) -> dict[str, Any]:
        return {
            "resources": {
                rc: {"capacity": r.capacity, "used": r.used}
                for rc, r in sorted(self.resources.items())
            },
            "traits": sorted(self.traits),
            "parent_provider_uuid": self.parent_uuid,
            "root_provider_uuid": self.root_uuid,
        }


@dataclass(frozen=True)
class AllocationRequest:
    """``allocations[rp_uuid][rc] = amount``; ``mappings[suffix]`` = providers used."""

    allocations: Mapping[str, Mapping[str, int]]
    mappings: Mapping[str, tuple[str, ...]]
    root_uuid: str

    def to_placement(self) -> dict[str, Any]:
        return {
            "allocations": {
                rp: {"resources": dict(sorted(res.items()))}
                for rp, res in sorted(self.allocations.items())
            },
            "mappings": {s: list(rps) for s, rps in sorted(self.mappings.items())},
        }


@dataclass(frozen=True)
class AllocationCandidates:
    allocation_requests: tuple[AllocationRequest, ...] = ()
    provider_summaries: Mapping[str, ProviderSummary] = field(default_factory=dict)

    def to_placement(self) -> dict[str, Any]:
        """The body of Placement 1.39's ``GET /allocation_candidates`` response."""
        return {
            "allocation_requests": [a.to_placement() for a in self.allocation_requests],
            "provider_summaries": {
                u: s.to_placement() for u, s in sorted(self.provider_summaries.items())
            },
        }
