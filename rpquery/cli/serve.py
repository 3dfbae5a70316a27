"""``rpquery serve``: Placement's REST API on a production WSGI server (gunicorn).

$ rpquery --db postgresql://placement@db/placement serve --bind 0.0.0.0:8778 --workers 4
"""

from __future__ import annotations

import click

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
@handles_errors
def serve(
    bind: str,
    workers: int,
    threads: int,
    auth: str,
    policy: str,
    access_log: str,
    graceful_timeout: int,
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
    )


COMMANDS = [serve]
