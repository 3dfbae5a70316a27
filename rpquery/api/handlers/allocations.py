"""Allocations: ``GET/PUT/DELETE /allocations/{consumer_uuid}``, ``POST /allocations``
(1.13+) and ``GET /resource_providers/{uuid}/allocations``.

Request bodies change with the microversion (a list of ``{resource_provider, resources}``
before 1.12, then a dict by provider; ``project_id``/``user_id`` from 1.8,
``consumer_generation`` from 1.28, ``mappings`` from 1.34, ``consumer_type`` from 1.38);
the JSON schemas below keep Placement's constraints (Apache-2.0, OpenStack Placement
``placement/schemas/allocation.py``) so validation messages match. Each body becomes
:class:`rpquery.models.ConsumerAllocations` and one library write
(:func:`rpquery.write.allocations.replace_many`).
"""

from __future__ import annotations

import copy
import uuid as uuidlib
from collections.abc import Mapping
from typing import Any

import falcon

from rpquery.api import errors, schemas
from rpquery.api.errors import ApiError
from rpquery.api.routing import route
from rpquery.api.schemas import RC_PATTERN
from rpquery.api.util import ctx, empty, is_uuid_like, json_body, send_json, want
from rpquery.errors import CapacityExceeded, ConcurrentUpdate, InvalidRequest, NotFound
from rpquery.models import ConsumerAllocations
from rpquery.read import objects
from rpquery.usage import reads as usages
from rpquery.write import allocations as alloc_lib
from rpquery.write import consumers

__all__ = [
    "RC_PATTERN",
    "ROUTES",
    "UUID_PATTERN",
    "capacity_message",
    "compare_consumer_generations",
    "post_schema",
]

#: Placement's ``incomplete_consumer_project_id`` / ``_user_id`` defaults: the owner
#: of consumers written before 1.8, when bodies carried none.
INCOMPLETE_CONSUMER_ID = "00000000-0000-0000-0000-000000000000"

# ---------------------------------------------------------------- schemas (Placement's)

UUID_PATTERN = "^[0-9a-fA-F-]{36}$"
GROUP_PATTERN = "[a-zA-Z0-9_-]{1,64}"
_OWNER = {"type": "string", "minLength": 1, "maxLength": 255}
_RESOURCES = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {RC_PATTERN: {"type": "integer", "minimum": 1}},
    "additionalProperties": False,
}

SCHEMA_1_0: dict[str, Any] = {
    "type": "object",
    "properties": {
        "allocations": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "resource_provider": {
                        "type": "object",
                        "properties": {"uuid": {"type": "string", "format": "uuid"}},
                        "additionalProperties": False,
                        "required": ["uuid"],
                    },
                    "resources": _RESOURCES,
                },
                "required": ["resource_provider", "resources"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["allocations"],
    "additionalProperties": False,
}
SCHEMA_1_8 = copy.deepcopy(SCHEMA_1_0)
SCHEMA_1_8["properties"].update(project_id=_OWNER, user_id=_OWNER)
SCHEMA_1_8["required"] += ["project_id", "user_id"]
SCHEMA_1_12: dict[str, Any] = {
    "type": "object",
    "properties": {
        "allocations": {
            "type": "object",
            "minProperties": 1,
            "patternProperties": {
                UUID_PATTERN: {
                    "type": "object",
                    "properties": {"generation": {"type": "integer"}, "resources": _RESOURCES},
                    "required": ["resources"],
                    "additionalProperties": False,
                }
            },
            "additionalProperties": False,
        },
        "project_id": _OWNER,
        "user_id": _OWNER,
    },
    "additionalProperties": False,
    "required": ["allocations", "project_id", "user_id"],
}
DELETABLE = copy.deepcopy(SCHEMA_1_12)
DELETABLE["properties"]["allocations"]["minProperties"] = 0
SCHEMA_1_28 = copy.deepcopy(DELETABLE)
# Placement's carries a (meaningless) additionalProperties: kept, its error texts dump it
SCHEMA_1_28["properties"]["consumer_generation"] = {
    "type": ["integer", "null"],
    "additionalProperties": False,
}
SCHEMA_1_28["required"].append("consumer_generation")
SCHEMA_1_34 = copy.deepcopy(SCHEMA_1_28)
SCHEMA_1_34["properties"]["mappings"] = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        GROUP_PATTERN: {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "format": "uuid"},
        }
    },
}
SCHEMA_1_38 = copy.deepcopy(SCHEMA_1_34)
SCHEMA_1_38["properties"]["consumer_type"] = dict(schemas.CONSUMER_TYPE)
SCHEMA_1_38["required"].append("consumer_type")


def _post_schema(per_consumer: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "patternProperties": {UUID_PATTERN: per_consumer},
    }


def put_schema(req: falcon.Request) -> dict[str, Any]:
    for version, schema in (
        ((1, 38), SCHEMA_1_38),
        ((1, 34), SCHEMA_1_34),
        ((1, 28), SCHEMA_1_28),
        ((1, 12), SCHEMA_1_12),
        ((1, 8), SCHEMA_1_8),
    ):
        if want(req, version):
            return schema
    return SCHEMA_1_0


def post_schema(req: falcon.Request) -> dict[str, Any]:
    for version, schema in (
        ((1, 38), SCHEMA_1_38),
        ((1, 34), SCHEMA_1_34),
        ((1, 28), SCHEMA_1_28),
    ):
        if want(req, version):
            return _post_schema(schema)
    return _post_schema(DELETABLE)


# ---------------------------------------------------------------- request → library


def _consumer_request(
    req: falcon.Request, consumer_uuid: str, data: Mapping[str, Any]
) -> ConsumerAllocations:
    allocs = data["allocations"]
    if isinstance(allocs, list):  # before 1.12
        allocs = {a["resource_provider"]["uuid"]: {"resources": a["resources"]} for a in allocs}
    checked = want(req, (1, 28))
    return ConsumerAllocations(
        consumer_uuid=consumer_uuid,
        project_id=data.get("project_id", INCOMPLETE_CONSUMER_ID),
        user_id=data.get("user_id", INCOMPLETE_CONSUMER_ID),
        consumer_type=data.get("consumer_type"),
        consumer_generation=data.get("consumer_generation"),
        allocations={rp: dict(entry["resources"]) for rp, entry in allocs.items()},
        generation_checked=checked,
    )


def _conflict_message(
    db: Any, error: ConcurrentUpdate, requests: list[ConsumerAllocations]
) -> str:
    """Placement's wording: ``consumer generation conflict - expected X but got Y``
    (X the database's generation, Y the request's), from the error's data; read again
    only when the error has none (a consumer inserted concurrently)."""
    if error.consumer is not None:
        expected_now, got_now = error.actual_generation, error.expected_generation
        return (
            f"consumer generation conflict - expected {_js(expected_now)} but got {_js(got_now)}"
        )
    for request in requests:
        if error.token != request.consumer_uuid:
            continue
        try:
            expected: object = objects.get_consumer(db, request.consumer_uuid).generation
        except NotFound:
            expected = None
        got = request.consumer_generation
        return f"consumer generation conflict - expected {_js(expected)} but got {_js(got)}"
    return f"consumer generation conflict - {error.detail}"


def _js(value: object) -> str:
    return "null" if value is None else str(value)


def compare_consumer_generations(db: Any, requests: list[ConsumerAllocations]) -> None:
    """Placement compares consumer generations first (before providers, classes and
    capacity), with its own wording; the library checks them again in its transaction."""
    checked = [r for r in requests if r.generation_checked]
    if not checked:
        return
    current = objects.consumer_generations(db, [r.consumer_uuid for r in checked])
    for request in checked:
        expected = current.get(request.consumer_uuid)
        if expected != request.consumer_generation:
            raise ApiError(
                409,
                f"consumer generation conflict - expected {_js(expected)} "
                f"but got {_js(request.consumer_generation)}",
                code=errors.CONCURRENT_UPDATE,
            )


def capacity_message(error: CapacityExceeded) -> str:
    """Placement's wording of an allocation its provider's inventory cannot take."""
    rp, rc = error.provider or "?", error.resource_class or error.token
    if error.code == "rpquery.allocation.no_inventory":
        return f"Inventory for '{rc}' on resource provider '{rp}' invalid."
    what = (
        "exceed the capacity"
        if error.code.endswith("capacity_exceeded")
        else ("violate inventory constraints")
    )
    return (
        f"Unable to create allocation for '{rc}' on resource provider '{rp}'. "
        f"The requested amount would {what}."
    )


def _write(req: falcon.Request, requests: list[ConsumerAllocations], *, post: bool) -> None:
    db = ctx(req).db
    compare_consumer_generations(db, requests)
    try:
        alloc_lib.replace_many(db, requests)
    except ConcurrentUpdate as error:
        if error.code == consumers.GENERATION_CONFLICT:
            raise ApiError(
                409, _conflict_message(db, error, requests), code=errors.CONCURRENT_UPDATE
            ) from None
        raise ApiError(
            409,
            f"Inventory and/or allocations changed while attempting to allocate: {error.detail}",
            code=errors.CONCURRENT_UPDATE,
        ) from None
    except CapacityExceeded as error:
        raise ApiError(409, f"Unable to allocate inventory: {capacity_message(error)}") from None
    except InvalidRequest as error:
        if error.code == "rpquery.allocation.provider_not_found":
            raise ApiError(
                400, f"Allocation for resource provider '{error.token}' that does not exist."
            ) from None
        if error.code.startswith("rpquery.resource_class."):
            what = (
                "Unable to allocate inventory"
                if post
                else (f"Unable to allocate inventory for consumer {requests[0].consumer_uuid}")
            )
            raise ApiError(400, f"{what}: No such resource class {error.token}.") from None
        raise


# ---------------------------------------------------------------- handlers


def _consumer_uuid(value: str) -> str:
    if not is_uuid_like(value):
        raise ApiError(400, f"Malformed consumer_uuid: {value}")
    return str(uuidlib.UUID(value))


def get_for_consumer(req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
    view = usages.consumer_allocations(ctx(req).db, consumer_uuid)
    body: dict[str, Any] = {
        "allocations": {
            # Placement's key order (clients may print it): resources, then generation
            rp: {"resources": dict(pa.resources), "generation": pa.generation}
            for rp, pa in view.allocations.items()
        }
    }
    if view.allocations and want(req, (1, 12)):
        body.update(project_id=view.project_id, user_id=view.user_id)
        if want(req, (1, 28)):
            body["consumer_generation"] = view.generation
        if want(req, (1, 38)):
            body["consumer_type"] = view.consumer_type
    send_json(req, resp, body)


def put_for_consumer(req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
    consumer_uuid = _consumer_uuid(consumer_uuid)
    data = json_body(req, put_schema(req))
    _write(req, [_consumer_request(req, consumer_uuid, data)], post=False)
    empty(resp, 204)


def post_allocations(req: falcon.Request, resp: falcon.Response) -> None:
    data = json_body(req, post_schema(req))
    requests = [_consumer_request(req, str(uuidlib.UUID(c)), d) for c, d in data.items()]
    _write(req, requests, post=True)
    empty(resp, 204)


def delete_for_consumer(req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
    try:
        alloc_lib.delete_allocations(ctx(req).db, consumer_uuid, consumer_generation=None)
    except (NotFound, InvalidRequest):
        raise ApiError(404, f"No allocations for consumer '{consumer_uuid}'") from None
    empty(resp, 204)


def get_for_provider(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    db = ctx(req).db
    try:
        view = usages.provider_allocations(db, uuid)
    except NotFound:
        raise ApiError(
            404,
            f"Resource provider '{uuid}' not found: No resource provider with uuid {uuid} found",
        ) from None  # Placement sets no code here
    gens: dict[str, int] = {}
    if want(req, (1, 28)) and view.allocations:
        gens = objects.consumer_generations(db, view.allocations)
    body = {
        "resource_provider_generation": view.generation,
        "allocations": {
            c: {
                "resources": dict(r),
                **({"consumer_generation": gens.get(c)} if want(req, (1, 28)) else {}),
            }
            for c, r in view.allocations.items()
        },
    }
    send_json(req, resp, body)


ROUTES = [
    route(
        "/allocations/{consumer_uuid}",
        "GET",
        get_for_consumer,
        "placement:allocations:list",
        accept=True,
    ),
    route(
        "/allocations/{consumer_uuid}",
        "PUT",
        put_for_consumer,
        "placement:allocations:update",
        body=True,
    ),
    route(
        "/allocations/{consumer_uuid}",
        "DELETE",
        delete_for_consumer,
        "placement:allocations:delete",
    ),
    route(
        "/allocations",
        "POST",
        post_allocations,
        "placement:allocations:manage",
        since="1.13",
        body=True,
    ),
    route(
        "/resource_providers/{uuid}/allocations",
        "GET",
        get_for_provider,
        "placement:resource_providers:allocations:list",
        accept=True,
    ),
]
