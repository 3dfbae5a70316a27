"""``/resource_providers/{uuid}/inventories[/{resource_class}]``: list, create one,
replace all, delete all (from 1.5), show, update and delete one.

Placement's defaults apply to fields left out (``max_unit`` is 2**31 - 1, not the
total); ``reserved`` may equal ``total`` only from 1.26.
"""

from __future__ import annotations

from typing import Any

import falcon

from rpquery.api import errors, schemas
from rpquery.api.errors import ApiError
from rpquery.api.handlers.resource_providers import load, not_found
from rpquery.api.routing import route
from rpquery.api.util import ctx, empty, json_body, send_json, set_location, want
from rpquery.errors import ConcurrentUpdate, Conflict, InUse, InvalidRequest, NotFound
from rpquery.models import Inventory, ResourceProvider
from rpquery.read import objects
from rpquery.write import inventory as inv_lib

__all__ = ["ROUTES"]

POLICY = "placement:resource_providers:inventories:%s"
MAX_INT = 2**31 - 1
_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


def _inventory(data: dict[str, Any]) -> Inventory:
    return Inventory(
        total=data["total"],
        reserved=data.get("reserved", 0),
        min_unit=data.get("min_unit", 1),
        max_unit=data.get("max_unit", MAX_INT),
        step_size=data.get("step_size", 1),
        allocation_ratio=float(data.get("allocation_ratio", 1.0)),
    )


def _serialize(inv: Inventory, generation: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {field: getattr(inv, field) for field in _FIELDS}
    if generation:  # Placement leaves out a generation of 0 here
        data["resource_provider_generation"] = generation
    return data


def _check_capacity(
    req: falcon.Request, rp_uuid: str, rc: str, inv: Inventory, action: str = "update"
) -> None:
    """Before 1.26 ``reserved`` must be below ``total``; from 1.26 it may equal it."""
    if want(req, (1, 26)):
        if inv.reserved > inv.total:
            raise _invalid_capacity(rp_uuid, rc, "greater than total", action)
    elif inv.reserved >= inv.total:
        raise _invalid_capacity(rp_uuid, rc, "greater than or equal to total", action)


def _invalid_capacity(rp_uuid: str, rc: str, what: str, action: str) -> ApiError:
    return ApiError(
        400,
        f"Unable to {action} inventory for resource provider {rp_uuid}: Invalid inventory "
        f"for '{rc}' on resource provider '{rp_uuid}'. The reserved value is {what}.",
    )


def _bad_inventory(rp_uuid: str, rc: str, exc: InvalidRequest) -> ApiError:
    if exc.code.startswith("rpquery.resource_class."):
        return ApiError(
            400,
            f"Unknown resource class in inventory for resource provider {rp_uuid}: "
            f"No such resource class {exc.token or rc}.",
        )
    return ApiError(400, f"Bad inventory {rc} for resource provider {rp_uuid}: {exc.detail}")


def _conflict(exc: Conflict, prefix: str = "update conflict") -> ApiError:
    code = errors.INVENTORY_INUSE if isinstance(exc, InUse) else errors.CONCURRENT_UPDATE
    return ApiError(409, f"{prefix}: {exc.detail}", code=code)


def _load_for_read(req: falcon.Request, uuid: str) -> ResourceProvider:
    """The provider, or the 404 Placement's inventory reads give (its text repeats
    itself: the lookup's own message after the handler's)."""
    try:
        return load(req, uuid)
    except ApiError as exc:
        message = f"No resource provider with uuid {uuid} found"
        raise not_found(uuid, f" : {message}") from exc


# ---------------------------------------------------------------- the collection


def get_inventories(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    rp = _load_for_read(req, uuid)
    found = objects.get_inventories(ctx(req).db, uuid)
    body = {
        "resource_provider_generation": rp.generation,
        "inventories": {rc: _serialize(inv) for rc, inv in found.items()},
    }
    send_json(req, resp, body)


def create_inventory(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    rp = load(req, uuid)
    data = json_body(req, schemas.POST_INVENTORY)
    rc = data["resource_class"]
    inv = _inventory(data)
    _check_capacity(req, uuid, rc, inv, "create")
    db = ctx(req).db
    if rc in objects.get_inventories(db, uuid):
        raise ApiError(
            409,
            f"Update conflict: Inventory for {rc} on resource provider {uuid} already exists.",
            code=errors.CONCURRENT_UPDATE,
        )
    try:
        generation = inv_lib.set_inventory(
            db, uuid, rc, inv, generation=rp.generation, allow_below_usage=True
        )
    except InvalidRequest as exc:
        if exc.code.startswith("rpquery.resource_class."):
            raise ApiError(
                400,
                f"Unable to create inventory for resource provider {uuid}: "
                f"No such resource class {rc}.",
            ) from exc
        raise _bad_inventory(uuid, rc, exc) from exc
    except Conflict as exc:
        raise _conflict(exc, "Update conflict") from exc
    send_json(req, resp, _serialize(inv, generation), status=201)
    set_location(req, resp, f"/resource_providers/{uuid}/inventories/{rc}")


def set_inventories(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    rp = load(req, uuid)
    data = json_body(req, schemas.PUT_INVENTORIES)
    if data["resource_provider_generation"] != rp.generation:
        raise ApiError(409, "resource provider generation conflict", code=errors.CONCURRENT_UPDATE)
    wanted = {rc: _inventory(fields) for rc, fields in data["inventories"].items()}
    for rc, inv in wanted.items():
        _check_capacity(req, uuid, rc, inv)
    try:
        generation = inv_lib.set_inventories(
            ctx(req).db,
            uuid,
            wanted,
            generation=data["resource_provider_generation"],
            allow_below_usage=True,
        )
    except InvalidRequest as exc:
        raise _bad_inventory(uuid, exc.token or "", exc) from exc
    except Conflict as exc:
        raise _conflict(exc) from exc
    body = {
        "resource_provider_generation": generation,
        "inventories": {rc: _serialize(inv) for rc, inv in wanted.items()},
    }
    send_json(req, resp, body)


def delete_inventories(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    rp = load(req, uuid)
    try:
        inv_lib.set_inventories(ctx(req).db, uuid, {}, generation=rp.generation)
    except InUse as exc:  # the library words it as Placement (inv_lib.in_use_detail)
        raise ApiError(409, exc.detail, code=errors.INVENTORY_INUSE) from exc
    except ConcurrentUpdate as exc:
        raise ApiError(
            409,
            f"Unable to delete inventory for resource provider {uuid} because the "
            "inventory was updated by another process. Please retry your request.",
            code=errors.CONCURRENT_UPDATE,
        ) from exc
    empty(resp, 204)


# ---------------------------------------------------------------- one class


def get_inventory(
    req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
) -> None:
    rp = _load_for_read(req, uuid)
    inv = objects.get_inventories(ctx(req).db, uuid).get(resource_class)
    if inv is None:
        raise ApiError(404, f"No inventory of class {resource_class} for {uuid}")
    send_json(req, resp, _serialize(inv, rp.generation))


def update_inventory(
    req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
) -> None:
    rp = load(req, uuid)
    data = json_body(req, schemas.PUT_INVENTORY)
    if data["resource_provider_generation"] != rp.generation:
        raise ApiError(409, "resource provider generation conflict", code=errors.CONCURRENT_UPDATE)
    inv = _inventory(data)
    _check_capacity(req, uuid, resource_class, inv)
    db = ctx(req).db
    if resource_class not in objects.get_inventories(db, uuid):
        raise ApiError(
            400,
            f"No inventory record with resource class for resource provider {uuid}: "
            f"No inventory of class {resource_class} found.",
        )
    try:
        generation = inv_lib.set_inventory(
            db,
            uuid,
            resource_class,
            inv,
            generation=data["resource_provider_generation"],
            allow_below_usage=True,
        )
    except InvalidRequest as exc:
        raise _bad_inventory(uuid, resource_class, exc) from exc
    except Conflict as exc:
        raise _conflict(exc) from exc
    send_json(req, resp, _serialize(inv, generation))


def delete_inventory(
    req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
) -> None:
    rp = load(req, uuid)
    try:
        inv_lib.delete_inventory(ctx(req).db, uuid, resource_class, generation=rp.generation)
    except (NotFound, InvalidRequest) as exc:
        why = (
            f"No such resource class {resource_class}."
            if exc.code.startswith("rpquery.resource_class.")
            else f"No inventory of class {resource_class} found for delete"
        )
        raise ApiError(
            404, f"No inventory of class {resource_class} found for delete: {why}"
        ) from exc
    except Conflict as exc:  # Placement's code here is concurrent_update, even when in use
        raise ApiError(
            409,
            f"Unable to delete inventory of class {resource_class}: {exc.detail}",
            code=errors.CONCURRENT_UPDATE,
        ) from exc
    empty(resp, 204)


_INV = "/resource_providers/{uuid}/inventories"
_ONE = _INV + "/{resource_class}"
ROUTES = [
    route(_INV, "GET", get_inventories, POLICY % "list", accept=True),
    route(_INV, "POST", create_inventory, POLICY % "create", body=True),
    route(_INV, "PUT", set_inventories, POLICY % "update", body=True),
    route(_INV, "DELETE", delete_inventories, POLICY % "delete", since="1.5", status_below=405),
    route(_ONE, "GET", get_inventory, POLICY % "show", accept=True),
    route(_ONE, "PUT", update_inventory, POLICY % "update", body=True),
    route(_ONE, "DELETE", delete_inventory, POLICY % "delete"),
]
