"""Server groups: affinity rules, their storage, the host policy, the soft weighers and
scheduling with them (docs/server-groups.md).

Public names are imported on first use (:mod:`rpquery._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rpquery._lazy import lazy_exports

if TYPE_CHECKING:
    from rpquery.server_groups.groups import (
        GroupSpec,
        ServerGroup,
        ServerGroupPolicy,
        add_members,
        create_group,
        delete_group,
        get_group,
        list_groups,
        policy_for_group,
        remove_members,
        show_group,
    )
    from rpquery.server_groups.scheduling import Scheduled, move, schedule
    from rpquery.server_groups.weighers import WeigherConfig

__all__ = [
    "GroupSpec",
    "Scheduled",
    "ServerGroup",
    "ServerGroupPolicy",
    "WeigherConfig",
    "add_members",
    "create_group",
    "delete_group",
    "get_group",
    "list_groups",
    "move",
    "policy_for_group",
    "remove_members",
    "schedule",
    "show_group",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "GroupSpec": ".groups",
        "ServerGroup": ".groups",
        "ServerGroupPolicy": ".groups",
        "add_members": ".groups",
        "create_group": ".groups",
        "delete_group": ".groups",
        "get_group": ".groups",
        "list_groups": ".groups",
        "policy_for_group": ".groups",
        "remove_members": ".groups",
        "show_group": ".groups",
        "Scheduled": ".scheduling",
        "move": ".scheduling",
        "schedule": ".scheduling",
        "WeigherConfig": ".weighers",
    },
)
