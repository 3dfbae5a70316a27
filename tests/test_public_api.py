"""The public API: ``rpquery`` re-exports what a caller needs, every public module says what
it exports, and the README and docs import only public names.

Public means: importable from a module path without a ``_``-prefixed part, and listed in
that module's ``__all__``.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rpquery

ROOT = Path(__file__).resolve().parents[1]


def public_modules() -> list[str]:
    out = []
    for path in sorted((ROOT / "rpquery").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts[-1] == "__main__" or any(p.startswith("_") for p in parts):
            continue
        out.append(".".join(parts))
    return out


def test_the_top_level_exports_resolve() -> None:
    assert len(rpquery.__all__) >= 20
    for name in rpquery.__all__:
        assert getattr(rpquery, name) is not None, name
    assert rpquery.Database is importlib.import_module("rpquery.db").Database
    with pytest.raises(AttributeError):
        rpquery.candidates_sql  # noqa: B018


def test_the_front_doors_modules_are_public_modules() -> None:
    found = set(public_modules())
    assert {"rpquery.api.app", "rpquery.api.handlers.allocations", "rpquery.cli.tour"} <= found
    assert "rpquery.cli._common" not in found


@pytest.mark.parametrize("module", public_modules())
def test_every_public_module_has_all(module: str) -> None:
    mod = importlib.import_module(module)
    assert isinstance(getattr(mod, "__all__", None), list), f"{module} has no __all__"
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert missing == []


def _doc_imports(text: str) -> list[tuple[str, str]]:
    """(module, name) of every ``from rpquery... import`` in the document's Python."""
    code = [*re.findall(r"```python\n(.*?)```", text, flags=re.S)]
    code += [m for m in re.findall(r"^\s*>>> (.*)$", text, flags=re.M)]
    found = []
    for block in code:
        for m in re.finditer(r"from (rpquery[\w.]*) import (?:\(([\w,\s]+)\)|([\w, ]+))", block):
            for name in (m.group(2) or m.group(3)).replace("\n", " ").split(","):
                if name.strip():
                    found.append((m.group(1), name.split(" as ")[0].strip()))
        for m in re.finditer(r"^\s*import (rpquery[\w.]*)", block, flags=re.M):
            found.append((m.group(1), ""))
    return found


def private_uses(text: str) -> list[str]:
    bad = []
    for module, name in _doc_imports(text):
        full = f"{module}.{name}" if name else module
        if any(part.startswith("_") for part in full.split(".")):
            bad.append(f"{full}: an underscore name")
            continue
        if not name:
            continue
        mod = importlib.import_module(module)
        if importlib.util.find_spec(f"{module}.{name}") if hasattr(mod, "__path__") else False:
            continue  # a public submodule
        if name not in getattr(mod, "__all__", ()):
            bad.append(f"{full}: not in {module}.__all__")
    return bad


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_import_only_public_names(doc: Path) -> None:
    assert private_uses(doc.read_text()) == []


def test_the_check_catches_private_names() -> None:
    bad = private_uses(
        "```python\nfrom rpquery.read.candidates._sql import names_stmt\n"
        "from rpquery.read.providers import _names\nfrom rpquery import Database\n```\n"
    )
    assert len(bad) == 2


def test_import_rpquery_is_cheap() -> None:
    """The public names load on first use: ``import rpquery`` loads no SQLAlchemy."""
    code = "import sys, rpquery; print(sorted(m for m in sys.modules if 'sqlalchemy' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _front_door_imports() -> list[tuple[str, str, str]]:
    """(file, module, name) of every library import in rpquery/api and rpquery/cli."""
    found = []
    doors = [*(ROOT / "rpquery/api").rglob("*.py"), *(ROOT / "rpquery/cli").rglob("*.py")]
    for path in sorted(doors):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.split(".")[0] == "rpquery"
                and not node.module.startswith(("rpquery.api", "rpquery.cli"))
            ):
                found += [(path.name, node.module, alias.name) for alias in node.names]
    return found


def test_the_api_and_cli_use_only_public_names() -> None:
    imports = _front_door_imports()
    assert len(imports) > 20
    text = "\n".join(f"from {module} import {name}" for _, module, name in imports)
    assert private_uses(f"```python\n{text}\n```") == []


#: The object reads moved to ``rpquery.read.objects`` (issue 36): their earlier public
#: names, (module, name) → the read now behind them.
EARLIER_NAMES = {
    ("rpquery.write.providers", "get_provider"): "get_provider",
    ("rpquery.write.inventory", "get_inventories"): "get_inventories",
    ("rpquery.write.associations", "get_provider_traits"): "get_provider_traits",
    ("rpquery.write.associations", "get_provider_aggregates"): "get_provider_aggregates",
    ("rpquery.write.allocations", "get_allocations"): "get_allocations",
    ("rpquery.write.consumers", "get_consumer"): "get_consumer",
    ("rpquery.write.consumers", "generations"): "consumer_generations",
    ("rpquery.write", "get_provider"): "get_provider",
    ("rpquery.write", "get_allocations"): "get_allocations",
    ("rpquery", "get_allocations"): "get_allocations",
}


@pytest.mark.parametrize(("module", "name"), sorted(EARLIER_NAMES))
def test_the_object_reads_keep_their_earlier_names(module: str, name: str) -> None:
    objects = importlib.import_module("rpquery.read.objects")
    mod = importlib.import_module(module)
    assert name in mod.__all__
    assert getattr(mod, name) is getattr(objects, EARLIER_NAMES[module, name])
