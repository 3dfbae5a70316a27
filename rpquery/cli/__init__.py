"""The ``rpquery`` command line (click). Every command takes ``--db URL`` (default
``sqlite:///rpquery.db``, or ``RPQUERY_DB_URL``).

Feature commands live in their own modules under ``rpquery.cli``; :data:`main` imports a
module only when one of its commands runs, and ``rpquery --help`` lists them from
:data:`COMMAND_MODULES` without importing any (start-up time, issue 18).
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from rpquery.cli._common import (
    LOG_LEVELS,
    configure_logging,
    emit_json,
    get_db,
    handles_errors,
    json_option,
)
from rpquery.cli._format import Output, output_options
from rpquery.store.urls import DEFAULT_URL, REPLICA_URLS_ENV, split_urls

if TYPE_CHECKING:
    from rpquery.db import Database

__all__ = [
    "COMMAND_MODULES",
    "FEATURE_MODULES",
    "SKIPPED_FEATURES",
    "db_check",
    "db_group",
    "db_status",
    "db_upgrade",
    "load_all_commands",
    "main",
]


#: Feature modules under ``rpquery.cli``; each exposes ``COMMANDS``, a list of click
#: commands or groups attached to :data:`main`.
FEATURE_MODULES = (
    "core",
    "queries",
    "why",
    "tour",
    "aggregates",
    "server_groups",
    "tags",
    "reshape",
    "writes",
    "allocations",
    "serve",
)

#: Every feature command: its name → (module under ``rpquery.cli``, the one-line help that
#: ``rpquery --help`` shows without importing the module). ``tests/test_cli_startup.py``
#: checks this table against the modules' ``COMMANDS``.
COMMAND_MODULES: dict[str, tuple[str, str]] = {
    "load": ("core", "Load a sample cloud (upgrading the schema first), in one transaction."),
    "usages": (
        "core",
        "Usages of a project (and user) grouped by consumer type (Placement 1.38+).",
    ),
    "claim": ("core", "Replace every allocation of a consumer, atomically."),
    "release": ("core", "Delete every allocation of a consumer (and the consumer)."),
    "providers": ("queries", "Resource providers (GET /resource_providers, microversion 1.39)."),
    "candidates": (
        "queries",
        "Allocation candidates (GET /allocation_candidates, microversion 1.39).",
    ),
    "explain": (
        "queries",
        "The SQL a request sends to this backend (every statement, with its values) and "
        "the database's plan for each.",
    ),
    "why": (
        "why",
        "Why hosts are excluded from a candidates request: hosts per reason, in the order "
        "the filters apply, each host under its first reason.",
    ),
    "headroom": (
        "why",
        "How many more instances of a request fit: per host (as if alone) and in total "
        "(a sharing provider's room counted once).",
    ),
    "tour": (
        "tour",
        "A guided tour: create the database, load a sample cloud, ask real questions.",
    ),
    "aggregate-metadata": ("aggregates", "Metadata of host aggregates for the flavor filter."),
    "server-group": (
        "server_groups",
        "Server groups: affinity, anti-affinity, soft-affinity, soft-anti-affinity.",
    ),
    "schedule": (
        "server_groups",
        "Pick and claim hosts for COUNT new instances of a server group, one at a time.",
    ),
    "move": ("server_groups", "Migrate, evacuate or rebuild a member of a server group."),
    "tags": ("tags", "Instance tags per namespace (user, system), with backend job states."),
    "instances": (
        "tags",
        "Instances selected by their tags in one namespace (filters combine with AND).",
    ),
    "reshape": (
        "reshape",
        "Move inventories and allocations between providers atomically (POST /reshaper).",
    ),
    "provider": ("writes", "Resource providers: create, set (rename, move), delete, show."),
    "inventory": (
        "writes",
        "Inventories of a provider: set (replace or --amend), delete, list.",
    ),
    "trait": ("writes", "Traits of a provider: set (replace), list."),
    "aggregate": ("writes", "Aggregates of a provider: set (replace), list."),
    "allocation": (
        "allocations",
        "A consumer's allocations: set (replace), unset (remove some), show.",
    ),
    "serve": ("serve", "Serve Placement's REST API (microversions 1.0-1.39) on this database."),
}

#: Feature modules left out of this build, with the reason (shown by ``--debug``).
SKIPPED_FEATURES: dict[str, str] = {}


class LazyGroup(click.Group):
    """A group whose feature commands are imported on first use: looking a command up
    imports its module (and attaches all of that module's commands); listing them for
    ``--help`` uses :data:`COMMAND_MODULES` and imports nothing.

    Called as the process's entry point (the ``rpquery`` console script and ``python -m
    rpquery``: no ``args``, standalone mode, so the process exits once the command is
    done), it keeps Python's cyclic garbage collector out of a one-off command's way
    (:func:`_one_off_process`)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if args is None and standalone_mode:
            _one_off_process()
        return super().main(args, prog_name, complete_var, standalone_mode, **extra)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMAND_MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            _load_feature(COMMAND_MODULES[cmd_name][0])
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None and name in COMMAND_MODULES:
                module, help_text = COMMAND_MODULES[name]
                if module in SKIPPED_FEATURES:
                    continue
                command = click.Command(name, help=help_text)  # a stand-in for its help line
            if command is not None and not command.hidden:
                rows.append((name, command))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])


@click.group(cls=LazyGroup)
@click.option(
    "--db",
    "db_url",
    envvar="RPQUERY_DB_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="SQLAlchemy URL of the database (env RPQUERY_DB_URL).",
)
@click.option(
    "--replica",
    "replica_urls",
    multiple=True,
    help="URL of a read replica (repeatable; env RPQUERY_DB_REPLICA_URLS, comma-separated): "
    "reads go to replicas, writes to --db.",
)
@click.option(
    "--max-replica-lag",
    type=click.FloatRange(0),
    default=5.0,
    show_default=True,
    envvar="RPQUERY_DB_MAX_REPLICA_LAG",
    help="Seconds a replica may lag before reads go to the primary instead.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="warning",
    show_default=True,
    envvar="RPQUERY_LOG_LEVEL",
    help="rpquery's log records at this level and above go to stderr (env "
    "RPQUERY_LOG_LEVEL); debug adds a line per read and per transaction with its "
    "statements and timings.",
)
@click.pass_context
def main(
    ctx: click.Context,
    db_url: str,
    replica_urls: tuple[str, ...],
    max_replica_lag: float,
    debug: bool,
    log_level: str,
) -> None:
    """Placement-compatible placement queries on SQLite, PostgreSQL and MariaDB."""
    _imports_done()
    ctx.ensure_object(dict)
    ctx.call_on_close(configure_logging(log_level.lower()))
    replicas = [u for given in replica_urls for u in split_urls(given)] or split_urls(
        os.environ.get(REPLICA_URLS_ENV)
    )
    ctx.obj.update(
        db_url=db_url, replica_urls=replicas, max_replica_lag=max_replica_lag, debug=debug
    )
    if debug:
        load_all_commands()
        for name, reason in SKIPPED_FEATURES.items():
            click.echo(f"debug: commands of rpquery.cli.{name} left out: {reason}", err=True)


@main.group("db")
def db_group() -> None:
    """Schema management."""


@db_group.command("upgrade")
@handles_errors
def db_upgrade() -> None:
    """Create or upgrade the schema; sync standard resource classes and traits."""
    from rpquery.store import migrations

    db = get_db()
    migrations.upgrade(db)
    st = migrations.status(db)
    click.echo(f"schema at {st.revision} on {db.url.render_as_string(hide_password=True)}")
    _warn_charset(migrations.charset_problems(db))


def _warn_charset(problems: Sequence[tuple[str, str]]) -> None:
    if not problems:
        return
    click.echo(
        "warning: this database cannot store 4-byte characters (emoji, some CJK) everywhere; "
        "such input is refused there. Fix:",
        err=True,
    )
    for problem, fix in problems:
        click.echo(f"  {problem}: {fix}", err=True)


@db_group.command("status")
@output_options(listing=False)
@handles_errors
def db_status(out: Output) -> None:
    """Schema revision and whether the database carries Placement's schema."""
    from rpquery.store import migrations

    st = migrations.status(get_db())
    data = {
        "revision": st.revision,
        "head": st.head,
        "up_to_date": st.up_to_date,
        "placement_revision": st.placement_revision,
        "placement_database": st.is_placement_database,
    }
    if out.is_table and not out.columns:  # "key: value" lines, as before -f
        for key, value in data.items():
            click.echo(f"{key}: {value}")
    else:
        out.show(data, "schema", lambda: data)


@db_group.command("check")
@click.option("--repair", is_flag=True, help="Rebuild every summary found stale.")
@json_option
@handles_errors
def db_check(repair: bool, as_json: bool) -> None:
    """Compare the trigger-kept usage tables with a recomputation from allocations, and
    report (MySQL/MariaDB) a character set that cannot hold 4-byte characters.

    ``rpq_usage_totals``/``rpq_consumer_counts`` (usages by consumer type, rpq0006) and
    ``rpq_provider_usages`` (usage per provider and class, rpq0007). Exit 1 when one
    differs (after ``--repair``: when one still differs) or a character set needs fixing."""
    from rpquery.store import migrations
    from rpquery.usage.provider_totals import rebuild_provider_usages, verify_provider_usages
    from rpquery.usage.summary import rebuild_usage_summary, verify_usage_summary

    db = get_db()
    checks: dict[str, tuple[Callable[[Database], Sequence[object]], Callable[[Database], object]]]
    checks = {
        "usage_summary": (verify_usage_summary, rebuild_usage_summary),
        "provider_usages": (verify_provider_usages, rebuild_provider_usages),
    }
    report: dict[str, dict[str, Any]] = {}
    for name, (verify, rebuild) in checks.items():
        found = verify(db)
        entry: dict[str, Any] = {"differences": len(found), "sample": [str(d) for d in found[:5]]}
        if found and repair:
            rebuild(db)
            entry["after_repair"] = len(verify(db))
        report[name] = entry
    charset = migrations.charset_problems(db)
    if as_json:
        emit_json({**report, "charset": [{"problem": p, "fix": f} for p, f in charset]})
    else:
        for name, entry in report.items():
            line = f"{name}: {entry['differences']} difference(s)"
            if "after_repair" in entry:
                line += f", rebuilt: {entry['after_repair']} left"
            click.echo(line)
            for sample in entry["sample"]:
                click.echo(f"  {sample}")
        click.echo(f"charset: {len(charset)} problem(s)")
        for problem, fix in charset:
            click.echo(f"  {problem}; fix: {fix}")
    stale = any(entry.get("after_repair", entry["differences"]) for entry in report.values())
    if stale or charset:
        raise SystemExit(1)


#: Whether this process runs one command and exits (:func:`_one_off_process`).
_ONE_OFF = {"process": False}


def _one_off_process() -> None:
    """This process runs one command, then exits: Python's cyclic garbage collector is
    off while the command's modules import (SQLAlchemy and the read path make ~50,000
    objects, all alive, that collections would walk in vain), and everything alive at
    exit is frozen (``gc.freeze``) so that the interpreter's shutdown does not walk it
    again (a query's ~80,000 objects: ~60 ms of CPU) to free memory the process is about
    to give back anyway. Objects are
    still freed by their reference counts, exit hooks still run; the database's
    connections are closed by ``dispose`` when the command ends
    (:func:`rpquery.cli._common.get_db`), not left to a collection. Start-up: see
    docs/benchmarks.md, section Start-up."""
    _ONE_OFF["process"] = True
    gc.disable()
    atexit.register(gc.freeze)


def _imports_done() -> None:
    """Once the command is looked up (its module imported), a one-off process collects
    garbage again (a long command, ``load`` or ``serve``, makes some), with what the
    imports made frozen: no collection walks it."""
    if _ONE_OFF["process"] and not gc.isenabled():
        gc.freeze()
        gc.enable()


def _load_feature(name: str) -> None:
    """Import one feature module and attach its commands. A module that is absent, or
    that needs a part of rpquery that is absent (a feature still being built), is left
    out so the other commands keep working; any other import error is a bug and is
    raised."""
    if name in SKIPPED_FEATURES:
        return
    try:
        module = importlib.import_module(f"rpquery.cli.{name}")
    except ImportError as exc:
        if not (exc.name or "").startswith("rpquery"):
            raise
        SKIPPED_FEATURES[name] = str(exc)
        return
    for command in module.COMMANDS:
        if command.name not in main.commands:
            main.add_command(command)
            if isinstance(command, click.Group):
                _accept_db_after_subcommand(command)
            else:
                _accept_db_option(command)


def load_all_commands() -> None:
    """Import every feature module now (``--debug``, and tests that walk all commands)."""
    for name in FEATURE_MODULES:
        _load_feature(name)


def _set_db_url(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        obj = ctx.find_root().obj
        obj["db_url"] = value
        obj.pop("db", None)


def _accept_db_after_subcommand(group: click.Group) -> None:
    """Give every command its own ``--db`` too, so ``rpquery candidates QS --db URL``
    works as ``rpquery --db URL candidates QS`` does (the later one wins)."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            _accept_db_after_subcommand(command)
        else:
            _accept_db_option(command)


def _accept_db_option(command: click.Command) -> None:
    if not any(p.name == "db_url" for p in command.params):
        command.params.append(
            click.Option(
                ["--db", "db_url"],
                expose_value=False,
                callback=_set_db_url,
                help="SQLAlchemy URL of the database (as the global --db).",
            )
        )


_accept_db_after_subcommand(db_group)
