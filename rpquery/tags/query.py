"""Listing instances by their tags (Nova's ``tags``, ``tags-any``, ``not-tags``,
``not-tags-any``), in one statement, within one namespace.

- ``tags=A,B``: has all of them; ``tags_any=A,B``: has at least one;
- ``not_tags=A,B``: does not have all of them; ``not_tags_any=A,B``: has none.

Filters combine with AND. Without a positive filter (``tags``/``tags_any``) the
instances considered are Placement's consumers plus every instance with a tag row.
Only ACTIVE tags count unless ``include_pending``.

>>> f = parse_filter(tags="web,db", not_tags_any="legacy")
>>> f.tags, f.not_tags_any
(('web', 'db'), ('legacy',))
>>> from sqlalchemy.dialects import postgresql
>>> sql = str(instances_query("user", f).compile(dialect=postgresql.dialect()))
>>> "HAVING count(DISTINCT rpq_instance_tags.tag)" in sql and "NOT (EXISTS" in sql
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from rpquery.db import Database
from rpquery.store.tables import consumers
from rpquery.store.tables import instance_tags as tags_t
from rpquery.tags.model import (
    DEFAULT_CONFIG,
    TagConfig,
    TagStatus,
    tag_list,
    validate_namespace,
    validate_tag,
)

__all__ = [
    "TagFilter",
    "has_all_tags",
    "has_any_tag",
    "instances_query",
    "list_instances",
    "parse_filter",
]


@dataclass(frozen=True)
class TagFilter:
    """Validated filter lists; an empty tuple means "no such filter"."""

    tags: tuple[str, ...] = ()
    tags_any: tuple[str, ...] = ()
    not_tags: tuple[str, ...] = ()
    not_tags_any: tuple[str, ...] = ()
    include_pending: bool = False


def parse_filter(
    tags: str | Sequence[str] | None = None,
    tags_any: str | Sequence[str] | None = None,
    not_tags: str | Sequence[str] | None = None,
    not_tags_any: str | Sequence[str] | None = None,
    *,
    namespace: str = "user",
    include_pending: bool = False,
    config: TagConfig = DEFAULT_CONFIG,
) -> TagFilter:
    """Each argument is a comma-separated string (as in a query string) or a list."""

    def one(value: str | Sequence[str] | None) -> tuple[str, ...]:
        if value is None:
            return ()
        items = value.split(",") if isinstance(value, str) else tag_list(value)
        return tuple(dict.fromkeys(validate_tag(config, namespace, t) for t in items))

    return TagFilter(one(tags), one(tags_any), one(not_tags), one(not_tags_any), include_pending)


def _counted(namespace: str, tags: tuple[str, ...], pending: bool) -> list[sa.ColumnElement[bool]]:
    where = [tags_t.c.namespace == namespace, tags_t.c.tag.in_(tags)]
    if not pending:
        where.append(tags_t.c.status == str(TagStatus.ACTIVE))
    return where


def has_all_tags(
    instance: sa.ColumnElement[str], namespace: str, tags: tuple[str, ...], pending: bool = False
) -> sa.ColumnElement[bool]:
    """``instance IN (SELECT instance_uuid ... WHERE tag IN (:tags) GROUP BY
    instance_uuid HAVING count(DISTINCT tag) = :n)``"""
    return instance.in_(_all_tags_select(namespace, tags, pending))


def has_any_tag(
    instance: sa.ColumnElement[str], namespace: str, tags: tuple[str, ...], pending: bool = False
) -> sa.ColumnElement[bool]:
    """``EXISTS (SELECT 1 ... WHERE instance_uuid = outer AND tag IN (:tags))``"""
    return sa.exists().where(
        tags_t.c.instance_uuid == instance, *_counted(namespace, tags, pending)
    )


def _all_tags_select(namespace: str, tags: tuple[str, ...], pending: bool) -> sa.Select[Any]:
    return (
        sa.select(tags_t.c.instance_uuid.label("uuid"))
        .where(*_counted(namespace, tags, pending))
        .group_by(tags_t.c.instance_uuid)
        .having(sa.func.count(sa.distinct(tags_t.c.tag)) == len(tags))
    )


def _candidates(namespace: str, flt: TagFilter) -> sa.Subquery:
    """Where the instances come from: the positive filter when there is one (an index
    range on (namespace, tag)), else every consumer and every tagged instance."""
    pending = flt.include_pending
    if flt.tags:
        return _all_tags_select(namespace, flt.tags, pending).subquery("instances")
    if flt.tags_any:
        return (
            sa.select(tags_t.c.instance_uuid.label("uuid"))
            .where(*_counted(namespace, flt.tags_any, pending))
            .distinct()
            .subquery("instances")
        )
    return sa.union(
        sa.select(consumers.c.uuid.label("uuid")),
        sa.select(tags_t.c.instance_uuid.label("uuid")),
    ).subquery("instances")


def instances_query(namespace: str, flt: TagFilter) -> sa.Select[Any]:
    """The one statement answering ``flt`` in ``namespace``, instances sorted by uuid.

    The first positive filter drives the query (``tags`` as a grouped subquery,
    else ``tags-any`` as a distinct one); the others are (NOT) EXISTS / NOT IN
    conditions on its rows.
    """
    inst = _candidates(namespace, flt)
    uuid = inst.c.uuid
    pending = flt.include_pending
    where: list[sa.ColumnElement[bool]] = []
    if flt.tags_any and flt.tags:
        where.append(has_any_tag(uuid, namespace, flt.tags_any, pending))
    if flt.not_tags:
        where.append(sa.not_(has_all_tags(uuid, namespace, flt.not_tags, pending)))
    if flt.not_tags_any:
        where.append(sa.not_(has_any_tag(uuid, namespace, flt.not_tags_any, pending)))
    return sa.select(uuid).where(*where).order_by(uuid)


def list_instances(
    db: Database, flt: TagFilter, namespace: str = "user", config: TagConfig = DEFAULT_CONFIG
) -> tuple[str, ...]:
    """Instance uuids matching ``flt`` (empty tuple when none)."""
    validate_namespace(config, namespace)
    with db.connect() as conn:
        return tuple(conn.execute(instances_query(namespace, flt)).scalars())
