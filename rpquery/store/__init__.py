"""The store: every table (``tables``), the dialect differences (``dialects``), schema
migrations (``migrations``) and the resource class and trait catalog (``catalog``).

Public names are imported on first use (:mod:`rpquery._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rpquery._lazy import lazy_exports

if TYPE_CHECKING:
    from rpquery.store.catalog import (
        create_resource_class,
        create_trait,
        delete_resource_class,
        delete_trait,
        list_resource_classes,
        list_traits,
        update_resource_class,
    )
    from rpquery.store.migrations import SchemaStatus, downgrade, require_current, status, upgrade

__all__ = [
    "SchemaStatus",
    "create_resource_class",
    "create_trait",
    "delete_resource_class",
    "delete_trait",
    "downgrade",
    "list_resource_classes",
    "list_traits",
    "require_current",
    "status",
    "update_resource_class",
    "upgrade",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "create_resource_class": ".catalog",
        "create_trait": ".catalog",
        "delete_resource_class": ".catalog",
        "delete_trait": ".catalog",
        "list_resource_classes": ".catalog",
        "list_traits": ".catalog",
        "update_resource_class": ".catalog",
        "SchemaStatus": ".migrations",
        "downgrade": ".migrations",
        "require_current": ".migrations",
        "status": ".migrations",
        "upgrade": ".migrations",
    },
)
