"""WSGI entry points, for uWSGI, mod_wsgi, gunicorn or any WSGI server.

``rpquery.api.wsgi:application`` is the application Placement's
``placement.wsgi.api:application`` is: built on first access from the Placement
configuration (``$OS_PLACEMENT_CONFIG_DIR/placement.conf``, else oslo.config's default
places: ``/etc/placement/placement.conf`` ...; :mod:`rpquery.api.config`)::

    uwsgi --http-socket 127.0.0.1:8778 --module rpquery.api.wsgi:application

``rpquery.api.wsgi:create_app()`` is a factory (``gunicorn 'rpquery.api.wsgi:create_app()'``)
reading the same configuration; environment variables override it:
``RPQUERY_CONFIG_FILE`` (files, comma-separated, instead of the default places),
``RPQUERY_DB_URL`` (``[placement_database] connection``), ``RPQUERY_DB_REPLICA_URLS``
(comma-separated) and ``RPQUERY_DB_MAX_REPLICA_LAG``, ``RPQUERY_API_AUTH`` (``[api]
auth_strategy``: ``keystone``, ``noauth2`` or ``none``) and ``RPQUERY_API_POLICY`` (a
preset: ``legacy-rbac``, ``secure-rbac`` or ``open``). Both need
``rpquery[openstack]``. Request bodies are held to the defaults of
:class:`rpquery.api.limits.Limits` (:func:`rpquery.api.deploy.build_app`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["create_app", "settings_from_environment"]  # and ``application`` (built lazily)

_lock = threading.Lock()
_application: Any = None


def settings_from_environment(env: Mapping[str, str] | None = None) -> Any:
    """The :class:`rpquery.api.config.Settings` of the files and variables above."""
    from rpquery.api import config
    from rpquery.db import REPLICA_URLS_ENV, split_urls

    env = os.environ if env is None else env
    files = [f for f in env.get("RPQUERY_CONFIG_FILE", "").split(",") if f.strip()]
    replicas = split_urls(env.get(REPLICA_URLS_ENV))
    lag = env.get("RPQUERY_DB_MAX_REPLICA_LAG")
    overrides = {
        ("placement_database", "connection"): env.get("RPQUERY_DB_URL"),
        ("placement_database", "replica_connections"): list(replicas) or None,
        ("placement_database", "max_replica_lag"): float(lag) if lag else None,
        ("api", "auth_strategy"): env.get("RPQUERY_API_AUTH"),
    }
    return config.load(
        files, overrides=overrides, policy=env.get("RPQUERY_API_POLICY"), env=env
    )


def create_app() -> Any:
    """A new WSGI application from the configuration and the environment."""
    import logging

    from rpquery.api.deploy import build_app

    settings = settings_from_environment()
    log = logging.getLogger("rpquery.api")
    for warning in settings.warnings:
        log.warning("configuration: %s", warning)
    return build_app(settings)


def __getattr__(name: str) -> Any:
    """``application``, built once on first access (PEP 562), as Placement's module
    builds its own under a lock."""
    global _application
    if name != "application":
        raise AttributeError(name)
    with _lock:
        if _application is None:
            _application = create_app()
    return _application
