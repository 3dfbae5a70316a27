"""``rpquery why`` and ``rpquery headroom``: the answers Placement cannot give.

    $ rpquery why 'resources=VCPU:16,MEMORY_MB:65536&required=CUSTOM_FAST'
    $ rpquery why --resources VCPU:16 --examples 5 --json
    $ rpquery headroom 'resources=VCPU:4,MEMORY_MB:8192' --group-by aggregate

Same query syntax, friendly flags and host policies as ``rpquery candidates``.
"""

from __future__ import annotations

from typing import Any

import click

from rpquery.cli._common import emit_json, emit_table, get_db, handles_errors, json_option
from rpquery.cli.queries import build_policies, candidate_params, policy_options, request_options
from rpquery.insight import (
    EXAMPLES,
    GROUP_BY,
    Headroom,
    Rejections,
    explain_no_candidates,
    headroom,
)
from rpquery.read.request import parse_candidates

__all__ = ["COMMANDS", "headroom_command", "why"]


def show_rejections(answer: Rejections) -> None:
    """One row per reason (count, reason, group, what it asks for, example hosts), then
    the one-line summary."""
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
    emit_table("hosts per reason", ["hosts", "reason", "group", "detail", "examples"], rows)
    click.echo(answer.summary())


@click.command("why")
@request_options
@click.option(
    "--examples", type=int, default=EXAMPLES, show_default=True, help="Hosts shown per reason."
)
@policy_options
@json_option
@handles_errors
def why(
    query: str | None,
    examples: int,
    extra_specs: str | None,
    nova_compat: bool,
    server_group: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Why hosts are excluded from a candidates request: hosts per reason, in the order
    the filters apply, each host under its first reason.

    QUERY is Placement's syntax, e.g. 'resources=VCPU:16&required=CUSTOM_FAST'.
    """
    request = parse_candidates(candidate_params(query, flags))
    db = get_db()
    policies = build_policies(db, extra_specs, nova_compat, server_group)
    answer = explain_no_candidates(db, request, policies=policies, examples=max(examples, 0))
    if as_json:
        emit_json(answer.to_dict())
    else:
        show_rejections(answer)


def show_headroom(answer: Headroom, top: int) -> None:
    """The ``top`` hosts with most room, the groups of ``--group-by``, then the total."""
    rows = [[h.name or h.uuid, h.count, h.in_total] for h in answer.hosts[:top]]
    emit_table("instances that fit", ["host", "alone", "in total"], rows)
    if len(answer.hosts) > top:
        click.echo(f"... {len(answer.hosts) - top} more hosts with room")
    if answer.groups:
        emit_table(
            "per group",
            ["group", "hosts", "instances"],
            [[g.label, g.hosts, g.count] for g in answer.groups],
        )
    click.echo(f"{answer.total} more instances fit on {len(answer.hosts)} hosts ({answer.method})")


@click.command("headroom")
@request_options
@click.option("--group-by", type=click.Choice(GROUP_BY), help="Sum per host aggregate or trait.")
@click.option("--top", type=int, default=20, show_default=True, help="Hosts shown.")
@policy_options
@json_option
@handles_errors
def headroom_command(
    query: str | None,
    group_by: str | None,
    top: int,
    extra_specs: str | None,
    nova_compat: bool,
    server_group: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """How many more instances of a request fit: per host (as if alone) and in total
    (a sharing provider's room counted once).

    QUERY is Placement's syntax, e.g. 'resources=VCPU:4,MEMORY_MB:8192'.
    """
    request = parse_candidates(candidate_params(query, flags))
    db = get_db()
    policies = build_policies(db, extra_specs, nova_compat, server_group)
    answer = headroom(db, request, policies=policies, group_by=group_by)
    if as_json:
        emit_json(answer.to_dict())
    else:
        show_headroom(answer, max(top, 0))


COMMANDS: list[click.Command] = [why, headroom_command]
