"""A factory for WSGI servers: ``gunicorn 'rpquery.api.wsgi:create_app()'`` (or uWSGI,
mod_wsgi, ...). The database URL comes from ``RPQUERY_DB_URL`` and the auth strategy
from ``RPQUERY_API_AUTH`` (``noauth2`` by default), the policy from
``RPQUERY_API_POLICY`` (``legacy-rbac``, ``secure-rbac`` or ``open``)."""

from __future__ import annotations

import os

import falcon

from rpquery.api.app import make_app
from rpquery.db import DEFAULT_URL


def create_app() -> falcon.App:
    return make_app(
        os.environ.get("RPQUERY_DB_URL", DEFAULT_URL),
        auth=os.environ.get("RPQUERY_API_AUTH", "noauth2"),
        policy=os.environ.get("RPQUERY_API_POLICY", "legacy-rbac"),
    )
