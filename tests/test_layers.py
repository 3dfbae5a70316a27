"""The package layers of docs/architecture.md hold: a module imports only its own layer or a
lower one, independent siblings never import each other, and no import circle exists.

Imports under ``if TYPE_CHECKING:`` are not dependencies (they never run); imports inside
functions are. ``rpquery/__init__`` (the public re-exports) and ``__main__`` sit above it all.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Lowest first. Packages on one line are siblings of one layer; ``independent`` ones must
#: not import each other. Mirrors the diagram in docs/architecture.md.
LAYERS: list[tuple[str, tuple[str, ...], bool]] = [
    # (layer, packages or modules, independent siblings?)
    ("errors", ("rpquery.errors", "rpquery._lazy"), True),
    ("values", ("rpquery._validation", "rpquery.retry"), True),
    ("models", ("rpquery.models", "rpquery.policies"), True),
    ("store", ("rpquery.store", "rpquery.db", "rpquery.schema"), False),
    ("reads", ("rpquery.read",), False),
    ("paths", ("rpquery.write", "rpquery.usage"), True),
    (
        "features",
        (
            "rpquery.insight",
            "rpquery.server_groups",
            "rpquery.aggregate_metadata",
            "rpquery.tags",
            "rpquery.generator",
        ),
        True,
    ),
    ("api", ("rpquery.api",), False),
    ("cli", ("rpquery.cli",), False),
    ("public", ("rpquery", "rpquery.__main__"), False),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "schema":
        parts[0:1] = ["rpquery", "schema"]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {
    module_name(p): p
    for p in [*(ROOT / "rpquery").rglob("*.py"), *(ROOT / "schema").rglob("*.py")]
}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(node: ast.AST) -> Iterator[ast.AST]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child):
            for other in child.orelse:
                yield other
                yield from _runtime_nodes(other)
            continue
        yield child
        yield from _runtime_nodes(child)


def imports(module: str) -> set[str]:
    """The rpquery modules ``module`` imports when it runs."""
    tree = ast.parse(MODULES[module].read_text())
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "rpquery")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if base.split(".")[0] != "rpquery":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in MODULES:
                    found.add(full)
                elif base == "rpquery" and alias.name in EAGER:
                    found.add(EAGER[alias.name])  # rpquery.SchemaError is rpquery.errors'
                else:
                    found.add(base)
    return found - {module}


def _eager_names() -> dict[str, str]:
    """Names ``rpquery/__init__`` imports when it loads (the errors), by their module:
    importing those from ``rpquery`` loads nothing more (the rest is lazy)."""
    tree = ast.parse(MODULES["rpquery"].read_text())
    return {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


EAGER = _eager_names()


def layer_of(module: str) -> tuple[int, str]:
    """(rank, sibling) of the longest matching entry."""
    best: tuple[int, str, int] | None = None
    for rank, (_, members, _) in enumerate(LAYERS):
        for member in members:
            # "rpquery" itself is the public face; its modules belong to the layers below
            inside = module == member or (member != "rpquery" and module.startswith(member + "."))
            if inside and (best is None or len(member) > best[2]):
                best = (rank, member, len(member))
    assert best is not None, f"{module} is in no layer: add it to LAYERS and the diagram"
    return best[0], best[1]


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def violations(module: str, targets: set[str]) -> list[str]:
    """Imports of ``module`` that go up a layer or across to an independent sibling."""
    rank, sibling = layer_of(module)
    bad = []
    for target in sorted(targets):
        t_rank, t_sibling = layer_of(target)
        independent = LAYERS[rank][2]
        if t_rank > rank or (t_rank == rank and independent and t_sibling != sibling):
            bad.append(f"{module} ({LAYERS[rank][0]}) imports {target} ({LAYERS[t_rank][0]})")
    return bad


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down(module: str) -> None:
    assert violations(module, imports(module)) == []


def test_no_import_circle() -> None:
    graph = {m: imports(m) & MODULES.keys() for m in MODULES}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert cycles == []


def test_a_module_outside_the_table_has_no_layer() -> None:
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("rpquery.newcomer")


def test_the_check_catches_upward_and_sideways_imports() -> None:
    assert "rpquery.store.tables" in imports("rpquery.read.providers")
    assert EAGER["SchemaError"] == "rpquery.errors" and "Database" not in EAGER
    assert violations("rpquery.read.providers", {"rpquery.store.tables", "rpquery.errors"}) == []
    assert violations("rpquery.store.tables", {"rpquery.read.request"}) != []
    assert violations("rpquery.read.providers", {"rpquery.write.allocations"}) != []
    assert violations("rpquery.write.providers", {"rpquery.read.objects"}) == []
    assert violations("rpquery.write.allocations", {"rpquery.usage.reads"}) != []
    assert violations("rpquery.write.allocations", {"rpquery.api.app"}) != []
    assert violations("rpquery.server_groups.scheduling", {"rpquery.insight.why"}) != []


def beyond_objects(targets: set[str]) -> list[str]:
    """Which of ``targets`` (imports of a ``write/`` or ``usage/`` module) are in
    ``read/`` but not ``read/objects.py``, the object reads the write path builds on: the
    query path (request parsing, candidates, ``GET /resource_providers``) stays out of
    writes."""
    return sorted(
        t for t in targets if t.startswith("rpquery.read") and t != "rpquery.read.objects"
    )


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if m.startswith(("rpquery.write", "rpquery.usage")))
)
def test_the_write_path_reads_only_objects(module: str) -> None:
    assert beyond_objects(imports(module)) == []


def test_the_check_catches_a_query_path_import() -> None:
    assert "rpquery.read.objects" in imports("rpquery.write.providers")
    found = beyond_objects({"rpquery.read.objects", "rpquery.read.request", "rpquery.read"})
    assert found == ["rpquery.read", "rpquery.read.request"]


def private_imports(module: str) -> list[str]:
    """Imports by ``module`` of another package's private (underscore) modules: a
    package's public modules are its seam (``rpquery.read.engine``, not
    ``rpquery.read.candidates._execute``)."""
    _, own = layer_of(module)
    bad = []
    for target in sorted(imports(module)):
        _, package = layer_of(target)
        inner = target.removeprefix(package).split(".")[1:]
        if package != own and any(part.startswith("_") for part in inner):
            bad.append(f"{module} imports {target}")
    return bad


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_of_another_package_s_private_module(module: str) -> None:
    assert private_imports(module) == []


def test_the_check_catches_a_private_import() -> None:
    assert private_imports("rpquery.read.providers") == []
    assert "rpquery.read._names" in imports("rpquery.read.providers")  # its own: allowed


#: Sizes that keep the package readable (docs/architecture.md): no module over 800
#: lines, no function over 60 (its docstring included).
MODULE_LINES = 800
FUNCTION_LINES = 60


def oversized(path: Path) -> list[str]:
    text = path.read_text()
    found = []
    if len(text.splitlines()) > MODULE_LINES:
        found.append(f"{path.name}: {len(text.splitlines())} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > FUNCTION_LINES:
                found.append(f"{path.name}:{node.lineno} {node.name}: {lines} lines")
    return found


@pytest.mark.parametrize("module", sorted(m for m, p in MODULES.items() if "rpquery" in p.parts))
def test_modules_and_functions_stay_small(module: str) -> None:
    assert oversized(MODULES[module]) == []


def test_the_size_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(FUNCTION_LINES))
    long = tmp_path / "long.py"
    long.write_text(f"def f() -> None:\n{body}")
    assert oversized(long) == [f"long.py:1 f: {FUNCTION_LINES + 1} lines"]
