"""The host policy of a server group (docs/server-groups.md): the
:class:`~rpquery.policies.base.HostPolicy` that ``allocation_candidates`` applies.

``affinity`` and ``anti-affinity`` are hard: they filter candidate hosts in SQL
(anti-affinity allows up to ``max_server_per_host`` members per host, default 1).
``soft-affinity`` and ``soft-anti-affinity`` only order hosts, through the weighers of
:mod:`rpquery.server_groups.weighers`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement

from rpquery.db import Database
from rpquery.server_groups import _group_hosts as gh
from rpquery.server_groups import weighers as w
from rpquery.server_groups._model import (
    AFFINITY,
    ANTI_AFFINITY,
    POLICY_WEIGHER,
    SOFT_ANTI_AFFINITY,
    ServerGroup,
)
from rpquery.server_groups._store import get_group
from rpquery.store.tables import resource_providers

__all__ = ["ServerGroupPolicy", "policy_for_group"]


@dataclass(frozen=True)
class ServerGroupPolicy:
    """The :class:`~rpquery.policies.base.HostPolicy` of one server group.

    Hard policies become SQL in :meth:`where`; soft policies weigh the candidate hosts
    in :meth:`weigh` (one grouped statement). ``moving_instance`` is a member being
    moved: its own allocations do not count. ``exclude_hosts`` are root provider
    uuids that must not be chosen (a migrating member's current host).

    >>> g = ServerGroup(1, "u", "n", "p", "u", "soft-affinity", None, 0)
    >>> ServerGroupPolicy(g, w.WeigherConfig(frozenset()))
    Traceback (most recent call last):
    ...
    rpquery.errors.InvalidRequest: ... (rpquery.weigher.not_enabled)
    """

    group: ServerGroup
    weighers: w.WeigherConfig = w.DEFAULT_WEIGHERS
    moving_instance: str | None = None
    exclude_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        weigher = POLICY_WEIGHER.get(self.group.policy)
        if weigher is not None:
            self.weighers.require(weigher)
        object.__setattr__(self, "exclude_hosts", tuple(self.exclude_hosts))

    @property
    def multiplier(self) -> float:
        weigher = POLICY_WEIGHER.get(self.group.policy)
        return self.weighers.multiplier(weigher) if weigher else 0.0

    @property
    def needs_all_candidates(self) -> bool:
        return self.group.is_soft and self.multiplier > 0

    def where(self, root_id: ColumnElement[int]) -> ColumnElement[bool] | None:
        terms: list[ColumnElement[bool]] = []
        if self.exclude_hosts:
            excluded = (
                sa.select(resource_providers.c.id)
                .where(resource_providers.c.uuid.in_(self.exclude_hosts))
                .correlate(None)
            )
            terms.append(root_id.not_in(excluded))
        if self.group.policy == AFFINITY:
            terms.append(self._affinity_clause(root_id))
        elif self.group.policy == ANTI_AFFINITY:
            limit = self.group.max_server_per_host or 1
            terms.append(
                root_id.not_in(gh.hosts_at_or_over(self.group.id, limit, self.moving_instance))
            )
        return sa.and_(*terms) if terms else None

    def _affinity_clause(self, root_id: ColumnElement[int]) -> ColumnElement[bool]:
        # Hosts holding a member, or any host while no member has a host yet.
        held = gh.hosts_at_or_over(self.group.id, 1, self.moving_instance)
        return sa.or_(root_id.in_(held), ~sa.exists(held))

    def keep(self, conn: Connection, root_ids: Sequence[int]) -> set[int] | None:
        return None

    def weigh(self, conn: Connection, root_ids: Sequence[int]) -> Mapping[int, float] | None:
        if not self.needs_all_candidates or not root_ids:
            return None
        counts = gh.member_counts(
            conn, self.group.id, root_ids, exclude_instance=self.moving_instance
        )
        return w.group_weights(
            counts,
            root_ids,
            negate=self.group.policy == SOFT_ANTI_AFFINITY,
            multiplier=self.multiplier,
        )


def policy_for_group(
    db: Database,
    group_uuid: str,
    weighers: w.WeigherConfig = w.DEFAULT_WEIGHERS,
    *,
    moving_instance: str | None = None,
    exclude_hosts: Iterable[str] = (),
) -> ServerGroupPolicy:
    """Load a group and return its host policy, ready for ``allocation_candidates``.

    Raises ``NotFound`` for an unknown group and ``InvalidRequest``
    (``rpquery.weigher.not_enabled``) when a soft policy's weigher is not enabled.
    """
    group = get_group(db, group_uuid)
    return ServerGroupPolicy(group, weighers, moving_instance, tuple(exclude_hosts))
