"""``rpquery providers``, ``rpquery candidates`` and ``rpquery explain``: the read path
from the command line.

Both take Placement's query syntax as one argument, friendly flags, or both (flags are
appended to the query, so ``--required`` adds one more ``required=`` term):

    $ rpquery candidates 'resources=VCPU:2,MEMORY_MB:2048&required=!CUSTOM_GPU&limit=5'
    $ rpquery candidates --resources VCPU:2 --required '!CUSTOM_GPU' --limit 5 --json
    $ rpquery explain 'resources=VCPU:1&required=!CUSTOM_GPU&limit=10'

Policies join the candidate query as :class:`~rpquery.policies.base.HostPolicy`
objects: ``--extra-specs JSON`` [``--nova-compat``] (docs/aggregate-metadata.md) and
``--server-group UUID`` (docs/server-groups.md).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from rpquery.cli._common import emit_json, emit_table, get_db, handles_errors, json_option
from rpquery.cli._common import query_pairs as _pairs
from rpquery.cli._format import Cell, Listing, Output, output_options
from rpquery.errors import DatabaseError, InvalidRequest
from rpquery.read.candidates import AllocationCandidates, CandidateOptions, allocation_candidates
from rpquery.read.request import CandidatesRequest, parse_candidates, parse_providers

if TYPE_CHECKING:
    from rpquery.db import Database
    from rpquery.policies.base import HostPolicy
    from rpquery.read.providers import ResourceProvider

__all__ = [
    "COMMANDS",
    "PolicyFlags",
    "build_policies",
    "candidate_params",
    "candidates",
    "explain",
    "policy_options",
    "providers",
    "request_options",
]

# Imported where used, so that a candidates query loads only the read path (start-up
# time, issue 18): rpquery.read.providers (providers, explain --providers),
# rpquery.aggregate_metadata (--extra-specs), rpquery.server_groups (--server-group).

Params = dict[str, list[str]]


def multidict(pairs: Sequence[tuple[str, str]]) -> Params:
    """``[(key, value), ...]`` → ``{key: [values...]}``, the shape the parser takes.

    >>> multidict([("required", "A"), ("required", "!B"), ("limit", "5")])
    {'required': ['A', '!B'], 'limit': ['5']}
    """
    out: Params = {}
    for key, value in pairs:
        out.setdefault(key, []).append(value)
    return out


def _repeat(key: str, values: Sequence[str]) -> list[tuple[str, str | None]]:
    return [(key, v) for v in values]


def candidate_params(query: str | None, flags: dict[str, Any]) -> Params:
    """Query string plus the friendly flags of ``candidates``/``explain``."""
    limit = flags.get("limit")
    return multidict(
        _pairs(
            query,
            ("resources", flags.get("resources")),
            *_repeat("required", flags.get("required", ())),
            *_repeat("member_of", flags.get("member_of", ())),
            ("in_tree", flags.get("in_tree")),
            *_repeat("root_required", flags.get("root_required", ())),
            *_repeat("same_subtree", flags.get("same_subtree", ())),
            ("group_policy", flags.get("group_policy")),
            ("limit", None if limit is None else str(limit)),
        )
    )


def request_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The friendly flags shared by ``candidates`` and ``explain``."""
    options = [
        click.argument("query", required=False),
        click.option("--resources", help="CLASS:AMOUNT,... for the unsuffixed group."),
        click.option("--required", multiple=True, help="Traits: A,!B or in:A,B (repeatable)."),
        click.option("--member-of", multiple=True, help="Aggregates: uuid, in:a,b, !uuid."),
        click.option("--in-tree", help="Only the tree of this provider uuid."),
        click.option("--root-required", multiple=True, help="Root traits: A,!B (repeatable)."),
        click.option("--same-subtree", multiple=True, help="Suffixes: _A,_B (repeatable)."),
        click.option(
            "--group-policy",
            type=click.Choice(["none", "isolate"]),
            help="Needed with 2+ suffixed groups.",
        ),
        click.option("--limit", type=int, help="At most this many allocation requests."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


class PolicyFlags(NamedTuple):
    """``--extra-specs``, ``--nova-compat`` and ``--server-group`` as given: what a
    command of :func:`policy_options` receives as ``policy``."""

    extra_specs: str | None = None
    nova_compat: bool = False
    server_group: str | None = None

    def build(self, db: Database) -> list[HostPolicy]:
        """The host policies (:func:`build_policies`)."""
        return build_policies(db, self.extra_specs, self.nova_compat, self.server_group)


def policy_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--extra-specs``, ``--nova-compat`` and ``--server-group`` (host policies); the
    command receives them as one ``policy: PolicyFlags``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = PolicyFlags(
            kwargs.pop("extra_specs"), kwargs.pop("nova_compat"), kwargs.pop("server_group")
        )
        return fn(*args, policy=flags, **kwargs)

    options = [
        click.option("--extra-specs", help="Flavor extra specs as a JSON object."),
        click.option("--nova-compat", is_flag=True, help="Evaluate --extra-specs as nova does."),
        click.option("--server-group", help="Filter and order hosts by this group's policy."),
    ]
    command: Callable[..., Any] = wrapper
    for option in reversed(options):
        command = option(command)
    return command


# ---------------------------------------------------------------- policies


def build_policies(
    db: Database, extra_specs: str | None, nova_compat: bool, server_group: str | None
) -> list[HostPolicy]:
    """The host policies the flags ask for (none by default): the aggregate-metadata
    filter for ``--extra-specs``, the group's policy for ``--server-group``."""
    if nova_compat and extra_specs is None:
        raise InvalidRequest(
            "rpquery.cli.bad_option", "--nova-compat needs --extra-specs", token="--nova-compat"
        )
    policies: list[HostPolicy] = []
    if extra_specs is not None:
        from rpquery.aggregate_metadata import metadata as aggregate_metadata

        flavor_filter = aggregate_metadata.policy_from_cli(extra_specs, nova_compat)
        if flavor_filter is not None:
            policies.append(flavor_filter)
    if server_group is not None:
        from rpquery.server_groups import groups as server_groups

        policies.append(server_groups.policy_for_group(db, server_group))
    return policies


# ---------------------------------------------------------------- candidates


def _provider_names(result: AllocationCandidates) -> dict[str, str]:
    return {u: s.name or u for u, s in result.provider_summaries.items()}


def _resources_text(resources: Any) -> str:
    return ", ".join(f"{rc}:{n}" for rc, n in sorted(resources.items()))


def candidates_listing(result: AllocationCandidates, title: str) -> Listing:
    """One row per allocation request: its number, the host, and one line per provider
    used with its resources and, for granular requests, the groups it serves (as data:
    ``{provider uuid: {class: amount}}``)."""
    names = _provider_names(result)
    granular = any(set(a.mappings) - {""} for a in result.allocation_requests)
    rows = []
    for n, req in enumerate(result.allocation_requests, start=1):
        groups: dict[str, list[str]] = {}
        for suffix, rps in req.mappings.items():
            for rp in rps:
                groups.setdefault(rp, []).append(suffix or "(unsuffixed)")
        lines = []
        for rp, res in sorted(req.allocations.items(), key=lambda kv: names.get(kv[0], "")):
            line = f"{names.get(rp, rp)}: {_resources_text(res)}"
            if granular and rp in groups:
                line += f"  [{', '.join(sorted(groups[rp]))}]"
            lines.append(line)
        data = {rp: dict(sorted(res.items())) for rp, res in sorted(req.allocations.items())}
        rows.append([n, names.get(req.root_uuid, req.root_uuid), Cell("\n".join(lines), data)])
    note = (
        f"{len(result.allocation_requests)} allocation requests; "
        f"{len(result.provider_summaries)} providers in the summaries"
    )
    return Listing(["#", "host", "allocations"], rows, title, [note])


def show_candidates(result: AllocationCandidates, title: str) -> None:
    """The candidates as a table, with the counts line after it."""
    Output().emit(candidates_listing(result, title))


@click.command("candidates")
@request_options
@click.option(
    "--random",
    "randomize",
    is_flag=True,
    help="A random sample (Placement's [placement] randomize_allocation_candidates).",
)
@click.option(
    "--strategy",
    type=click.Choice(["depth-first", "breadth-first"]),
    default="depth-first",
    show_default=True,
    help="Order roots give candidates up to --max-candidates "
    "([placement] allocation_candidates_generation_strategy).",
)
@click.option(
    "--max-candidates",
    type=click.IntRange(min=-1),
    default=-1,
    show_default=True,
    help="Generate at most this many candidates, -1: no bound "
    "([placement] max_allocation_candidates).",
)
@click.option(
    "--max-search-steps",
    type=int,
    help="Work budget of the search (default: RPQUERY_MAX_SEARCH_STEPS, else 1,000,000).",
)
@policy_options
@output_options
@handles_errors
def candidates(
    query: str | None,
    randomize: bool,
    strategy: Any,  # (click's Choice: "depth-first" or "breadth-first")
    max_candidates: int,
    max_search_steps: int | None,
    policy: PolicyFlags,
    out: Output,
    **flags: Any,
) -> None:
    """Allocation candidates (GET /allocation_candidates, microversion 1.39).

    QUERY is Placement's syntax, e.g.
    'resources=VCPU:2,MEMORY_MB:2048&required=!CUSTOM_GPU&limit=5'.
    """
    request: CandidatesRequest = parse_candidates(candidate_params(query, flags))
    options = CandidateOptions(
        randomize=randomize, max_candidates=max_candidates, strategy=strategy
    )
    db = get_db()
    policies = policy.build(db)
    result = allocation_candidates(
        db, request, policies=policies, max_search_steps=max_search_steps, options=options
    )
    out.emit(candidates_listing(result, "allocation candidates"), result.to_placement)


# ---------------------------------------------------------------- providers


@click.command("providers")
@click.argument("query", required=False)
@click.option("--uuid", help="Only the provider with this uuid.")
@click.option("--name", help="Only the provider with this name.")
@click.option("--resources", help="CLASS:AMOUNT,... the provider itself has room for.")
@click.option("--required", multiple=True, help="Traits: A,!B or in:A,B (repeatable).")
@click.option("--member-of", multiple=True, help="Aggregates: uuid, in:a,b, !uuid.")
@click.option("--in-tree", help="Only the tree of this provider uuid.")
@policy_options
@output_options
@handles_errors
def providers(
    query: str | None,
    uuid: str | None,
    name: str | None,
    resources: str | None,
    required: tuple[str, ...],
    member_of: tuple[str, ...],
    in_tree: str | None,
    policy: PolicyFlags,
    out: Output,
) -> None:
    """Resource providers (GET /resource_providers, microversion 1.39).

    QUERY is Placement's syntax, e.g. 'required=CUSTOM_GPU&resources=VCPU:4'.
    """
    params = multidict(
        _pairs(
            query,
            ("uuid", uuid),
            ("name", name),
            ("resources", resources),
            *_repeat("required", required),
            *_repeat("member_of", member_of),
            ("in_tree", in_tree),
        )
    )
    from rpquery.read import providers as provider_list

    request = parse_providers(params)
    db = get_db()
    policies = policy.build(db)
    found = provider_list.list_providers(db, request, policies=policies)
    out.emit(providers_listing(found), lambda: provider_list.to_placement(found))


def providers_listing(found: Sequence[ResourceProvider]) -> Listing:
    """One row per provider; parent and root by name when they are listed too (their
    uuid otherwise)."""
    names = {p.uuid: p.name or p.uuid for p in found}
    rows = [
        [
            p.name,
            p.uuid,
            p.generation,
            names.get(p.parent_uuid, p.parent_uuid) if p.parent_uuid else None,
            names.get(p.root_uuid, p.root_uuid) if p.root_uuid != p.uuid else None,
        ]
        for p in found
    ]
    columns = ["name", "uuid", "generation", "parent", "root"]
    return Listing(columns, rows, "resource providers", [f"{len(found)} providers"])


def show_providers(found: Sequence[ResourceProvider]) -> None:
    """The providers as a table, with the count after it."""
    Output().emit(providers_listing(found))


# ---------------------------------------------------------------- explain


@dataclasses.dataclass(frozen=True)
class ExplainedStatement:
    """One statement a request sent: its SQL as the driver received it, its
    parameters, and the backend's plan (``plan_error`` when the backend refused)."""

    sql: str
    params: Any
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    plan_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        plan = [dict(zip(self.columns, row, strict=True)) for row in self.rows]
        params = self.params if isinstance(self.params, dict) else list(self.params or ())
        return {"sql": self.sql, "params": params, "plan": plan, "plan_error": self.plan_error}


def explain_statement(db: Database, sql: str, params: Any, *, analyze: bool) -> ExplainedStatement:
    """The backend's plan for one captured statement."""
    from rpquery.store.dialects import explain_sql

    explain = explain_sql(db.dialect_name, sql, analyze=analyze)
    try:
        with db.connect() as conn:
            result = conn.exec_driver_sql(explain, params)
            columns = tuple(result.keys())
            rows = tuple(tuple(row) for row in result)
    except DatabaseError as exc:
        return ExplainedStatement(sql, params, plan_error=exc.detail)
    return ExplainedStatement(sql, params, columns, rows)


@click.command("explain")
@request_options
@click.option(
    "--providers",
    "as_providers",
    is_flag=True,
    help="Explain the provider list (GET /resource_providers) instead.",
)
@click.option("--analyze", is_flag=True, help="Run the statements (EXPLAIN ANALYZE).")
@click.option("--plan/--no-plan", default=True, help="Ask the database for its plans.")
@policy_options
@json_option
@handles_errors
def explain(
    query: str | None,
    as_providers: bool,
    analyze: bool,
    plan: bool,
    policy: PolicyFlags,
    as_json: bool,
    **flags: Any,
) -> None:
    """The SQL a request sends to this backend (every statement, with its values) and
    the database's plan for each.

    QUERY is Placement's syntax, as for ``candidates`` (or ``providers`` with
    --providers).
    """
    params = candidate_params(query, flags)
    db = get_db()
    run: Callable[[], Any]
    if as_providers:
        providers_request = parse_providers(params)
        policies = policy.build(db)
        from rpquery.read.providers import list_providers

        run = lambda: list_providers(db, providers_request, policies=policies)  # noqa: E731
    else:
        request = parse_candidates(params)
        policies = policy.build(db)
        run = lambda: allocation_candidates(db, request, policies=policies)  # noqa: E731
    _, sent = db.capture_selects(run)
    out = [
        explain_statement(db, sql, values, analyze=analyze)
        if plan
        else ExplainedStatement(sql, values)
        for sql, values in sent
    ]
    if as_json:
        emit_json({"backend": db.dialect_name, "statements": [e.as_dict() for e in out]})
        return
    for n, explained in enumerate(out, start=1):
        click.echo(f"-- statement {n} of {len(out)} ({db.dialect_name})")
        click.echo(explained.sql.strip() + ";")
        click.echo(f"-- parameters: {explained.params!r}")
        if explained.plan_error:
            click.echo(f"-- no plan: {explained.plan_error}")
        elif plan:
            _show_plan(list(explained.columns), list(explained.rows))
        click.echo()


def _show_plan(columns: list[str], rows: list[Any]) -> None:
    if len(columns) == 1:
        click.echo("-- plan:")
        for (value,) in rows:
            for line in str(value).splitlines():
                click.echo(f"--   {line}")
        return
    if {"id", "parent", "detail"} <= set(columns):  # SQLite's EXPLAIN QUERY PLAN tree
        click.echo("-- plan:")
        at = {name: columns.index(name) for name in ("id", "parent", "detail")}
        depth: dict[Any, int] = {}
        for row in rows:
            depth[row[at["id"]]] = depth.get(row[at["parent"]], 0) + 1
            click.echo(f"-- {'  ' * depth[row[at['id']]]}{row[at['detail']]}")
        return
    emit_table("plan", columns, rows)


COMMANDS: list[click.Command] = [providers, candidates, explain]
