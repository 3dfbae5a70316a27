"""A factory for WSGI servers: ``gunicorn 'rpquery.api.wsgi:create_app()'`` (or uWSGI,
mod_wsgi, ...). The database URL comes from ``RPQUERY_DB_URL`` and the auth strategy
from ``RPQUERY_API_AUTH`` (``noauth2`` by default), the policy from
``RPQUERY_API_POLICY`` (``legacy-rbac``, ``secure-rbac`` or ``open``); read replicas from
``RPQUERY_DB_REPLICA_URLS`` (comma-separated) with ``RPQUERY_DB_MAX_REPLICA_LAG`` seconds
(5 by default). Request bodies are held to :class:`rpquery.api.limits.Limits`
defaults."""

from __future__ import annotations

import os
from typing import Any

from rpquery.api.app import make_app
from rpquery.api.limits import with_limits
from rpquery.db import DEFAULT_URL, REPLICA_URLS_ENV, Database, split_urls

__all__ = ["create_app"]


def create_app() -> Any:
    db = Database(
        os.environ.get("RPQUERY_DB_URL", DEFAULT_URL),
        replicas=split_urls(os.environ.get(REPLICA_URLS_ENV)),
        max_replica_lag=float(os.environ.get("RPQUERY_DB_MAX_REPLICA_LAG", "5")),
    )
    app = make_app(
        db,
        auth=os.environ.get("RPQUERY_API_AUTH", "noauth2"),
        policy=os.environ.get("RPQUERY_API_POLICY", "legacy-rbac"),
    )
    return with_limits(app)  # the request body's limits (rpquery.api.limits)
