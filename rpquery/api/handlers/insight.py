"""rpquery's own routes, outside Placement's namespace: why hosts are excluded from a
candidates request (``GET /rpquery/why``) and how many more instances fit
(``GET /rpquery/headroom``). Both take ``GET /allocation_candidates``' query (1.39
syntax, whatever the request's microversion) plus ``examples=N`` (why) or
``group_by=aggregate|trait`` (headroom), and answer what ``Rejections.to_dict()`` /
``Headroom.to_dict()`` give. Bad input is a 400 with rpquery's error code. Both are
guarded by ``placement:allocation_candidates:list``: they tell what that query tells."""

from __future__ import annotations

import falcon

from rpquery.api.routing import route
from rpquery.api.util import ctx, query, send_json
from rpquery.errors import InvalidRequest
from rpquery.insight import EXAMPLES, explain_no_candidates, headroom
from rpquery.read.request import parse_candidates

__all__ = ["ROUTES"]


def _one(params: dict[str, list[str]], name: str) -> str | None:
    values = params.pop(name, None)
    if values is None:
        return None
    if len(values) != 1:
        raise InvalidRequest("rpquery.request.bad_params", f"{name} given twice", token=name)
    return values[0]


def get_why(req: falcon.Request, resp: falcon.Response) -> None:
    params = query(req)
    raw = _one(params, "examples")
    if raw is not None and not (raw.isascii() and raw.isdigit() and len(raw) < 6):
        raise InvalidRequest(
            "rpquery.request.bad_params",
            f"examples must be an integer >= 0, not {raw!r}",
            token=raw[:100],
        )
    request = parse_candidates(params)
    examples = EXAMPLES if raw is None else int(raw)
    send_json(req, resp, explain_no_candidates(ctx(req).db, request, examples=examples).to_dict())


def get_headroom(req: falcon.Request, resp: falcon.Response) -> None:
    params = query(req)
    group_by = _one(params, "group_by")
    request = parse_candidates(params)
    send_json(req, resp, headroom(ctx(req).db, request, group_by=group_by).to_dict())


ROUTES = [
    route("/rpquery/why", "GET", get_why, "placement:allocation_candidates:list", accept=True),
    route(
        "/rpquery/headroom",
        "GET",
        get_headroom,
        "placement:allocation_candidates:list",
        accept=True,
    ),
]
