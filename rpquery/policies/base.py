"""The hook through which scheduler policies take part in the candidate query.

A policy (aggregate-metadata filter, server group, ...) narrows and orders the
*hosts* (root providers) of allocation candidates and provider lists. The read path
(:mod:`rpquery.read.candidates`, :mod:`rpquery.read.providers`) calls, in this order:

1. ``where(root_id)`` while building the statement: a boolean clause on the root
   provider id column, pushed into the candidate SQL (``EXISTS`` / ``NOT EXISTS``
   and equality tests SQL can decide), or ``None``;
2. ``keep(conn, root_ids)`` once, on the candidate roots that survived the SQL: one
   statement at most, returning the roots to keep (``None`` keeps all);
3. ``weigh(conn, root_ids)`` once: a weight per root (higher first; missing = 0.0),
   or ``None`` when the policy does not order hosts.

``limit`` is applied after ``keep`` and ``weigh`` and before provider summaries are
built. A policy with no ``keep``/``weigh`` work leaves ``limit`` in the SQL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement

__all__ = ["HostPolicy"]


class HostPolicy(Protocol):
    """What the candidate and provider-list queries need from a policy."""

    def where(self, root_id: ColumnElement[int]) -> ColumnElement[bool] | None: ...

    def keep(self, conn: Connection, root_ids: Sequence[int]) -> set[int] | None: ...

    def weigh(self, conn: Connection, root_ids: Sequence[int]) -> Mapping[int, float] | None: ...

    @property
    def needs_all_candidates(self) -> bool:
        """True when ``keep`` or ``weigh`` does work (so ``limit`` cannot go into SQL)."""
        ...
