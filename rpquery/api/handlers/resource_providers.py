"""``/resource_providers`` and ``/resource_providers/{uuid}``: list (with the ``name``,
``uuid``, ``member_of``, ``resources``, ``in_tree`` and ``required`` filters), create,
show, update (rename, re-parent), delete."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable
from typing import Any

import falcon

from rpquery.api import errors, query, schemas
from rpquery.api.errors import ApiError
from rpquery.api.microversion import Version
from rpquery.api.routing import route
from rpquery.api.util import (
    ctx,
    empty,
    json_body,
    query_params,
    send_json,
    set_location,
    url,
    want,
)
from rpquery.api.util import query as all_params
from rpquery.errors import Conflict, InvalidRequest, NotFound
from rpquery.models import ResourceProvider
from rpquery.read import objects
from rpquery.read import providers as provider_list
from rpquery.write import providers

__all__ = ["ROUTES", "load"]

POLICY = "placement:resource_providers:%s"


def provider_url(req: falcon.Request, rp_uuid: str) -> str:
    return url(req, f"/resource_providers/{rp_uuid}")


def serializer(req: falcon.Request) -> Callable[[ResourceProvider], dict[str, Any]]:
    """How the request's microversion shows a provider: what depends on the request
    (the links' mount point and relations, the tree's uuids) decided once, for lists
    of thousands."""
    prefix = url(req, "/resource_providers/")
    rels = ["inventories", "usages"]
    for since, rel in (((1, 1), "aggregates"), ((1, 6), "traits"), ((1, 11), "allocations")):
        if want(req, since):
            rels.append(rel)
    tree = want(req, (1, 14))

    def one(rp: ResourceProvider) -> dict[str, Any]:
        base = prefix + rp.uuid
        links = [{"rel": "self", "href": base}]
        links += [{"rel": r, "href": f"{base}/{r}"} for r in rels]
        data: dict[str, Any] = {
            "uuid": rp.uuid,
            "name": rp.name,
            "generation": rp.generation,
            "links": links,
        }
        if tree:
            data["parent_provider_uuid"] = rp.parent_uuid
            data["root_provider_uuid"] = rp.root_uuid
        return data

    return one


def serialize(req: falcon.Request, rp: ResourceProvider) -> dict[str, Any]:
    """One provider as Placement shows it at the request's microversion."""
    return serializer(req)(rp)


def not_found(rp_uuid: str, suffix: str = "") -> ApiError:
    return ApiError(404, f"No resource provider with uuid {rp_uuid} found{suffix}")


def load(req: falcon.Request, rp_uuid: str) -> ResourceProvider:
    """The provider named in the path, or Placement's 404."""
    try:
        return objects.get_provider(ctx(req).db, rp_uuid)
    except (NotFound, InvalidRequest):
        raise not_found(rp_uuid) from None


# ---------------------------------------------------------------- list


def _list_schema(version: Version) -> dict[str, Any]:
    for since, schema in (
        ((1, 18), schemas.LIST_PROVIDERS_1_18),
        ((1, 14), schemas.LIST_PROVIDERS_1_14),
        ((1, 4), schemas.LIST_PROVIDERS_1_4),
        ((1, 3), schemas.LIST_PROVIDERS_1_3),
    ):
        if version >= since:
            return schema
    return schemas.LIST_PROVIDERS_1_0


def provider_filters(req: falcon.Request) -> dict[str, list[str]]:
    """The query of ``GET /resource_providers`` checked as the request's microversion
    reads it, as the multi-dict :func:`rpquery.read.providers.list_providers` takes."""
    version = ctx(req).version
    query_params(req, _list_schema(version))
    params = all_params(req)
    wanted: dict[str, list[str]] = {}
    for key in ("uuid", "name", "in_tree", "resources"):
        if key in params:
            wanted[key] = params[key][-1:]
    if "resources" in wanted:
        query.check_resources(wanted["resources"][0])
    if "member_of" in params:
        query.check_member_of("member_of", params["member_of"], version)
        wanted["member_of"] = params["member_of"] if version >= (1, 24) else params["member_of"]
    if "required" in params:
        wanted["required"] = query.check_required("required", params["required"], version)
    return wanted


def list_resource_providers(req: falcon.Request, resp: falcon.Response) -> None:
    filters = provider_filters(req)
    try:
        found = provider_list.list_providers(ctx(req).db, filters)
    except InvalidRequest as exc:
        raise _list_error(exc) from None
    one = serializer(req)
    send_json(req, resp, {"resource_providers": [one(rp) for rp in found]})


def _list_error(exc: InvalidRequest) -> ApiError:
    if exc.code.startswith("rpquery.resource_class."):
        return ApiError(
            400,
            f"Invalid resource class in resources parameter: No such resource class {exc.token}.",
        )
    if exc.code.startswith("rpquery.trait."):
        return ApiError(
            400, f'Invalid trait(s) in "required" parameter: No such trait(s): {exc.token}.'
        )
    return ApiError(400, f"Invalid query string parameters: {exc.detail}")


# ---------------------------------------------------------------- create, show


def create_resource_provider(req: falcon.Request, resp: falcon.Response) -> None:
    schema = schemas.POST_PROVIDER_1_14 if want(req, (1, 14)) else schemas.POST_PROVIDER
    data = json_body(req, schema)
    db = ctx(req).db
    name = data["name"]
    if data.get("uuid"):
        data["uuid"] = str(uuidlib.UUID(data["uuid"]))
        if data.get("parent_provider_uuid") == data["uuid"]:
            raise ApiError(
                400,
                f'Unable to create resource provider "{name}", {data["uuid"]}: Object action '
                "create failed because: parent provider UUID cannot be same as UUID. Please "
                "set parent provider UUID to None if there is no parent.",
            )
    try:
        rp = providers.create_provider(
            db, name, uuid=data.get("uuid"), parent_uuid=data.get("parent_provider_uuid")
        )
    except Conflict as exc:
        raise _duplicate(req, data) from exc
    except InvalidRequest as exc:
        reason = _action_reason(exc)
        raise ApiError(
            400,
            f'Unable to create resource provider "{name}", {data.get("uuid")}: '
            f"Object action create failed because: {reason}",
        ) from exc
    if want(req, (1, 20)):
        send_json(req, resp, serialize(req, rp))
    else:
        empty(resp, 201)
    set_location(req, resp, f"/resource_providers/{rp.uuid}")


def _duplicate(req: falcon.Request, data: dict[str, Any]) -> ApiError:
    taken = []
    if data.get("uuid"):
        try:
            objects.get_provider(ctx(req).db, data["uuid"])
            taken.append(f"uuid: {data['uuid']}")
        except NotFound:
            pass
    if not taken:
        taken.append(f"name: {data['name']}")
    return ApiError(
        409,
        f"Conflicting resource provider {', '.join(taken)} already exists.",
        code=errors.DUPLICATE_NAME,
    )


def _action_reason(exc: InvalidRequest) -> str:
    return {
        "rpquery.provider.parent_not_found": "parent provider UUID does not exist.",
        "rpquery.provider.cycle": "creating loop in the provider tree is not allowed.",
        "rpquery.provider.reparent_not_allowed": "re-parenting a provider is not currently "
        "allowed.",
        "rpquery.provider.unparent_not_allowed": "un-parenting a provider is not currently "
        "allowed.",
    }.get(exc.code, exc.detail)


def get_resource_provider(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    send_json(req, resp, serialize(req, load(req, uuid)))


# ---------------------------------------------------------------- update, delete


def update_resource_provider(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    load(req, uuid)
    schema = schemas.PUT_PROVIDER_1_14 if want(req, (1, 14)) else schemas.PUT_PROVIDER
    data = json_body(req, schema)
    changes: dict[str, Any] = {"name": data["name"]}
    if "parent_provider_uuid" in data:
        parent = data["parent_provider_uuid"]
        if parent == uuid:
            raise ApiError(
                400,
                f"Unable to save resource provider {uuid}: Object action update failed "
                "because: creating loop in the provider tree is not allowed.",
            )
        changes["parent_uuid"] = parent
    try:
        rp = providers.update_provider(
            ctx(req).db, uuid, allow_reparenting=want(req, (1, 37)), **changes
        )
    except Conflict as exc:
        raise ApiError(
            409,
            f"Conflicting resource provider {data['name']} already exists.",
            code=errors.DUPLICATE_NAME,
        ) from exc
    except InvalidRequest as exc:
        raise ApiError(
            400,
            f"Unable to save resource provider {uuid}: Object action update failed "
            f"because: {_action_reason(exc)}",
        ) from exc
    send_json(req, resp, serialize(req, rp))


def delete_resource_provider(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    try:
        providers.delete_provider(ctx(req).db, uuid)
    except (NotFound, InvalidRequest):
        raise not_found(uuid, " for delete") from None
    except Conflict as exc:
        if exc.code == "rpquery.provider.has_children":
            raise ApiError(
                409,
                f"Unable to delete parent resource provider {uuid}: It has child resource "
                "providers.",
                code=errors.PROVIDER_CANNOT_DELETE_PARENT,
            ) from exc
        if exc.code == "rpquery.provider.in_use":
            raise ApiError(
                409,
                f"Unable to delete resource provider {uuid}: Resource provider has allocations.",
                code=errors.PROVIDER_IN_USE,
            ) from exc
        raise
    empty(resp, 204)


_RP = "/resource_providers/{uuid}"
ROUTES = [
    route("/resource_providers", "GET", list_resource_providers, POLICY % "list", accept=True),
    route("/resource_providers", "POST", create_resource_provider, POLICY % "create", body=True),
    route(_RP, "GET", get_resource_provider, POLICY % "show", accept=True),
    route(_RP, "PUT", update_resource_provider, POLICY % "update", body=True),
    route(_RP, "DELETE", delete_resource_provider, POLICY % "delete"),
]
