"""The host-policy contract: :class:`~rpquery.policies.base.HostPolicy`.

Policies themselves live with their feature (``rpquery.server_groups``,
``rpquery.aggregate_metadata``).
"""

from __future__ import annotations

from rpquery.policies.base import HostPolicy

__all__ = ["HostPolicy"]
