"""rpquery's HTTP API: Placement's REST API (microversions 1.0–1.39) as a WSGI app.

>>> from rpquery.api import make_app
>>> app = make_app("sqlite://")   # any WSGI server can run it; `rpquery serve` uses gunicorn

See ``docs/api.md`` for the routes, what differs from Placement, and how to add a
handler.
"""

from rpquery.api.app import make_app

__all__ = ["make_app"]
