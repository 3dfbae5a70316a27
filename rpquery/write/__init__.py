"""The write path: providers, inventories, traits and aggregates, consumers, allocations
and reshapes, each write one atomic transaction (docs/writes.md).

The object reads (``get_provider``, ``get_inventories``, ``get_provider_traits``,
``get_provider_aggregates``, ``get_consumer``, ``get_allocations``) live in
:mod:`rpquery.read.objects`; the write modules re-export them under their old names.

Public names are imported on first use (:mod:`rpquery._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rpquery._lazy import lazy_exports

if TYPE_CHECKING:
    from rpquery.write.allocations import (
        delete_allocations,
        get_allocations,
        replace_allocations,
        replace_many,
    )
    from rpquery.write.associations import (
        get_provider_aggregates,
        get_provider_traits,
        set_provider_aggregates,
        set_provider_traits,
    )
    from rpquery.write.consumers import get_consumer
    from rpquery.write.inventory import (
        delete_inventory,
        get_inventories,
        set_inventories,
        set_inventory,
    )
    from rpquery.write.providers import (
        create_provider,
        delete_provider,
        get_provider,
        rename_provider,
        set_parent,
        update_provider,
    )
    from rpquery.write.reshaper import (
        ProviderInventories,
        ReshapeRequest,
        parse_reshape_body,
        reshape,
    )

__all__ = [
    "ProviderInventories",
    "ReshapeRequest",
    "create_provider",
    "delete_allocations",
    "delete_inventory",
    "delete_provider",
    "get_allocations",
    "get_consumer",
    "get_inventories",
    "get_provider",
    "get_provider_aggregates",
    "get_provider_traits",
    "parse_reshape_body",
    "rename_provider",
    "replace_allocations",
    "replace_many",
    "reshape",
    "set_inventories",
    "set_inventory",
    "set_parent",
    "set_provider_aggregates",
    "set_provider_traits",
    "update_provider",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        # the object reads under their earlier names: every get_* here is one
        # (tests/test_public_api.py: the same objects as rpquery.read's)
        **{name: "..read.objects" for name in __all__ if name.startswith("get_")},
        "delete_allocations": ".allocations",
        "replace_allocations": ".allocations",
        "replace_many": ".allocations",
        "set_provider_aggregates": ".associations",
        "set_provider_traits": ".associations",
        "delete_inventory": ".inventory",
        "set_inventories": ".inventory",
        "set_inventory": ".inventory",
        "create_provider": ".providers",
        "delete_provider": ".providers",
        "rename_provider": ".providers",
        "set_parent": ".providers",
        "update_provider": ".providers",
        "ProviderInventories": ".reshaper",
        "ReshapeRequest": ".reshaper",
        "parse_reshape_body": ".reshaper",
        "reshape": ".reshaper",
    },
)
