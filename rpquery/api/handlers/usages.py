"""Usages: ``GET /resource_providers/{uuid}/usages`` and ``GET /usages`` (1.9+; grouped
by consumer type from 1.38). The query schemas keep Placement's constraints (Apache-2.0,
OpenStack Placement ``placement/schemas/usage.py``)."""

from __future__ import annotations

import copy
from typing import Any

import falcon

from rpquery.api import schemas
from rpquery.api.errors import ApiError
from rpquery.api.routing import route
from rpquery.api.util import ctx, query_params, send_json, want
from rpquery.errors import InvalidRequest, NotFound
from rpquery.read import objects
from rpquery.usage import reads as usages

__all__ = ["ROUTES"]

_OWNER = {"type": "string", "minLength": 1, "maxLength": 255}
SCHEMA_1_9: dict[str, Any] = {
    "type": "object",
    "properties": {"project_id": _OWNER, "user_id": _OWNER},
    "required": ["project_id"],
    "additionalProperties": False,
}
SCHEMA_1_38 = copy.deepcopy(SCHEMA_1_9)
SCHEMA_1_38["properties"]["consumer_type"] = dict(schemas.CONSUMER_TYPE_FILTER)


def provider_usages(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    db = ctx(req).db
    try:
        generation = objects.get_provider(db, uuid).generation
        used = usages.provider_usages(db, uuid)
    except (NotFound, InvalidRequest):
        raise ApiError(
            404,
            f"No resource provider with uuid {uuid} found: No resource "
            f"provider with uuid {uuid} found",
        ) from None  # Placement sets no code here
    send_json(req, resp, usages.render_provider_usages(generation, used))


def total_usages(req: falcon.Request, resp: falcon.Response) -> None:
    grouped = want(req, (1, 38))
    params = query_params(req, SCHEMA_1_38 if grouped else SCHEMA_1_9)
    project_id, user_id = params["project_id"], params.get("user_id")
    ctx(req).authorize("placement:usages", {"project_id": project_id})
    db = ctx(req).db
    if grouped:
        report = usages.project_usages(
            db, project_id, user_id=user_id, consumer_type=params.get("consumer_type")
        )
        body = usages.render_project_usages(report)
    else:
        body = usages.render_total_usages(
            usages.project_usages_total(db, project_id, user_id=user_id)
        )
    send_json(req, resp, body)


ROUTES = [
    route(
        "/resource_providers/{uuid}/usages",
        "GET",
        provider_usages,
        "placement:resource_providers:usages",
        accept=True,
    ),
    route("/usages", "GET", total_usages, since="1.9", accept=True),
]
