"""The WSGI application a configuration describes (``rpquery serve``, ``rpquery.api.wsgi``).

From the inside out, as Placement's ``deploy.py`` stacks its middleware:

1. :func:`rpquery.api.make_app` on the configured database (with its read replicas),
   authorizing with oslo.policy on the configuration's ``[oslo_policy]``;
2. keystonemiddleware's auth_token when ``[api] auth_strategy = keystone``
   (:mod:`rpquery.api.keystone`);
3. oslo.middleware's CORS when ``[cors] allowed_origin`` is set;
4. request ids (:class:`rpquery.api.request_id.RequestIdMiddleware`), outermost, so that
   auth_token's 401 answers carry one too and its log lines the ids.

Needs the OpenStack libraries (``pip install 'rpquery[openstack]'``).
"""

from __future__ import annotations

import logging
from typing import Any

from rpquery.api import request_id
from rpquery.api.config import ConfigError, Settings, keys_in
from rpquery.api.limits import Limits, with_limits
from rpquery.db import DEFAULT_URL, Database

__all__ = ["build_app", "check", "setup_logging"]

LOG = logging.getLogger("rpquery.api")


def check(settings: Settings) -> None:
    """Refuse a configuration that cannot serve (named in the error)."""
    if settings.auth_strategy == "keystone" and not _has_keystone_section(settings):
        raise ConfigError(
            "[api] auth_strategy = keystone (Placement's default) needs a [keystone_authtoken] "
            "section (www_authenticate_uri, auth_url, auth_type, username, password ...) in "
            "the configuration file; for tests and development use auth_strategy = noauth2 "
            "(rpquery serve --auth noauth2)"
        )


def _has_keystone_section(settings: Settings) -> bool:
    return any(s == "keystone_authtoken" for f in settings.files for s, _ in keys_in(f))


def build_app(settings: Settings, db: Database | None = None, limits: Limits | None = None) -> Any:
    """The whole WSGI application for ``settings`` (``db``: an open database to use
    instead of ``[placement_database] connection``), request bodies held to ``limits``
    (the defaults of :class:`rpquery.api.limits.Limits` when ``None``) before any
    middleware reads them."""
    from oslo_middleware import cors

    from rpquery.api.app import make_app
    from rpquery.api.policy import OsloPolicy, named_policy

    check(settings)
    setup_logging(settings)
    if db is None:
        db = Database(
            settings.connection or DEFAULT_URL,
            replicas=settings.replicas,
            max_replica_lag=settings.max_replica_lag,
        )
    conf = settings.conf
    authorizer = named_policy(settings.policy, conf) if settings.policy else OsloPolicy(conf)
    app: Any = make_app(
        db,
        auth=settings.auth_strategy,
        authorizer=authorizer if settings.auth_strategy != "none" else None,
        candidate_options=settings.candidate_options,
    )
    if settings.auth_strategy == "keystone":
        from rpquery.api.keystone import protect

        app = protect(app, conf)
    if settings.cors_origins:
        app = cors.CORS(app, conf)
    return request_id.RequestIdMiddleware(with_limits(app, limits))


def setup_logging(settings: Settings) -> None:
    """``[DEFAULT] debug`` and ``log_file`` on rpquery's log, and the request ids on
    every handler's lines; each warning of the configuration logged once."""
    root = logging.getLogger("rpquery")
    if settings.debug:
        root.setLevel(logging.DEBUG)
    if settings.log_file and not any(
        getattr(h, "baseFilename", None) == settings.log_file for h in root.handlers
    ):
        root.addHandler(logging.FileHandler(settings.log_file))
        if root.level == logging.NOTSET or root.level > logging.INFO:
            root.setLevel(logging.DEBUG if settings.debug else logging.INFO)
    for handler in root.handlers:
        request_id.install_log_filter(handler)
