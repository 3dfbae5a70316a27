"""A factory for WSGI servers: ``gunicorn 'rpquery.api.wsgi:create_app()'`` (or uWSGI,
mod_wsgi, ...). The database URL comes from ``RPQUERY_DB_URL`` and the auth strategy
from ``RPQUERY_API_AUTH`` (``noauth2`` by default), the policy from
``RPQUERY_API_POLICY`` (``legacy-rbac``, ``secure-rbac`` or ``open``); read replicas from
``RPQUERY_DB_REPLICA_URLS`` (comma-separated) with ``RPQUERY_DB_MAX_REPLICA_LAG`` seconds
(5 by default)."""

from __future__ import annotations

import os

import falcon

from rpquery.api.app import make_app
from rpquery.db import DEFAULT_URL, REPLICA_URLS_ENV, Database, split_urls

__all__ = ["create_app"]


def create_app() -> falcon.App:
    db = Database(
        os.environ.get("RPQUERY_DB_URL", DEFAULT_URL),
        replicas=split_urls(os.environ.get(REPLICA_URLS_ENV)),
        max_replica_lag=float(os.environ.get("RPQUERY_DB_MAX_REPLICA_LAG", "5")),
    )
    return make_app(
        db,
        auth=os.environ.get("RPQUERY_API_AUTH", "noauth2"),
        policy=os.environ.get("RPQUERY_API_POLICY", "legacy-rbac"),
    )
