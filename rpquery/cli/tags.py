"""``rpquery tags ...`` and ``rpquery instances`` (instance tags, docs/tags.md).

The demo backend is the database-backed fake (``--backend fake``): successive
commands see one backend. Write commands run the fake's jobs and apply their
outcomes before returning, unless ``--lag`` (jobs wait until ``rpquery tags
process``); ``--fail`` makes the next job fail::

    $ rpquery tags add 6f1c0a52-9f54-4d39-9d1c-1f0f5d3b2a11 web db --json
    $ rpquery tags add 6f1c... cache --lag          # stays PENDADD
    $ rpquery tags list 6f1c... --namespace user
    $ rpquery tags process --json                   # PENDADD → ACTIVE
    $ rpquery tags conflicts --set high-availability,high-performance --namespace system
    $ rpquery tags reconcile --json
    $ rpquery instances --tags web,db --not-tags-any legacy --json
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import click

from rpquery import tags as t
from rpquery.cli._common import emit_json, get_db, handles_errors, json_option
from rpquery.cli._format import Listing, Output, output_options
from rpquery.db import Database
from rpquery.errors import Conflict, InvalidRequest
from rpquery.tags.fake_db import DbFakeBackend

__all__ = ["COMMANDS", "instances", "tags_group"]

BACKENDS = ("fake",)

namespace_option = click.option(
    "--namespace",
    default="user",
    show_default=True,
    help="Whose tags: user or system (or any configured namespace).",
)


def _backend_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            click.option(
                "--backend",
                type=click.Choice(BACKENDS),
                default="fake",
                show_default=True,
                help="Tag backend (the fake keeps its state in the database).",
            ),
            click.option("--lag", is_flag=True, help="Leave the backend jobs queued."),
            click.option("--fail", is_flag=True, help="Make the next backend job fail."),
        ]
    ):
        fn = option(fn)
    return fn


def _backend(db: Database, backend: str, lag: bool, fail: bool) -> DbFakeBackend:
    if backend != "fake":  # pragma: no cover - click.Choice guards it
        raise InvalidRequest("rpquery.tags.unknown_backend", f"unknown backend {backend}")
    fake = DbFakeBackend.load(db, lag=lag)
    if fail:
        fake.fail_next()
    return fake


def _settle(db: Database, fake: DbFakeBackend) -> t.OutcomeReport:
    """Apply whatever the fake finished, then persist it."""
    report = t.process_outcomes(db, fake)
    fake.save(db)
    return report


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return str(value) if isinstance(value, t.TagStatus) else value


def _tags_listing(namespace: str, found: Sequence[t.Tag]) -> Listing:
    rows = [(x.tag, str(x.status)) for x in found]
    return Listing(["tag", "status"], rows, f"{namespace} tags")


def _show_tags(instance: str, namespace: str, found: Sequence[t.Tag], out: Output) -> None:
    if out.is_table:
        click.echo(f"instance {instance}")
    out.emit(
        _tags_listing(namespace, found),
        lambda: {"instance": instance, "namespace": namespace, "tags": _jsonable(found)},
    )


def _write(
    instance: str,
    namespace: str,
    opts: tuple[str, bool, bool],
    out: Output,
    action: Callable[[Database, DbFakeBackend], list[t.TagWriteResult]],
) -> None:
    db = get_db()
    fake = _backend(db, *opts)
    try:
        results = action(db, fake)
    finally:
        fake.save(db)
    report = _settle(db, fake)
    final = t.list_tags(db, instance, namespace)
    failed = _failed(results, final)
    if not out.is_table:
        out.emit(
            _tags_listing(namespace, final),
            lambda: {
                "writes": [_jsonable(dataclasses.replace(r, tags=())) for r in results],
                "outcomes": _jsonable(report),
                "instance": instance,
                "namespace": namespace,
                "tags": _jsonable(final),
                "failed": failed,
            },
        )
        _raise_failed(failed)
        return
    for r in results:
        for label, items in (
            ("added", r.added),
            ("deleted", r.deleted),
            ("unchanged", r.unchanged),
            ("pending kept", r.pending_kept),
        ):
            items = tuple(i for i in items if i not in failed)
            if items:
                click.echo(f"{label}: {', '.join(items)}")
        for skip in r.skipped:
            click.echo(f"skipped {skip.tag!r}: conflicts with present tag {skip.kept!r}")
    _show_tags(instance, namespace, final, out)
    _raise_failed(failed)


def _failed(results: Sequence[t.TagWriteResult], final: Sequence[t.Tag]) -> list[str]:
    """Tags whose write the backend undid before the command returned: added but gone
    (the add job failed: dropped), deleted but back (the delete job failed: reinstated)."""
    present = {x.tag for x in final}
    failed: list[str] = []
    for r in results:
        failed.extend(tag for tag in r.added if tag not in present)
        failed.extend(tag for tag in r.deleted if tag in present)
    return failed


def _raise_failed(failed: Sequence[str]) -> None:
    if failed:
        raise Conflict(
            "rpquery.tags.job_failed",
            f"the backend job failed for {', '.join(map(repr, failed))}: the write was undone",
            token=failed[0],
        )


# ------------------------------------------------------------------ tags group


@click.group("tags")
def tags_group() -> None:
    """Instance tags per namespace (user, system), with backend job states."""


@tags_group.command("list")
@click.argument("instance")
@namespace_option
@output_options
@handles_errors
def tags_list(instance: str, namespace: str, out: Output) -> None:
    """Tags of INSTANCE in the namespace, with their status."""
    _show_tags(instance, namespace, t.list_tags(get_db(), instance, namespace), out)


@tags_group.command("check")
@click.argument("instance")
@click.argument("tag")
@namespace_option
@json_option
@handles_errors
def tags_check(instance: str, tag: str, namespace: str, as_json: bool) -> None:
    """Whether TAG is set on INSTANCE, and its status (exit 1 when it is not set)."""
    found = t.check_tag(get_db(), instance, tag, namespace)
    data = {"tag": tag, "exists": found is not None, "status": found and str(found.status)}
    if as_json:
        emit_json(data)
    else:
        click.echo(f"{tag}: {found.status}" if found else f"{tag}: not set")
    if found is None:  # like grep: scripts can test the exit status
        raise SystemExit(1)


def _multi(
    name: str, fn: Callable[..., t.TagWriteResult], doc: str, *, per_tag: bool, create: bool
) -> click.Command:
    def command(
        instance: str,
        namespace: str,
        backend: str,
        lag: bool,
        fail: bool,
        out: Output,
        tags: tuple[str, ...] = (),
    ) -> None:
        if per_tag and not tags:
            raise InvalidRequest("rpquery.cli.no_tags", f"{name} needs at least one TAG")

        def action(db: Database, fake: DbFakeBackend) -> list[t.TagWriteResult]:
            if per_tag:
                return [fn(db, fake, instance, tag, namespace) for tag in tags]
            if create:
                return [fn(db, fake, instance, tags, namespace)]
            return [fn(db, fake, instance, namespace)]

        _write(instance, namespace, (backend, lag, fail), out, action)

    command.__doc__ = doc
    decorated: Callable[..., Any] = output_options(handles_errors(command))
    decorated = namespace_option(_backend_options(decorated))
    if per_tag or create:  # delete-all takes no TAG (its usage line must not offer one)
        decorated = click.argument("tags", nargs=-1)(decorated)
    return tags_group.command(name)(click.argument("instance")(decorated))


_multi(
    "add",
    t.add_tag,
    "Add each TAG (PENDADD until the backend confirms).",
    per_tag=True,
    create=False,
)
_multi("delete", t.delete_tag, "Delete each ACTIVE TAG.", per_tag=True, create=False)
_multi("create", t.create_tags, "Set the tags of a new INSTANCE.", per_tag=False, create=True)
_multi("replace", t.replace_tags, "Replace the ACTIVE tags with TAGs.", per_tag=False, create=True)
_multi("delete-all", t.delete_all_tags, "Delete every ACTIVE tag.", per_tag=False, create=False)


@tags_group.command("process")
@_backend_options
@json_option
@handles_errors
def tags_process(backend: str, lag: bool, fail: bool, as_json: bool) -> None:
    """Run the backend's queued jobs and apply their outcomes."""
    db = get_db()
    fake = _backend(db, backend, False, fail)
    ran = fake.run_jobs()
    report = _settle(db, fake)
    if as_json:
        emit_json({"jobs_run": ran, "outcomes": _jsonable(report)})
    else:
        click.echo(f"jobs run: {ran}")
        _echo_changes(_jsonable(report))


@tags_group.command("reconcile")
@click.option("--instance", "instances", multiple=True, help="Only these instances.")
@_backend_options
@json_option
@handles_errors
def tags_reconcile(
    instances: tuple[str, ...], backend: str, lag: bool, fail: bool, as_json: bool
) -> None:
    """Make the database match the backend (the single source of truth)."""
    db = get_db()
    fake = _backend(db, backend, lag, fail)
    report = t.reconcile(db, fake, instances=instances or None)
    if as_json:
        emit_json({**_jsonable(report), "changed": report.changed})
    else:
        _echo_changes(_jsonable(report))
        if not report.changed:
            click.echo("nothing to reconcile: the database matches the backend")


def _echo_changes(report: dict[str, Any]) -> None:
    for kind, changes in report.items():
        for change in changes:
            if isinstance(change, dict):
                click.echo(
                    f"{kind}: {change['instance_uuid']} {change['namespace']} {change['tag']!r}"
                )
            else:
                click.echo(f"{kind}: {change!r}")


@tags_group.command("conflicts")
@click.option(
    "--set",
    "pairs",
    multiple=True,
    metavar="A,B",
    help="Declare the namespace's exclusive pairs (repeatable; replaces all).",
)
@click.option("--clear", is_flag=True, help="Remove every pair of the namespace.")
@namespace_option
@output_options
@handles_errors
def tags_conflicts(pairs: tuple[str, ...], clear: bool, namespace: str, out: Output) -> None:
    """Show or declare mutually exclusive tags of a namespace."""
    db = get_db()
    if pairs or clear:
        parsed = []
        for pair in pairs:
            a, sep, b = pair.partition(",")
            if not sep or "," in b:
                raise InvalidRequest(
                    "rpquery.tags.bad_conflict", f"{pair!r} is not A,B", token=pair
                )
            parsed.append((a, b))
        t.set_conflicts(db, namespace, parsed)
    rules = t.list_conflicts(db, namespace)
    listing = Listing(
        ["tag", "excludes"], [(r.tag_a, r.tag_b) for r in rules], f"exclusive {namespace} tags"
    )
    out.emit(
        listing,
        lambda: {"namespace": namespace, "conflicts": [[r.tag_a, r.tag_b] for r in rules]},
    )


# ------------------------------------------------------------------ instances


@click.command("instances")
@click.option("--tags", "tags_all", help="Has all of these (comma-separated).")
@click.option("--tags-any", help="Has at least one of these.")
@click.option("--not-tags", help="Does not have all of these.")
@click.option("--not-tags-any", help="Has none of these.")
@click.option("--include-pending", is_flag=True, help="Count PENDADD tags too.")
@namespace_option
@output_options
@handles_errors
def instances(
    tags_all: str | None,
    tags_any: str | None,
    not_tags: str | None,
    not_tags_any: str | None,
    include_pending: bool,
    namespace: str,
    out: Output,
) -> None:
    """Instances selected by their tags in one namespace (filters combine with AND)."""
    flt = t.parse_filter(
        tags_all,
        tags_any,
        not_tags,
        not_tags_any,
        namespace=namespace,
        include_pending=include_pending,
    )
    found = t.list_instances(get_db(), flt, namespace)
    listing = Listing(["instance"], [(u,) for u in found], f"instances ({namespace} tags)")
    out.emit(listing, lambda: {"namespace": namespace, "instances": list(found)})


COMMANDS = [tags_group, instances]
