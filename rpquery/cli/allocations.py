"""``rpquery allocation set|unset|show``: a consumer's allocations, with
osc-placement's verbs and options (``openstack resource provider allocation ...``).

    $ rpquery allocation set 9f2c... --allocation rp=4a8d...,VCPU=2,MEMORY_MB=2048 \\
          --project-id P --user-id U --consumer-type INSTANCE
    $ rpquery allocation unset 9f2c... --resource-class MEMORY_MB
    $ rpquery allocation show 9f2c...

``set`` replaces every allocation of the consumer, ``unset`` removes some (a provider's,
a class's) and keeps the rest; both read the consumer's generation first and write with
it in one transaction (``rpquery.write.allocations.replace_allocations``): a concurrent
writer makes them fail (``rpquery.consumer.generation_conflict``, exit 1) with nothing
written, and so does a capacity the claim would exceed.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from rpquery.cli._common import consumer_type_option, get_db, handles_errors
from rpquery.cli._format import Cell, Listing, Output, output_options
from rpquery.errors import InvalidRequest
from rpquery.models import ConsumerAllocations
from rpquery.usage import reads
from rpquery.write import allocations

__all__ = ["COMMANDS", "allocation_group", "parse_allocations"]

COLUMNS = [
    "resource_provider",
    "generation",
    "resources",
    "project_id",
    "user_id",
    "consumer_type",
]


def parse_allocations(texts: Sequence[str]) -> dict[str, dict[str, int]]:
    """osc-placement's ``--allocation rp=UUID,CLASS=AMOUNT[,...]``, merged per provider;
    the same class of one provider given twice with different amounts is refused.

    >>> parse_allocations(["rp=4a8d,VCPU=2", "rp=4a8d,MEMORY_MB=512"])
    {'4a8d': {'VCPU': 2, 'MEMORY_MB': 512}}
    """
    out: dict[str, dict[str, int]] = {}
    for text in texts:
        pairs = [item.partition("=") for item in text.split(",")]
        if any(not sep or not key for key, sep, _ in pairs):
            raise _bad(text, "is not rp=UUID,CLASS=AMOUNT[,CLASS=AMOUNT...]")
        given = {key.strip(): value.strip() for key, _, value in pairs}
        rp = given.pop("rp", "")
        if not rp or not given:
            raise _bad(text, "needs rp=UUID and at least one CLASS=AMOUNT")
        for rc, amount in given.items():
            if not amount.isdigit():
                raise _bad(text, f"has {rc}={amount!r}: the amount must be a whole number")
            if out.get(rp, {}).get(rc, int(amount)) != int(amount):
                raise _bad(text, f"gives {rc} of provider {rp} a second, different amount")
            out.setdefault(rp, {})[rc] = int(amount)
    return out


def _bad(text: str, why: str) -> InvalidRequest:
    return InvalidRequest("rpquery.cli.bad_allocation", f"--allocation {text!r} {why}", token=text)


def _emit(consumer_uuid: str, out: Output) -> None:
    """The consumer's allocations, one row per provider (osc-placement's columns)."""
    view = reads.consumer_allocations(get_db(), consumer_uuid)
    rows = [
        [
            rp,
            pa.generation,
            Cell(
                ", ".join(f"{rc}={n}" for rc, n in sorted(pa.resources.items())),
                dict(sorted(pa.resources.items())),
            ),
            view.project_id,
            view.user_id,
            view.consumer_type,
        ]
        for rp, pa in sorted(view.allocations.items())
    ]
    out.emit(
        Listing(COLUMNS, rows, f"allocations of {consumer_uuid}"),
        lambda: {"consumer_uuid": consumer_uuid, **reads.render_consumer_allocations(view)},
    )


@click.group("allocation")
def allocation_group() -> None:
    """A consumer's allocations: set (replace), unset (remove some), show."""


@allocation_group.command("set")
@click.argument("consumer_uuid")
@click.option(
    "--allocation",
    "texts",
    multiple=True,
    required=True,
    metavar="rp=UUID,CLASS=AMOUNT[,...]",
    help="Allocations on one provider (repeatable).",
)
@click.option("--project-id", required=True, help="Project of the consumer.")
@click.option("--user-id", required=True, help="User of the consumer.")
@consumer_type_option
@output_options
@handles_errors
def allocation_set(
    consumer_uuid: str,
    texts: tuple[str, ...],
    project_id: str,
    user_id: str,
    consumer_type: str,
    out: Output,
) -> None:
    """Replace every allocation of CONSUMER_UUID (a new consumer if it has none)."""
    wanted = parse_allocations(texts)
    db = get_db()
    generation = reads.consumer_allocations(db, consumer_uuid).generation
    request = ConsumerAllocations(
        consumer_uuid, project_id, user_id, consumer_type, generation, wanted
    )
    allocations.replace_allocations(db, request)
    _emit(consumer_uuid, out)


@allocation_group.command("unset")
@click.argument("consumer_uuid")
@click.option(
    "--provider", "provider_uuids", multiple=True, help="Only this provider's (repeatable)."
)
@click.option(
    "--resource-class", "classes", multiple=True, help="Only this class (repeatable)."
)
@output_options
@handles_errors
def allocation_unset(
    consumer_uuid: str, provider_uuids: tuple[str, ...], classes: tuple[str, ...], out: Output
) -> None:
    """Remove allocations of CONSUMER_UUID: those on --provider, of --resource-class (on
    the --provider ones if given), or all; the others stay. Removing the last one
    removes the consumer."""
    db = get_db()
    view = reads.consumer_allocations(db, consumer_uuid)
    if view.generation is not None:
        left: dict[str, dict[str, int]] = {}
        for rp, pa in view.allocations.items():
            chosen = not provider_uuids or rp in provider_uuids
            if chosen and not classes:
                continue
            kept = {rc: n for rc, n in pa.resources.items() if not (chosen and rc in classes)}
            if kept:
                left[rp] = kept
        request = ConsumerAllocations(
            consumer_uuid,
            str(view.project_id),
            str(view.user_id),
            view.consumer_type if view.consumer_type != "unknown" else None,
            view.generation,
            left,
        )
        allocations.replace_allocations(db, request)
    _emit(consumer_uuid, out)


@allocation_group.command("show")
@click.argument("consumer_uuid")
@output_options
@handles_errors
def allocation_show(consumer_uuid: str, out: Output) -> None:
    """The allocations of CONSUMER_UUID."""
    _emit(consumer_uuid, out)


COMMANDS: list[click.Command] = [allocation_group]
