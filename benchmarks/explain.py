"""EXPLAIN every SELECT a scenario sends, and flag full scans of the big tables.

The statements are captured with a :class:`~rpquery.db.Database` tracer while the
scenario runs once, then re-sent with :func:`rpquery.store.dialects.explain_sql`
(PostgreSQL ``EXPLAIN (ANALYZE, BUFFERS)``, MariaDB ``ANALYZE FORMAT=JSON``, SQLite
``EXPLAIN QUERY PLAN``). A full scan of ``allocations``, ``inventories``,
``resource_provider_traits`` or ``rpq_provider_usages`` is flagged, naming the index
that would serve the statement's predicates (from :mod:`rpquery.store.tables`).

>>> aliases("SELECT 1 FROM allocations AS a JOIN inventories ON x = y")
{'allocations': 'allocations', 'a': 'allocations', 'inventories': 'inventories'}
>>> sqlite_scans("SCAN a", {"a": "allocations"})
[('allocations', 'SCAN a')]
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import PrimaryKeyConstraint, UniqueConstraint

from rpquery.db import Database
from rpquery.store import dialects
from rpquery.store.tables import metadata

WATCHED = ("allocations", "inventories", "resource_provider_traits", "rpq_provider_usages")
_KEYWORDS = {
    "where",
    "join",
    "on",
    "left",
    "right",
    "inner",
    "outer",
    "cross",
    "group",
    "order",
    "limit",
    "union",
    "using",
    "natural",
    "full",
    "set",
    "values",
    "having",
    "window",
}


@dataclass(frozen=True)
class ScanFlag:
    """One full scan of a watched table and the index that would avoid it."""

    table: str
    detail: str
    index: str


@dataclass(frozen=True)
class Plan:
    sql: str
    text: str
    flags: tuple[ScanFlag, ...]


def explain_all(db: Database, statements: list[tuple[str, Any]]) -> list[Plan]:
    """The plan of each distinct captured statement, with its full-scan flags."""
    plans = []
    name = db.dialect_name
    unique = list({sql: (sql, params) for sql, params in statements}.values())
    with db.connect() as conn:
        for sql, params in unique:
            explain = dialects.explain_sql(name, sql, analyze=name != "sqlite")
            rows = conn.exec_driver_sql(explain, params).all()
            text = _plan_text(name, rows)
            names = aliases(sql)
            scans = _scans(name, text, names)
            unique = dict.fromkeys((t, _short(d)) for t, d in scans)
            flags = tuple(ScanFlag(t, d, suggest_index(t, sql)) for t, d in unique)
            plans.append(Plan(sql, text, flags))
    return plans


def _short(detail: str) -> str:
    """``->  Seq Scan on inventories inv  (cost=...) (actual ... rows=131 loops=1)`` →
    ``Seq Scan on inventories inv (rows=131)``."""
    detail = detail.lstrip("-> ").strip()
    m = re.match(r"(.*?)\s+\(cost=.*?(?:actual [^)]*?rows=(\d+))?", detail)
    if m:
        rows = re.search(r"actual [^)]*?rows=(\d+)", detail)
        return f"{m.group(1)} (rows={rows.group(1)})" if rows else m.group(1)
    return detail


def _plan_text(dialect: str, rows: Sequence[Any]) -> str:
    if dialect == "sqlite":
        return "\n".join(str(r[-1]) for r in rows)
    if dialect == "postgresql":
        return "\n".join(str(r[0]) for r in rows)
    return "\n".join(str(c) for r in rows for c in r)


def _scans(dialect: str, text: str, names: dict[str, str]) -> list[tuple[str, str]]:
    if dialect == "sqlite":
        return sqlite_scans(text, names)
    if dialect == "postgresql":
        return postgresql_scans(text, names)
    return mariadb_scans(text, names)


def aliases(sql: str) -> dict[str, str]:
    """Map each name a watched table goes by in ``sql`` (itself and its aliases)."""
    found: dict[str, str] = {}
    for table in WATCHED:
        for m in re.finditer(rf"\b{table}\b(?:\s+AS)?(?:\s+(\w+))?", sql, re.IGNORECASE):
            found[table] = table
            alias = m.group(1)
            if alias and alias.lower() not in _KEYWORDS:
                found[alias] = table
    return found


def _line_scans(text: str, names: dict[str, str], pattern: str) -> list[tuple[str, str]]:
    """Plan lines matching ``pattern`` (group 1: the table or alias) on watched tables."""
    out = []
    for line in text.splitlines():
        m = re.search(pattern, line)
        if m and m.group(1) in names:
            out.append((names[m.group(1)], line.strip()))
    return out


def sqlite_scans(text: str, names: dict[str, str]) -> list[tuple[str, str]]:
    """``SCAN x`` lines (``SEARCH`` uses an index) of watched tables."""
    return _line_scans(text, names, r"^\s*SCAN (\w+)")


def postgresql_scans(text: str, names: dict[str, str]) -> list[tuple[str, str]]:
    """``Seq Scan on x`` nodes of watched tables."""
    return _line_scans(text, names, r"Seq Scan on (\w+)")


def mariadb_scans(text: str, names: dict[str, str]) -> list[tuple[str, str]]:
    """Tables with ``access_type`` ``ALL`` (full scan) or ``index`` (full index scan)."""
    out = []
    for chunk in _json_objects(text):
        for node in _walk(chunk):
            table = node.get("table_name")
            access = node.get("access_type")
            if table in names and access in ("ALL", "index"):
                kind = "full table scan" if access == "ALL" else "full index scan"
                rows = node.get("r_rows", node.get("rows"))
                out.append((names[table], f"{kind} of {table} (rows={rows})"))
    return out


def _json_objects(text: str) -> Iterator[Any]:
    try:
        yield json.loads(text)
    except ValueError:
        return


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def suggest_index(table: str, sql: str) -> str:
    """The index of ``table`` whose leading columns the statement uses most, or a new one.

    >>> suggest_index("allocations", "WHERE a.consumer_id = :c")
    'allocations_consumer_id_idx (consumer_id) exists: the planner preferred a scan'
    """
    used = {c.name for c in metadata.tables[table].columns if re.search(rf"\.{c.name}\b", sql)}
    best, best_len = None, 0
    for name, cols in _indexes(table):
        prefix = 0
        for col in cols:
            if col not in used:
                break
            prefix += 1
        # ties: the narrowest index (index sets are unordered: no hash-seed luck)
        if prefix > best_len or (
            prefix and prefix == best_len and best is not None and len(cols) < len(best[1])
        ):
            best, best_len = (name, cols), prefix
    if best is None:
        cols = sorted(used - {"id", "created_at", "updated_at"}) or ["?"]
        return (
            f"no index leads with a column the statement filters on; consider ({', '.join(cols)})"
        )
    return f"{best[0]} ({', '.join(best[1])}) exists: the planner preferred a scan"


def _indexes(table: str) -> list[tuple[str, list[str]]]:
    t = metadata.tables[table]
    out = [(str(ix.name), [c.name for c in ix.columns]) for ix in t.indexes]
    for cons in t.constraints:
        if isinstance(cons, PrimaryKeyConstraint | UniqueConstraint) and cons.name:
            out.append((str(cons.name), [c.name for c in cons.columns]))
    return sorted(out)
