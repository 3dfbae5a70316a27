"""``rpquery aggregate-metadata``: set, unset and show the metadata the flavor filter
reads (one aggregate per call, keyed by its Placement uuid; docs/aggregate-metadata.md).

    $ rpquery aggregate-metadata set 6c1e...  ssd=true force_metadata_check=True
    $ rpquery aggregate-metadata unset 6c1e... ssd
    $ rpquery aggregate-metadata show 6c1e... --json

``providers`` and ``candidates`` take ``--extra-specs '<json>'`` and ``--nova-compat``
through :func:`policy_from_cli` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from rpquery.aggregate_metadata import metadata as agg_md
from rpquery.aggregate_metadata.metadata import AggregateMetadata, policy_from_cli
from rpquery.cli._common import get_db, handles_errors
from rpquery.cli._format import Listing, Output, output_options
from rpquery.errors import InvalidRequest

__all__ = ["COMMANDS", "parse_assignments", "policy_from_cli"]


def parse_assignments(pairs: Sequence[str]) -> dict[str, str]:
    """``["ssd=true", "note=a=b"]`` → ``{"ssd": "true", "note": "a=b"}`` (split on the
    first ``=``; a repeated key or a pair without ``=`` is an ``InvalidRequest``).

    >>> parse_assignments(["ssd=true", "note=a=b"])
    {'ssd': 'true', 'note': 'a=b'}
    """
    items: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise InvalidRequest(
                "rpquery.aggregate_metadata.bad_assignment",
                f"expected KEY=VALUE, got {pair!r}",
                token=pair,
            )
        if key in items:
            raise InvalidRequest(
                "rpquery.aggregate_metadata.repeated_key", f"key {key!r} given twice", token=key
            )
        items[key] = value
    return items


def _emit(found: Sequence[AggregateMetadata], out: Output, *, many: bool = False) -> None:
    """One row per key; ``--json``: one aggregate as ``{"aggregate_uuid", "metadata"}``,
    ``many`` gives a list."""
    rows = [(m.aggregate_uuid, k, v) for m in found for k, v in m.items.items()]
    listing = Listing(["aggregate", "key", "value"], rows, "aggregate metadata")
    out.emit(listing, lambda: [m.as_dict() for m in found] if many else found[0].as_dict())


@click.group("aggregate-metadata")
def aggregate_metadata_group() -> None:
    """Metadata of host aggregates for the flavor filter."""


@aggregate_metadata_group.command("set")
@click.argument("aggregate_uuid")
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
@output_options
@handles_errors
def set_cmd(aggregate_uuid: str, pairs: tuple[str, ...], out: Output) -> None:
    """Add or update keys (other keys stay)."""
    result = agg_md.set_metadata(get_db(), aggregate_uuid, parse_assignments(pairs))
    _emit([result], out)


@aggregate_metadata_group.command("unset")
@click.argument("aggregate_uuid")
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@output_options
@handles_errors
def unset_cmd(aggregate_uuid: str, keys: tuple[str, ...], out: Output) -> None:
    """Remove keys (all or none: an unknown key fails the whole call)."""
    _emit([agg_md.unset_metadata(get_db(), aggregate_uuid, keys)], out)


@aggregate_metadata_group.command("show")
@click.argument("aggregate_uuid", required=False)
@output_options
@handles_errors
def show_cmd(aggregate_uuid: str | None, out: Output) -> None:
    """Show one aggregate's metadata, or every aggregate that has some."""
    db = get_db()
    if aggregate_uuid is None:
        _emit(agg_md.list_metadata(db), out, many=True)
    else:
        _emit([agg_md.get_metadata(db, aggregate_uuid)], out)


COMMANDS = [aggregate_metadata_group]
