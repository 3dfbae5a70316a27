"""Every route of the API, collected from the handler modules (each exports
``ROUTES``). Placement's table has 21 paths; ``/healthcheck`` is rpquery's addition."""

from __future__ import annotations

from rpquery.api.handlers import (
    aggregates,
    allocation_candidates,
    allocations,
    insight,
    inventories,
    reshaper,
    resource_classes,
    resource_providers,
    root,
    traits,
    usages,
)
from rpquery.api.routing import Route

__all__ = ["ROUTES"]

ROUTES: list[Route] = [
    *root.ROUTES,
    *resource_providers.ROUTES,
    *inventories.ROUTES,
    *resource_classes.ROUTES,
    *traits.ROUTES,
    *aggregates.ROUTES,
    *allocations.ROUTES,
    *allocation_candidates.ROUTES,
    *usages.ROUTES,
    *reshaper.ROUTES,
    *insight.ROUTES,
]
