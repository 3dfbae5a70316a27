"""``rpquery provider``, ``inventory``, ``trait`` and ``aggregate``: the provider writes
of osc-placement (``openstack resource provider ...``), with its verbs and options, on
the database directly (docs/cli.md, section Writes).

    $ rpquery provider create cn1 --uuid 4a8d51b6-5a8e-4bd2-9d5e-2f1b8f1b2a10
    $ rpquery provider set 4a8d51b6-... --name cn1-renamed
    $ rpquery inventory set 4a8d51b6-... --resource VCPU=8 --resource VCPU:allocation_ratio=16
    $ rpquery inventory set 4a8d51b6-... --resource MEMORY_MB=4096 --amend
    $ rpquery inventory delete 4a8d51b6-... --resource-class MEMORY_MB
    $ rpquery trait set 4a8d51b6-... --trait HW_CPU_X86_AVX2 --trait CUSTOM_FAST
    $ rpquery aggregate set 4a8d51b6-... --aggregate 0b0c2a35-...
    $ rpquery provider delete 4a8d51b6-...

Each write is one call of the library (``rpquery.write``, the functions ``rpquery``
exports), so it is one transaction with the library's checks and errors: bad input exit
2, nothing written; a provider changed since it was read (its generation moved) exit 1
``rpquery.provider.generation_conflict``, nothing written. Where osc-placement reads the
provider's generation first (inventory, traits, aggregates without ``--generation``),
so does rpquery, and the write is guarded by it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from rpquery.cli._common import get_db, handles_errors
from rpquery.cli._format import Listing, Output, output_options
from rpquery.errors import InvalidRequest
from rpquery.models import Inventory, ResourceProvider
from rpquery.read import objects
from rpquery.write import associations, inventory, providers

__all__ = [
    "COMMANDS",
    "INVENTORY_FIELDS",
    "aggregate_group",
    "inventory_group",
    "parse_resource",
    "provider_group",
    "trait_group",
]

#: osc-placement's inventory fields, in its column order, with their types.
INVENTORY_FIELDS: dict[str, type] = {
    "allocation_ratio": float,
    "min_unit": int,
    "max_unit": int,
    "reserved": int,
    "step_size": int,
    "total": int,
}


def _provider_fields(rp: ResourceProvider) -> dict[str, Any]:
    """osc-placement's columns for one provider."""
    return {
        "uuid": rp.uuid,
        "name": rp.name,
        "generation": rp.generation,
        "root_provider_uuid": rp.root_uuid,
        "parent_provider_uuid": rp.parent_uuid,
    }


def _generation(rp_uuid: str) -> int:
    """The provider's generation now (``rpquery.provider.not_found`` if none)."""
    return objects.get_provider(get_db(), rp_uuid).generation


# ---------------------------------------------------------------- provider


@click.group("provider")
def provider_group() -> None:
    """Resource providers: create, set (rename, move), delete, show."""


@provider_group.command("create")
@click.argument("name")
@click.option("--uuid", help="UUID of the new provider (default: a new one).")
@click.option("--parent-provider", help="UUID of the parent provider (default: a root).")
@output_options(listing=False)
@handles_errors
def provider_create(name: str, uuid: str | None, parent_provider: str | None, out: Output) -> None:
    """Create a provider NAME at generation 0."""
    rp = providers.create_provider(get_db(), name, uuid=uuid, parent_uuid=parent_provider)
    fields = _provider_fields(rp)
    out.show(fields, "resource provider", lambda: fields)


@provider_group.command("set")
@click.argument("uuid")
@click.option("--name", required=True, help="The provider's new name (or its name).")
@click.option(
    "--parent-provider", help="UUID of the new parent (the provider moves with its subtree)."
)
@output_options(listing=False)
@handles_errors
def provider_set(uuid: str, name: str, parent_provider: str | None, out: Output) -> None:
    """Rename a provider, and move it under --parent-provider (Placement's PUT: the
    generation is neither checked nor raised)."""
    db = get_db()
    if parent_provider is None:
        rp = providers.update_provider(db, uuid, name=name)
    else:
        rp = providers.update_provider(db, uuid, name=name, parent_uuid=parent_provider)
    fields = _provider_fields(rp)
    out.show(fields, "resource provider", lambda: fields)


@provider_group.command("show")
@click.argument("uuid")
@output_options(listing=False)
@handles_errors
def provider_show(uuid: str, out: Output) -> None:
    """One provider."""
    fields = _provider_fields(objects.get_provider(get_db(), uuid))
    out.show(fields, "resource provider", lambda: fields)


@provider_group.command("delete")
@click.argument("uuid")
@handles_errors
def provider_delete(uuid: str) -> None:
    """Delete a provider with its inventories, traits and aggregates (refused while it
    has children or allocations)."""
    providers.delete_provider(get_db(), uuid)


# ---------------------------------------------------------------- inventory


def parse_resource(text: str) -> tuple[str, str, int | float]:
    """osc-placement's ``--resource``: ``CLASS=VALUE`` (the total) or
    ``CLASS:FIELD=VALUE``.

    >>> parse_resource("VCPU=8"), parse_resource("VCPU:allocation_ratio=16")
    (('VCPU', 'total', 8), ('VCPU', 'allocation_ratio', 16.0))
    """
    name, sep, value = text.partition("=")
    rc, colon, field = name.partition(":")
    field = field if colon else "total"
    if not sep or not rc or not value or "=" in value or ":" in field:
        raise InvalidRequest(
            "rpquery.cli.bad_resource",
            f"--resource {text!r} is not CLASS=VALUE or CLASS:FIELD=VALUE",
            token=text,
        )
    if field not in INVENTORY_FIELDS:
        raise InvalidRequest(
            "rpquery.cli.bad_resource",
            f"unknown inventory field {field!r} in {text!r}; the fields are "
            f"{', '.join(INVENTORY_FIELDS)}",
            token=field,
        )
    try:
        return rc, field, INVENTORY_FIELDS[field](value)
    except ValueError:
        kind = "a number" if INVENTORY_FIELDS[field] is float else "a whole number"
        raise InvalidRequest(
            "rpquery.cli.bad_resource",
            f"{field} in {text!r} must be {kind}, got {value!r}",
            token=value,
        ) from None


def wanted_inventories(
    resources: Sequence[str], current: Mapping[str, Inventory]
) -> dict[str, Inventory]:
    """The inventories to write: ``current`` (``--amend``; else empty) with the
    ``--resource`` fields applied. A class with no total is an ``InvalidRequest``."""
    fields: dict[str, dict[str, Any]] = {
        rc: {f: getattr(inv, f) for f in INVENTORY_FIELDS} for rc, inv in current.items()
    }
    for text in resources:
        rc, field, value = parse_resource(text)
        fields.setdefault(rc, {})[field] = value
    out = {}
    for rc, values in fields.items():
        if "total" not in values:
            raise InvalidRequest(
                "rpquery.cli.missing_total",
                f"inventory of {rc} has no total: give --resource {rc}=N",
                token=rc,
            )
        out[rc] = Inventory(**values)
    return out


def _inventory_listing(found: Mapping[str, Inventory]) -> Listing:
    rows = [
        [rc, *(getattr(inv, f) for f in INVENTORY_FIELDS)] for rc, inv in sorted(found.items())
    ]
    return Listing(["resource_class", *INVENTORY_FIELDS], rows, "inventories")


def _emit_inventories(uuid: str, out: Output) -> None:
    found = objects.get_inventories(get_db(), uuid)
    out.emit(
        _inventory_listing(found),
        lambda: {rc: {f: getattr(inv, f) for f in INVENTORY_FIELDS} for rc, inv in found.items()},
    )


@click.group("inventory")
def inventory_group() -> None:
    """Inventories of a provider: set (replace or --amend), delete, list."""


@inventory_group.command("set")
@click.argument("uuid")
@click.option(
    "--resource",
    "resources",
    multiple=True,
    metavar="CLASS[:FIELD]=VALUE",
    help="An inventory field (repeatable); FIELD is total (the default), reserved, "
    "min_unit, max_unit, step_size or allocation_ratio.",
)
@click.option(
    "--amend", is_flag=True, help="Change the given fields only (default: replace every one)."
)
@output_options
@handles_errors
def inventory_set(uuid: str, resources: tuple[str, ...], amend: bool, out: Output) -> None:
    """Replace the provider's inventories with the --resource ones (a class not given
    is removed), or with --amend change only the fields given."""
    db = get_db()
    generation = _generation(uuid)
    current = objects.get_inventories(db, uuid) if amend else {}
    wanted = wanted_inventories(resources, current)
    inventory.set_inventories(db, uuid, wanted, generation=generation)
    _emit_inventories(uuid, out)


@inventory_group.command("delete")
@click.argument("uuid")
@click.option("--resource-class", help="Only this class (default: every inventory).")
@handles_errors
def inventory_delete(uuid: str, resource_class: str | None) -> None:
    """Delete one inventory of the provider, or all of them (refused while allocated)."""
    db = get_db()
    generation = _generation(uuid)
    if resource_class is None:
        inventory.set_inventories(db, uuid, {}, generation=generation)
    else:
        inventory.delete_inventory(db, uuid, resource_class, generation=generation)


@inventory_group.command("list")
@click.argument("uuid")
@output_options
@handles_errors
def inventory_list(uuid: str, out: Output) -> None:
    """The provider's inventories."""
    _emit_inventories(uuid, out)


# ---------------------------------------------------------------- traits, aggregates


@click.group("trait")
def trait_group() -> None:
    """Traits of a provider: set (replace), list."""


def _emit_names(column: str, names: frozenset[str], out: Output) -> None:
    out.emit(Listing([column], [[n] for n in sorted(names)], f"{column}s"), lambda: sorted(names))


@trait_group.command("set")
@click.argument("uuid")
@click.option("--trait", "names", multiple=True, help="A trait (repeatable; none: no trait).")
@output_options
@handles_errors
def trait_set(uuid: str, names: tuple[str, ...], out: Output) -> None:
    """Replace the provider's traits with the --trait ones."""
    db = get_db()
    associations.set_provider_traits(db, uuid, names, generation=_generation(uuid))
    _emit_names("name", objects.get_provider_traits(db, uuid), out)


@trait_group.command("list")
@click.argument("uuid")
@output_options
@handles_errors
def trait_list(uuid: str, out: Output) -> None:
    """The provider's traits."""
    _emit_names("name", objects.get_provider_traits(get_db(), uuid), out)


@click.group("aggregate")
def aggregate_group() -> None:
    """Aggregates of a provider: set (replace), list."""


@aggregate_group.command("set")
@click.argument("uuid")
@click.option(
    "--aggregate", "aggregates", multiple=True, help="An aggregate uuid (repeatable; none: none)."
)
@click.option(
    "--generation", type=int, help="The provider generation last seen (default: the current)."
)
@output_options
@handles_errors
def aggregate_set(
    uuid: str, aggregates: tuple[str, ...], generation: int | None, out: Output
) -> None:
    """Replace the provider's aggregates with the --aggregate ones."""
    db = get_db()
    generation = _generation(uuid) if generation is None else generation
    associations.set_provider_aggregates(db, uuid, aggregates, generation=generation)
    _emit_names("uuid", objects.get_provider_aggregates(db, uuid), out)


@aggregate_group.command("list")
@click.argument("uuid")
@output_options
@handles_errors
def aggregate_list(uuid: str, out: Output) -> None:
    """The provider's aggregates."""
    _emit_names("uuid", objects.get_provider_aggregates(get_db(), uuid), out)


COMMANDS: list[click.Command] = [provider_group, inventory_group, trait_group, aggregate_group]
