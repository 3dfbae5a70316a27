"""``rpquery tour``: what ``make run`` shows a new user.

The tour creates (or upgrades) the database, loads a sample cloud when the database
has no providers yet, and then runs real ``rpquery`` commands against it, printing
each command line before its answer so the reader can type it again. Steps whose
command is not part of this build (a feature module that did not land) are skipped.

Decision: an already-loaded database is reused as is (``rm rpquery.db`` or
``make clean`` starts over); the tour's own writes (a demo claim) are undone before
it ends, so running it twice prints the same answers.

    $ rpquery --db sqlite:///rpquery.db tour
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import click
import sqlalchemy as sa
from rich.console import Console

from rpquery.cli._common import get_db, handles_errors
from rpquery.db import Database
from rpquery.tables import projects, resource_providers

#: Size of the sample cloud the tour loads into an empty database.
TOUR_HOSTS = 300

#: A step's arguments may depend on the loaded data (a project id, a provider uuid).
ArgsFn = Callable[[Database], Sequence[str] | None]


@dataclass(frozen=True)
class Step:
    """One heading and the ``rpquery`` command line that answers it."""

    heading: str
    args: Sequence[str] | ArgsFn

    def argv(self, db: Database) -> Sequence[str] | None:
        return self.args(db) if callable(self.args) else self.args


def _console() -> Console:
    return Console(width=100, highlight=False)


def run_step(ctx: click.Context, step: Step, number: int) -> bool | None:
    """Run one step as if typed on the command line: True when it succeeded, False
    when it failed, None when it was skipped (nothing to do, or the feature behind it
    is not part of this build)."""
    root = ctx.find_root()
    group = root.command
    assert isinstance(group, click.Group)
    argv = step.argv(get_db())
    if argv is None or group.get_command(root, argv[0]) is None:
        return None
    console = _console()
    console.print()
    console.rule(f"[bold]{number}. {step.heading}", align="left")
    console.print(f"[dim]$ rpquery {shlex.join(argv)}[/dim]")
    sub = group.make_context("rpquery", ["--db", root.obj["db_url"], *argv], obj=root.obj)
    try:
        with sub:
            group.invoke(sub)
    except click.exceptions.Exit as done:
        return done.exit_code == 0
    return True


def _count(db: Database, table: sa.Table) -> int:
    with db.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def _load_args(db: Database) -> Sequence[str] | None:
    """Load the sample cloud only into an empty database; say so when reusing one."""
    found = _count(db, resource_providers)
    if found:
        _console().print(
            f"\n[dim]reusing the {found} providers already in the database "
            "(rm rpquery.db, or make clean, to start over)[/dim]"
        )
        return None
    return ["load", "--hosts", str(TOUR_HOSTS), "--seed", "42"]


def first_project(db: Database) -> str | None:
    """The first project of the loaded cloud (the generator's ``project-42-0000``)."""
    with db.connect() as conn:
        return conn.execute(
            sa.select(projects.c.external_id).order_by(projects.c.id).limit(1)
        ).scalar()


def _usages_args(db: Database) -> Sequence[str] | None:
    project = first_project(db)
    return None if project is None else ["usages", f"project_id={project}"]


def tour_steps() -> list[Step]:
    """The tour, in order."""
    return [
        Step("Create or upgrade the schema", ["db", "upgrade"]),
        Step("Load a sample cloud", _load_args),
        Step("Usages of one project, by consumer type", _usages_args),
    ]


@click.command()
@click.pass_context
@handles_errors
def tour(ctx: click.Context) -> None:
    """A guided tour: create the database, load a sample cloud, ask real questions."""
    failed: list[str] = []
    number = 1
    for step in tour_steps():
        outcome = run_step(ctx, step, number)
        if outcome is not None:
            number += 1
        if outcome is False:
            failed.append(step.heading)
    if failed:
        raise click.ClickException("tour steps failed: " + ", ".join(failed))


COMMANDS = [tour]
