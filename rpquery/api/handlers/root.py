"""``GET /``: the version document (no authentication), and ``GET /healthcheck``."""

from __future__ import annotations

import falcon
import sqlalchemy as sa

from rpquery.api.microversion import MAX_VERSION, MIN_VERSION
from rpquery.api.routing import route
from rpquery.api.util import ctx, send_json

__all__ = ["ROUTES"]


def home(req: falcon.Request, resp: falcon.Response) -> None:
    """The one version this service offers, with its microversion range."""
    document = {
        "versions": [
            {
                "id": f"v{MIN_VERSION}",
                "max_version": str(MAX_VERSION),
                "min_version": str(MIN_VERSION),
                "status": "CURRENT",
                "links": [{"rel": "self", "href": ""}],
            }
        ]
    }
    send_json(req, resp, document)


def healthcheck(req: falcon.Request, resp: falcon.Response) -> None:
    """200 ``OK`` when the database answers ``SELECT 1``; 503 otherwise."""
    try:
        with ctx(req).db.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except Exception as exc:  # any failure to reach the database
        resp.status = 503
        resp.content_type = "text/plain"
        resp.text = f"database unavailable: {type(exc).__name__}"
        return
    resp.content_type = "text/plain"
    resp.text = "OK"


ROUTES = [
    route("/", "GET", home),
    route("/healthcheck", "GET", healthcheck),
]
