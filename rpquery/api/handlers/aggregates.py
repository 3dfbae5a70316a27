"""``/resource_providers/{uuid}/aggregates`` (from 1.1): the provider's aggregates,
with its generation and a generation check on writes from 1.19. As in Placement, a write
before 1.19 neither checks nor raises the provider generation."""

from __future__ import annotations

import falcon

from rpquery.api import errors, schemas
from rpquery.api.errors import ApiError
from rpquery.api.handlers.resource_providers import load
from rpquery.api.routing import route
from rpquery.api.util import ctx, json_body, send_json, want
from rpquery.errors import ConcurrentUpdate
from rpquery.read import objects
from rpquery.write import associations

__all__ = ["ROUTES"]

POLICY = "placement:resource_providers:aggregates:%s"
_WITH_GENERATION = (1, 19)


def _send(req: falcon.Request, resp: falcon.Response, aggs: list[str], generation: int) -> None:
    body: dict[str, object] = {"aggregates": aggs}
    if want(req, _WITH_GENERATION):
        body["resource_provider_generation"] = generation
    send_json(req, resp, body)


def get_aggregates(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    rp = load(req, uuid)
    aggs = objects.get_provider_aggregates(ctx(req).db, uuid)
    _send(req, resp, sorted(aggs), rp.generation)


def set_aggregates(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    with_generation = want(req, _WITH_GENERATION)
    rp = load(req, uuid)
    schema = schemas.PUT_AGGREGATES_1_19 if with_generation else schemas.PUT_AGGREGATES
    data = json_body(req, schema)
    if with_generation:
        if data["resource_provider_generation"] != rp.generation:
            raise ApiError(
                409,
                "Resource provider's generation already changed. Please update the "
                "generation and try again.",
                code=errors.CONCURRENT_UPDATE,
            )
        aggs = data["aggregates"]
    else:
        aggs = data
    try:
        generation = associations.set_provider_aggregates(
            ctx(req).db, uuid, aggs, generation=rp.generation if with_generation else None
        )
    except ConcurrentUpdate as exc:
        raise ApiError(
            409, f"Update conflict: {exc.detail}", code=errors.CONCURRENT_UPDATE
        ) from exc
    _send(req, resp, aggs, generation)


_AGG = "/resource_providers/{uuid}/aggregates"
ROUTES = [
    route(_AGG, "GET", get_aggregates, POLICY % "list", since="1.1", accept=True),
    route(_AGG, "PUT", set_aggregates, POLICY % "update", since="1.1", body=True),
]
