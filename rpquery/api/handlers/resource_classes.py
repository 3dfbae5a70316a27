"""``/resource_classes`` (from 1.2): list, create, show, rename (1.2–1.6), create or
check (PUT from 1.7), delete."""

from __future__ import annotations

import falcon

from rpquery.api import schemas
from rpquery.api.errors import ApiError
from rpquery.api.routing import route
from rpquery.api.util import ctx, empty, json_body, send_json, set_location, url, validate
from rpquery.errors import Conflict, InUse, InvalidRequest, NotFound
from rpquery.store import catalog

__all__ = ["ROUTES"]

POLICY = "placement:resource_classes:%s"


def _url(req: falcon.Request, name: str) -> str:
    return url(req, f"/resource_classes/{name}")


def _serialize(req: falcon.Request, name: str) -> dict[str, object]:
    return {"name": name, "links": [{"rel": "self", "href": _url(req, name)}]}


def _require(req: falcon.Request, name: str) -> None:
    if not catalog.has_resource_class(ctx(req).db, name):
        raise ApiError(404, f"No such resource class {name}.")


def list_resource_classes(req: falcon.Request, resp: falcon.Response) -> None:
    names = catalog.list_resource_classes(ctx(req).db)
    send_json(req, resp, {"resource_classes": [_serialize(req, n) for n in names]})


def get_resource_class(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    _require(req, name)
    send_json(req, resp, _serialize(req, name))


def create_resource_class(req: falcon.Request, resp: falcon.Response) -> None:
    name = json_body(req, schemas.POST_RESOURCE_CLASS)["name"]
    try:
        catalog.create_resource_class(ctx(req).db, name)
    except Conflict:
        raise ApiError(409, f"Conflicting resource class already exists: {name}") from None
    empty(resp, 201)
    set_location(req, resp, f"/resource_classes/{name}")


def rename_resource_class(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """PUT before 1.7: rename a custom class."""
    new_name = json_body(req, schemas.PUT_RESOURCE_CLASS)["name"]
    _require(req, name)
    try:
        catalog.update_resource_class(ctx(req).db, name, new_name)
    except InvalidRequest:
        raise ApiError(400, f"Cannot update standard resource class {name}") from None
    except NotFound:
        raise ApiError(404, f"No such resource class {name}.") from None
    except Conflict:
        raise ApiError(409, f"Resource class already exists: {new_name}") from None
    send_json(req, resp, _serialize(req, new_name), cache=False)


def ensure_resource_class(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """PUT from 1.7: create the custom class (201) or confirm it exists (204)."""
    validate({"name": name}, schemas.PUT_RESOURCE_CLASS, "JSON does not validate")
    status = 204
    db = ctx(req).db
    if not catalog.has_resource_class(db, name):
        try:
            catalog.create_resource_class(db, name)
            status = 201
        except Conflict:
            pass  # created meanwhile by someone else: it exists
    empty(resp, status)
    set_location(req, resp, f"/resource_classes/{name}")


def delete_resource_class(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    try:
        catalog.delete_resource_class(ctx(req).db, name)
    except NotFound:
        raise ApiError(404, f"No such resource class {name}.") from None
    except InvalidRequest as exc:
        if exc.code == "rpquery.resource_class.standard":
            raise ApiError(
                400,
                f"Error in delete resource class: Cannot delete standard resource class {name}.",
            ) from None
        raise ApiError(404, f"No such resource class {name}.") from None
    except InUse:
        raise ApiError(
            409,
            f"Error in delete resource class: Cannot delete resource class {name}. "
            "Class is in use in inventory.",
        ) from None
    empty(resp, 204)


_ONE = "/resource_classes/{name}"
ROUTES = [
    route(
        "/resource_classes",
        "GET",
        list_resource_classes,
        POLICY % "list",
        since="1.2",
        accept=True,
    ),
    route(
        "/resource_classes",
        "POST",
        create_resource_class,
        POLICY % "create",
        since="1.2",
        body=True,
    ),
    route(_ONE, "GET", get_resource_class, POLICY % "show", since="1.2", accept=True),
    route(
        _ONE, "PUT", rename_resource_class, POLICY % "update", since="1.2", until="1.6", body=True
    ),
    route(_ONE, "PUT", ensure_resource_class, POLICY % "update", since="1.7"),
    route(_ONE, "DELETE", delete_resource_class, POLICY % "delete", since="1.2"),
]
