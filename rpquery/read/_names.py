"""Name resolution shared by the read path: resource class and trait names to ids.

Allocation candidates (:mod:`rpquery.read.candidates`) and provider lists
(:mod:`rpquery.read.providers`) both read the ids of a request's names with
:func:`resolve_names` (one ``UNION ALL``, :func:`names_stmt`) and pass them around as
:class:`Names`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Select
from sqlalchemy.sql.elements import BindParameter

from rpquery.read._clauses import id_list, ids_param
from rpquery.store.catalog import raise_missing
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


@functools.cache
def _every_class() -> Select:
    """Every class and the request's traits (names bound at execution): built once, on
    first use."""
    return names_stmt(None, ids_param("trait_names"))


def resolve_names(
    conn: Connection,
    rc_names: Iterable[str],
    trait_names: Iterable[str],
    *,
    every_class: bool = False,
) -> Names:
    """Ids of ``rc_names`` and ``trait_names`` in one statement; an unknown class or
    trait raises ``InvalidRequest`` (``rpquery.resource_class.not_found`` /
    ``rpquery.trait.not_found``, "no such resource class: X"), as Placement answers
    400 for them (docs/design.md#requests-and-validation). ``every_class`` also reads
    every class's name (``Names.rc_names``, which summaries need) and the sharing
    trait's id, with one statement built once for every request."""
    rcs, trs = set(rc_names), set(trait_names)
    if every_class:
        rows = conn.execute(_every_class(), {"trait_names": sorted({*trs, SHARING_TRAIT})})
    else:
        rows = conn.execute(names_stmt(sorted(rcs), sorted(trs)))
    every_rc: dict[str, int] = {}
    trait_ids: dict[str, int] = {}
    for kind, name, ident in rows:
        (every_rc if kind == "rc" else trait_ids)[name] = int(ident)
    return names_found(rcs, trs, every_rc, trait_ids)


def names_found(
    rc_names: set[str],
    trait_names: set[str],
    every_rc: dict[str, int],
    trait_ids: dict[str, int],
) -> Names:
    """The :class:`Names` of a request from the classes and traits read (``every_rc``:
    every class read, or only the requested ones); an unknown class or trait raises
    ``InvalidRequest`` (see :func:`resolve_names`)."""
    rc_ids = {name: every_rc[name] for name in rc_names if name in every_rc}
    raise_missing(rc_names, rc_ids, "rpquery.resource_class.not_found", "resource class")
    raise_missing(trait_names, trait_ids, "rpquery.trait.not_found", "trait")
    return Names(rc_ids, trait_ids, {ident: name for name, ident in every_rc.items()})
