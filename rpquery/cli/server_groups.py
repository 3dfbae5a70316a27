"""``rpquery server-group ...``, ``rpquery schedule`` and ``rpquery move``
(docs/server-groups.md).

    $ rpquery server-group create --name web --policy soft-anti-affinity \\
          --project P --user U --json
    $ rpquery server-group show 5bbcc3c4-1da2-4437-a48a-66f15b1b13f9 --json
    $ rpquery server-group list --project P -f csv
    $ rpquery schedule 'resources=VCPU:1,MEMORY_MB:512' --server-group 5bbcc3c4-... \\
          --project P --user U --consumer-type INSTANCE --count 2 --json
    $ rpquery move 'resources=VCPU:1' --instance 0f5b... --action migrate --json
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from rpquery.cli._common import get_db, handles_errors
from rpquery.cli._common import query_pairs as _pairs
from rpquery.cli._format import Cell, Listing, Output, output_options
from rpquery.server_groups import groups as sg
from rpquery.server_groups import weighers as w

if TYPE_CHECKING:
    from rpquery.server_groups.scheduling import Scheduled

__all__ = ["COMMANDS", "move", "schedule", "server_group"]

#: Same as ``rpquery.server_groups.scheduling.MOVE_ACTIONS``; scheduling (and the candidate
#: query it needs) is imported only by the commands that run it.
MOVE_ACTIONS = ("migrate", "evacuate", "rebuild")


def _params(query: str) -> dict[str, list[str]]:
    params: dict[str, list[str]] = {}
    for key, value in _pairs(query):
        params.setdefault(key, []).append(value)
    return params


def _weighers(enabled: Sequence[str], multipliers: Sequence[str]) -> w.WeigherConfig:
    names = enabled or w.KNOWN_WEIGHERS
    return w.WeigherConfig.build(names, w.parse_multipliers(multipliers))


weigher_options = [
    click.option(
        "--weigher",
        "enabled",
        multiple=True,
        help=f"Enabled weigher (repeatable; default all: {', '.join(w.KNOWN_WEIGHERS)}).",
    ),
    click.option(
        "--weigher-multiplier",
        "multipliers",
        multiple=True,
        metavar="NAME=X",
        help="Multiplier (>= 0, default 1.0) of a weigher (repeatable).",
    ),
]


def _with_weigher_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(weigher_options):
        fn = option(fn)
    return fn


#: The columns of ``server-group list`` and the fields of ``server-group create -f``.
GROUP_FIELDS = ("uuid", "name", "policy", "rules", "project_id", "user_id")


def _group_row(group: sg.ServerGroup) -> list[Any]:
    """A group's values in :data:`GROUP_FIELDS` order; rules as ``k=v`` text, a mapping
    as data."""
    rules = dict(group.rules)
    text = ", ".join(f"{k}={v}" for k, v in rules.items())
    return [
        group.uuid,
        group.name,
        group.policy,
        Cell(text, rules),
        group.project_id,
        group.user_id,
    ]


@click.group("server-group")
def server_group() -> None:
    """Server groups: affinity, anti-affinity, soft-affinity, soft-anti-affinity."""


@server_group.command("create")
@click.option("--name", required=True, help="Group name.")
@click.option(
    "--policy",
    "policies",
    multiple=True,
    # Required, but checked by create_group so a missing one is rpquery.server_group.
    # no_policy (with --json, Placement's error body) rather than a click usage error.
    help=f"Exactly one of {', '.join(sg.POLICIES)}.  [required]",
)
@click.option(
    "--max-server-per-host", type=int, default=None, help="anti-affinity only (default 1)."
)
@click.option("--project", required=True, help="Owning project (external id).")
@click.option("--user", required=True, help="Owning user (external id).")
@output_options(listing=False)
@handles_errors
def create(
    name: str,
    policies: tuple[str, ...],
    max_server_per_host: int | None,
    project: str,
    user: str,
    out: Output,
) -> None:
    """Create a group and print its uuid (-f: its fields)."""
    rules = None if max_server_per_host is None else {sg.MAX_SERVER_PER_HOST: max_server_per_host}
    group = sg.create_group(get_db(), name, policies, project, user, rules)
    if out.is_table and not out.columns:
        click.echo(group.uuid)
        return
    fields = dict(zip(GROUP_FIELDS, _group_row(group), strict=True))
    out.show(fields, "server group", lambda: sg.ServerGroupDetail(group, ()).as_dict())


@server_group.command("list")
@click.option("--project", default=None, help="Only the groups of this project (external id).")
@output_options
@handles_errors
def list_(project: str | None, out: Output) -> None:
    """Every server group (or one project's), ordered by name."""
    groups = sg.list_groups(get_db(), project_id=project)
    rows = [_group_row(g) for g in groups]

    def document() -> list[dict[str, Any]]:
        return [
            dict(zip(GROUP_FIELDS, r, strict=True)) | {"rules": dict(g.rules)}
            for g, r in zip(groups, rows, strict=True)
        ]

    out.emit(Listing(list(GROUP_FIELDS), rows, "server groups"), document)


@server_group.command("show")
@click.argument("group_uuid")
@output_options
@handles_errors
def show(group_uuid: str, out: Output) -> None:
    """A group's members and their hosts (the group itself on the line above the table)."""
    detail = sg.show_group(get_db(), group_uuid)
    g = detail.group
    if out.is_table:
        rules = ", ".join(f"{k}={v}" for k, v in g.rules.items())
        click.echo(f"{g.uuid} {g.name} policy={g.policy} {rules}".rstrip())
    rows = [
        (m.instance_uuid, ", ".join(h.name or h.uuid for h in m.hosts)) for m in detail.members
    ]
    out.emit(Listing(["instance", "hosts"], rows, "members"), detail.as_dict)


@server_group.command("delete")
@click.argument("group_uuid")
@handles_errors
def delete(group_uuid: str) -> None:
    """Delete a group and its memberships (allocations stay)."""
    sg.delete_group(get_db(), group_uuid)


def _emit_placed(placed: Sequence[Scheduled], out: Output) -> None:
    rows = [(p.instance_uuid, p.host.name, p.host.uuid) for p in placed]
    listing = Listing(["instance", "host", "host uuid"], rows, "scheduled")
    out.emit(listing, lambda: [p.as_dict() for p in placed])


@click.command("schedule")
@click.argument("query")
@click.option("--server-group", "group_uuid", required=True, help="Group uuid.")
@click.option("--project", required=True, help="Project of the new instances.")
@click.option("--user", required=True, help="User of the new instances.")
@click.option("--consumer-type", default="INSTANCE", show_default=True)
@click.option("--count", type=int, default=1, show_default=True, help="Instances to place.")
@_with_weigher_options
@output_options
@handles_errors
def schedule(
    query: str,
    group_uuid: str,
    project: str,
    user: str,
    consumer_type: str,
    count: int,
    enabled: tuple[str, ...],
    multipliers: tuple[str, ...],
    out: Output,
) -> None:
    """Pick and claim hosts for COUNT new instances of a server group, one at a time."""
    from rpquery.server_groups import scheduling

    placed = scheduling.schedule(
        get_db(),
        _params(query),
        group_uuid,
        project_id=project,
        user_id=user,
        consumer_type=consumer_type,
        count=count,
        weighers=_weighers(enabled, multipliers),
    )
    _emit_placed(placed, out)


@click.command("move")
@click.argument("query")
@click.option("--instance", "instance_uuid", required=True, help="Member to move.")
@click.option("--action", type=click.Choice(MOVE_ACTIONS), required=True, help="Kind of move.")
@_with_weigher_options
@output_options
@handles_errors
def move(
    query: str,
    instance_uuid: str,
    action: Any,
    enabled: tuple[str, ...],
    multipliers: tuple[str, ...],
    out: Output,
) -> None:
    """Migrate, evacuate or rebuild a member of a server group."""
    from rpquery.server_groups import scheduling

    placed = scheduling.move(
        get_db(),
        _params(query),
        instance_uuid,
        action,
        weighers=_weighers(enabled, multipliers),
    )
    _emit_placed([placed], out)


COMMANDS = [server_group, schedule, move]
