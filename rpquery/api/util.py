"""Request and response helpers for handlers.

>>> is_uuid_like("6a4d3d6a-6e47-4a5b-9fa4-1b1e9c3f3c3d"), is_uuid_like("pony")
(True, False)
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid as uuidlib
from collections.abc import Mapping
from typing import Any, cast

import falcon
import jsonschema
import orjson
from falcon.uri import parse_query_string
from falcon.util import dt_to_http

from rpquery.api.context import RequestContext
from rpquery.api.errors import ApiError
from rpquery.api.query_schema import QueryCheck, compile_query_schema

__all__ = [
    "JSON",
    "ctx",
    "dump_json",
    "empty",
    "is_uuid_like",
    "is_valid",
    "json_body",
    "no_cache",
    "parse_json",
    "parse_query",
    "query",
    "query_params",
    "send_json",
    "send_json_bytes",
    "set_location",
    "url",
    "validate",
    "validate_query",
    "want",
]

JSON = "application/json"
#: Deepest nesting of arrays and objects a request body may have: Placement's bodies
#: need 6 (a reshape); deeper ones are refused before any schema sees them.
MAX_JSON_DEPTH = 32
_FORMATS = jsonschema.FormatChecker()


@_FORMATS.checks("uuid")
def is_uuid_like(value: object) -> bool:
    """Placement's notion of a uuid: parses as one, with or without dashes."""
    if not isinstance(value, str):
        return False
    try:
        parsed = uuidlib.UUID(value)
    except ValueError:
        return False
    return parsed.hex == value.replace("-", "").lower()


def ctx(req: falcon.Request) -> RequestContext:
    """The request's :class:`RequestContext` (typed access to ``req.context``)."""
    return cast(RequestContext, req.context)


def want(req: falcon.Request, version: tuple[int, int]) -> bool:
    """Does the request speak microversion ``version`` or newer?"""
    return ctx(req).version >= version


_VALIDATORS: dict[int, Any] = {}


def _validator(schema: Mapping[str, Any]) -> Any:
    """One checked validator per schema object: ``jsonschema.validate`` would check the
    schema itself on every call (~10 ms for the provider list's)."""
    found = _VALIDATORS.get(id(schema))
    if found is None or found.schema is not schema:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        found = _VALIDATORS[id(schema)] = cls(schema, format_checker=_FORMATS)
    return found


def is_valid(data: Any, schema: Mapping[str, Any]) -> bool:
    return bool(_validator(schema).is_valid(data))


def validate(data: Any, schema: Mapping[str, Any], prefix: str) -> None:
    """Validate ``data`` against a JSON schema; 400 ``"<prefix>: <jsonschema error>"``
    (the error ``jsonschema.validate`` would raise: the best match)."""
    error = jsonschema.exceptions.best_match(_validator(schema).iter_errors(data))
    if error is not None:
        raise ApiError(400, f"{prefix}: {error}")


_QUERY_CHECKS: dict[int, tuple[Mapping[str, Any], QueryCheck | None]] = {}


def validate_query(params: Mapping[str, str], schema: Mapping[str, Any]) -> None:
    """:func:`validate` of query parameters (400 ``Invalid query string parameters:
    ...``): the schema's tests compiled once (:mod:`rpquery.api.query_schema`), and
    jsonschema only for the error of parameters they refuse."""
    found = _QUERY_CHECKS.get(id(schema))
    if found is None or found[0] is not schema:
        found = _QUERY_CHECKS[id(schema)] = (schema, compile_query_schema(schema, _conforms))
    check = found[1]
    if check is None or not check(params):
        validate(params, schema, "Invalid query string parameters")


def _conforms(value: str, format_name: str) -> bool:
    return bool(_FORMATS.conforms(value, format_name))


def json_body(req: falcon.Request, schema: Mapping[str, Any]) -> Any:
    """The request body parsed as JSON (:func:`parse_json`) and validated against
    ``schema`` (400 ``JSON does not validate: ...`` as Placement words it)."""
    data = parse_json(req.bounded_stream.read())
    validate(data, schema, "JSON does not validate")
    return data


def parse_json(raw: bytes) -> Any:
    """``raw`` as JSON, or 400 ``Malformed JSON: ...`` as Placement words it.

    The bytes must be UTF-8, as Placement reads them (``json.loads`` would guess
    UTF-16 or UTF-32 from the first bytes); nesting deeper than
    :data:`MAX_JSON_DEPTH` is refused (the decoder would otherwise recurse until the
    interpreter's limit: a 500 in Placement). Messages never quote the body.

    >>> parse_json(b'{"a": [1]}')
    {'a': [1]}
    >>> parse_json(b"[" * 100_000)
    Traceback (most recent call last):
    ...
    rpquery.api.errors.ApiError: Malformed JSON: nested deeper than 32 levels
    """
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:
        data = _TOO_DEEP
    except ValueError as exc:  # UnicodeDecodeError is one
        raise ApiError(400, f"Malformed JSON: {exc}") from None
    if data is _TOO_DEEP or (
        raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and _too_deep(data)
    ):
        raise ApiError(400, f"Malformed JSON: nested deeper than {MAX_JSON_DEPTH} levels")
    return data


_TOO_DEEP = object()


def _too_deep(data: Any) -> bool:
    """Is ``data`` nested deeper than :data:`MAX_JSON_DEPTH`? (iterative: no recursion)"""
    if not isinstance(data, (dict, list)):
        return False
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > MAX_JSON_DEPTH:
                    return True
                stack.append((child, depth + 1))
    return False


def query(req: falcon.Request) -> dict[str, list[str]]:
    """Every query parameter with all its values, blank ones kept, in order."""
    return parse_query(req.query_string)


def parse_query(query_string: str) -> dict[str, list[str]]:
    """:func:`query` of a query string."""
    parsed = parse_query_string(query_string, keep_blank=True, csv=False)
    return {k: v if isinstance(v, list) else [v] for k, v in parsed.items()}


def query_params(req: falcon.Request, schema: Mapping[str, Any]) -> dict[str, str]:
    """The query parameters (last value of a repeated one) validated against
    ``schema`` (400 ``Invalid query string parameters: ...``)."""
    params = {k: v[-1] for k, v in query(req).items()}
    validate_query(params, schema)
    return params


def send_json(
    req: falcon.Request,
    resp: falcon.Response,
    body: Any,
    *,
    status: int = 200,
    cache: bool = True,
    last_modified: dt.datetime | None = None,
) -> None:
    """A JSON response; with ``cache`` the 1.15+ ``cache-control: no-cache`` and
    ``last-modified`` (``last_modified`` or now) headers."""
    resp.status = status
    resp.content_type = JSON
    resp.data = dump_json(body)
    if cache:
        no_cache(req, resp, last_modified)


def dump_json(body: Any) -> bytes:
    """``body`` as JSON bytes: orjson (a C encoder: the provider list's 2.5 MB body at
    5,000 hosts cost ~100 ms in ``json.dumps``), or ``json.dumps`` for what orjson does
    not write (a key that is not a string, an integer beyond 64 bits). The same content
    either way; orjson writes no spaces and non-ASCII characters as UTF-8.

    >>> dump_json({"a": [1, "é"]}), dump_json({1: 2})
    (b'{"a":[1,"\xc3\xa9"]}', b'{"1": 2}')
    """
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()


def send_json_bytes(
    req: falcon.Request, resp: falcon.Response, data: bytes, *, status: int = 200
) -> None:
    """A JSON response whose body is already serialised (``data``), with the 1.15+
    cache headers as :func:`send_json`."""
    resp.status = status
    resp.content_type = JSON
    resp.data = data
    no_cache(req, resp)


def no_cache(
    req: falcon.Request, resp: falcon.Response, last_modified: dt.datetime | None = None
) -> None:
    """From microversion 1.15: ``cache-control: no-cache`` and ``last-modified``."""
    if want(req, (1, 15)):
        resp.set_header("cache-control", "no-cache")
        if last_modified is None:
            resp.set_header("last-modified", _http_now())
        else:
            resp.last_modified = last_modified


#: The current second and its HTTP date (one immutable pair: threads read it whole).
_NOW: tuple[int, str] = (-1, "")


def _http_now() -> str:
    """The HTTP date of now, as ``falcon.util.dt_to_http(datetime.now(UTC))``, formatted
    once a second."""
    global _NOW
    second = int(time.time())
    found = _NOW
    if found[0] != second:
        found = _NOW = (second, dt_to_http(dt.datetime.fromtimestamp(second, dt.UTC)))
    return found[1]


def empty(resp: falcon.Response, status: int = 204) -> None:
    """A bodiless response (201/204): no body, no content-type."""
    resp.status = status
    resp.content_type = None
    resp.data = b""


def set_location(req: falcon.Request, resp: falcon.Response, path: str) -> None:
    """``location: <scheme>://<host><mount point><path>`` — absolute, as Placement's
    (WebOb makes it so)."""
    resp.location = f"{req.scheme}://{req.netloc}{url(req, path)}"


def url(req: falcon.Request, path: str) -> str:
    """``path`` under the app's mount point (``SCRIPT_NAME``), for links and ``location``."""
    return f"{req.env.get('SCRIPT_NAME', '')}{path}"
