"""Where a server group's members are: pure statement builders over the member,
allocation and provider tables, and the one grouped count the soft weighers need.

A member's host is the root provider of the providers its allocations use; sharing
providers (trait ``MISC_SHARES_VIA_AGGREGATE``) are not hosts::

    SELECT rp.root_provider_id, COUNT(DISTINCT m.instance_uuid)
    FROM rpq_server_group_members m
    JOIN allocations a ON a.consumer_id = m.instance_uuid
    JOIN resource_providers rp ON rp.id = a.resource_provider_id
    WHERE m.group_id = :group AND rp.root_provider_id IN (:candidate_roots)
      AND NOT EXISTS (<rp shares via aggregate>)
    GROUP BY rp.root_provider_id

>>> from sqlalchemy.dialects import postgresql
>>> sql = str(member_counts_stmt(1, [10, 11]).compile(dialect=postgresql.dialect()))
>>> "GROUP BY resource_providers.root_provider_id" in sql
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement, Select

from rpquery.read.engine import SHARING_TRAIT as SHARING_TRAIT  # re-exported
from rpquery.store.tables import (
    allocations,
    resource_provider_traits,
    resource_providers,
    server_group_members,
    traits,
)


def not_sharing(rp_id: ColumnElement[int]) -> ColumnElement[bool]:
    """``rp_id`` is not a sharing provider (``NOT EXISTS`` on its traits)."""
    sharing_id = sa.select(traits.c.id).where(traits.c.name == SHARING_TRAIT).scalar_subquery()
    return ~sa.exists().where(
        resource_provider_traits.c.resource_provider_id == rp_id,
        resource_provider_traits.c.trait_id == sharing_id,
    )


def _member_allocations(group_id: int, exclude_instance: str | None) -> tuple[Any, list[Any]]:
    """FROM clause and WHERE terms shared by the member-host builders."""
    m, a, rp = server_group_members, allocations, resource_providers
    joined = m.join(a, a.c.consumer_id == m.c.instance_uuid).join(
        rp, rp.c.id == a.c.resource_provider_id
    )
    terms: list[Any] = [m.c.group_id == group_id, not_sharing(rp.c.id)]
    if exclude_instance is not None:
        terms.append(m.c.instance_uuid != exclude_instance)
    return joined, terms


def member_counts_stmt(
    group_id: int,
    root_ids: Sequence[int] | None = None,
    *,
    exclude_instance: str | None = None,
) -> Select[Any]:
    """``(root_id, members)`` per host holding members of the group, restricted to
    ``root_ids`` when given; ``exclude_instance`` (a moving member) is not counted."""
    root = resource_providers.c.root_provider_id
    joined, terms = _member_allocations(group_id, exclude_instance)
    if root_ids is not None:
        terms.append(root.in_(sa.bindparam("root_ids", list(root_ids), expanding=True)))
    members = sa.func.count(sa.distinct(server_group_members.c.instance_uuid))
    return (
        sa.select(root, members.label("members")).select_from(joined).where(*terms).group_by(root)
    )


def member_hosts_stmt(group_id: int) -> Select[Any]:
    """``(instance_uuid, host id, host uuid, host name)`` for every member with allocations."""
    host = resource_providers.alias("host")
    joined, terms = _member_allocations(group_id, None)
    joined = joined.join(host, host.c.id == resource_providers.c.root_provider_id)
    return (
        sa.select(server_group_members.c.instance_uuid, host.c.id, host.c.uuid, host.c.name)
        .select_from(joined)
        .where(*terms)
        .distinct()
        .order_by(server_group_members.c.instance_uuid, host.c.uuid)
    )


#: Up to this many candidate roots are bound into the count statement; past it, the
#: statement counts every host of the group (bounded by the group's size) and the
#: candidates are picked out in Python: 5,000 bound ids cost more than the count itself.
BIND_ROOTS_UP_TO = 1000


def member_counts(
    conn: Connection,
    group_id: int,
    root_ids: Sequence[int] | None = None,
    *,
    exclude_instance: str | None = None,
    bind_up_to: int = BIND_ROOTS_UP_TO,
) -> dict[int, int]:
    """Run :func:`member_counts_stmt` (one statement): ``{root_id: members}`` for the
    hosts in ``root_ids`` (every host when ``None``) that hold members."""
    bound = root_ids if root_ids is not None and len(root_ids) <= bind_up_to else None
    stmt = member_counts_stmt(group_id, bound, exclude_instance=exclude_instance)
    counts = {int(root): int(n) for root, n in conn.execute(stmt)}
    if root_ids is None or bound is not None:
        return counts
    wanted = set(root_ids)
    return {root: n for root, n in counts.items() if root in wanted}


def hosts_at_or_over(group_id: int, limit: int, exclude_instance: str | None) -> Select[Any]:
    """Hosts holding at least ``limit`` members (``exclude_instance`` not counted): the
    set hard policies test candidate roots against, computed once per statement."""
    root = resource_providers.c.root_provider_id
    joined, terms = _member_allocations(group_id, exclude_instance)
    members = sa.func.count(sa.distinct(server_group_members.c.instance_uuid))
    return (
        sa.select(root)
        .select_from(joined)
        .where(root.is_not(None), *terms)
        .group_by(root)
        .having(members >= limit)
        .correlate(None)  # a set computed once, whatever the enclosing query is
    )
