"""``rpquery reshape FILE.json``: apply a Placement 1.38 ``POST /reshaper`` body.

    $ rpquery reshape numa-split.json --json
    {"consumers": [...], "providers": {"<rp uuid>": 2, ...}}

``FILE`` may be ``-`` for stdin. Everything is applied in one transaction or nothing is
(see ``docs/reshaper.md``); exit code 2 for a malformed body, 1 for a refused reshape.
"""

from __future__ import annotations

import json
from typing import IO

import click
import sqlalchemy as sa

from rpquery.cli._common import get_db, handles_errors
from rpquery.cli._format import Listing, Output, output_options
from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.store.tables import resource_providers
from rpquery.write import reshaper

__all__ = ["COMMANDS", "reshape"]


def _generations(db: Database, rp_uuids: list[str]) -> dict[str, int]:
    rp = resource_providers
    stmt = sa.select(rp.c.uuid, rp.c.generation).where(rp.c.uuid.in_(rp_uuids))
    with db.connect() as conn:
        return {uuid: int(gen or 0) for uuid, gen in conn.execute(stmt)}


@click.command("reshape")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@output_options
@handles_errors
def reshape(file: IO[str], out: Output) -> None:
    """Move inventories and allocations between providers atomically (POST /reshaper)."""
    try:
        body = json.load(file)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            "rpquery.reshape.bad_json", f"{file.name}: not JSON: {exc}", token=file.name
        ) from exc
    except UnicodeDecodeError as exc:
        raise InvalidRequest(
            "rpquery.reshape.not_utf8",
            f"{file.name}: not UTF-8 text (JSON must be): byte {exc.start}: {exc.reason}",
            token=file.name,
        ) from exc
    request = reshaper.parse_reshape_body(body)
    db = get_db()
    reshaper.reshape(db, request.inventories, request.allocations)
    generations = _generations(db, sorted(request.inventories))
    consumers = sorted(req.consumer_uuid for req in request.allocations)
    listing = Listing(
        ["provider", "generation"],
        sorted(generations.items()),
        f"reshaped {len(generations)} providers, {len(consumers)} consumers",
    )
    out.emit(listing, lambda: {"providers": generations, "consumers": consumers})


COMMANDS: list[click.Command] = [reshape]
