"""``rpquery load``, ``usages``, ``claim`` and ``release``: sample data, usage reads
and allocation writes from the command line (the read-path queries are in
:mod:`rpquery.cli.queries`, the tour in :mod:`rpquery.cli.tour`).

``usages`` takes Placement's query syntax as one argument, friendly flags, or both
(flags are appended to the query); ``--json`` prints Placement's body.

    $ rpquery load --hosts 300 --seed 42
    $ rpquery usages 'project_id=P&consumer_type=INSTANCE' --json
    $ rpquery claim RP_UUID=VCPU:2,MEMORY_MB:2048 --project P --user U --consumer-type INSTANCE
    $ rpquery release CONSUMER_UUID
"""

from __future__ import annotations

import sys
import uuid as uuidlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from rpquery.cli._common import (
    consumer_type_option,
    emit_json,
    get_db,
    handles_errors,
    json_option,
)
from rpquery.cli._common import query_pairs as _pairs
from rpquery.cli._format import Cell, Listing, Output, output_options
from rpquery.errors import Conflict, InvalidRequest
from rpquery.models import ConsumerAllocations
from rpquery.usage import reads as usages_mod

if TYPE_CHECKING:  # generator (which imports the migrations) is loaded by ``load`` only
    from rpquery import generator

__all__ = ["COMMANDS", "claim", "load", "release", "usages"]


def single_values(pairs: Sequence[tuple[str, str]], allowed: Sequence[str]) -> dict[str, str]:
    """``pairs`` as a dict, refusing unknown or repeated keys (``InvalidRequest``).

    >>> single_values([("project_id", "p1")], ["project_id", "user_id"])
    {'project_id': 'p1'}
    """
    found: dict[str, str] = {}
    for key, value in pairs:
        if key not in allowed:
            raise InvalidRequest(
                "rpquery.cli.unknown_parameter",
                f"unknown query parameter {key!r}; expected one of {', '.join(allowed)}",
                token=key,
            )
        if key in found:
            raise InvalidRequest(
                "rpquery.cli.repeated_parameter",
                f"query parameter {key!r} given more than once",
                token=key,
            )
        found[key] = value
    return found


# ---------------------------------------------------------------- load


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[generator.Progress | None]:
    """A rich progress bar with one line per table, as a ``progress`` callback."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

    bar = Progress(
        TextColumn("{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        transient=True,
        console=Console(stderr=True),
    )
    tasks: dict[str, TaskID] = {}

    def report(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bar.add_task(stage, total=total)
        bar.update(tasks[stage], completed=done, total=max(total, done))

    with bar:
        yield report


@click.command("load")
@click.option(
    "--hosts",
    type=click.IntRange(min=1),
    default=300,
    show_default=True,
    help="Number of compute hosts (root providers).",
)
@click.option(
    "--nested/--flat",
    default=True,
    show_default=True,
    help="Give about a third of the hosts NUMA and SR-IOV PF children.",
)
@click.option(
    "--sharing",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Sharing storage providers (DISK_GB via an aggregate).",
)
@click.option(
    "--seed",
    type=int,
    default=42,
    show_default=True,
    help="Same seed, same cloud (names, uuids, amounts).",
)
@click.option(
    "--fill",
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="Fraction of each host already allocated to existing consumers.",
)
@click.option(
    "--name-prefix",
    default="cn",
    show_default=True,
    help="Provider name prefix (change it to load a second cloud).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bar on stderr [default: when stderr is a terminal].",
)
@json_option
@handles_errors
def load(
    hosts: int,
    nested: bool,
    sharing: int,
    seed: int,
    fill: float,
    name_prefix: str,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Load a sample cloud (upgrading the schema first), in one transaction."""
    from rpquery import generator

    spec = generator.CloudSpec(
        hosts=hosts,
        nested=nested,
        sharing=sharing,
        seed=seed,
        fill=fill,
        name_prefix=name_prefix,
    )
    if progress is None:
        progress = sys.stderr.isatty()
    with _progress_bar(progress) as report:
        try:
            summary = generator.load_cloud(get_db(), spec, progress=report)
        except Conflict as exc:
            raise Conflict(
                exc.code,
                f"{exc.detail}; nothing was loaded: a cloud with this --seed or "
                "--name-prefix is already there (choose others to load a second one)",
            ) from exc
    if as_json:
        emit_json(
            {
                "seconds": round(summary.seconds, 3),
                "rows": summary.rows,
                "projects": list(summary.project_ids),
                "host_aggregates": list(summary.host_aggregates),
                "sharing_aggregates": list(summary.sharing_aggregates),
            }
        )
        return
    click.echo(
        f"loaded {summary.hosts} hosts ({summary.providers} providers), "
        f"{summary.consumers} consumers, {summary.allocations} allocations "
        f"in {summary.seconds:.1f} s; projects {summary.project_ids[0]} .. "
        f"{summary.project_ids[-1]}"
    )


# ---------------------------------------------------------------- usages


@click.command("usages")
@click.argument("query", required=False)
@click.option("--project", "project_id", help="Project (external id); same as project_id=.")
@click.option("--user", "user_id", help="Only this user's consumers; same as user_id=.")
@click.option(
    "--consumer-type",
    help="A type name, 'all' (one group summing everything) or 'unknown' (untyped).",
)
@output_options
@handles_errors
def usages(
    query: str | None,
    project_id: str | None,
    user_id: str | None,
    consumer_type: str | None,
    out: Output,
) -> None:
    """Usages of a project (and user) grouped by consumer type (Placement 1.38+).

    QUERY is Placement's syntax: 'project_id=P&user_id=U&consumer_type=INSTANCE'.
    """
    pairs = _pairs(
        query,
        ("project_id", project_id),
        ("user_id", user_id),
        ("consumer_type", consumer_type),
    )
    args = single_values(pairs, ["project_id", "user_id", "consumer_type"])
    if "project_id" not in args:
        raise InvalidRequest(
            "rpquery.usages.missing_project",
            "project_id is required (project_id=P or --project P)",
            token="project_id",
        )
    report = usages_mod.project_usages(
        get_db(),
        args["project_id"],
        user_id=args.get("user_id"),
        consumer_type=args.get("consumer_type"),
    )
    classes = sorted({rc for g in report.groups for rc in g.resources})
    title = f"usages of project {report.project_id}"
    if report.user_id:
        title += f", user {report.user_id}"
    rows = [
        [g.consumer_type, g.consumer_count, *(g.resources.get(rc, 0) for rc in classes)]
        for g in report.groups
    ]
    listing = Listing(["consumer type", "consumers", *classes], rows, title)
    out.emit(listing, lambda: usages_mod.render_project_usages(report))


# ---------------------------------------------------------------- claim / release


def parse_allocation(text: str) -> tuple[str, dict[str, int]]:
    """``RP_UUID=VCPU:2,MEMORY_MB:2048`` → ``(rp_uuid, {class: amount})``; names and
    amounts are checked by the write path, only the shape here.

    >>> parse_allocation("e10927c4-8bc9-465d-ac60-d2f79f7e4a00=VCPU:2,MEMORY_MB:512")
    ('e10927c4-8bc9-465d-ac60-d2f79f7e4a00', {'VCPU': 2, 'MEMORY_MB': 512})
    """
    rp_uuid, sep, resources = text.partition("=")
    if not sep or not rp_uuid.strip() or not resources.strip():
        raise InvalidRequest(
            "rpquery.cli.bad_allocation",
            f"allocation {text!r} is not PROVIDER_UUID=CLASS:AMOUNT[,CLASS:AMOUNT...]",
            token=text,
        )
    amounts: dict[str, int] = {}
    for item in resources.split(","):
        rc, colon, amount = item.strip().partition(":")
        if not colon or not amount.strip().isdigit():
            raise InvalidRequest(
                "rpquery.cli.bad_allocation",
                f"{item!r} in allocation {text!r} is not CLASS:AMOUNT with a whole amount",
                token=item,
            )
        amounts[rc.strip()] = amounts.get(rc.strip(), 0) + int(amount)
    return rp_uuid.strip(), amounts


def _show_consumer(consumer_uuid: str, out: Output) -> None:
    """The consumer's allocations, one row per provider (``resources`` as data:
    ``{class: amount}``); the consumer's owner and generation head the table."""
    view = usages_mod.consumer_allocations(get_db(), consumer_uuid)
    rows = [
        [rp, pa.generation, Cell(_resources(pa.resources), dict(sorted(pa.resources.items())))]
        for rp, pa in sorted(view.allocations.items())
    ]
    if out.is_table:
        if not view.allocations:
            click.echo(f"consumer {consumer_uuid} has no allocations")
            return
        click.echo(
            f"consumer {consumer_uuid} ({view.consumer_type}, project {view.project_id}, "
            f"user {view.user_id}) at generation {view.generation}"
        )
    listing = Listing(["provider", "generation", "resources"], rows, "allocations")
    out.emit(
        listing,
        lambda: {"consumer_uuid": consumer_uuid, **usages_mod.render_consumer_allocations(view)},
    )


def _resources(resources: Mapping[str, int]) -> str:
    return ", ".join(f"{rc}:{n}" for rc, n in sorted(resources.items()))


@click.command("claim")
@click.argument("allocation", nargs=-1, required=True)
@click.option("--consumer", "consumer_uuid", help="Consumer uuid (default: a new one).")
@click.option("--project", "project_id", required=True, help="Project of the consumer.")
@click.option("--user", "user_id", required=True, help="User of the consumer.")
@consumer_type_option
@click.option(
    "--generation",
    type=int,
    default=None,
    help="Consumer generation last seen (default: the current one, or new).",
)
@output_options
@handles_errors
def claim(
    allocation: tuple[str, ...],
    consumer_uuid: str | None,
    project_id: str,
    user_id: str,
    consumer_type: str,
    generation: int | None,
    out: Output,
) -> None:
    """Replace every allocation of a consumer, atomically.

    ALLOCATION is PROVIDER_UUID=CLASS:AMOUNT[,CLASS:AMOUNT...]; repeat it for several
    providers. Example:

        rpquery claim 5b0f...=VCPU:2,MEMORY_MB:2048 --project p --user u --consumer-type INSTANCE
    """
    wanted: dict[str, dict[str, int]] = {}
    for text in allocation:
        rp_uuid, amounts = parse_allocation(text)
        for rc, amount in amounts.items():
            wanted.setdefault(rp_uuid, {})[rc] = wanted.get(rp_uuid, {}).get(rc, 0) + amount
    db = get_db()
    consumer_uuid = consumer_uuid or str(uuidlib.uuid4())
    if generation is None:
        generation = usages_mod.consumer_allocations(db, consumer_uuid).generation
    from rpquery.write import allocations

    allocations.replace_allocations(
        db,
        ConsumerAllocations(consumer_uuid, project_id, user_id, consumer_type, generation, wanted),
    )
    _show_consumer(consumer_uuid, out)


@click.command("release")
@click.argument("consumer_uuid")
@click.option(
    "--generation",
    type=int,
    default=None,
    help="Consumer generation last seen (default: the current one).",
)
@json_option
@handles_errors
def release(consumer_uuid: str, generation: int | None, as_json: bool) -> None:
    """Delete every allocation of a consumer (and the consumer)."""
    db = get_db()
    if generation is None:
        generation = usages_mod.consumer_allocations(db, consumer_uuid).generation or 0
    from rpquery.write import allocations

    allocations.delete_allocations(db, consumer_uuid, consumer_generation=generation)
    if as_json:
        emit_json({"consumer_uuid": consumer_uuid, "released": True})
    else:
        click.echo(f"released consumer {consumer_uuid}")


COMMANDS: list[click.Command] = [load, usages, claim, release]
