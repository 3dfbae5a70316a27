"""Name resolution shared by the read path: resource class and trait names to ids.

Allocation candidates (:mod:`rpquery.read.candidates`) and provider lists
(:mod:`rpquery.read.providers`) both read the ids of a request's names with
:func:`names_stmt` (one ``UNION ALL``) and pass them around as :class:`Names`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import Select
from sqlalchemy.sql.elements import BindParameter

from rpquery.read._clauses import id_list
from rpquery.store.tables import resource_classes, traits

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"


@dataclass(frozen=True)
class Names:
    """Name → id maps for the request (filled by :func:`names_stmt`)."""

    rc_ids: Mapping[str, int] = field(default_factory=dict)
    trait_ids: Mapping[str, int] = field(default_factory=dict)
    #: id → name of every resource class (summaries list every inventory's class)
    rc_names: Mapping[int, str] = field(default_factory=dict)

    @property
    def sharing_trait(self) -> int | None:
        return self.trait_ids.get(SHARING_TRAIT)

    def traits(self, names: frozenset[str]) -> list[int]:
        """Ids of the known names among ``names`` (unknown forbidden traits drop out)."""
        return sorted(self.trait_ids[n] for n in names if n in self.trait_ids)


def names_stmt(
    rc_names: Sequence[str] | BindParameter[Any] | None,
    trait_names: Sequence[str] | BindParameter[Any],
) -> Select:
    """``SELECT 'rc', name, id FROM resource_classes [WHERE name IN (...)]
    UNION ALL SELECT 't', name, id FROM traits WHERE name IN (...)``; ``rc_names``
    ``None`` reads every class (a few dozen rows: the candidate path needs all their
    names for the summaries, which list every inventory)."""
    rcs = sa.select(sa.literal("rc").label("kind"), resource_classes.c.name, resource_classes.c.id)
    if rc_names is not None:
        rcs = rcs.where(resource_classes.c.name.in_(id_list(rc_names)))
    trs = sa.select(sa.literal("t").label("kind"), traits.c.name, traits.c.id)
    trs = trs.where(traits.c.name.in_(id_list(trait_names)))
    return sa.union_all(rcs, trs)  # type: ignore[return-value]
