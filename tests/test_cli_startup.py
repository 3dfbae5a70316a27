"""Start-up cost of ``import rpquery`` and of the ``rpquery`` command (issue 18, item 4):
what each loads, checked in a fresh interpreter through ``sys.modules`` (a test of what is
imported, not of timing; the times are in ``make bench``, docs/benchmarks.md).

- ``import rpquery`` and ``rpquery --help``: no SQLAlchemy, Alembic, rich, os_traits, web
  stack, and no feature module of the CLI (the group lists them from ``COMMAND_MODULES``).
- a one-off query on a current SQLite database: the read path only — no Alembic, no web
  stack, no other backend's SQLAlchemy dialect, no feature it does not use; importing the
  read path builds no statement (each is built on first use).
- the process's entry point (console script, ``python -m rpquery``) freezes what is alive
  at exit (``gc.freeze``: no collection walks it at shutdown) and runs the command with
  the collector on; ``main`` called with arguments (tests, click's runner) leaves the
  collector alone.
"""

from __future__ import annotations

import gc
import importlib
import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from rpquery.cli import COMMAND_MODULES, FEATURE_MODULES, SKIPPED_FEATURES, main
from rpquery.db import Database

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


#: Imports the modules of the queries (candidates, providers, explain, why, headroom,
#: usages), then prints the kinds of SQLAlchemy statements alive, as JSON.
_STATEMENTS_AFTER_IMPORT = """
import collections, gc, json
import rpquery.cli.core, rpquery.cli.queries, rpquery.cli.why
from sqlalchemy.sql.selectable import CompoundSelect, Select
kinds = collections.Counter(
    type(o).__name__ for o in gc.get_objects() if isinstance(o, (Select, CompoundSelect))
)
print(json.dumps(kinds))
"""


def test_importing_the_read_path_builds_no_statement() -> None:
    """The read path's fixed statements are built on first use (``functools.cache``'d
    builders such as ``_summaries.summary_keyed``), not at import: a one-off command
    builds only those it sends."""
    out = subprocess.run(
        [sys.executable, "-c", _STATEMENTS_AFTER_IMPORT],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}


def test_the_check_sees_a_statement_built_at_import() -> None:
    """The check above is real: a statement built at import is seen."""
    code = _STATEMENTS_AFTER_IMPORT.replace(
        "import rpquery.cli.core,",
        "import rpquery.read.candidates._summaries as sm; sm.summary_keyed(True); import",
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert sum(json.loads(out.stdout.strip().splitlines()[-1]).values()) >= 1


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


#: An exit hook registered before the CLI's own runs after them (LIFO): it prints the
#: garbage collector's state then, as JSON on stderr's last line.
_REPORT_GC_AT_EXIT = """
import atexit, gc, json, sys
def report():
    print(json.dumps([gc.isenabled(), gc.get_freeze_count()]), file=sys.stderr)
atexit.register(report)
"""

#: Runs the CLI as the console script does: ``main()``, the arguments from ``sys.argv``.
_RUN_AS_SCRIPT = (
    _REPORT_GC_AT_EXIT
    + """
from rpquery.cli import main
sys.argv[0] = "rpquery"
main()
"""
)

#: Runs ``main(args)`` as a caller's process would (and goes on).
_RUN_CLI_WITH_ARGS = (
    _REPORT_GC_AT_EXIT
    + """
from rpquery.cli import main
try:
    main(sys.argv[1:], prog_name="rpquery")
except SystemExit as exit:
    assert not exit.code, exit.code
"""
)


def gc_at_exit(code: str, *args: str) -> tuple[bool, int]:
    """Whether the collector was on at exit, and how many objects were frozen."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    enabled, frozen = json.loads(out.stderr.strip().splitlines()[-1])
    return enabled, frozen


def test_a_one_off_command_freezes_what_is_alive_at_exit(current_sqlite: str) -> None:
    """The entry point freezes the imports' objects and everything at exit (tens of
    thousands: SQLAlchemy alone makes more), with the collector on again for the command."""
    query = ("--db", current_sqlite, "candidates", "resources=VCPU:1&limit=2", "--json")
    enabled, frozen = gc_at_exit(_RUN_AS_SCRIPT, *query)
    assert enabled and frozen > 50_000
    _, frozen_help = gc_at_exit(_RUN_AS_SCRIPT, "--help")
    assert frozen_help > 1_000


def test_main_with_arguments_leaves_the_collector_alone(current_sqlite: str) -> None:
    """A caller's process goes on after ``main(args)`` (a test, click's runner): nothing
    frozen, the collector on."""
    query = ("--db", current_sqlite, "candidates", "resources=VCPU:1&limit=2", "--json")
    assert gc_at_exit(_RUN_CLI_WITH_ARGS, *query) == (True, 0)
    assert gc_at_exit(_RUN_CLI_WITH_ARGS, "--help") == (True, 0)


def test_python_m_rpquery_is_a_one_off_process(current_sqlite: str) -> None:
    code = _RUN_AS_SCRIPT.replace("from rpquery.cli import main", "import runpy").replace(
        "main()", 'runpy.run_module("rpquery", run_name="__main__")'
    )
    _, frozen = gc_at_exit(code, "--db", current_sqlite, "usages", "project_id=p", "--json")
    assert frozen > 50_000


def test_the_command_closes_its_connections(current_sqlite: str) -> None:
    """The database a command opened is disposed of when it ends: its pooled connection
    is closed then, not left to the collector (frozen at exit in a one-off process)."""
    obj: dict[str, object] = {}
    result = CliRunner().invoke(
        main, ["--db", current_sqlite, "candidates", "resources=VCPU:1&limit=2", "--json"], obj=obj
    )
    assert result.exit_code == 0, result.output
    db = obj["db"]
    assert isinstance(db, Database)
    assert db.engine.pool.checkedin() == 0  # a fresh pool: the used one was disposed of
    assert gc.isenabled() and gc.get_freeze_count() == 0
