"""The ``rpquery`` command line (click). Every command takes ``--db URL``
(default ``sqlite:///rpquery.db``, or ``RPQUERY_DB_URL``)."""

from __future__ import annotations

import click

from rpquery import migrations
from rpquery.db import DEFAULT_URL, Database


@click.group()
@click.option("--db", "db_url", envvar="RPQUERY_DB_URL", default=DEFAULT_URL, show_default=True,
              help="SQLAlchemy URL of the database.")
@click.pass_context
def main(ctx: click.Context, db_url: str) -> None:
    """Placement-compatible placement queries on SQLite, PostgreSQL and MariaDB."""
    ctx.obj = {"db_url": db_url}


@main.group("db")
def db_group() -> None:
    """Schema management."""


@db_group.command("upgrade")
@click.pass_context
def db_upgrade(ctx: click.Context) -> None:
    """Create or upgrade the schema; sync standard resource classes and traits."""
    db = Database(ctx.obj["db_url"])
    migrations.upgrade(db)
    st = migrations.status(db)
    click.echo(f"schema at {st.revision} on {db.url.render_as_string(hide_password=True)}")


@main.command()
@click.pass_context
def tour(ctx: click.Context) -> None:
    """A guided tour on the embedded database."""
    ctx.invoke(db_upgrade)
