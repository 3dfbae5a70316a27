"""Server groups (docs/server-groups.md): the public module of their values, storage and
host policy, which live in three private modules by concern:

- :mod:`~rpquery.server_groups._model`: policies, rules, the frozen values and
  :func:`validate_group` (no database);
- :mod:`~rpquery.server_groups._store`: the SQL reads and writes (groups, members,
  generations, :func:`show_group`);
- :mod:`~rpquery.server_groups._policy`: :class:`ServerGroupPolicy`, the host policy.

A server group has exactly one policy. ``affinity`` and ``anti-affinity`` are hard:
they filter candidate hosts (anti-affinity allows up to ``max_server_per_host``
members per host, default 1). ``soft-affinity`` and ``soft-anti-affinity`` only order
hosts, through the weighers of :mod:`rpquery.server_groups.weighers`.

A member's *host* is the root provider of the providers its allocations use (sharing
providers are not hosts). Member counts per host come from one grouped statement
(:func:`~rpquery.server_groups._group_hosts.member_counts_stmt`, re-exported here).

>>> validate_group("web", ["soft-anti-affinity"], "p", "u").policy
'soft-anti-affinity'
>>> validate_group("db", ["anti-affinity"], "p", "u").max_server_per_host
1
"""

from __future__ import annotations

from rpquery.server_groups._group_hosts import SHARING_TRAIT as SHARING_TRAIT
from rpquery.server_groups._group_hosts import member_counts as member_counts
from rpquery.server_groups._group_hosts import member_counts_stmt as member_counts_stmt
from rpquery.server_groups._group_hosts import member_hosts_stmt as member_hosts_stmt
from rpquery.server_groups._model import (
    AFFINITY,
    ANTI_AFFINITY,
    BAD_UUID,
    GENERATION_CONFLICT,
    MAX_SERVER_PER_HOST,
    POLICIES,
    POLICY_RULES,
    POLICY_WEIGHER,
    SOFT_AFFINITY,
    SOFT_ANTI_AFFINITY,
    GroupSpec,
    Host,
    Member,
    ServerGroup,
    ServerGroupDetail,
    validate_group,
)
from rpquery.server_groups._policy import ServerGroupPolicy, policy_for_group
from rpquery.server_groups._store import (
    add_members,
    add_members_conn,
    bump_generation,
    create_group,
    delete_group,
    get_group,
    list_groups,
    load_group,
    locked_group,
    remove_members,
    show_group,
)

__all__ = [
    "AFFINITY",
    "ANTI_AFFINITY",
    "BAD_UUID",
    "GENERATION_CONFLICT",
    "MAX_SERVER_PER_HOST",
    "POLICIES",
    "POLICY_RULES",
    "POLICY_WEIGHER",
    "SHARING_TRAIT",
    "SOFT_AFFINITY",
    "SOFT_ANTI_AFFINITY",
    "GroupSpec",
    "Host",
    "Member",
    "ServerGroup",
    "ServerGroupDetail",
    "ServerGroupPolicy",
    "add_members",
    "add_members_conn",
    "bump_generation",
    "create_group",
    "delete_group",
    "get_group",
    "list_groups",
    "load_group",
    "locked_group",
    "member_counts",
    "member_counts_stmt",
    "member_hosts_stmt",
    "policy_for_group",
    "remove_members",
    "show_group",
    "validate_group",
]
