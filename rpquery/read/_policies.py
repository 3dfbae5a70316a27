"""How the read path applies scheduler policies (:class:`~rpquery.policies.base.HostPolicy`),
written once for allocation candidates and provider lists: ``where`` clauses on a root id
column while the statement is built, then ``keep`` and ``weigh`` on the roots found."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypeVar

from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement

from rpquery.policies.base import HostPolicy

T = TypeVar("T")


def where_clauses(
    policies: Sequence[HostPolicy], root_id: ColumnElement[int]
) -> list[ColumnElement[bool]]:
    """Every policy's ``where`` clause on ``root_id`` (policies without one add none)."""
    return [c for c in (p.where(root_id) for p in policies) if c is not None]


def keep_and_weigh(
    conn: Connection,
    items: Sequence[T],
    root_of: Callable[[T], int],
    policies: Sequence[HostPolicy],
    *,
    shuffle: bool = False,
) -> list[T]:
    """The ``items`` whose root every policy keeps (each ``keep`` once, on the roots the
    earlier ones kept), highest summed ``weigh`` first; items of equal weight keep their
    order, shuffled first when ``shuffle``."""
    if not policies:  # every item kept, none weighed: no root to look at
        out = list(items)
        if shuffle:
            random.shuffle(out)
        return out
    roots = sorted({root_of(i) for i in items})
    for policy in policies:
        kept = policy.keep(conn, roots)
        if kept is not None:
            roots = [r for r in roots if r in kept]
    weights: dict[int, float] = {}
    for policy in policies:
        for r, w in (policy.weigh(conn, roots) or {}).items():
            weights[r] = weights.get(r, 0.0) + w
    keep = set(roots)
    out = [i for i in items if root_of(i) in keep]
    if shuffle:
        random.shuffle(out)
    if weights:
        out.sort(key=lambda i: -weights.get(root_of(i), 0.0))
    return out
