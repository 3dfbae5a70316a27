"""Usage reads (by project, provider, consumer) and the trigger-kept usage tables they
read, each with a verify and a rebuild (docs/usages.md).

``reads`` answers the usage endpoints (``provider_usages()`` is
``GET /resource_providers/{uuid}/usages``); ``summary`` keeps the usage summary by
consumer type (``rpq0006``); ``provider_totals`` keeps ``rpq_provider_usages``, the
per-(provider, class) totals the read path's capacity checks use (``rpq0007``).

Public names are imported on first use (:mod:`rpquery._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rpquery._lazy import lazy_exports

if TYPE_CHECKING:
    from rpquery.usage.provider_totals import rebuild_provider_usages, verify_provider_usages
    from rpquery.usage.reads import (
        ConsumerView,
        ProviderAllocations,
        UsageGroup,
        UsageReport,
        consumer_allocations,
        project_usages,
        provider_allocations,
        provider_usages,
    )
    from rpquery.usage.summary import rebuild_usage_summary, verify_usage_summary

__all__ = [
    "ConsumerView",
    "ProviderAllocations",
    "UsageGroup",
    "UsageReport",
    "consumer_allocations",
    "project_usages",
    "provider_allocations",
    "provider_usages",
    "rebuild_provider_usages",
    "rebuild_usage_summary",
    "verify_provider_usages",
    "verify_usage_summary",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "rebuild_provider_usages": ".provider_totals",
        "verify_provider_usages": ".provider_totals",
        "ConsumerView": ".reads",
        "ProviderAllocations": ".reads",
        "UsageGroup": ".reads",
        "UsageReport": ".reads",
        "consumer_allocations": ".reads",
        "project_usages": ".reads",
        "provider_allocations": ".reads",
        "provider_usages": ".reads",
        "rebuild_usage_summary": ".summary",
        "verify_usage_summary": ".summary",
    },
)
