"""``rpquery serve``: Placement's REST API on a production WSGI server (gunicorn).

$ rpquery serve --config-file /etc/placement/placement.conf --bind 0.0.0.0:8778 --workers 4
$ rpquery --db sqlite:///dev.db serve --auth noauth2          # development, loopback only

The configuration is Placement's ``placement.conf`` (:mod:`rpquery.api.config`); the
command line's ``--db``, ``--replica``, ``--max-replica-lag``, ``--auth`` and ``--policy``
win over it. Needs ``rpquery[openstack]`` (oslo.config, oslo.policy, keystonemiddleware).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import click

from rpquery.api.limits import Limits
from rpquery.cli._common import get_db, handles_errors
from rpquery.errors import InvalidRequest
from rpquery.store import migrations

__all__ = ["COMMANDS", "serve"]


def _limit_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """One option a field of :class:`Limits` (``max_body_size``: ``--max-body-size``),
    its default, help and range from the field: a whole number from 1 (to the field's
    ``max``), or a number of seconds above 0."""
    for limit in reversed(dataclasses.fields(Limits)):
        kind: click.ParamType
        if isinstance(limit.default, int):
            kind = click.IntRange(1, limit.metadata.get("max"))
        else:
            kind = click.FloatRange(min=0, min_open=True)
        option = click.option(
            f"--{limit.name.replace('_', '-')}",
            default=limit.default,
            show_default=True,
            type=kind,
            help=limit.metadata["help"],
        )
        fn = option(fn)
    return fn


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
    "--config-file",
    "config_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Placement's configuration file (repeatable; default: "
    "$OS_PLACEMENT_CONFIG_DIR/placement.conf, else /etc/placement/placement.conf ...).",
)
@click.option(
    "--config-dir",
    "config_dirs",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="A directory of *.conf files read after the files (repeatable).",
)
@click.option(
    "--auth",
    type=click.Choice(["keystone", "noauth2", "none"]),
    default=None,
    help="Overrides [api] auth_strategy (default keystone: keystonemiddleware with "
    "[keystone_authtoken]); noauth2: Placement's X-Auth-Token user[:project] (tests); "
    "none: every caller is admin (trusted proxy in front).",
)
@click.option(
    "--policy",
    type=click.Choice(["legacy-rbac", "secure-rbac", "open"]),
    default=None,
    help="A preset over [oslo_policy]: legacy defaults (role:admin still accepted), the "
    "new secure-RBAC defaults only, or open to any authenticated caller. Default: the "
    "configuration's [oslo_policy] (enforce_new_defaults, policy_file).",
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
@_limit_options
@handles_errors
def serve(
    bind: str,
    workers: int,
    threads: int,
    config_files: tuple[str, ...],
    config_dirs: tuple[str, ...],
    auth: str | None,
    policy: str | None,
    access_log: str,
    graceful_timeout: int,
    **limit_options: Any,
) -> None:
    """Serve Placement's REST API (microversions 1.0-1.39) on this database."""
    from rpquery.api.server import serve as run

    settings = _settings(config_files, config_dirs, auth, policy)
    db = get_db()
    if settings.sync_on_startup:
        migrations.upgrade(db)
    migrations.require_current(db)
    url = db.url.render_as_string(hide_password=False)
    db.engine.dispose()  # workers open their own connections after the fork
    threaded = f" x {threads} threads" if threads > 1 else ""
    click.echo(
        f"rpquery API on http://{bind} ({workers} workers{threaded}, "
        f"auth {settings.auth_strategy})",
        err=True,
    )
    _warn(settings, bind)
    run(
        url,
        bind=bind,
        workers=workers,
        threads=threads,
        access_log=None if access_log == "off" else access_log,
        graceful_timeout=graceful_timeout,
        replicas=[r.engine.url.render_as_string(hide_password=False) for r in db.replicas],
        max_replica_lag=db.max_replica_lag,
        settings=settings,
        **_limits(limit_options),
    )


def _settings(
    files: tuple[str, ...], dirs: tuple[str, ...], auth: str | None, policy: str | None
) -> Any:
    """The configuration with the command line's overrides; ``--db`` (or
    ``RPQUERY_DB_URL``) wins over ``[placement_database] connection``, which, when set,
    becomes the database of the command."""
    try:
        from rpquery.api import config
        from rpquery.api.deploy import check
    except ImportError as error:
        raise InvalidRequest(
            "rpquery.serve.openstack_missing",
            f"rpquery serve needs the OpenStack libraries ({error}): "
            "pip install 'rpquery[openstack]'",
            token=str(error.name),
        ) from error
    root = click.get_current_context().find_root()
    explicit = root.get_parameter_source("db_url") in (
        click.core.ParameterSource.COMMANDLINE,
        click.core.ParameterSource.ENVIRONMENT,
    )
    obj = root.obj
    overrides = {
        ("api", "auth_strategy"): auth,
        ("placement_database", "connection"): obj["db_url"] if explicit else None,
        ("placement_database", "replica_connections"): list(obj.get("replica_urls", ())) or None,
        ("placement_database", "max_replica_lag"): obj.get("max_replica_lag")
        if root.get_parameter_source("max_replica_lag") == click.core.ParameterSource.COMMANDLINE
        else None,
    }
    try:
        settings = config.load(files, config_dirs=dirs, overrides=overrides, policy=policy)
        check(settings)
    except config.ConfigError as error:
        raise InvalidRequest("rpquery.serve.bad_config", str(error), token="config") from error
    if not explicit and settings.connection:
        obj["db_url"] = settings.connection
        obj["replica_urls"] = settings.replicas
        obj["max_replica_lag"] = settings.max_replica_lag
    return settings


def _warn(settings: Any, bind: str) -> None:
    """Each configuration warning, and a loud one for an open API beyond loopback."""
    log = logging.getLogger("rpquery.serve")
    for warning in settings.warnings:
        click.echo(f"rpquery serve: WARNING: configuration: {warning}", err=True)
        log.warning("configuration: %s", warning)
    host = bind.rsplit(":", 1)[0].strip("[]") if not bind.startswith("unix:") else "unix"
    loopback = host in ("localhost", "::1", "unix") or host.startswith("127.")
    if settings.auth_strategy in ("noauth2", "none") and not loopback:
        text = (
            f"auth_strategy {settings.auth_strategy} on {bind}: anyone who reaches this "
            "address is whoever they claim to be (noauth2) or an administrator (none); use "
            "[api] auth_strategy = keystone beyond loopback"
        )
        click.echo(f"rpquery serve: WARNING: {text}", err=True)
        log.warning("%s", text)


def _limits(options: dict[str, Any]) -> dict[str, Any]:
    """The ``--worker-class`` and limit options as :func:`rpquery.api.server.serve`
    takes them."""
    worker_class = options.pop("worker_class")
    return {"worker_class": worker_class, "limits": Limits(**options)}


COMMANDS = [serve]
