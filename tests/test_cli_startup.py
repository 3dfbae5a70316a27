"""Start-up cost of ``import rpquery`` and of the ``rpquery`` command (issue 18, item 4):
what each loads, checked in a fresh interpreter through ``sys.modules`` (a test of what is
imported, not of timing; the times are in ``make bench``, docs/benchmarks.md).

- ``import rpquery`` and ``rpquery --help``: no SQLAlchemy, Alembic, rich, os_traits, web
  stack, and no feature module of the CLI (the group lists them from ``COMMAND_MODULES``).
- a one-off query on a current SQLite database: the read path only — no Alembic, no web
  stack, no other backend's SQLAlchemy dialect, no feature it does not use.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click
import pytest

from rpquery.cli import COMMAND_MODULES, FEATURE_MODULES, SKIPPED_FEATURES, main

#: Needed by no ``--help`` (and by ``import rpquery``).
HEAVY = (
    "sqlalchemy",
    "alembic",
    "rich",
    "os_traits",
    "os_resource_classes",
    "falcon",
    "gunicorn",
    "jsonschema",
    "psycopg",
    "pymysql",
)

#: Needed by no candidates query on SQLite without policies (``--json`` output).
NOT_FOR_A_QUERY = (
    "alembic",
    "rich",
    "os_traits",
    "falcon",
    "gunicorn",
    "jsonschema",
    "psycopg",
    "pymysql",
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.dialects.mysql",
    "rpquery.store.migrations",
    "rpquery.generator",
    "rpquery.api",
    "rpquery.aggregate_metadata.metadata",
    "rpquery.server_groups.groups",
    "rpquery.server_groups._model",
    "rpquery.server_groups._store",
    "rpquery.server_groups._policy",
    "rpquery.tags.store",
    "rpquery.write",
    "rpquery.read.providers",
    *(f"rpquery.cli.{name}" for name in FEATURE_MODULES if name != "queries"),
)

#: Runs the CLI in this interpreter, then prints the modules loaded, as JSON on the last line.
_RUN_CLI = """
import json, sys
from rpquery.cli import main
try:
    main(sys.argv[1:], prog_name="rpquery")
except SystemExit as exit:
    assert not exit.code, exit.code
print(json.dumps(sorted(sys.modules)))
"""


def loaded_by(code: str, *args: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def within(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_import_rpquery_loads_nothing_heavy() -> None:
    modules = loaded_by("import json, sys, rpquery; print(json.dumps(sorted(sys.modules)))")
    assert "rpquery" in modules
    assert within(modules, HEAVY) == []


def test_help_loads_no_library_and_no_feature_module() -> None:
    modules = loaded_by(_RUN_CLI, "--help")
    assert "rpquery.cli" in modules
    assert within(modules, HEAVY) == []
    assert within(modules, tuple(f"rpquery.cli.{name}" for name in FEATURE_MODULES)) == []
    assert within(modules, ("rpquery.db", "rpquery.read", "rpquery.store.migrations")) == []


def test_the_check_sees_a_heavy_import() -> None:
    """The subprocess check is real: a command that runs loads what it needs."""
    modules = loaded_by(_RUN_CLI, "serve", "--help")
    assert within(modules, ("rpquery.cli.serve",)) == ["rpquery.cli.serve"]
    assert within(modules, ("alembic",)) != []  # serve checks the schema: migrations


@pytest.fixture(scope="module")
def current_sqlite(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A current SQLite database with a small cloud (``rpquery load``)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('startup') / 'small.db'}"
    subprocess.run(
        [sys.executable, "-m", "rpquery", "--db", url, "load", "--hosts", "5", "--seed", "3"],
        capture_output=True,
        check=True,
    )
    return url


@pytest.mark.parametrize(
    "query",
    ["resources=VCPU:1,MEMORY_MB:512&limit=5", "resources=VCPU:1&required=!CUSTOM_GPU"],
)
def test_a_candidates_query_loads_only_the_read_path(current_sqlite: str, query: str) -> None:
    modules = loaded_by(_RUN_CLI, "--db", current_sqlite, "candidates", query, "--json")
    assert {"rpquery.cli.queries", "rpquery.read.candidates", "sqlite3"} <= modules
    assert "sqlalchemy.dialects.sqlite" in modules
    assert within(modules, NOT_FOR_A_QUERY) == []


def test_usages_on_a_current_database_loads_no_alembic(current_sqlite: str) -> None:
    modules = loaded_by(_RUN_CLI, "--db", current_sqlite, "usages", "project_id=p", "--json")
    assert "rpquery.usage.reads" in modules
    assert within(modules, ("alembic", "rpquery.store.migrations", "rpquery.generator")) == []


def test_command_modules_names_every_command_with_its_help() -> None:
    """``COMMAND_MODULES`` (what ``--help`` shows without importing) is the modules' truth."""
    found = {}
    for name in FEATURE_MODULES:
        module = importlib.import_module(f"rpquery.cli.{name}")
        for command in module.COMMANDS:
            assert isinstance(command, click.Command) and command.name
            found[command.name] = (name, command.get_short_help_str(limit=10_000))
    assert SKIPPED_FEATURES == {}
    assert found == COMMAND_MODULES


def test_help_is_the_same_before_and_after_the_commands_load() -> None:
    code = """
from click.testing import CliRunner
from rpquery.cli import load_all_commands, main
lazy = CliRunner().invoke(main, ["--help"], terminal_width=100).output
load_all_commands()
loaded = CliRunner().invoke(main, ["--help"], terminal_width=100).output
assert "candidates" in lazy and "Allocation candidates" in lazy, lazy
assert lazy == loaded, (lazy, loaded)
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_command_loads_on_first_lookup() -> None:
    command = main.get_command(click.Context(main), "headroom")
    assert command is not None and command.name == "headroom"
    assert "rpquery.cli.why" in sys.modules
    assert main.get_command(click.Context(main), "no-such-command") is None
