"""Aggregate metadata and the flavor extra-specs filter built on it
(docs/aggregate-metadata.md).

Public names are imported on first use (:mod:`rpquery._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rpquery._lazy import lazy_exports

if TYPE_CHECKING:
    from rpquery.aggregate_metadata.extra_specs import (
        FlavorFilter,
        host_passes,
        validate_extra_specs,
    )
    from rpquery.aggregate_metadata.metadata import (
        AggregateMetadata,
        AggregateMetadataFilter,
        get_metadata,
        list_metadata,
        replace_metadata,
        set_metadata,
        unset_metadata,
    )

__all__ = [
    "AggregateMetadata",
    "AggregateMetadataFilter",
    "FlavorFilter",
    "get_metadata",
    "host_passes",
    "list_metadata",
    "replace_metadata",
    "set_metadata",
    "unset_metadata",
    "validate_extra_specs",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FlavorFilter": ".extra_specs",
        "host_passes": ".extra_specs",
        "validate_extra_specs": ".extra_specs",
        "AggregateMetadata": ".metadata",
        "AggregateMetadataFilter": ".metadata",
        "get_metadata": ".metadata",
        "list_metadata": ".metadata",
        "replace_metadata": ".metadata",
        "set_metadata": ".metadata",
        "unset_metadata": ".metadata",
    },
)
