"""Pure statement builders of the rejection reasons (:mod:`rpquery.insight._why`).

One statement per request group tells, per host, how far the group's filters got: each
inventory row of a requested class gets a *level*, the number of the group's stages it
passes in order (the candidate query's own clauses,
:func:`rpquery.read.candidates._sql.group_filters` called on one filter at a time, then
:func:`rpquery.read._clauses.has_room` and :func:`rpquery.read._clauses.unit_allows`), and
the rows are grouped per host::

    WITH r AS (SELECT <key> AS k, inv.resource_class_id AS rc,
                      CASE WHEN NOT <stage 1> THEN 0 WHEN NOT <stage 2> THEN 1 ...
                           ELSE <n> END AS level,
                      capacity - used AS free [, <required flags>] [, rp.id AS rp]
               FROM inventories inv LEFT JOIN resource_providers rp ...
                    [LEFT JOIN (SELECT DISTINCT resource_provider_id
                                FROM resource_provider_traits WHERE trait_id IN (:t)) t0
                     ON t0.resource_provider_id = inv.resource_provider_id ...]
                    LEFT JOIN usage ...
               WHERE inv.resource_class_id IN (:rcs))
    SELECT k, rc, MAX(level), MAX(CASE WHEN level >= :filters THEN free END) ...
    FROM r GROUP BY k, rc
    [UNION ALL SELECT k, -1, MAX(single), NULL ... FROM (per provider) GROUP BY k]

``<key>`` is the provider's root, or the provider itself for a sharing provider (the
executor adds a sharing provider's levels to every host it shares with). The trait
stages test the joined sets (``t0.resource_provider_id IS NULL``: no forbidden trait),
the same sets as the candidate query's ``EXISTS``, read once per statement. The second
part, for a granular group of several classes, is the best level one provider reaches
for all of them.

>>> from rpquery.read.request import RequestGroup
>>> names = engine.Names({"VCPU": 0}, {"CUSTOM_X": 9})
>>> g = RequestGroup(resources={"VCPU": 2}, forbidden=frozenset({"CUSTOM_X"}))
>>> [(s.code, s.detail) for s in filter_stages(g, names, resource_providers.alias("rp"))]
[('forbidden_trait', 'CUSTOM_X')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import ColumnElement, FromClause, Select
from sqlalchemy.sql.elements import BindParameter

from rpquery.policies.base import HostPolicy
from rpquery.read import engine
from rpquery.read.request import RequestGroup
from rpquery.store import dialects
from rpquery.store.tables import inventories, resource_provider_traits, resource_providers

#: Reason codes in the order the filters apply (a host counts under its first): the
#: per-group filters' (:data:`rpquery.read.engine.TOLD_FILTERS`), then the others.
REASONS = (
    *(f.reason for f in engine.TOLD_FILTERS),
    "no_inventory",
    "no_capacity",
    "unit_limits",
    "no_single_provider",
    "group_policy_isolate",
    "same_subtree",
    "groups_together",
    "root_required",
    "policy",
)
RANK = {code: i for i, code in enumerate(REASONS)}
#: The reason of a set of the unsuffixed group's collective (tree-wide) filter that no
#: provider of a tree has: ``required_trait``.
TREE_WIDE_REASON = engine.TREE_WIDE.reason


@dataclass(frozen=True)
class Stage:
    """One per-provider filter of a group: its reason code, what it asks for (a class,
    trait set or aggregate set as text) and the clause a provider must pass; ``of``:
    the filter's ``value`` in a group of that stage alone (``None``: no filter)."""

    code: str
    detail: str
    clause: ColumnElement[bool]
    of: engine.GroupFilter | None = None
    value: Any = None


def text_of(names: Sequence[str] | frozenset[str]) -> str:
    return ",".join(sorted(names))


def _filter(
    group: RequestGroup,
    names: engine.Names,
    rp: FromClause,
    root_covers: bool | None,
    f: engine.GroupFilter,
    value: Any,
) -> Any:
    """The candidate query's clauses for one of ``group``'s filters, ``f`` of ``value``
    (:func:`rpquery.read.candidates._sql.group_filters` of a group with only that filter;
    ``root_covers=False``: the provider's own aggregates only)."""
    one = RequestGroup(suffix=group.suffix, **{f.field: value})
    return sa.and_(
        sa.true(),
        *engine.provider_filters(
            one, names, rp, with_required=one.is_granular, root_covers=root_covers
        ),
    )


def _details(f: engine.GroupFilter, value: Any) -> list[tuple[str, Any]]:
    """The stages of filter ``f`` of ``value``: (what it asks for as text, the value
    of a group with only that stage). One stage per set of a ``per_set`` filter."""
    if f.per_set:
        return [(text_of(s), (s,)) for s in value]
    if f.sets:
        return [("&".join("in:" + text_of(s) for s in value), value)]
    return [(value if f.scalar else text_of(value), value)]


def filter_stages(group: RequestGroup, names: engine.Names, rp: FromClause) -> list[Stage]:
    """The group's per-provider filters in the order reasons are told
    (:data:`rpquery.read.engine.TOLD_FILTERS`: tree, aggregates, forbidden aggregates,
    required trait sets, forbidden traits), those the candidate query has: the
    unsuffixed group's required sets are collective (``tree_wide``, see
    :func:`rows_cte`), unknown forbidden traits drop out."""
    shape, _ = engine.filter_shape(group, names, "")
    out: list[Stage] = []
    for f in engine.TOLD_FILTERS:
        if not shape.count(f) or (f.tree_wide and not group.is_granular):
            continue
        for detail, value in _details(f, f.of(group)):
            clause = _filter(group, names, rp, None, f, value)
            out.append(Stage(f.reason, detail, clause, f, value))
    return out


def splits_sharing(group: RequestGroup, sharing_ids: engine.Ids) -> bool:
    """Does a sharing provider pass ``group``'s filters differently for another tree
    than for its own? Only in the unsuffixed group, with ``member_of``, forbidden
    aggregates or ``in_tree``, and sharing providers in play (see
    :func:`other_tree_clauses`)."""
    if group.is_granular or not (isinstance(sharing_ids, BindParameter) or sharing_ids):
        return False
    return any(f.sharing is not None and f.given(group) for f in engine.GROUP_FILTERS)


def other_tree_clauses(
    group: RequestGroup, names: engine.Names, rp: FromClause
) -> dict[str, ColumnElement[bool]]:
    """Stage code → the clause a sharing provider must pass to serve *another* tree in
    the unsuffixed group, where it differs from :func:`filter_stages`' (the candidate
    query's rules, docs/read-path.md *Semantics*): ``member_of`` and forbidden
    aggregates on its own aggregates only (its root's do not count there; the anchor's
    forbidden aggregates are the executor's: :func:`roots_in_aggregates_stmt`), and
    ``in_tree`` never (it fixes the anchor: a sharing provider in that tree serves it
    alone)."""
    out: dict[str, ColumnElement[bool]] = {}
    for f in engine.TOLD_FILTERS:
        if f.sharing is None or not f.given(group):
            continue
        if f.sharing == engine.LOCAL:
            out[f.reason] = sa.false()
        else:  # OWN, ANCHOR: its own aggregates
            out[f.reason] = _filter(group, names, rp, False, f, f.of(group))
    return out


def roots_in_aggregates_stmt(agg_uuids: Sequence[str]) -> Select:
    """engine.Roots in one of ``agg_uuids`` (a forbidden aggregate of the unsuffixed group):
    no sharing provider serves them
    (:func:`rpquery.read.candidates._sql.roots_in_aggregates_stmt`)."""
    return engine.roots_in_aggregates_stmt(sorted(agg_uuids))


def _pre_required(stages: Sequence[Stage]) -> int:
    """How many stages come before the required traits (tree and aggregates)."""
    return sum(1 for s in stages if RANK[s.code] < RANK[TREE_WIDE_REASON])


def _level(
    group: RequestGroup, names: engine.Names, stages: Sequence[Stage], inv: FromClause, used: Any
) -> ColumnElement[int]:
    n = len(stages)
    whens: list[tuple[ColumnElement[bool], int]] = [
        (sa.not_(s.clause), i) for i, s in enumerate(stages)
    ]
    room = []
    unit = []
    for rc, amount in sorted(group.resources.items()):
        is_rc = inv.c.resource_class_id == names.rc_ids[rc]
        room.append(sa.and_(is_rc, sa.not_(engine.has_room(inv, amount, used))))
        unit.append(sa.and_(is_rc, sa.not_(engine.unit_allows(inv, amount))))
    whens += [(sa.or_(*room), n), (sa.or_(*unit), n + 1)]
    return sa.case(*whens, else_=n + 2)


def having_any_trait(trait_ids: Sequence[int], name: str) -> Any:
    """The providers that hold one of ``trait_ids``, each once, as a derived table
    (uncorrelated: one read of ``resource_provider_traits`` for the whole statement)::

        (SELECT DISTINCT resource_provider_id FROM resource_provider_traits
         WHERE trait_id IN (:ids)) AS <name>"""
    rpt = resource_provider_traits.alias(f"{name}_rpt")
    return (
        sa.select(rpt.c.resource_provider_id)
        .where(rpt.c.trait_id.in_(sorted(trait_ids)))
        .distinct()
        .subquery(name)
    )


def _joined_traits(
    group: RequestGroup, names: engine.Names, stages: Sequence[Stage], joined: Any, rp_id: Any
) -> tuple[Any, list[Stage], list[ColumnElement[bool]]]:
    """The trait tests of :func:`rows_cte` as outer joins: the same sets as the
    candidate query's ``EXISTS`` (:func:`rpquery.read._clauses.has_any_trait`), read
    once per statement instead of once per provider (MariaDB runs a correlated
    ``EXISTS`` per row: ~12 ms of 65 at 5,000 hosts). Returns the join, the stages with
    the trait stages' clauses replaced, and the unsuffixed group's required sets (a
    provider has one of set ``i``)."""
    out: list[Stage] = []
    for i, s in enumerate(stages):
        if s.of is None or s.of.holders is None:
            out.append(s)
            continue
        (trait_ids,) = s.of.bind(RequestGroup(**{s.of.field: s.value}), names)
        has = having_any_trait(trait_ids, f"t{i}")
        held = has.c.resource_provider_id
        clause = held.is_not(None) if s.of.holders else held.is_(None)
        joined = joined.outerjoin(has, has.c.resource_provider_id == rp_id)
        out.append(Stage(s.code, s.detail, clause))
    flags: list[ColumnElement[bool]] = []
    for j, any_of in enumerate(engine.tree_wide_sets(group)):
        has = having_any_trait(engine.TREE_WIDE.value(any_of, names), f"q{j}")
        joined = joined.outerjoin(has, has.c.resource_provider_id == rp_id)
        flags.append(has.c.resource_provider_id.is_not(None))
    return joined, out, flags


def rows_cte(group: RequestGroup, names: engine.Names, sharing_ids: engine.Ids) -> tuple[Any, int]:
    """The per-row levels of ``group`` (see the module docstring) and the number of
    filter stages.

    ``inventories LEFT JOIN resource_providers``: every inventory has its provider (a
    foreign key), and the outer join keeps that order, the one a whole-cloud read wants
    (MariaDB otherwise reads the providers first and each one's inventories by index)."""
    inv = inventories.alias("inv")
    rp = resource_providers.alias("rp")
    joined: Any = inv.outerjoin(rp, rp.c.id == inv.c.resource_provider_id)
    joined, stages, has_sets = _joined_traits(
        group, names, filter_stages(group, names, rp), joined, inv.c.resource_provider_id
    )
    joined, used = engine.join_usage(joined, inv)
    level = _level(group, names, stages, inv, used)
    key: ColumnElement[int] = rp.c.root_provider_id
    if isinstance(sharing_ids, BindParameter) or sharing_ids:
        key = sa.case((rp.c.id.in_(engine.id_list(sharing_ids)), rp.c.id), else_=key)
    pre = _pre_required(stages)
    flags = [
        sa.case((sa.and_(level >= pre, has), 1), else_=0).label(f"req_{i}")
        for i, has in enumerate(has_sets)
    ]
    if splits_sharing(group, sharing_ids):
        # a sharing provider's level for another tree: NULL on other rows
        other = other_tree_clauses(group, names, rp)
        ostages = [Stage(s.code, s.detail, other.get(s.code, s.clause)) for s in stages]
        olevel = _level(group, names, ostages, inv, used)
        is_sharing = rp.c.id.in_(engine.id_list(sharing_ids))
        flags.append(sa.case((is_sharing, olevel)).label("olevel"))
        flags += [
            sa.case((sa.and_(olevel >= pre, has), 1), else_=0).label(f"oreq_{i}")
            for i, has in enumerate(has_sets)
        ]
    rc_ids = sorted(names.rc_ids[rc] for rc in group.resources)
    stmt = (
        sa.select(
            key.label("k"),
            rp.c.id.label("rp"),
            inv.c.resource_class_id.label("rc"),
            level.label("level"),
            (engine.capacity(inv) - used).label("free"),
            *flags,
        )
        .select_from(joined)
        .where(inv.c.resource_class_id.in_(rc_ids))
    )
    return stmt.cte("r"), len(stages)


def levels_stmt(group: RequestGroup, names: engine.Names, sharing_ids: engine.Ids) -> Select:
    """Per host (or sharing provider) and requested class: the best level any of its
    providers reaches, the largest free amount among providers that pass the filters,
    the unsuffixed group's collective trait flags; for a granular group of several
    classes, one more row per host (class ``-1``) with the best level a single
    provider reaches for all of them.

    ``SELECT k, rc, MAX(level), MAX(CASE WHEN level >= :n THEN free END), MAX(req_0) ...
    FROM r GROUP BY k, rc`` (see the module docstring). When :func:`splits_sharing`, a
    sharing provider's row also has the level, free amount and flags it reaches serving
    another tree (``olevel, ofree, oreq_0 ...``; ``NULL`` for the hosts' rows)."""
    r, n = rows_cte(group, names, sharing_ids)
    nreq = len(engine.tree_wide_sets(group))
    free = sa.func.max(sa.case((r.c.level >= n, r.c.free)))
    other: list[Any] = []
    if splits_sharing(group, sharing_ids):
        other = [
            sa.func.max(r.c.olevel).label("olevel"),
            sa.func.max(sa.case((r.c.olevel >= n, r.c.free))).label("ofree"),
            *(sa.func.max(r.c[f"oreq_{i}"]).label(f"oreq_{i}") for i in range(nreq)),
        ]
    per_class = sa.select(
        r.c.k,
        r.c.rc,
        sa.func.max(r.c.level).label("level"),
        free.label("free"),
        *(sa.func.max(r.c[f"req_{i}"]).label(f"req_{i}") for i in range(nreq)),
        *other,
    ).group_by(r.c.k, r.c.rc)
    if not group.is_granular or len(group.resources) < 2:
        return per_class
    per_rp = (
        sa.select(
            r.c.k,
            sa.case(
                (sa.func.count() == len(group.resources), sa.func.min(r.c.level)), else_=-1
            ).label("single"),
        )
        .group_by(r.c.k, r.c.rp)
        .subquery("per_rp")
    )
    single = sa.select(
        per_rp.c.k,
        sa.literal(-1, sa.Integer).label("rc"),
        sa.func.max(per_rp.c.single).label("level"),
        sa.null().label("free"),
    ).group_by(per_rp.c.k)
    return sa.union_all(per_class, single)  # type: ignore[return-value]


def resourceless_levels_stmt(group: RequestGroup, names: engine.Names) -> Select:
    """A resourceless group: per host, the best level of its providers over the
    filter stages alone. ``SELECT rp.root_provider_id, MAX(CASE ...) FROM
    resource_providers rp GROUP BY rp.root_provider_id``"""
    rp = resource_providers.alias("rp")
    stages = filter_stages(group, names, rp)
    whens = [(sa.not_(s.clause), i) for i, s in enumerate(stages)]
    level = sa.case(*whens, else_=len(stages)) if whens else sa.literal(0, sa.Integer)
    return sa.select(rp.c.root_provider_id, sa.func.max(level)).group_by(rp.c.root_provider_id)


def hosts_stmt() -> Select:
    """``SELECT id FROM resource_providers WHERE parent_provider_id IS NULL ORDER BY id``"""
    rp = resource_providers.alias("rp")
    return sa.select(rp.c.id).where(rp.c.parent_provider_id.is_(None)).order_by(rp.c.id)


def roots_of_stmt(ids: engine.Ids) -> Select:
    """``SELECT id, root_provider_id, uuid, name FROM resource_providers WHERE id IN (:ids)``"""
    rp = resource_providers.alias("rp")
    return sa.select(rp.c.id, rp.c.root_provider_id, rp.c.uuid, rp.c.name).where(
        rp.c.id.in_(engine.id_list(ids))
    )


def passing_roots_stmt(
    root_required: Sequence[int],
    root_forbidden: Sequence[int],
    policy: HostPolicy | None,
    ids: engine.Ids,
) -> Select:
    """The hosts among ``ids`` that pass ``root_required`` (and ``policy``'s ``where``
    clause, when given): :func:`rpquery.read.candidates._sql.roots_stmt` with the ids as one
    more clause."""
    root = resource_providers.alias("root")
    extra: list[ColumnElement[bool]] = [root.c.id.in_(engine.id_list(ids))]
    clause = policy.where(root.c.id) if policy is not None else None
    if clause is not None:
        extra.append(clause)
    return engine.roots_stmt(root_required, root_forbidden, extra, root=root)


# ---------------------------------------------------------------- one group, counted in SQL

#: A host's verdict as one integer, ``rank * 1000 + index`` (the order of reasons);
#: :data:`PASS` when the group passes.
PASS = 999_999


def encode(code: str, index: int) -> int:
    return RANK[code] * 1000 + index


def decode(value: int) -> tuple[str, int]:
    """``(code, index)`` of an encoded verdict (see :func:`encode`)."""
    return REASONS[value // 1000], value % 1000


def _class_verdict(level: Any, stages: Sequence[Stage], ci: int, n: int) -> ColumnElement[int]:
    whens: list[tuple[ColumnElement[bool], int]] = [(level.is_(None), encode("no_inventory", ci))]
    whens += [(level == j, encode(s.code, j)) for j, s in enumerate(stages)]
    whens += [(level == n, encode("no_capacity", ci)), (level == n + 1, encode("unit_limits", ci))]
    return sa.case(*whens, else_=PASS)


def _bare_value(
    group: RequestGroup, names: engine.Names, p: FromClause
) -> ColumnElement[int] | None:
    """The verdict of a host none of whose providers (nor a sharing provider) holds an
    inventory of the group's classes, as an aggregate over the providers ``p`` of its
    tree: the first filter stage none of them passes, or a set of the unsuffixed
    group's required traits none of them has (after the tree and aggregate stages),
    else ``no_inventory`` of the first class (:func:`encode`). ``None`` when the group
    has no filter: such a host is ``no_inventory`` whatever its providers are."""
    stages = filter_stages(group, names, p)
    required = engine.tree_wide_sets(group)
    if not stages and not required:
        return None
    n = len(stages)
    whens = [(sa.not_(s.clause), j) for j, s in enumerate(stages)]
    level = sa.case(*whens, else_=n) if whens else sa.literal(n, sa.Integer)
    best = sa.func.max(level)
    parts: list[ColumnElement[int]] = [
        sa.case(
            *((best == j, encode(s.code, j)) for j, s in enumerate(stages)),
            else_=encode("no_inventory", 0),
        )
        if stages
        else sa.literal(encode("no_inventory", 0), sa.Integer)
    ]
    pre = _pre_required(stages)
    for i, any_of in enumerate(required):
        trait_ids = engine.TREE_WIDE.value(any_of, names)
        has = sa.and_(level >= pre, engine.has_any_trait(p.c.id, trait_ids))
        flag = sa.func.max(sa.case((has, 1), else_=0))
        parts.append(sa.case((flag == 0, encode(TREE_WIDE_REASON, i)), else_=PASS))
    return parts[0] if len(parts) == 1 else dialects.least(*parts)


def bare_stmt(group: RequestGroup, names: engine.Names, ids: engine.Ids) -> Select | None:
    """Per host among ``ids`` (hosts without an inventory of the group's classes): its
    verdict over every provider of its tree (see :func:`_bare_value`).

    ``SELECT p.root_provider_id, <verdict> FROM resource_providers p
    WHERE p.root_provider_id IN (:ids) GROUP BY p.root_provider_id``"""
    p = resource_providers.alias("p")
    value = _bare_value(group, names, p)
    if value is None:
        return None
    return (
        sa.select(p.c.root_provider_id, value)
        .where(p.c.root_provider_id.in_(engine.id_list(ids)))
        .group_by(p.c.root_provider_id)
    )


def counted_stmt(
    group: RequestGroup, names: engine.Names, examples: int, dialect_name: str
) -> Select:
    """The verdicts of a request of one group, counted in SQL: per verdict (see
    :func:`encode`), its host count, the largest free amount (``no_capacity``) and the
    first ``examples`` hosts by id; every host that passes (``verdict = PASS``).

    ``r`` as in :func:`levels_stmt`, plus one row of NULLs per root (``UNION ALL``: a
    root without an inventory of a requested class still gets a row), pivoted per host
    (one ``MAX(CASE ...)`` per class), its verdict the smallest of its classes'
    (``LEAST``); a host with none of the classes gets its verdict from a correlated
    subquery over its tree's providers (:func:`bare_stmt`), run for those hosts only.
    Then counted per verdict by the backend's ``tally`` (:mod:`rpquery.store.dialects`):
    window functions on SQLite and PostgreSQL (one row per example host),
    ``GROUP BY verdict`` with the examples as text on MariaDB (one row per verdict),
    whose window functions cost several times the rest of the statement and which runs
    it with hash joins. Only for one group that no sharing provider serves and that is
    not a granular group of several classes."""
    r, n = rows_cte(group, names, ())
    stages = filter_stages(group, names, resource_providers.alias("rp"))
    classes = sorted(group.resources)
    rc_ids = [names.rc_ids[rc] for rc in classes]
    nreq = len(engine.tree_wide_sets(group))
    ph = _per_host(r, n, rc_ids, nreq)
    parts = [_class_verdict(ph.c[f"l{i}"], stages, i, n) for i in range(len(rc_ids))]
    parts += [
        sa.case((ph.c[f"q{i}"] == 0, encode(TREE_WIDE_REASON, i)), else_=PASS)
        for i in range(nreq)
    ]
    verdict: ColumnElement[int] = parts[0] if len(parts) == 1 else dialects.least(*parts)
    p = resource_providers.alias("p")
    bare_value = _bare_value(group, names, p)
    if bare_value is not None:  # no inventory of any class: the tree's providers decide
        bare_verdict = sa.select(bare_value).where(p.c.root_provider_id == ph.c.k)
        no_rows = sa.and_(*(ph.c[f"l{i}"].is_(None) for i in range(len(rc_ids))))
        verdict = sa.case((no_rows, bare_verdict.scalar_subquery()), else_=verdict)
    free_of = sa.case(
        *((verdict == encode("no_capacity", i), ph.c[f"f{i}"]) for i in range(len(rc_ids))),
        else_=sa.null(),
    )
    h = sa.select(ph.c.k, verdict.label("verdict"), free_of.label("free")).subquery("h")
    return dialects.backend(dialect_name).tally(
        h, "verdict", "k", "free", examples=examples, every=PASS
    )


def _per_host(r: Any, n: Any, rc_ids: list[int], nreq: int) -> Any:
    """:func:`counted_stmt`'s rows pivoted per host ``k``: the level ``l<i>`` and free
    amount ``f<i>`` of each class, ``q<i>`` of each required trait set; one row of
    NULLs per root joins in (a root without an inventory of a requested class)."""
    req = [f"req_{i}" for i in range(nreq)]
    root = resource_providers.alias("root")
    bare = sa.select(root.c.id, *(sa.null() for _ in range(3 + nreq))).where(
        root.c.parent_provider_id.is_(None)
    )
    rows = sa.select(r.c.k, r.c.rc, r.c.level, r.c.free, *(r.c[c] for c in req))
    u = sa.union_all(rows, bare).subquery("u")
    return (
        sa.select(
            u.c.k,
            *(
                sa.func.max(sa.case((u.c.rc == c, u.c.level))).label(f"l{i}")
                for i, c in enumerate(rc_ids)
            ),
            *(
                sa.func.max(sa.case((sa.and_(u.c.rc == c, u.c.level >= n), u.c.free))).label(
                    f"f{i}"
                )
                for i, c in enumerate(rc_ids)
            ),
            *(sa.func.max(u.c[c]).label(f"q{i}") for i, c in enumerate(req)),
        )
        .group_by(u.c.k)
        .subquery("ph")
    )
