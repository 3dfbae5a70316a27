"""The same REST requests sent to OpenStack Placement 16.0 and to rpquery, each on its own
fresh database of one backend, answers side by side.

Placement runs in ``.venv-placement`` (:class:`tests.differential.placement.Placement`,
its own WSGI app, noauth2, the ``admin`` token); rpquery's app is called in-process. A
request is ``{"method", "path", "body"?, "version"?}`` (``version`` defaults to 1.39)::

    with BothApis(placement_db, rpquery_db) as apis:
        theirs, ours = apis.ask({"method": "GET", "path": "/resource_providers"})

:func:`comparable` strips what legitimately differs (request ids) so that answers can be
compared whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks import side_by_side
from rpquery.api.app import make_app
from rpquery.db import Database
from rpquery.store import migrations
from tests.api_client import WsgiClient
from tests.differential.placement import Placement

READY, WHY = side_by_side.available()
SKIP_REASON = f"no usable Placement: {WHY}; run `make placement-venv` to install it"

Answer = dict[str, Any]


def req(method: str, path: str, body: Any = None, version: str = "1.39") -> dict[str, Any]:
    """One request for :meth:`BothApis.ask`."""
    item: dict[str, Any] = {"method": method, "path": path, "version": version}
    if body is not None:
        item["body"] = body
    return item


class BothApis:
    """Placement on ``placement_db`` and rpquery on ``rpquery_db`` (both migrated by
    rpquery, so both start from the same standard classes and traits)."""

    def __init__(self, placement_db: Database, rpquery_db: Database) -> None:
        self.placement = Placement(placement_db.url.render_as_string(hide_password=False))
        self.rpquery = WsgiClient(make_app(rpquery_db, auth="noauth2"))

    def ours(self, item: dict[str, Any]) -> Answer:
        """rpquery's answer to one request, in the Placement driver's form."""
        headers = {
            "X-Auth-Token": "admin",
            "OpenStack-API-Version": "placement " + item.get("version", "1.39"),
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        body = json.dumps(item["body"]) if "body" in item else None
        got = WsgiClient.simulate_request(
            self.rpquery, item.get("method", "GET"), item["path"], body=body, headers=headers
        )
        try:
            parsed = json.loads(got.text) if got.text else None
        except ValueError:
            parsed = got.text[:2000]
        return {"status": got.status_code, "body": parsed}

    def ask_all(self, items: list[dict[str, Any]]) -> list[tuple[Answer, Answer]]:
        """``(Placement's answer, rpquery's answer)`` for each request, in order."""
        theirs = self.placement.ask(items)
        return [(t, self.ours(item)) for t, item in zip(theirs, items, strict=True)]

    def ask(self, item: dict[str, Any]) -> tuple[Answer, Answer]:
        return self.ask_all([item])[0]

    def close(self) -> None:
        self.placement.close()

    def __enter__(self) -> BothApis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def both_apis(database_url: Callable[[str], str], backend: str) -> Iterator[BothApis]:
    """:class:`BothApis` on two new migrated databases of ``backend`` (``database_url``
    is the conftest fixture: it skips, or fails under CI, when the backend is missing)."""
    dbs = [Database(database_url(backend)) for _ in range(2)]
    try:
        for db in dbs:
            migrations.upgrade(db)
        with BothApis(*dbs) as apis:
            yield apis
    finally:
        for db in dbs:
            db.dispose()


def comparable(answer: Answer) -> Answer:
    """``answer`` without the request ids of error bodies (random on each side), and a
    provider list sorted by uuid (neither side orders it: on PostgreSQL a list comes back
    in the table's physical order, which an update changes)."""
    body = answer["body"]
    if isinstance(body, dict) and isinstance(body.get("resource_providers"), list):
        listed = sorted(body["resource_providers"], key=lambda rp: str(rp.get("uuid")))
        body = {**body, "resource_providers": listed}
    if isinstance(body, dict) and isinstance(body.get("errors"), list):
        errors = [{k: v for k, v in e.items() if k != "request_id"} for e in body["errors"]]
        body = {**body, "errors": errors}
    return {"status": answer["status"], "body": body}
