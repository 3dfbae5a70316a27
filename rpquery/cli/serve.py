"""``rpquery serve``: Placement's REST API on a production WSGI server (gunicorn).

$ rpquery --db postgresql://placement@db/placement serve --bind 0.0.0.0:8778 --workers 4
"""

from __future__ import annotations

from typing import Any

import click

from rpquery.api.limits import Limits
from rpquery.cli._common import get_db, handles_errors
from rpquery.store import migrations

__all__ = ["COMMANDS", "serve"]


@click.command("serve")
@click.option(
    "--bind", default="127.0.0.1:8778", show_default=True, help="HOST:PORT to listen on."
)
@click.option(
    "--workers",
    default=2,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Worker processes (each with its own connection pool).",
)
@click.option(
    "--threads",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Threads per worker; above 1, gunicorn's threaded workers, which keep client "
    "connections alive (sync workers close each after one response).",
)
@click.option(
    "--auth",
    type=click.Choice(["noauth2", "none"]),
    default="noauth2",
    show_default=True,
    help="noauth2: Placement's X-Auth-Token user[:project]; "
    "none: every caller is admin (trusted proxy in front).",
)
@click.option(
    "--policy",
    type=click.Choice(["legacy-rbac", "secure-rbac", "open"]),
    default="legacy-rbac",
    show_default=True,
    help="Placement's policy rules: legacy defaults (role:admin still accepted), the new "
    "secure-RBAC defaults, or open to any authenticated caller.",
)
@click.option(
    "--access-log",
    default="-",
    show_default=True,
    help="Where JSON access log lines go ('-' = stdout, 'off' = nowhere).",
)
@click.option(
    "--graceful-timeout",
    default=30,
    show_default=True,
    help="Seconds in-flight requests get to finish on SIGTERM.",
)
@click.option(
    "--worker-class",
    type=click.Choice(["gevent", "gthread", "sync"]),
    default=None,
    help="gunicorn worker: gevent (default; slow clients hold greenlets, not workers), "
    "gthread (default with --threads > 1) or sync.",
)
@click.option(
    "--max-body-size",
    default=Limits.max_body_size,
    show_default=True,
    type=click.IntRange(1),
    help="Largest request body in bytes; larger: 413.",
)
@click.option(
    "--body-timeout",
    default=Limits.body_timeout,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a request body may take to arrive; slower: 408.",
)
@click.option(
    "--read-timeout",
    default=Limits.read_timeout,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds one read of a request line or header may wait (gevent workers).",
)
@click.option(
    "--limit-request-line",
    default=Limits.limit_request_line,
    show_default=True,
    type=click.IntRange(1),
    help="Longest request line in bytes (path and query string); longer: 414.",
)
@click.option(
    "--limit-request-fields",
    default=Limits.limit_request_fields,
    show_default=True,
    type=click.IntRange(1, 32768),
    help="Most header fields; more: 431.",
)
@click.option(
    "--limit-request-field-size",
    default=Limits.limit_request_field_size,
    show_default=True,
    type=click.IntRange(1),
    help="Longest header field in bytes; longer: 431.",
)
@handles_errors
def serve(
    bind: str,
    workers: int,
    threads: int,
    auth: str,
    policy: str,
    access_log: str,
    graceful_timeout: int,
    **limit_options: Any,
) -> None:
    """Serve Placement's REST API (microversions 1.0-1.39) on this database."""
    from rpquery.api.server import serve as run

    db = get_db()
    migrations.require_current(db)
    url = db.url.render_as_string(hide_password=False)
    db.engine.dispose()  # workers open their own connections after the fork
    threaded = f" x {threads} threads" if threads > 1 else ""
    click.echo(
        f"rpquery API on http://{bind} ({workers} workers{threaded}, auth {auth})", err=True
    )
    run(
        url,
        bind=bind,
        workers=workers,
        threads=threads,
        auth=auth,
        policy=policy,
        access_log=None if access_log == "off" else access_log,
        graceful_timeout=graceful_timeout,
        replicas=[r.engine.url.render_as_string(hide_password=False) for r in db.replicas],
        max_replica_lag=db.max_replica_lag,
        **_limits(limit_options),
    )


def _limits(options: dict[str, Any]) -> dict[str, Any]:
    """The ``--worker-class`` and limit options as :func:`rpquery.api.server.serve`
    takes them."""
    worker_class = options.pop("worker_class")
    return {"worker_class": worker_class, "limits": Limits(**options)}


COMMANDS = [serve]
