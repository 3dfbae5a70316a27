"""Usage reads: one consumer's allocations, one provider's allocations and usages, and the
usages of a project (optionally one user) grouped by consumer type (docs/usages.md).

Every question is answered by **one** statement. The grouped project usage reads the
usage summary (``rpq_usage_totals``, ``rpq_consumer_counts``, migration ``rpq0006``),
which triggers on ``allocations`` and ``consumers`` keep exact whoever writes; its cost
depends on the project's users × types × classes, not on its allocations. Per-(type,
class) sums on one side of a ``UNION ALL``, consumer counts per type on the other;
every selected column is grouped or aggregated, so the statement is valid on
PostgreSQL, where Placement's own query (selecting ``consumer_types.name`` while
grouping by ``consumer_type_id``) fails with a GroupingError.

The scan of the project's allocations that answered before the summary existed is kept
as the reference (:func:`project_usages_scan`, :func:`project_usages_statement`): tests
and :mod:`rpquery.usage.summary` compare the two.

Consumers whose ``consumer_type_id`` is NULL (rows written before consumer types existed)
are reported under the type ``unknown``; a stored type literally named ``UNKNOWN`` is a
different, ordinary type.

>>> from rpquery.db import Database
>>> db = Database("sqlite://")
>>> db.upgrade()
>>> project_usages(db, "no-such-project").groups
()
>>> render_project_usages(project_usages(db, "no-such-project"))
{'usages': {}}
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import Select

from rpquery._validation import check_external_id
from rpquery.db import Database
from rpquery.errors import NotFound
from rpquery.models import CONSUMER_TYPE_RE, check_consumer_type
from rpquery.store import dialects
from rpquery.store.tables import (
    allocations,
    consumer_counts,
    consumer_types,
    consumers,
    inventories,
    projects,
    resource_classes,
    resource_providers,
    usage_totals,
    users,
)

__all__ = [
    "ALL",
    "CONSUMER_TYPE_RE",
    "UNKNOWN",
    "ConsumerView",
    "ProviderAllocation",
    "ProviderAllocations",
    "UsageGroup",
    "UsageReport",
    "check_consumer_type_filter",
    "check_consumer_type_name",
    "consumer_allocations",
    "consumer_allocations_statement",
    "project_usages",
    "project_usages_scan",
    "project_usages_statement",
    "project_usages_total",
    "project_usages_total_scan",
    "provider_allocations",
    "provider_allocations_statement",
    "provider_usages",
    "provider_usages_statement",
    "render_consumer_allocations",
    "render_project_usages",
    "render_provider_usages",
    "render_total_usages",
    "summary_totals_statement",
    "summary_usages_statement",
]

#: How a consumer with no type (NULL ``consumer_type_id``) is reported.
UNKNOWN = "unknown"
#: The filter value that sums every consumer into one group.
ALL = "all"



# ---------------------------------------------------------------- validation


def check_consumer_type_name(name: str) -> str:
    """Return ``name`` if it is a valid stored consumer type name, else raise
    ``InvalidRequest`` (``rpquery.consumer.bad_type``) naming it: the rule of
    :func:`rpquery.models.check_consumer_type`.

    >>> check_consumer_type_name("INSTANCE")
    'INSTANCE'
    """
    return check_consumer_type(name)


def check_consumer_type_filter(value: str | None) -> str | None:
    """Validate the ``consumer_type`` filter of a usage query: ``None`` (group by type),
    ``all``, ``unknown`` or a type name.

    >>> check_consumer_type_filter("all")
    'all'
    """
    if value is None or (isinstance(value, str) and value in (ALL, UNKNOWN)):
        return value
    return check_consumer_type_name(value)


def _check_external_id(value: str | None, code: str, what: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    check_external_id(value, code, what)


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class ProviderAllocation:
    """A consumer's allocation on one provider, with that provider's generation."""

    generation: int
    resources: dict[str, int]


@dataclass(frozen=True)
class ConsumerView:
    """``GET /allocations/{consumer_uuid}``: empty ``allocations`` and ``None`` fields
    for a consumer that does not exist (Placement answers 200 with ``{}``)."""

    consumer_uuid: str
    allocations: dict[str, ProviderAllocation] = field(default_factory=dict)
    project_id: str | None = None
    user_id: str | None = None
    generation: int | None = None
    consumer_type: str | None = None


@dataclass(frozen=True)
class ProviderAllocations:
    """``GET /resource_providers/{uuid}/allocations``: consumer → class → used."""

    rp_uuid: str
    generation: int
    allocations: dict[str, dict[str, int]]


@dataclass(frozen=True)
class UsageGroup:
    """Usage of one consumer type (or ``all``): per-class sums and distinct consumers."""

    consumer_type: str
    consumer_count: int
    resources: dict[str, int]


@dataclass(frozen=True)
class UsageReport:
    """Usages of a project (and user), one group per consumer type, sorted by type."""

    project_id: str
    user_id: str | None
    consumer_type: str | None
    groups: tuple[UsageGroup, ...]

    def group(self, consumer_type: str) -> UsageGroup | None:
        """The group of ``consumer_type`` (``unknown`` for untyped consumers), if any."""
        return next((g for g in self.groups if g.consumer_type == consumer_type), None)


# ---------------------------------------------------------------- statement builders


def consumer_allocations_statement(consumer_uuid: str) -> Select[Any]:
    """One consumer row (project, user, type) outer-joined to its allocations.

    ``SELECT c.generation, p.external_id, u.external_id, t.name, rp.uuid,
    rp.generation, rc.name, a.used FROM consumers c JOIN projects p JOIN users u
    LEFT JOIN consumer_types t LEFT JOIN allocations a ... WHERE c.uuid = :uuid
    ORDER BY a.id``: providers (and classes) in the order they were allocated, as Placement
    lists them (clients print them in that order).
    """
    a, c, rp, rc = allocations, consumers, resource_providers, resource_classes
    frm = (
        c.join(projects, projects.c.id == c.c.project_id)
        .join(users, users.c.id == c.c.user_id)
        .outerjoin(consumer_types, consumer_types.c.id == c.c.consumer_type_id)
        .outerjoin(a, a.c.consumer_id == c.c.uuid)
        .outerjoin(rp, rp.c.id == a.c.resource_provider_id)
        .outerjoin(rc, rc.c.id == a.c.resource_class_id)
    )
    return (
        sa.select(
            c.c.generation.label("consumer_generation"),
            projects.c.external_id.label("project_id"),
            users.c.external_id.label("user_id"),
            consumer_types.c.name.label("consumer_type"),
            rp.c.uuid.label("rp_uuid"),
            rp.c.generation.label("rp_generation"),
            rc.c.name.label("resource_class"),
            a.c.used,
        )
        .select_from(frm)
        .where(c.c.uuid == consumer_uuid)
        .order_by(a.c.id)  # Placement's observable order: providers as first allocated
    )


def provider_allocations_statement(rp_uuid: str) -> Select[Any]:
    """The provider (for its generation) outer-joined to its allocations; no row at all
    means the provider does not exist."""
    a, rp, rc = allocations, resource_providers, resource_classes
    frm = rp.outerjoin(a, a.c.resource_provider_id == rp.c.id).outerjoin(
        rc, rc.c.id == a.c.resource_class_id
    )
    return (
        sa.select(rp.c.generation, a.c.consumer_id, rc.c.name.label("resource_class"), a.c.used)
        .select_from(frm)
        .where(rp.c.uuid == rp_uuid)
    )


def provider_usages_statement(rp_uuid: str) -> Select[Any]:
    """Usage per inventory class of one provider (0 where nothing is allocated), as
    Placement reports it; a single row with a NULL class means "provider, no inventory".

    ``SELECT rc.name, COALESCE(SUM(a.used), 0) FROM resource_providers rp LEFT JOIN
    inventories i LEFT JOIN allocations a ON (a.rp, a.rc) = (i.rp, i.rc) LEFT JOIN
    resource_classes rc WHERE rp.uuid = :uuid GROUP BY rc.name``
    """
    a, i, rp, rc = allocations, inventories, resource_providers, resource_classes
    frm = (
        rp.outerjoin(i, i.c.resource_provider_id == rp.c.id)
        .outerjoin(
            a,
            sa.and_(
                a.c.resource_provider_id == i.c.resource_provider_id,
                a.c.resource_class_id == i.c.resource_class_id,
            ),
        )
        .outerjoin(rc, rc.c.id == i.c.resource_class_id)
    )
    used = sa.func.coalesce(sa.func.sum(a.c.used), 0).label("used")
    return (
        sa.select(rc.c.name.label("resource_class"), used)
        .select_from(frm)
        .where(rp.c.uuid == rp_uuid)
        .group_by(rc.c.name)
    )


def _type_mode(consumer_type: str | None) -> str:
    """The statement shape a ``consumer_type`` filter needs."""
    if consumer_type is None:
        return "grouped"
    if consumer_type in (ALL, UNKNOWN):
        return consumer_type
    return "named"


def _project_scope(with_user: bool, mode: str) -> sa.CTE:
    """The allocations of the project's (and user's) consumers with each consumer's
    ``consumer_type_id`` (a NULL constant for ``all``). Bind parameters: ``project_id``,
    ``user_id``, ``consumer_type``.

    Reached through indexes only: ``projects.external_id`` (unique) →
    ``consumers (project_id[, user_id], uuid)`` → ``allocations.consumer_id``.
    """
    a, c, t = allocations, consumers, consumer_types
    frm = a.join(c, c.c.uuid == a.c.consumer_id).join(projects, projects.c.id == c.c.project_id)
    where: list[sa.ColumnElement[bool]] = [
        dialects.exact_eq(
            projects.c.external_id, sa.bindparam("project_id", type_=sa.String(255))
        )
    ]
    if with_user:
        frm = frm.join(users, users.c.id == c.c.user_id)
        where.append(
            dialects.exact_eq(users.c.external_id, sa.bindparam("user_id", type_=sa.String(255)))
        )
    type_id: sa.ColumnElement[Any] = c.c.consumer_type_id
    if mode == ALL:
        type_id = sa.cast(sa.null(), sa.Integer)
    elif mode == UNKNOWN:
        where.append(c.c.consumer_type_id.is_(None))
    elif mode == "named":
        named = sa.select(t.c.id).where(
            t.c.name == sa.bindparam("consumer_type", type_=sa.Unicode(255))
        )
        where.append(c.c.consumer_type_id == named.scalar_subquery())
    return (
        sa.select(
            type_id.label("type_id"),
            c.c.id.label("consumer_key"),
            a.c.resource_class_id,
            a.c.used,
        )
        .select_from(frm)
        .where(*where)
        .cte("scoped")
    )


def _named(per_class: Select[Any], counts: Select[Any]) -> Select[Any]:
    """``(type_name, resource_class, used, consumer_count)`` rows: the per-class sums and
    the per-type counts (both keyed by ids) in one ``UNION ALL``, then named."""
    agg = sa.union_all(per_class, counts).subquery("agg")
    t, rc = consumer_types, resource_classes
    return sa.select(
        t.c.name.label("type_name"),
        rc.c.name.label("resource_class"),
        agg.c.used,
        agg.c.consumer_count,
    ).select_from(
        agg.outerjoin(t, t.c.id == agg.c.type_id).outerjoin(rc, rc.c.id == agg.c.resource_class_id)
    )


@functools.cache
def _usages_shape(with_user: bool, mode: str) -> Select[Any]:
    """Aggregate on ids, then name the few result rows. Built once per shape and reused:
    SQLAlchemy's compiled cache then skips building and compiling (about 1.5 ms a call
    on PostgreSQL)."""
    scoped = _project_scope(with_user, mode)
    per_class = sa.select(
        scoped.c.type_id,
        scoped.c.resource_class_id,
        sa.func.sum(scoped.c.used).label("used"),
        sa.cast(sa.null(), sa.Integer).label("consumer_count"),
    ).group_by(scoped.c.type_id, scoped.c.resource_class_id)
    counts = sa.select(
        scoped.c.type_id,
        sa.cast(sa.null(), sa.Integer).label("resource_class_id"),
        sa.cast(sa.null(), sa.Integer).label("used"),
        # distinct integer keys: cheaper to sort or hash than uuid strings
        sa.func.count(sa.distinct(scoped.c.consumer_key)).label("consumer_count"),
    ).group_by(scoped.c.type_id)
    return _named(per_class, counts)


@functools.cache
def _totals_shape(with_user: bool) -> Select[Any]:
    scoped = _project_scope(with_user, ALL)
    rc = resource_classes
    return (
        sa.select(rc.c.name.label("resource_class"), sa.func.sum(scoped.c.used).label("used"))
        .select_from(scoped.join(rc, rc.c.id == scoped.c.resource_class_id))
        .group_by(rc.c.name)
    )


def _owner_id(table: sa.Table, column: str, param: str) -> sa.ScalarSelect[Any]:
    return (
        sa.select(table.c.id)
        .where(dialects.exact_eq(table.c[column], sa.bindparam(param, type_=sa.String(255))))
        .scalar_subquery()
    )


def _summary_filter(
    table: sa.Table, nonempty: sa.Column[Any], with_user: bool, mode: str
) -> tuple[sa.ColumnElement[Any], list[sa.ColumnElement[bool]]]:
    """The type column to group by (a NULL constant for ``all``) and the WHERE clauses
    selecting the project's (and user's) non-empty summary rows of the wanted type."""
    where: list[sa.ColumnElement[bool]] = [
        table.c.project_id == _owner_id(projects, "external_id", "project_id"),
        nonempty > 0,
    ]
    if with_user:
        where.append(table.c.user_id == _owner_id(users, "external_id", "user_id"))
    type_key: sa.ColumnElement[Any] = table.c.type_key
    if mode == ALL:
        type_key = sa.cast(sa.null(), sa.Integer)
    elif mode == UNKNOWN:
        where.append(table.c.type_key == 0)
    elif mode == "named":
        named = sa.select(consumer_types.c.id).where(
            consumer_types.c.name == sa.bindparam("consumer_type", type_=sa.Unicode(255))
        )
        where.append(table.c.type_key == named.scalar_subquery())
    return type_key, where


@functools.cache
def _summary_usages_shape(with_user: bool, mode: str) -> Select[Any]:
    """Sum the summary rows of the project (one per user × type × class), then name the
    few result rows. ``type_key`` 0 (no type) finds no ``consumer_types`` row: its name
    comes back NULL and is reported as ``unknown``."""
    ut, cc = usage_totals, consumer_counts
    t_type, t_where = _summary_filter(ut, ut.c.allocation_count, with_user, mode)
    c_type, c_where = _summary_filter(cc, cc.c.consumer_count, with_user, mode)
    t_group = [ut.c.resource_class_id] if mode == ALL else [ut.c.type_key, ut.c.resource_class_id]
    per_class = (
        sa.select(
            t_type.label("type_id"),
            ut.c.resource_class_id,
            sa.func.sum(ut.c.used).label("used"),
            sa.cast(sa.null(), sa.Integer).label("consumer_count"),
        )
        .where(*t_where)
        .group_by(*t_group)
    )
    counts = (
        sa.select(
            c_type.label("type_id"),
            sa.cast(sa.null(), sa.Integer).label("resource_class_id"),
            sa.cast(sa.null(), sa.Integer).label("used"),
            sa.func.sum(cc.c.consumer_count).label("consumer_count"),
        )
        .where(*c_where)
        .group_by(*([] if mode == ALL else [cc.c.type_key]))
    )
    return _named(per_class, counts)


@functools.cache
def _summary_totals_shape(with_user: bool) -> Select[Any]:
    ut, rc = usage_totals, resource_classes
    _, where = _summary_filter(ut, ut.c.allocation_count, with_user, ALL)
    return (
        sa.select(rc.c.name.label("resource_class"), sa.func.sum(ut.c.used).label("used"))
        .select_from(ut.join(rc, rc.c.id == ut.c.resource_class_id))
        .where(*where)
        .group_by(rc.c.name)
    )


def _usage_params(
    project_id: str, user_id: str | None, consumer_type: str | None
) -> dict[str, str]:
    params = {"project_id": project_id}
    if user_id is not None:
        params["user_id"] = user_id
    if _type_mode(consumer_type) == "named":
        params["consumer_type"] = str(consumer_type)
    return params


def project_usages_statement(
    project_id: str, *, user_id: str | None = None, consumer_type: str | None = None
) -> Select[Any]:
    """Grouped usages by scanning the project's allocations (the reference for
    :func:`summary_usages_statement`): rows ``(type_name, resource_class, used, NULL)``
    per type and class, and ``(type_name, NULL, NULL, consumer_count)`` per type.

    ``WITH scoped AS (...) SELECT t.name, rc.name, agg.used, agg.consumer_count FROM
    (SELECT type_id, resource_class_id, SUM(used), NULL FROM scoped GROUP BY type_id,
    resource_class_id UNION ALL SELECT type_id, NULL, NULL, COUNT(DISTINCT consumer_key)
    FROM scoped GROUP BY type_id) agg LEFT JOIN consumer_types t LEFT JOIN
    resource_classes rc``

    ``consumer_type`` must already be validated (:func:`check_consumer_type_filter`).
    """
    shape = _usages_shape(user_id is not None, _type_mode(consumer_type))
    return shape.params(_usage_params(project_id, user_id, consumer_type))


def summary_usages_statement(
    project_id: str, *, user_id: str | None = None, consumer_type: str | None = None
) -> Select[Any]:
    """What :func:`project_usages` runs: the same rows as
    :func:`project_usages_statement`, read from the usage summary::

        SELECT t.name, rc.name, agg.used, agg.consumer_count
        FROM (SELECT type_key, resource_class_id, SUM(used), NULL FROM rpq_usage_totals
              WHERE project_id = (SELECT id FROM projects WHERE external_id = :project_id)
                AND allocation_count > 0 GROUP BY type_key, resource_class_id
              UNION ALL
              SELECT type_key, NULL, NULL, SUM(consumer_count) FROM rpq_consumer_counts
              WHERE project_id = (...) AND consumer_count > 0 GROUP BY type_key) agg
        LEFT JOIN consumer_types t ON t.id = agg.type_key
        LEFT JOIN resource_classes rc ON rc.id = agg.resource_class_id

    ``consumer_type`` must already be validated (:func:`check_consumer_type_filter`).
    """
    shape = _summary_usages_shape(user_id is not None, _type_mode(consumer_type))
    return shape.params(_usage_params(project_id, user_id, consumer_type))


def summary_totals_statement(project_id: str, *, user_id: str | None = None) -> Select[Any]:
    """What :func:`project_usages_total` runs: usage per class from the summary."""
    shape = _summary_totals_shape(user_id is not None)
    return shape.params(_usage_params(project_id, user_id, None))


# ---------------------------------------------------------------- executors


def consumer_allocations(db: Database, consumer_uuid: str) -> ConsumerView:
    """The allocations of one consumer, with its project, user, generation and type.

    >>> db = Database("sqlite://"); db.upgrade()
    >>> consumer_allocations(db, "8d4b1c6e-0000-4000-8000-000000000000").allocations
    {}
    """
    with db.connect() as conn:
        rows = conn.execute(consumer_allocations_statement(consumer_uuid)).all()
    if not rows:
        return ConsumerView(consumer_uuid)
    allocs: dict[str, ProviderAllocation] = {}
    for row in rows:
        if row.rp_uuid is None:
            continue
        entry = allocs.setdefault(row.rp_uuid, ProviderAllocation(int(row.rp_generation), {}))
        entry.resources[row.resource_class] = int(row.used)
    first = rows[0]
    return ConsumerView(
        consumer_uuid=consumer_uuid,
        allocations=allocs,
        project_id=first.project_id,
        user_id=first.user_id,
        generation=int(first.consumer_generation),
        consumer_type=first.consumer_type or UNKNOWN,
    )


def provider_allocations(db: Database, rp_uuid: str) -> ProviderAllocations:
    """Every allocation on one provider, by consumer; ``NotFound``
    (``rpquery.provider.not_found``) for an unknown provider, as Placement's 404."""
    with db.connect() as conn:
        rows = conn.execute(provider_allocations_statement(rp_uuid)).all()
    if not rows:
        raise _provider_not_found(rp_uuid)
    by_consumer: dict[str, dict[str, int]] = {}
    for row in rows:
        if row.consumer_id is not None:
            by_consumer.setdefault(row.consumer_id, {})[row.resource_class] = int(row.used)
    return ProviderAllocations(rp_uuid, int(rows[0].generation or 0), by_consumer)


def provider_usages(db: Database, rp_uuid: str) -> dict[str, int]:
    """Usage of one provider per inventory class (``0`` when nothing is allocated);
    ``NotFound`` (``rpquery.provider.not_found``) for an unknown provider."""
    with db.connect() as conn:
        rows = conn.execute(provider_usages_statement(rp_uuid)).all()
    if not rows:
        raise _provider_not_found(rp_uuid)
    return {
        row.resource_class: dialects.to_int(row.used)
        for row in rows
        if row.resource_class is not None
    }


def project_usages(
    db: Database,
    project_id: str,
    *,
    user_id: str | None = None,
    consumer_type: str | None = None,
) -> UsageReport:
    """Usages of a project (optionally one user) grouped by consumer type (1.38+).

    ``consumer_type=None`` gives every type; a name gives that type only; ``all`` gives
    one group ``all`` summing every consumer; ``unknown`` selects untyped consumers. An
    unknown project, user or type gives an empty report.

    >>> db = Database("sqlite://"); db.upgrade()
    >>> project_usages(db, "p1", consumer_type="all").groups
    ()
    """
    return _run_usages(db, project_id, user_id, consumer_type, _summary_usages_shape)


def project_usages_scan(
    db: Database,
    project_id: str,
    *,
    user_id: str | None = None,
    consumer_type: str | None = None,
) -> UsageReport:
    """:func:`project_usages` computed by scanning the project's allocations instead of
    reading the summary: the reference answer (cost grows with the project)."""
    return _run_usages(db, project_id, user_id, consumer_type, _usages_shape)


def _run_usages(
    db: Database,
    project_id: str,
    user_id: str | None,
    consumer_type: str | None,
    shape_of: Any,
) -> UsageReport:
    _check_external_id(project_id, "rpquery.usages.bad_project_id", "project_id")
    _check_external_id(user_id, "rpquery.usages.bad_user_id", "user_id", optional=True)
    check_consumer_type_filter(consumer_type)
    shape = shape_of(user_id is not None, _type_mode(consumer_type))
    with db.connect() as conn:
        rows = conn.execute(shape, _usage_params(project_id, user_id, consumer_type)).all()
    return UsageReport(project_id, user_id, consumer_type, _groups(rows, consumer_type))


def _groups(rows: Any, consumer_type: str | None) -> tuple[UsageGroup, ...]:
    counts: dict[str, int] = {}
    resources: dict[str, dict[str, int]] = {}
    for row in rows:
        name = ALL if consumer_type == ALL else (row.type_name or UNKNOWN)
        if row.resource_class is not None:
            resources.setdefault(name, {})[row.resource_class] = dialects.to_int(row.used)
        else:
            counts[name] = dialects.to_int(row.consumer_count)
    return tuple(
        UsageGroup(name, counts.get(name, 0), dict(sorted(resources.get(name, {}).items())))
        for name in sorted(counts.keys() | resources.keys())
        if counts.get(name) or resources.get(name)
    )


def project_usages_total(
    db: Database, project_id: str, *, user_id: str | None = None
) -> dict[str, int]:
    """Pre-1.38 ``GET /usages``: usage per class for a project (and user), every
    consumer type together (from the usage summary); empty for an unknown project."""
    return _run_totals(db, project_id, user_id, _summary_totals_shape)


def project_usages_total_scan(
    db: Database, project_id: str, *, user_id: str | None = None
) -> dict[str, int]:
    """:func:`project_usages_total` by scanning the allocations (the reference)."""
    return _run_totals(db, project_id, user_id, _totals_shape)


def _run_totals(
    db: Database, project_id: str, user_id: str | None, shape_of: Any
) -> dict[str, int]:
    _check_external_id(project_id, "rpquery.usages.bad_project_id", "project_id")
    _check_external_id(user_id, "rpquery.usages.bad_user_id", "user_id", optional=True)
    with db.connect() as conn:
        rows = conn.execute(
            shape_of(user_id is not None), _usage_params(project_id, user_id, None)
        ).all()
    return {row.resource_class: dialects.to_int(row.used) for row in sorted(rows)}


def _provider_not_found(rp_uuid: str) -> NotFound:
    return NotFound("rpquery.provider.not_found", f"no resource provider {rp_uuid}")


# ---------------------------------------------------------------- renderers


def render_project_usages(report: UsageReport) -> dict[str, Any]:
    """Placement 1.38+ ``GET /usages`` body.

    >>> g = UsageGroup("INSTANCE", 5, {"VCPU": 2})
    >>> render_project_usages(UsageReport("p", None, None, (g,)))
    {'usages': {'INSTANCE': {'consumer_count': 5, 'VCPU': 2}}}
    """
    return {
        "usages": {
            g.consumer_type: {"consumer_count": g.consumer_count, **g.resources}
            for g in report.groups
        }
    }


def render_total_usages(totals: dict[str, int]) -> dict[str, Any]:
    """Placement 1.9–1.37 ``GET /usages`` body: ``{"usages": {"VCPU": 4, ...}}``."""
    return {"usages": dict(totals)}


def render_provider_usages(generation: int, usages: dict[str, int]) -> dict[str, Any]:
    """``GET /resource_providers/{uuid}/usages`` body."""
    return {"resource_provider_generation": generation, "usages": dict(usages)}


def render_consumer_allocations(view: ConsumerView) -> dict[str, Any]:
    """Placement 1.38+ ``GET /allocations/{consumer_uuid}`` body; ``{"allocations": {}}``
    alone for a consumer with no allocations, as Placement answers."""
    body: dict[str, Any] = {
        "allocations": {
            rp: {"generation": pa.generation, "resources": dict(pa.resources)}
            for rp, pa in view.allocations.items()
        }
    }
    if view.allocations:
        body.update(
            project_id=view.project_id,
            user_id=view.user_id,
            consumer_generation=view.generation,
            consumer_type=view.consumer_type,
        )
    return body
