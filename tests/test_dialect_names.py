"""Backend differences live in ``rpquery/store/dialects/`` (docs/architecture.md): no other
module of the package compares a dialect name. Elsewhere a difference is a member of the
backend object (``dialects.backend(name)``) or a function of ``rpquery.store.dialects``
taking the connection.

A dialect-name test is a comparison (``==``, ``!=``, ``in``, ``not in``) of a dialect
name (``x.dialect.name``, ``dialect_name``, ``url.get_backend_name()``) or with a
backend's name spelt out (``"sqlite"``, ``"mysql"``, ...).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mssql, mysql, postgresql, sqlite

from rpquery.db import SUPPORTED_BACKENDS
from rpquery.errors import InvalidRequest
from rpquery.store import dialects

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rpquery"
DIALECTS = PACKAGE / "store" / "dialects"

#: Modules still allowed one, with the reason (none since insight/_why_sql.py's tally moved
#: behind the registry); a listed module that no longer needs it fails the test below.
ALLOWED: set[str] = set()

NAMES = {"sqlite", "postgresql", "postgres", "mysql", "mariadb"}


def _is_dialect_name(node: ast.expr) -> bool:
    """``<...>.dialect.name``, ``dialect_name``, ``<...>.dialect_name``,
    ``<...>.get_backend_name()``."""
    if isinstance(node, ast.Attribute):
        if node.attr == "dialect_name":
            return True
        inner = node.value
        if node.attr == "name":
            return (isinstance(inner, ast.Attribute) and inner.attr == "dialect") or (
                isinstance(inner, ast.Name) and inner.id == "dialect"
            )
    if isinstance(node, ast.Name):
        return node.id == "dialect_name"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "get_backend_name"
    return False


def _is_backend_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_backend_literal(e) for e in node.elts)
    return False


def dialect_tests(source: str) -> list[int]:
    """Line numbers of the comparisons that test a dialect name."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_dialect_name(o) or _is_backend_literal(o) for o in operands):
                lines.append(node.lineno)
    return lines


def test_no_module_outside_the_dialects_tests_a_dialect_name() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if path.is_relative_to(DIALECTS) or rel in ALLOWED:
            continue
        found += [f"{rel}:{line}" for line in dialect_tests(path.read_text())]
    assert found == []


def test_the_allowed_modules_still_need_it() -> None:
    for rel in ALLOWED:
        assert dialect_tests((ROOT / rel).read_text()), f"{rel} no longer tests one: drop it"


def test_the_check_finds_each_form() -> None:
    caught = [
        'if conn.dialect.name == "mysql": pass',
        'x = dialect.name in ("mysql", "mariadb")',
        'if db.dialect_name != "sqlite": pass',
        'if dialect_name == "postgresql": pass',
        'ok = url.get_backend_name() == "sqlite"',
        'ok = "mariadb" == name',
        "ok = engine.dialect.name == wanted",
    ]
    for source in caught:
        assert dialect_tests(source) == [1], source
    passed = [
        "b = dialects.backend(conn.dialect.name)",
        'ok = mode == "triggers"',
        "ok = backend not in SUPPORTED_BACKENDS",
        "prefix = explain_prefix(db.dialect_name)",
    ]
    for source in passed:
        assert dialect_tests(source) == [], source


def test_an_unknown_dialect_is_refused_loudly() -> None:
    """The registry is the only list of backends: another dialect gets an error, never
    another backend's SQL (a construct with no standard spelling) or behaviour."""
    assert SUPPORTED_BACKENDS == dialects.BACKEND_NAMES
    with pytest.raises(InvalidRequest) as refused:
        dialects.backend("mssql")
    assert refused.value.code == "rpquery.db.unsupported_dialect"
    col = sa.column("x", sa.Integer)
    constructs = [
        dialects.random_order(),
        dialects.least(col, col),
        dialects.json_quote(col),
        dialects.concat_agg(col),
        dialects.json_rows(col),
    ]
    for construct in constructs:
        for known in (sqlite.dialect(), postgresql.dialect(), mysql.dialect()):
            assert str(construct.compile(dialect=known))  # each backend spells it
        with pytest.raises(sa.exc.CompileError, match="no spelling for the 'mssql' dialect"):
            construct.compile(dialect=mssql.dialect())
