"""Mutually exclusive tags: a declarative table of pairs, per namespace.

Rules live in ``rpq_instance_tag_conflicts`` so a write reads them in the same
transaction that checks and changes the tags. :func:`set_conflicts` declares the
whole rule set of a namespace (what is not listed is removed)::

    set_conflicts(db, "system", [("high-availability", "high-performance")])

A write then keeps a present tag and skips the new one that clashes with it, and
rejects a request that brings both at once (see :mod:`rpquery.tags.plan`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.store.tables import instance_tag_conflicts as rules_t
from rpquery.tags.model import (
    DEFAULT_CONFIG,
    TagConfig,
    tag_list,
    validate_namespace,
    validate_tag,
)

__all__ = [
    "ConflictRule",
    "Rules",
    "list_conflicts",
    "load_rules",
    "parse_rules",
    "rules_query",
    "set_conflicts",
]

#: A set of unordered pairs of tags that exclude each other.
Rules = frozenset[frozenset[str]]


@dataclass(frozen=True)
class ConflictRule:
    """``tag_a`` and ``tag_b`` (``tag_a < tag_b``) may not both be set in ``namespace``."""

    namespace: str
    tag_a: str
    tag_b: str


def parse_rules(
    namespace: str, pairs: Iterable[tuple[str, str]], config: TagConfig = DEFAULT_CONFIG
) -> tuple[ConflictRule, ...]:
    """Validated, normalised, de-duplicated rules.

    >>> parse_rules("system", [("hp", "ha"), ("ha", "hp")])
    (ConflictRule(namespace='system', tag_a='ha', tag_b='hp'),)
    """
    validate_namespace(config, namespace)
    out: dict[tuple[str, str], ConflictRule] = {}
    for pair in tag_list(pairs):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise InvalidRequest(
                "rpquery.tags.bad_conflict", "a conflict rule is a pair of tags", token=repr(pair)
            )
        a, b = sorted(
            (validate_tag(config, namespace, pair[0]), validate_tag(config, namespace, pair[1]))
        )
        if a == b:
            raise InvalidRequest(
                "rpquery.tags.bad_conflict", f"tag {a!r} cannot conflict with itself", token=a
            )
        out[(a, b)] = ConflictRule(namespace, a, b)
    return tuple(out[key] for key in sorted(out))


def set_conflicts(
    db: Database,
    namespace: str,
    pairs: Iterable[tuple[str, str]],
    config: TagConfig = DEFAULT_CONFIG,
) -> tuple[ConflictRule, ...]:
    """Replace the rule set of ``namespace`` with ``pairs``; returns the rules."""
    rules = parse_rules(namespace, pairs, config)
    with db.begin() as conn:
        conn.execute(rules_t.delete().where(rules_t.c.namespace == namespace))
        if rules:
            conn.execute(
                rules_t.insert(),
                [{"namespace": r.namespace, "tag_a": r.tag_a, "tag_b": r.tag_b} for r in rules],
            )
    return rules


def list_conflicts(
    db: Database, namespace: str, config: TagConfig = DEFAULT_CONFIG
) -> tuple[ConflictRule, ...]:
    validate_namespace(config, namespace)
    query = (
        sa.select(rules_t.c.tag_a, rules_t.c.tag_b)
        .where(rules_t.c.namespace == namespace)
        .order_by(rules_t.c.tag_a, rules_t.c.tag_b)
    )
    with db.connect() as conn:
        found = sorted((str(a), str(b)) for a, b in conn.execute(query))
    return tuple(ConflictRule(namespace, a, b) for a, b in found)


def rules_query(namespace: str, tags: Iterable[str]) -> sa.Select[Any]:
    """The rules of ``namespace`` that involve one of ``tags``.

    ``SELECT tag_a, tag_b FROM rpq_instance_tag_conflicts
    WHERE namespace = :ns AND (tag_a IN (:tags) OR tag_b IN (:tags))``
    """
    wanted = sorted(set(tags))
    return sa.select(rules_t.c.tag_a, rules_t.c.tag_b).where(
        rules_t.c.namespace == namespace,
        sa.or_(rules_t.c.tag_a.in_(wanted), rules_t.c.tag_b.in_(wanted)),
    )


def load_rules(conn: Connection, namespace: str, tags: Iterable[str]) -> Rules:
    """The rules touching ``tags``, read inside the caller's transaction."""
    wanted = set(tags)
    if not wanted:
        return frozenset()
    return frozenset(frozenset(row) for row in conn.execute(rules_query(namespace, wanted)))
