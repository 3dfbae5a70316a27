"""The read path: parse a query, build statements, run them, return frozen results.

``request`` parses Placement's query syntax; ``candidates`` answers
``GET /allocation_candidates``; ``providers`` answers ``GET /resource_providers``;
``objects`` reads single objects by uuid (a provider, its inventories, traits and
aggregates, a consumer and its allocations), the reads the write path builds on.

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
    from rpquery.read.objects import (
        consumer_generations,
        get_allocations,
        get_consumer,
        get_inventories,
        get_provider,
        get_provider_aggregates,
        get_provider_traits,
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
    "consumer_generations",
    "exclude_nested",
    "get_allocations",
    "get_consumer",
    "get_inventories",
    "get_provider",
    "get_provider_aggregates",
    "get_provider_traits",
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
        "consumer_generations": ".objects",
        "get_allocations": ".objects",
        "get_consumer": ".objects",
        "get_inventories": ".objects",
        "get_provider": ".objects",
        "get_provider_aggregates": ".objects",
        "get_provider_traits": ".objects",
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
