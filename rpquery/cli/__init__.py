"""The ``rpquery`` command line (click). Every command takes ``--db URL`` (default
``sqlite:///rpquery.db``, or ``RPQUERY_DB_URL``).

Feature commands live in their own modules under ``rpquery.cli`` and are attached to
:data:`main` at the bottom of this file.
"""

from __future__ import annotations

import click

from rpquery import migrations
from rpquery.cli._common import emit_json, get_db, handles_errors, json_option
from rpquery.db import DEFAULT_URL


@click.group()
@click.option(
    "--db",
    "db_url",
    envvar="RPQUERY_DB_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="SQLAlchemy URL of the database (env RPQUERY_DB_URL).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.pass_context
def main(ctx: click.Context, db_url: str, debug: bool) -> None:
    """Placement-compatible placement queries on SQLite, PostgreSQL and MariaDB."""
    ctx.ensure_object(dict)
    ctx.obj.update(db_url=db_url, debug=debug)
    if debug:
        for name, reason in SKIPPED_FEATURES.items():
            click.echo(f"debug: commands of rpquery.cli.{name} left out: {reason}", err=True)


@main.group("db")
def db_group() -> None:
    """Schema management."""


@db_group.command("upgrade")
@handles_errors
def db_upgrade() -> None:
    """Create or upgrade the schema; sync standard resource classes and traits."""
    db = get_db()
    migrations.upgrade(db)
    st = migrations.status(db)
    click.echo(f"schema at {st.revision} on {db.url.render_as_string(hide_password=True)}")


@db_group.command("status")
@json_option
@handles_errors
def db_status(as_json: bool) -> None:
    """Schema revision and whether the database carries Placement's schema."""
    st = migrations.status(get_db())
    data = {
        "revision": st.revision,
        "head": st.head,
        "up_to_date": st.up_to_date,
        "placement_revision": st.placement_revision,
        "placement_database": st.is_placement_database,
    }
    if as_json:
        emit_json(data)
    else:
        for key, value in data.items():
            click.echo(f"{key}: {value}")


#: Feature modules under ``rpquery.cli``; each exposes ``COMMANDS``, a list of click
#: commands or groups attached to :data:`main`.
FEATURE_MODULES = ("core", "queries", "tour", "aggregates", "server_groups", "tags", "reshape")


#: Feature modules left out of this build, with the reason (shown by ``--debug``).
SKIPPED_FEATURES: dict[str, str] = {}


def _register_features() -> None:
    """Attach every feature module's commands. A module that is absent, or that needs a
    part of rpquery that is absent (a feature still being built), is left out so the
    other commands keep working; any other import error is a bug and is raised."""
    import importlib

    for name in FEATURE_MODULES:
        module_name = f"rpquery.cli.{name}"
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            if not (exc.name or "").startswith("rpquery"):
                raise
            SKIPPED_FEATURES[name] = str(exc)
            continue
        for command in module.COMMANDS:
            main.add_command(command)


_register_features()
