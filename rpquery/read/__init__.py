"""The read path: parse a query, build statements, run them, return frozen results.

``request`` parses Placement's query syntax; ``candidates`` answers
``GET /allocation_candidates``; ``providers`` answers ``GET /resource_providers``.

Public names are imported on first use (:mod:`rpquery._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rpquery._lazy import lazy_exports

if TYPE_CHECKING:
    from rpquery.read.candidates import (
        AllocationCandidates,
        AllocationRequest,
        ProviderSummary,
        ResourceSummary,
        allocation_candidates,
        candidate_statements,
        exclude_nested,
    )
    from rpquery.read.providers import ResourceProvider, list_providers, provider_statements
    from rpquery.read.request import (
        CandidatesRequest,
        Params,
        ProvidersRequest,
        RequestGroup,
        parse_candidates,
        parse_providers,
    )

__all__ = [
    "AllocationCandidates",
    "AllocationRequest",
    "CandidatesRequest",
    "Params",
    "ProviderSummary",
    "ProvidersRequest",
    "RequestGroup",
    "ResourceProvider",
    "ResourceSummary",
    "allocation_candidates",
    "candidate_statements",
    "exclude_nested",
    "list_providers",
    "parse_candidates",
    "parse_providers",
    "provider_statements",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AllocationCandidates": ".candidates",
        "AllocationRequest": ".candidates",
        "ProviderSummary": ".candidates",
        "ResourceSummary": ".candidates",
        "allocation_candidates": ".candidates",
        "candidate_statements": ".candidates",
        "exclude_nested": ".candidates",
        "ResourceProvider": ".providers",
        "list_providers": ".providers",
        "provider_statements": ".providers",
        "CandidatesRequest": ".request",
        "Params": ".request",
        "ProvidersRequest": ".request",
        "RequestGroup": ".request",
        "parse_candidates": ".request",
        "parse_providers": ".request",
    },
)
