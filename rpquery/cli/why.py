"""``rpquery why`` and ``rpquery headroom``: the answers Placement cannot give.

    $ rpquery why 'resources=VCPU:16,MEMORY_MB:65536&required=CUSTOM_FAST'
    $ rpquery why --resources VCPU:16 --examples 5 --json
    $ rpquery headroom 'resources=VCPU:4,MEMORY_MB:8192' --group-by aggregate

Same query syntax, friendly flags and host policies as ``rpquery candidates``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
import sqlalchemy as sa

from rpquery.cli._common import get_db, handles_errors
from rpquery.cli._format import Listing, Output, output_options
from rpquery.cli.queries import PolicyFlags, candidate_params, policy_options, request_options
from rpquery.db import Database
from rpquery.insight import (
    EXAMPLES,
    GROUP_BY,
    Headroom,
    Rejections,
    explain_no_candidates,
    headroom,
)
from rpquery.read.request import parse_candidates
from rpquery.store.tables import (
    placement_aggregates,
    resource_provider_aggregates,
    resource_provider_traits,
    resource_providers,
    traits,
)

__all__ = [
    "COMMANDS",
    "aggregate_members",
    "headroom_command",
    "headroom_listing",
    "rejections_listing",
    "sharing_roots",
    "why",
]

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"

#: What headroom's two per-host columns mean (printed under the table).
HEADROOM_COLUMNS = (
    "alone: instances of the request the host can take if no other host takes anything; "
    "in total: the host's part of the total, where a sharing provider's room (shared "
    "disk) is counted once for all the hosts that share it."
)


def sharing_roots(db: Database) -> int:
    """Root providers with ``MISC_SHARES_VIA_AGGREGATE``: ``why`` counts every root
    provider (an allocation request is rooted at one), and says how many of them are
    sharing providers rather than hosts."""
    rp, rpt, t = resource_providers, resource_provider_traits, traits
    stmt = (
        sa.select(sa.func.count())
        .select_from(rp)
        .join(rpt, rpt.c.resource_provider_id == rp.c.id)
        .join(t, t.c.id == rpt.c.trait_id)
        .where(rp.c.parent_provider_id.is_(None), t.c.name == SHARING_TRAIT)
    )
    with db.connect() as conn:
        return int(conn.execute(stmt).scalar_one())


def summary_line(answer: Rejections, sharing: int) -> str:
    """``answer.summary()``, naming what was counted when sharing providers are among
    the roots: ``0/302 root providers fit (300 hosts, 2 sharing providers): ...``."""
    if not sharing:
        return answer.summary()
    head = (
        f"{answer.fit}/{answer.hosts} root providers fit "
        f"({answer.hosts - sharing} hosts, {sharing} sharing providers)"
    )
    if not answer.reasons:
        return head
    return head + ": " + ", ".join(r.describe() for r in answer.reasons)


def rejections_listing(answer: Rejections, sharing: int = 0) -> Listing:
    """One row per reason (count, reason, group, what it asks for, example hosts), a
    ``fits`` row for the hosts that fit, then the one-line summary (table only)."""
    rows = []
    for r in answer.reasons:
        detail = r.detail
        if r.largest_free is not None:
            detail += f" (largest free {r.describe().rsplit('largest free ', 1)[1][:-1]})"
        hosts = ", ".join(h.name or h.uuid for h in r.examples)
        rows.append([r.count, r.code, r.group or "-", detail, hosts])
    if answer.fit:
        hosts = ", ".join(h.name or h.uuid for h in answer.fit_examples)
        rows.append([answer.fit, "fits", "-", "", hosts])
    columns = ["hosts", "reason", "group", "detail", "examples"]
    return Listing(columns, rows, "hosts per reason", [summary_line(answer, sharing)])


def show_rejections(answer: Rejections) -> None:
    """The reasons as a table, with the summary after it."""
    Output().emit(rejections_listing(answer))


@click.command("why")
@request_options
@click.option(
    "--examples", type=int, default=EXAMPLES, show_default=True, help="Hosts shown per reason."
)
@policy_options
@output_options
@handles_errors
def why(
    query: str | None,
    examples: int,
    policy: PolicyFlags,
    out: Output,
    **flags: Any,
) -> None:
    """Why hosts are excluded from a candidates request: hosts per reason, in the order
    the filters apply, each host under its first reason.

    QUERY is Placement's syntax, e.g. 'resources=VCPU:16&required=CUSTOM_FAST'.
    """
    request = parse_candidates(candidate_params(query, flags))
    db = get_db()
    policies = policy.build(db)
    answer = explain_no_candidates(db, request, policies=policies, examples=max(examples, 0))
    sharing = sharing_roots(db) if out.is_table else 0
    out.emit(rejections_listing(answer, sharing), answer.to_dict)


def aggregate_members(db: Database, agg_uuids: Sequence[str]) -> dict[str, str]:
    """Placement knows an aggregate by its uuid only (its name lives in nova): each
    aggregate's root providers by name, first and last, and how many
    (``cn000000 .. cn000049 (50)``)."""
    rp, rpa, agg = resource_providers, resource_provider_aggregates, placement_aggregates
    stmt = (
        sa.select(agg.c.uuid, sa.func.min(rp.c.name), sa.func.max(rp.c.name), sa.func.count())
        .join(rpa, rpa.c.aggregate_id == agg.c.id)
        .join(rp, rp.c.id == rpa.c.resource_provider_id)
        .where(agg.c.uuid.in_(list(agg_uuids)), rp.c.parent_provider_id.is_(None))
        .group_by(agg.c.uuid)
    )
    with db.connect() as conn:
        rows = conn.execute(stmt).all()
    return {
        str(u): f"{first} .. {last} ({n})" if n > 1 else str(first)
        for u, first, last, n in rows
    }


def headroom_listing(
    answer: Headroom, top: int, group_by: str | None = None, members: dict[str, str] | None = None
) -> Listing:
    """Per host (the ``top`` with most room; 0: all), or per group (``--group-by``; an
    aggregate with its ``members``); the total and what the columns mean after the
    table."""
    total = f"{answer.total} more instances fit on {len(answer.hosts)} hosts ({answer.method})"
    if group_by == "aggregate":
        found = members or {}
        rows: list[list[Any]] = [
            [g.label, found.get(g.label, ""), g.hosts, g.count] for g in answer.groups
        ]
        columns = ["aggregate", "members", "hosts", "instances"]
        notes = ["members: the aggregate's root providers by name, first .. last (how many)"]
        return Listing(columns, rows, "instances that fit, per aggregate", [*notes, total])
    if group_by == "trait":
        rows = [[g.label, g.hosts, g.count] for g in answer.groups]
        columns = ["trait", "hosts", "instances"]
        return Listing(columns, rows, "instances that fit, per trait", [total])
    shown = answer.hosts[:top] if top else answer.hosts
    rows = [[h.name or h.uuid, h.uuid, h.count, h.in_total] for h in shown]
    notes = [HEADROOM_COLUMNS]
    if len(answer.hosts) > len(shown):
        notes.append(f"... {len(answer.hosts) - len(shown)} more hosts with room (--top 0: all)")
    columns = ["host", "uuid", "alone", "in total"]
    return Listing(columns, rows, "instances that fit", [*notes, total])


def show_headroom(answer: Headroom, top: int) -> None:
    """The hosts with most room as a table, then the total."""
    Output().emit(headroom_listing(answer, top))


@click.command("headroom")
@request_options
@click.option(
    "--group-by",
    type=click.Choice(GROUP_BY),
    help="One row per host aggregate or trait (the sum of its hosts) instead of per host.",
)
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Hosts shown, most room first (0: all).",
)
@policy_options
@output_options
@handles_errors
def headroom_command(
    query: str | None,
    group_by: str | None,
    top: int,
    policy: PolicyFlags,
    out: Output,
    **flags: Any,
) -> None:
    """How many more instances of a request fit: per host (as if alone) and in total
    (a sharing provider's room counted once).

    QUERY is Placement's syntax, e.g. 'resources=VCPU:4,MEMORY_MB:8192'.
    """
    request = parse_candidates(candidate_params(query, flags))
    db = get_db()
    policies = policy.build(db)
    answer = headroom(db, request, policies=policies, group_by=group_by)
    members = None
    if group_by == "aggregate" and not out.document:
        members = aggregate_members(db, [g.label for g in answer.groups])
    out.emit(headroom_listing(answer, top, group_by, members), answer.to_dict)


COMMANDS: list[click.Command] = [why, headroom_command]
