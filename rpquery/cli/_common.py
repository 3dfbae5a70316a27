"""Shared plumbing for every ``rpquery`` command: the database handle, output as
tables or JSON, and one place that turns errors into exit codes.

Exit codes: 0 success (also when the reader of a pipe, ``| head``, stops reading);
2 bad request (:class:`InvalidRequest`: one line naming the
bad token and the code); 1 any other failure. ``--debug`` (on the main group) shows
tracebacks. With ``--json``, answers go to stdout and errors to stderr as
``{"errors": [{"code": ..., "detail": ...}]}``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

import click

from rpquery.errors import InvalidRequest, RpqueryError
from rpquery.models import CONSUMER_TYPE_RE

if TYPE_CHECKING:  # imported when a command first needs the database: --help stays light
    from rpquery.db import Database

F = TypeVar("F", bound=Callable[..., Any])

_log = logging.getLogger("rpquery.cli")

#: ``--log-level`` / ``RPQUERY_LOG_LEVEL``: the levels, lowest first, and ``off``.
LOG_LEVELS = ("debug", "info", "warning", "error", "off")
#: gunicorn's error log line, with the logger's name: what ``rpquery serve`` prints.
LOG_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s"
LOG_DATE_FORMAT = "%Y-%m-%d %H:%M:%S %z"


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record arrives (click's test runner
    swaps it per invocation), as :data:`logging.lastResort` does."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(LOG_FORMAT, LOG_DATE_FORMAT))

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(level: str) -> Callable[[], None]:
    """Print rpquery's log records at ``level`` and above on stderr (``off``: none);
    returns the undo (the command line's process may be a test's, which goes on)."""
    root = logging.getLogger("rpquery")
    before = root.level
    handler = _Stderr()
    if level == "off":
        root.setLevel(logging.CRITICAL + 1)
    else:
        root.setLevel(level.upper())
        root.addHandler(handler)

    def undo() -> None:
        root.removeHandler(handler)
        root.setLevel(before)

    return undo

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON instead of a table."
)
#: ``--consumer-type`` of the allocation writes: its help writes the model's rule
#: (:data:`rpquery.models.CONSUMER_TYPE_RE`)
consumer_type_option = click.option(
    "--consumer-type",
    required=True,
    help=f"INSTANCE, MIGRATION, ... ({CONSUMER_TYPE_RE.pattern}).",
)


def get_db(ctx: click.Context | None = None) -> Database:
    """The :class:`Database` for ``--db`` (one per command invocation)."""
    ctx = ctx or click.get_current_context()
    root = ctx.find_root()
    obj = root.obj
    if "db" not in obj:
        from rpquery.db import Database

        db = obj["db"] = Database(
            obj["db_url"],
            replicas=obj.get("replica_urls", ()),
            max_replica_lag=obj.get("max_replica_lag", 5.0),
        )
        root.call_on_close(db.dispose)  # connections closed when the command ends
        _log.debug(
            "database %s%s",
            db.url.render_as_string(hide_password=True),
            "".join(f", replica {r['url']}" for r in db.replica_status()),
        )
    return obj["db"]


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def emit_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A readable table (rich) on stdout (:func:`rpquery.cli._format.print_table`)."""
    from rpquery.cli._format import print_table

    print_table(title, columns, [list(row) for row in rows])


def handles_errors(fn: F) -> F:
    """Decorator for command callbacks: RpqueryError → exit 2 (bad request) or 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = bool(ctx.find_root().obj.get("debug"))
        as_json = bool(kwargs.get("as_json")) or bool(getattr(kwargs.get("out"), "json_errors", 0))
        try:
            result = fn(*args, **kwargs)
            sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
            return result
        except RpqueryError as exc:
            if debug:
                traceback.print_exc()
            _report(exc.code, _detail(exc), as_json)
            ctx.exit(2 if isinstance(exc, InvalidRequest) else 1)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:  # `rpquery ... | head`: the reader has what it wanted
            _silence_stdout()
            ctx.exit(0)
        except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
            if debug:
                traceback.print_exc()
            _report("rpquery.internal", f"{type(exc).__name__}: {exc}", as_json)
            ctx.exit(1)

    return wrapper  # type: ignore[return-value]


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (click's test runner)
        pass


def _detail(exc: RpqueryError) -> str:
    """The error's detail, naming the offending token when the detail does not already."""
    if exc.token and exc.token not in exc.detail:
        return f"{exc.detail} (token {exc.token!r})"
    return exc.detail


def _report(code: str, detail: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"errors": [{"code": code, "detail": detail}]}), file=sys.stderr)
    else:
        click.echo(f"error: {detail} [{code}]", err=True)


def query_pairs(query: str | None, *flags: tuple[str, str | None]) -> list[tuple[str, str]]:
    """Placement's query string (as typed on the command line) plus friendly flags, as
    the ``(key, value)`` pairs an API layer would receive.

    A leading path or ``?`` is ignored, so a URL copied from Placement's logs works.
    Values are percent-decoded once; ``+`` stays a plus. Flags whose value is ``None``
    are left out.

    >>> query_pairs("/allocation_candidates?resources=VCPU:1&required=!CUSTOM_GPU",
    ...             ("limit", "5"), ("member_of", None))
    [('resources', 'VCPU:1'), ('required', '!CUSTOM_GPU'), ('limit', '5')]
    """
    pairs: list[tuple[str, str]] = []
    text = (query or "").strip()
    if "?" in text:
        text = text.split("?", 1)[1]
    for part in text.split("&"):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise InvalidRequest(
                "rpquery.cli.bad_query",
                f"query term {part!r} is not KEY=VALUE",
                token=part,
            )
        pairs.append((unquote(key.strip()), unquote(value)))
    pairs.extend((key, value) for key, value in flags if value is not None)
    return pairs
