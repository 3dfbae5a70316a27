"""Why a request finds no allocation candidate, and how much more fits (headroom)
(docs/why-and-headroom.md).

Public names are imported on first use (:mod:`rpquery._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rpquery._lazy import lazy_exports

if TYPE_CHECKING:
    from rpquery.insight._headroom import GROUP_BY, GroupHeadroom, Headroom, HostHeadroom, headroom
    from rpquery.insight._why import EXAMPLES, Host, Reason, Rejections, explain_no_candidates

__all__ = [
    "EXAMPLES",
    "GROUP_BY",
    "GroupHeadroom",
    "Headroom",
    "Host",
    "HostHeadroom",
    "Reason",
    "Rejections",
    "explain_no_candidates",
    "headroom",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "GROUP_BY": "._headroom",
        "GroupHeadroom": "._headroom",
        "Headroom": "._headroom",
        "HostHeadroom": "._headroom",
        "headroom": "._headroom",
        "EXAMPLES": "._why",
        "Host": "._why",
        "Reason": "._why",
        "Rejections": "._why",
        "explain_no_candidates": "._why",
    },
)
