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
from rich.console import Console

from rpquery.cli._common import get_db, handles_errors
from rpquery.db import Database

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


def run_step(ctx: click.Context, step: Step, number: int) -> bool:
    """Run one step as if typed on the command line; False when it failed."""
    root = ctx.find_root()
    group = root.command
    assert isinstance(group, click.Group)
    argv = step.argv(get_db())
    if argv is None or group.get_command(root, argv[0]) is None:
        return True  # the feature behind this step is not part of this build
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


def tour_steps() -> list[Step]:
    """The tour, in order."""
    return [
        Step("Schema", ["db", "status"]),
    ]


@click.command()
@click.pass_context
@handles_errors
def tour(ctx: click.Context) -> None:
    """A guided tour: create the database, load a sample cloud, ask real questions."""
    failed = [
        step.heading
        for number, step in enumerate(tour_steps(), start=1)
        if not run_step(ctx, step, number)
    ]
    if failed:
        raise click.ClickException("tour steps failed: " + ", ".join(failed))


COMMANDS = [tour]
