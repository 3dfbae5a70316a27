"""``POST /reshaper`` (1.30+) on :func:`rpquery.write.reshaper.reshape`: new inventories and
allocations in one transaction. The body schema keeps Placement's constraints
(Apache-2.0, OpenStack Placement ``placement/schemas/reshaper.py`` and
``inventory.py``); allocations take ``POST /allocations``' per-consumer shape of the
same microversion (1.28, 1.34 with ``mappings``, 1.38 with ``consumer_type``)."""

from __future__ import annotations

import copy
from typing import Any

import falcon

from rpquery.api import errors
from rpquery.api.errors import ApiError
from rpquery.api.handlers import allocations as alloc_handlers
from rpquery.api.routing import route
from rpquery.api.util import ctx, empty, json_body
from rpquery.errors import CapacityExceeded, ConcurrentUpdate, InUse, InvalidRequest, NotFound
from rpquery.models import Inventory
from rpquery.read import objects
from rpquery.write import consumers, reshaper

__all__ = ["ROUTES"]

MAX_INT = 2147483647
SQL_SP_FLOAT_MAX = 3.40282e38
#: Placement's defaults for the fields an inventory record leaves out.
INVENTORY_DEFAULTS = {
    "reserved": 0,
    "min_unit": 1,
    "max_unit": MAX_INT,
    "step_size": 1,
    "allocation_ratio": 1.0,
}


def _int(minimum: int) -> dict[str, Any]:
    return {"type": "integer", "maximum": MAX_INT, "minimum": minimum}


INVENTORY_RECORD: dict[str, Any] = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "total": _int(1),
        "reserved": _int(0),
        "min_unit": _int(1),
        "max_unit": _int(1),
        "step_size": _int(1),
        "allocation_ratio": {"type": "number", "maximum": SQL_SP_FLOAT_MAX},
    },
    "required": ["total"],
    "additionalProperties": False,
}
PROVIDER_INVENTORIES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "inventories": {
            "type": "object",
            "patternProperties": {alloc_handlers.RC_PATTERN: INVENTORY_RECORD},
        },
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}


def body_schema(req: falcon.Request) -> dict[str, Any]:
    allocations = copy.deepcopy(alloc_handlers.post_schema(req))
    allocations["minProperties"] = 0
    return {
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "patternProperties": {alloc_handlers.UUID_PATTERN: PROVIDER_INVENTORIES},
                "minProperties": 1,
                "additionalProperties": False,
            },
            "allocations": allocations,
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": False,
    }


def post_reshaper(req: falcon.Request, resp: falcon.Response) -> None:
    data = json_body(req, body_schema(req))
    inventories = {
        rp: reshaper.ProviderInventories(
            spec["resource_provider_generation"],
            {
                rc: Inventory(**{**INVENTORY_DEFAULTS, **inv})
                for rc, inv in spec["inventories"].items()
            },
        )
        for rp, spec in data["inventories"].items()
    }
    requests = [
        alloc_handlers._consumer_request(req, c, d) for c, d in data["allocations"].items()
    ]
    db = ctx(req).db
    _check_providers(db, inventories)
    alloc_handlers.compare_consumer_generations(db, requests)
    try:
        reshaper.reshape(db, inventories, requests)
    except (NotFound, ConcurrentUpdate, InUse, CapacityExceeded, InvalidRequest) as error:
        raise _refusal(db, error, requests) from None
    empty(resp, 204)


def _refusal(db: Any, error: Exception, requests: list[Any]) -> ApiError:
    """Placement's answer to a reshape the library refused with ``error``."""
    if isinstance(error, NotFound):
        if error.code == reshaper.PROVIDER_NOT_FOUND:
            return ApiError(
                400,
                f"Resource provider {error.token} in inventories not found",
                code=errors.RESOURCE_PROVIDER_NOT_FOUND,
            )
        return ApiError(400, f"malformed reshaper data: {error.detail}")
    if isinstance(error, ConcurrentUpdate):
        if error.code == reshaper.STALE_PROVIDER:
            return ApiError(
                409,
                f"resource provider generation conflict: {error.detail}",
                code=errors.CONCURRENT_UPDATE,
            )
        if error.code == consumers.GENERATION_CONFLICT:
            message = alloc_handlers._conflict_message(db, error, requests)
            return ApiError(409, message, code=errors.CONCURRENT_UPDATE)
        return ApiError(409, f"update conflict: {error.detail}", code=errors.CONCURRENT_UPDATE)
    if isinstance(error, InUse):
        return ApiError(409, f"update conflict: {error.detail}", code=errors.INVENTORY_INUSE)
    if isinstance(error, CapacityExceeded):
        message = error.detail
        if error.code.startswith("rpquery.allocation."):
            message = alloc_handlers.capacity_message(error)
        return ApiError(409, f"Unable to allocate inventory: {message}")
    assert isinstance(error, InvalidRequest), error
    if error.code.startswith("rpquery.resource_class."):
        return ApiError(400, f"malformed reshaper data: No such resource class {error.token}.")
    if error.code == "rpquery.allocation.provider_not_found":
        return ApiError(
            400, f"Allocation for resource provider '{error.token}' that does not exist."
        )
    return ApiError(400, f"malformed reshaper data: {error.detail}")


def _check_providers(db: Any, inventories: dict[str, reshaper.ProviderInventories]) -> None:
    """Placement looks each provider of ``inventories`` up first, with its wording; the
    library checks again in its transaction."""
    for rp_uuid, spec in inventories.items():
        try:
            actual = objects.get_provider(db, rp_uuid).generation
        except NotFound:
            raise ApiError(
                400,
                f"Resource provider {rp_uuid} in inventories not found: "
                f"No resource provider with uuid {rp_uuid} found",
                code=errors.RESOURCE_PROVIDER_NOT_FOUND,
            ) from None
        if actual != spec.generation:
            raise ApiError(
                409,
                f"resource provider generation conflict for provider "
                f"{rp_uuid}: actual: {actual}, given: {spec.generation}",
                code=errors.CONCURRENT_UPDATE,
            )


ROUTES = [
    route(
        "/reshaper", "POST", post_reshaper, "placement:reshaper:reshape", since="1.30", body=True
    ),
]
