"""``rpquery tour``: what ``make run`` shows a new user.

The tour creates (or upgrades) the database, loads a sample cloud when the database
has no providers yet, and then runs real ``rpquery`` commands against it, printing
each command line before its answer so the reader can type it again. Steps whose
command is not part of this build (a feature module that did not land) are skipped.

Decision: an already-loaded database is reused as is (on SQLite ``rm`` of its file
starts over, on a server a fresh database; the hint names the right one); the tour's
own writes (a demo claim) are undone before it ends, so running it twice prints the
same answers.

    $ rpquery --db sqlite:///rpquery.db tour
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import click
import sqlalchemy as sa
from rich.console import Console

from rpquery.aggregate_metadata import metadata as agg_md
from rpquery.cli._common import get_db, handles_errors
from rpquery.db import Database
from rpquery.server_groups import groups as sg
from rpquery.store import dialects
from rpquery.store.tables import (
    placement_aggregates,
    projects,
    resource_provider_aggregates,
    resource_providers,
    server_group_members,
    server_groups,
)
from rpquery.usage import reads as usages
from rpquery.write import allocations

__all__ = ["COMMANDS", "tour"]

#: Size of the sample cloud the tour loads into an empty database.
TOUR_HOSTS = 300
#: Owner of what the tour writes (and undoes before it ends).
TOUR_OWNER = ("--project", "tour", "--user", "tour")
GROUP_NAME = "tour-web"
METADATA_HOST = "cn000100"
GRANULAR = (
    "resources=DISK_GB:20"
    "&resources_COMPUTE=VCPU:2,MEMORY_MB:4096"
    "&resources_NET=SRIOV_NET_VF:1&required_NET=CUSTOM_PHYSNET_A"
    "&group_policy=isolate&limit=3"
)
HEADROOM = "resources=VCPU:2,MEMORY_MB:2048&required=!CUSTOM_GPU"
GROUP_CREATE = [
    "server-group",
    "create",
    "--name",
    GROUP_NAME,
    "--policy",
    "soft-anti-affinity",
    *TOUR_OWNER,
]

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


def invoke(ctx: click.Context, argv: Sequence[str], *, quiet: bool = False) -> int:
    """Run ``rpquery ARGV`` on the tour's database; its exit status. ``quiet`` sends
    its output nowhere (the tour's own clean-up)."""
    root = ctx.find_root()
    group = root.command
    assert isinstance(group, click.Group)
    sub = group.make_context("rpquery", ["--db", root.obj["db_url"], *argv], obj=root.obj)
    sink = open(os.devnull, "w") if quiet else None  # noqa: SIM115 - closed below
    try:
        with sub, contextlib.ExitStack() as stack:
            if sink is not None:
                stack.enter_context(contextlib.redirect_stdout(sink))
                stack.enter_context(contextlib.redirect_stderr(sink))
            group.invoke(sub)
    except click.exceptions.Exit as done:
        return done.exit_code
    finally:
        if sink is not None:
            sink.close()
    return 0


def has_command(ctx: click.Context, name: str) -> bool:
    root = ctx.find_root()
    group = root.command
    return isinstance(group, click.Group) and group.get_command(root, name) is not None


def run_step(ctx: click.Context, step: Step, number: int) -> bool | None:
    """Run one step as if typed on the command line: True when it succeeded, False
    when it failed, None when it was skipped (nothing to do, or the feature behind it
    is not part of this build)."""
    argv = step.argv(get_db())
    if argv is None or not has_command(ctx, argv[0]):
        return None
    console = _console()
    console.print()
    console.rule(f"[bold]{number}. {step.heading}", align="left")
    console.print(f"[dim]$ rpquery {shlex.join(argv)}[/dim]", soft_wrap=True)
    return invoke(ctx, argv) == 0


def _count(db: Database, table: sa.Table) -> int:
    with db.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def _start_over_hint(db: Database) -> str:
    """How to empty this database: remove the file on SQLite; on a server, drop and
    recreate the database (rpquery never drops one itself)."""
    path = db.sqlite_path
    if path is not None:
        return f"rm {path}"
    if not dialects.backend(db.dialect_name).on_server:
        return "a new in-memory database"
    return f"drop and recreate database {db.url.database} (e.g. a new --db)"


def _load_args(db: Database) -> Sequence[str] | None:
    """Load the sample cloud only into an empty database; say so when reusing one."""
    found = _count(db, resource_providers)
    if found:
        _console().print(
            f"\n[dim]reusing the {found} providers already in the database "
            f"({_start_over_hint(db)} to start over)[/dim]"
        )
        return None
    return ["load", "--hosts", str(TOUR_HOSTS), "--seed", "42"]


def first_project(db: Database) -> str | None:
    """The first project of the loaded cloud (the generator's ``project-42-0000``)."""
    with db.connect() as conn:
        return conn.execute(
            sa.select(projects.c.external_id).order_by(projects.c.id).limit(1)
        ).scalar()


def aggregate_of(db: Database, host_name: str) -> str | None:
    """The aggregate with the most members among those of ``host_name`` (its host
    aggregate rather than a storage-sharing one)."""
    rpa, rp, agg = resource_provider_aggregates, resource_providers, placement_aggregates
    members = (
        sa.select(rpa.c.aggregate_id, sa.func.count().label("n"))
        .group_by(rpa.c.aggregate_id)
        .subquery()
    )
    stmt = (
        sa.select(agg.c.uuid)
        .join(rpa, rpa.c.aggregate_id == agg.c.id)
        .join(rp, rp.c.id == rpa.c.resource_provider_id)
        .join(members, members.c.aggregate_id == agg.c.id)
        .where(rp.c.name == host_name)
        .order_by(members.c.n.desc(), agg.c.id)
        .limit(1)
    )
    with db.connect() as conn:
        return conn.execute(stmt).scalar()


def group_named(db: Database, name: str) -> str | None:
    """The uuid of the newest server group called ``name``."""
    stmt = (
        sa.select(server_groups.c.uuid)
        .where(server_groups.c.name == name)
        .order_by(server_groups.c.id.desc())
        .limit(1)
    )
    with db.connect() as conn:
        return conn.execute(stmt).scalar()


def _usages_args(db: Database) -> Sequence[str] | None:
    project = first_project(db)
    return None if project is None else ["usages", f"project_id={project}"]


def _metadata_args(db: Database) -> Sequence[str] | None:
    agg = aggregate_of(db, METADATA_HOST)
    return None if agg is None else ["aggregate-metadata", "set", agg, "tier=gold"]


def _schedule_args(db: Database) -> Sequence[str] | None:
    group = group_named(db, GROUP_NAME)
    if group is None:
        return None
    return [
        "schedule",
        "resources=VCPU:2,MEMORY_MB:4096",
        "--server-group",
        group,
        "--count",
        "3",
        *TOUR_OWNER,
        "--consumer-type",
        "INSTANCE",
    ]


def group_members(db: Database, name: str) -> list[str]:
    """Instance uuids of the newest server group called ``name``, in placement order."""
    group = group_named(db, name)
    if group is None:
        return []
    stmt = (
        sa.select(server_group_members.c.instance_uuid)
        .join(server_groups, server_groups.c.id == server_group_members.c.group_id)
        .where(server_groups.c.uuid == group)
        .order_by(server_group_members.c.created_at, server_group_members.c.instance_uuid)
    )
    with db.connect() as conn:
        return [str(u) for u in conn.execute(stmt).scalars()]


def _tag_args(index: int, *tags: str) -> ArgsFn:
    def args(db: Database) -> Sequence[str] | None:
        members = group_members(db, GROUP_NAME)
        return ["tags", "add", members[index], *tags] if len(members) > index else None

    return args


def tour_steps() -> list[Step]:
    """The tour, in order."""
    return [
        Step("Create or upgrade the schema", ["db", "upgrade"]),
        Step("Load a sample cloud", _load_args),
        Step(
            "Candidates that must not have a GPU (forbidden trait: NOT EXISTS in SQL)",
            ["candidates", "resources=VCPU:2,MEMORY_MB:2048&required=!CUSTOM_GPU&limit=5"],
        ),
        Step(
            "The same request needing a GPU: other hosts answer",
            ["candidates", "resources=VCPU:2,MEMORY_MB:2048&required=CUSTOM_GPU&limit=3"],
        ),
        Step(
            "A granular request: CPU+RAM on one NUMA node, a VF on physnet A, "
            "disk local or shared",
            ["candidates", GRANULAR],
        ),
        Step(
            "Why no host fits 200 VCPUs: root providers per rejection reason, in filter order",
            ["why", "resources=VCPU:200,MEMORY_MB:4096&required=!CUSTOM_GPU"],
        ),
        Step(
            "How many more 2-VCPU instances fit, per host (alone, and counted in the total)",
            ["headroom", HEADROOM, "--top", "5"],
        ),
        Step(
            "The same per host aggregate (a uuid in Placement: its members tell which)",
            ["headroom", HEADROOM, "--group-by", "aggregate"],
        ),
        Step("Usages of one project, by consumer type", _usages_args),
        Step(f"Aggregate metadata on the host aggregate of {METADATA_HOST}", _metadata_args),
        Step(
            "Flavor extra specs against aggregate metadata: only that aggregate's hosts",
            ["candidates", "resources=VCPU:1&limit=3", "--extra-specs", '{"tier": "gold"}'],
        ),
        Step("A soft-anti-affinity server group", GROUP_CREATE),
        Step("Place three members: the weigher spreads them", _schedule_args),
        Step(
            "Tag the first member (user namespace, fake backend)", _tag_args(0, "web", "frontend")
        ),
        Step("Tag the second member", _tag_args(1, "web")),
        Step(
            "Instances tagged web but not frontend",
            ["instances", "--tags", "web", "--not-tags-any", "frontend"],
        ),
    ]


def undo_tour_writes(ctx: click.Context, db: Database) -> None:
    """Remove what the tour wrote (its members' tags and allocations, its server
    groups, the aggregate metadata), so the next run prints the same answers."""
    while (group := group_named(db, GROUP_NAME)) is not None:
        detail = sg.show_group(db, group)
        for member in detail.members:
            if has_command(ctx, "tags"):
                invoke(ctx, ["tags", "delete-all", member.instance_uuid], quiet=True)
            found = usages.consumer_allocations(db, member.instance_uuid)
            if found.generation is not None:
                allocations.delete_allocations(
                    db, member.instance_uuid, consumer_generation=found.generation
                )
        sg.delete_group(db, group)
    agg = aggregate_of(db, METADATA_HOST)
    if agg is not None:
        agg_md.unset_metadata(db, agg, ["tier"])


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
    undo_tour_writes(ctx, get_db())
    if failed:
        raise click.ClickException("tour steps failed: " + ", ".join(failed))


COMMANDS = [tour]
