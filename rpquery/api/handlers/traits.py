"""``/traits`` and ``/resource_providers/{uuid}/traits`` (from 1.6)."""

from __future__ import annotations

import falcon

from rpquery.api import errors, schemas
from rpquery.api.errors import ApiError
from rpquery.api.handlers.resource_providers import load
from rpquery.api.routing import route
from rpquery.api.util import (
    ctx,
    empty,
    is_valid,
    json_body,
    no_cache,
    query_params,
    send_json,
    set_location,
)
from rpquery.errors import ConcurrentUpdate, InUse, InvalidRequest, NotFound
from rpquery.read import objects
from rpquery.store import catalog
from rpquery.write import associations

__all__ = ["ROUTES"]

POLICY = "placement:traits:%s"
RP_POLICY = "placement:resource_providers:traits:%s"


def _name_filter(value: str) -> dict[str, object]:
    op, sep, rest = value.partition(":")
    if not sep:
        raise ApiError(
            400,
            "Badly formatted name parameter. Expected name query string parameter in form: "
            f'?name=[in|startswith]:[name1,name2|prefix]. Got: "{value}"',
        )
    if op == "in":
        return {"names": rest.split(",")}
    if op == "startswith":
        return {"prefix": rest}
    return {}


def list_traits(req: falcon.Request, resp: falcon.Response) -> None:
    params = query_params(req, schemas.LIST_TRAITS)
    filters: dict[str, object] = {}
    if "name" in params:
        filters.update(_name_filter(params["name"]))
    if "associated" in params:
        flag = params["associated"].lower()
        if flag not in ("true", "false"):
            raise ApiError(400, 'The query parameter "associated" only accepts "true" or "false"')
        filters["associated"] = flag == "true"
    names = catalog.list_traits(ctx(req).db, **filters)  # type: ignore[arg-type]
    send_json(req, resp, {"traits": names})


def get_trait(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    if not catalog.has_trait(ctx(req).db, name):
        raise ApiError(404, f"No such trait(s): {name}.")
    empty(resp, 204)
    no_cache(req, resp)


def put_trait(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    if not is_valid(name, schemas.CUSTOM_TRAIT):
        raise ApiError(
            400,
            "The trait is invalid. A valid trait must be no longer than 255 characters, start "
            'with the prefix "CUSTOM_" and use following characters: "A"-"Z", "0"-"9" and "_"',
        )
    created = catalog.create_trait(ctx(req).db, name)
    empty(resp, 201 if created else 204)
    set_location(req, resp, f"/traits/{name}")
    no_cache(req, resp)


def delete_trait(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    try:
        catalog.delete_trait(ctx(req).db, name)
    except NotFound:
        raise ApiError(404, f"No such trait(s): {name}.") from None
    except InUse:
        raise ApiError(409, f"The trait {name} is in use by a resource provider.") from None
    except InvalidRequest as exc:
        if exc.code == "rpquery.trait.standard":
            raise ApiError(400, f"Cannot delete standard trait {name}.") from None
        raise ApiError(404, f"No such trait(s): {name}.") from None
    empty(resp, 204)


# ---------------------------------------------------------------- a provider's traits


def list_provider_traits(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    try:
        rp = load(req, uuid)
    except ApiError as exc:
        exc.message = f"{exc.message}: No resource provider with uuid {uuid} found"
        raise
    names = objects.get_provider_traits(ctx(req).db, uuid)
    body = {"traits": sorted(names), "resource_provider_generation": rp.generation}
    send_json(req, resp, body)


def set_provider_traits(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    data = json_body(req, schemas.PUT_PROVIDER_TRAITS)
    rp = load(req, uuid)
    if data["resource_provider_generation"] != rp.generation:
        raise _generation_conflict()
    names = data["traits"]
    db = ctx(req).db
    known = set(catalog.list_traits(db, names=names))
    missing = [n for n in names if n not in known]
    if missing:
        raise ApiError(400, f"No such trait {', '.join(missing)}")
    try:
        generation = associations.set_provider_traits(db, uuid, names, generation=rp.generation)
    except ConcurrentUpdate:
        raise _generation_conflict() from None
    body = {"traits": sorted(set(names)), "resource_provider_generation": generation}
    send_json(req, resp, body)


def _generation_conflict() -> ApiError:
    return ApiError(
        409,
        "Resource provider's generation already changed. Please update the generation and "
        "try again.",
        code=errors.CONCURRENT_UPDATE,
    )


def delete_provider_traits(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    rp = load(req, uuid)
    try:
        associations.set_provider_traits(ctx(req).db, uuid, [], generation=rp.generation)
    except ConcurrentUpdate as exc:
        raise ApiError(409, exc.detail, code=errors.CONCURRENT_UPDATE) from None
    empty(resp, 204)


_ONE = "/traits/{name}"
_RP = "/resource_providers/{uuid}/traits"
ROUTES = [
    route("/traits", "GET", list_traits, POLICY % "list", since="1.6", accept=True),
    route(_ONE, "GET", get_trait, POLICY % "show", since="1.6"),
    route(_ONE, "PUT", put_trait, POLICY % "update", since="1.6"),
    route(_ONE, "DELETE", delete_trait, POLICY % "delete", since="1.6"),
    route(_RP, "GET", list_provider_traits, RP_POLICY % "list", since="1.6", accept=True),
    route(_RP, "PUT", set_provider_traits, RP_POLICY % "update", since="1.6", body=True),
    route(_RP, "DELETE", delete_provider_traits, RP_POLICY % "delete", since="1.6"),
]
