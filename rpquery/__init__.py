"""rpquery: Placement-compatible placement queries on SQLAlchemy Core.

The public API: everything a caller needs is importable from here, and nothing else is
promised (``rpquery.<package>`` names a package's own public names; modules whose name
starts with ``_`` are internal)::

    from rpquery import Database, allocation_candidates, create_provider

Names are imported on first use, so ``import rpquery`` stays cheap.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rpquery._lazy import lazy_exports
from rpquery.errors import (
    CapacityExceeded,
    ConcurrentUpdate,
    Conflict,
    DatabaseError,
    InUse,
    InvalidRequest,
    NotFound,
    RpqueryError,
    SchemaError,
    TooComplex,
)

if TYPE_CHECKING:
    from rpquery.db import Database
    from rpquery.insight._headroom import Headroom, headroom
    from rpquery.insight._why import Rejections, explain_no_candidates
    from rpquery.models import ConsumerAllocations, Inventory
    from rpquery.policies.base import HostPolicy
    from rpquery.read.candidates import AllocationCandidates, allocation_candidates
    from rpquery.read.objects import get_allocations
    from rpquery.read.providers import list_providers
    from rpquery.store.catalog import create_resource_class, create_trait
    from rpquery.usage.reads import project_usages, provider_usages
    from rpquery.write.allocations import delete_allocations, replace_allocations
    from rpquery.write.associations import set_provider_aggregates, set_provider_traits
    from rpquery.write.inventory import set_inventories
    from rpquery.write.providers import create_provider, delete_provider
    from rpquery.write.reshaper import ProviderInventories, reshape

__all__ = [
    # the database
    "Database",
    # reads
    "AllocationCandidates",
    "allocation_candidates",
    "list_providers",
    "project_usages",
    "provider_usages",
    "Rejections",
    "explain_no_candidates",
    "Headroom",
    "headroom",
    "HostPolicy",
    # writes
    "Inventory",
    "ConsumerAllocations",
    "ProviderInventories",
    "create_provider",
    "delete_provider",
    "set_inventories",
    "set_provider_traits",
    "set_provider_aggregates",
    "replace_allocations",
    "delete_allocations",
    "get_allocations",
    "reshape",
    "create_resource_class",
    "create_trait",
    # errors
    "RpqueryError",
    "InvalidRequest",
    "NotFound",
    "Conflict",
    "ConcurrentUpdate",
    "CapacityExceeded",
    "InUse",
    "TooComplex",
    "SchemaError",
    "DatabaseError",
]
__version__ = "0.1.0"

_EXPORTS = {
    "Database": ".db",
    "AllocationCandidates": ".read.candidates",
    "allocation_candidates": ".read.candidates",
    "list_providers": ".read.providers",
    "project_usages": ".usage.reads",
    "provider_usages": ".usage.reads",
    "Rejections": ".insight._why",
    "explain_no_candidates": ".insight._why",
    "Headroom": ".insight._headroom",
    "headroom": ".insight._headroom",
    "HostPolicy": ".policies.base",
    "Inventory": ".models",
    "ConsumerAllocations": ".models",
    "ProviderInventories": ".write.reshaper",
    "create_provider": ".write.providers",
    "delete_provider": ".write.providers",
    "set_inventories": ".write.inventory",
    "set_provider_traits": ".write.associations",
    "set_provider_aggregates": ".write.associations",
    "replace_allocations": ".write.allocations",
    "delete_allocations": ".write.allocations",
    "get_allocations": ".read.objects",
    "reshape": ".write.reshaper",
    "create_resource_class": ".store.catalog",
    "create_trait": ".store.catalog",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

# Library logging (a logger per layer: rpquery.read, rpquery.write, ...; see
# docs/architecture.md#logging) is silent unless the application configures the
# ``rpquery`` logger or the root logger.
logging.getLogger("rpquery").addHandler(logging.NullHandler())
