"""``rpquery serve``: the API on gunicorn (pre-fork, multi-process), with a JSON access log.

Each worker builds its own app (and so its own connection pool) after the fork. On
SIGTERM or SIGINT gunicorn stops accepting, lets in-flight requests finish (up to
``graceful_timeout``) and exits; SIGHUP reloads workers one by one.

Access log lines are one JSON object each::

    {"time": "2026-11-26T06:30:00.123+00:00", "remote": "127.0.0.1", "method": "GET",
     "path": "/resource_providers", "query": "in_tree=...", "status": 200, "bytes": 731,
     "duration_ms": 2.41, "request_id": "req-...", "version": "placement 1.39", "pid": 4242}

Run with gunicorn directly (same app, any gunicorn option)::

    RPQUERY_DB_URL=postgresql://... gunicorn -w 4 -b 127.0.0.1:8778 \\
        --logger-class rpquery.api.server.JsonAccessLogger 'rpquery.api.wsgi:create_app()'
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Sequence
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger
from gunicorn.http import message as http_message

from rpquery.api.limits import Limits, with_limits

__all__ = ["ApiServer", "JsonAccessLogger", "serve"]


class JsonAccessLogger(Logger):
    """gunicorn's logger with one JSON object per access log line."""

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        if not (self.cfg.accesslog or self.cfg.logconfig or self.cfg.syslog):
            return
        status = resp.status.split(None, 1)[0] if isinstance(resp.status, str) else resp.status
        headers = {name.lower(): value for name, value in (resp.headers or [])}
        entry = {
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            "remote": environ.get("REMOTE_ADDR", "-"),
            "method": environ.get("REQUEST_METHOD"),
            "path": environ.get("PATH_INFO"),
            "query": environ.get("QUERY_STRING", ""),
            "status": int(status),
            "bytes": getattr(resp, "sent", None),
            "duration_ms": round(request_time.total_seconds() * 1000, 3),
            "request_id": headers.get("x-openstack-request-id"),
            "global_request_id": environ.get("openstack.global_request_id"),
            "version": headers.get("openstack-api-version"),
            "pid": os.getpid(),
        }
        try:
            self.access_log.info(json.dumps(entry))
        except Exception:  # a log line must never fail a request
            self.exception("failed to write the access log")


class ApiServer(BaseApplication):
    """gunicorn running :func:`rpquery.api.make_app` for ``db_url``."""

    def __init__(
        self,
        db_url: str,
        options: dict[str, Any],
        *,
        auth: str = "noauth2",
        policy: str = "legacy-rbac",
        replicas: Sequence[str] = (),
        max_replica_lag: float = 5.0,
        settings: Any = None,
        limits: Limits | None = None,
    ) -> None:
        self.settings = settings  # rpquery.api.config.Settings: the whole app from it
        self.limits = limits or Limits()
        self.db_url = db_url
        self.replicas = list(replicas)
        self.max_replica_lag = max_replica_lag
        self.auth = auth
        self.policy = policy
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            if value is not None:
                self.cfg.set(key, value)
        allow_long_request_lines(self.limits.limit_request_line)

    def load(self) -> Any:
        from rpquery.api import make_app
        from rpquery.db import Database

        if self.settings is not None:
            from rpquery.api.deploy import build_app

            return build_app(self.settings, limits=self.limits)
        db = Database(self.db_url, replicas=self.replicas, max_replica_lag=self.max_replica_lag)
        return with_limits(make_app(db, auth=self.auth, policy=self.policy), self.limits)


def allow_long_request_lines(limit: int) -> None:
    """Let gunicorn take request lines up to ``limit`` bytes: it caps
    ``limit_request_line`` at 8190 (``http.message.MAX_REQUEST_LINE``), too short for a
    legal candidates request with 1,000 granular groups (~25 KB) or 10,000 ``in:``
    values (~270 KB of trait names, ~370 KB of aggregate uuids)."""
    http_message.MAX_REQUEST_LINE = max(http_message.MAX_REQUEST_LINE, limit)


def serve(
    db_url: str,
    *,
    bind: str = "127.0.0.1:8778",
    workers: int = 2,
    threads: int = 1,
    auth: str = "noauth2",
    policy: str = "legacy-rbac",
    access_log: str | None = "-",
    graceful_timeout: int = 30,
    timeout: int = 60,
    replicas: Sequence[str] = (),
    max_replica_lag: float = 5.0,
    settings: Any = None,
    worker_class: str | None = None,
    limits: Limits | None = None,
) -> None:
    """Run the API until SIGTERM/SIGINT (blocks); with ``settings`` (a
    :class:`rpquery.api.config.Settings`) the app is the one they describe
    (:func:`rpquery.api.deploy.build_app`). Reads go to ``replicas`` when they are
    up and within ``max_replica_lag`` seconds, writes to ``db_url``. ``threads`` > 1
    runs gunicorn's threaded workers (``gthread``: connections kept alive between
    requests); 1 (and no ``worker_class``) its gevent workers, which hold slow clients
    in greenlets (:mod:`rpquery.api.workers`). ``limits``: :class:`Limits`."""
    from rpquery.api.workers import WORKER_CLASSES

    limits = limits or Limits()
    chosen = worker_class or ("gthread" if threads > 1 else "gevent")
    options = {
        "bind": bind,
        "workers": workers,
        "worker_class": WORKER_CLASSES[chosen],
        "threads": threads,
        "limit_request_line": limits.limit_request_line,
        "limit_request_fields": limits.limit_request_fields,
        "limit_request_field_size": limits.limit_request_field_size,
        "accesslog": access_log,
        "logger_class": JsonAccessLogger,
        "graceful_timeout": graceful_timeout,
        "timeout": timeout,
        "proc_name": "rpquery-api",
        "control_socket_disable": True,  # several servers may share a host
    }
    ApiServer(
        db_url,
        options,
        auth=auth,
        policy=policy,
        replicas=replicas,
        max_replica_lag=max_replica_lag,
        settings=settings,
        limits=limits,
    ).run()
