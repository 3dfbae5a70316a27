"""Hostile input to the app itself, on every backend: bodies that are not UTF-8, JSON
nested without end, microversions that only ``int()`` would read. Each is refused with
a 400 in Placement's JSON error shape, whose text does not grow with the input.

(The server in front of the app, its limits and slow clients: ``test_api_serving_limits``.)
"""

from __future__ import annotations

import json
from typing import Any

import falcon.testing
import pytest

from rpquery.api import make_app
from rpquery.api.errors import ApiError
from rpquery.api.microversion import parse_header
from rpquery.api.util import MAX_JSON_DEPTH, parse_json

HEADERS = {
    "x-auth-token": "admin",
    "accept": "application/json",
    "content-type": "application/json",
    "openstack-api-version": "placement 1.39",
}


def call(app: Any, method: str, path: str, body: bytes, **headers: str) -> tuple[int, Any]:
    """One request through the WSGI app with a raw body; ``(status, decoded JSON)``."""
    environ = falcon.testing.create_environ(
        path=path, method=method, headers={**HEADERS, **headers}, body=body
    )
    seen: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
        seen["status"] = int(status.split()[0])
        seen["type"] = dict((k.lower(), v) for k, v in response_headers).get("content-type")

    raw = b"".join(app(environ, start_response))
    if not raw:
        return seen["status"], None
    assert seen["type"] == "application/json", raw[:200]
    return seen["status"], json.loads(raw)


def one_error(answer: dict[str, Any], status: int) -> dict[str, Any]:
    """The single error entry of Placement's error shape, checked."""
    (entry,) = answer["errors"]
    assert entry["status"] == status and entry["code"] == "placement.undefined_code"
    assert entry["request_id"].startswith("req-")
    return entry


@pytest.fixture
def app(db):  # type: ignore[no-untyped-def]
    return make_app(db)


@pytest.mark.parametrize(
    "body",
    [b"[" * 100_000, b'{"a":' * 50_000, b"[" * 900 + b"]" * 900, b'{"a":' * 40 + b"1" + b"}" * 40],
    ids=["array-100000", "object-50000", "array-900-closed", "object-40-closed"],
)
def test_deep_json_is_a_400_not_a_recursion_error(app, body: bytes) -> None:  # type: ignore[no-untyped-def]
    status, answer = call(app, "POST", "/resource_classes", body)
    entry = one_error(answer, 400)
    assert f"Malformed JSON: nested deeper than {MAX_JSON_DEPTH} levels" in entry["detail"]
    assert len(entry["detail"]) < 300


def test_json_as_deep_as_the_limit_is_parsed() -> None:
    deepest = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert parse_json(deepest) is not None
    with pytest.raises(ApiError):
        parse_json(b"[" + deepest + b"]")
    # brackets inside strings are not nesting
    assert parse_json(json.dumps({"name": "[" * 100}).encode()) == {"name": "[" * 100}


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32", "utf-8-sig"])
def test_a_body_that_is_not_utf8_is_refused_as_placement_does(app, encoding: str) -> None:  # type: ignore[no-untyped-def]
    body = json.dumps({"name": "CUSTOM_UTF16"}).encode(encoding)
    status, answer = call(app, "POST", "/resource_classes", body)
    assert "Malformed JSON:" in one_error(answer, 400)["detail"]
    status, answer = call(app, "GET", "/resource_classes/CUSTOM_UTF16", b"")
    assert status == 404  # nothing was written


def test_utf8_body_is_still_accepted(app) -> None:  # type: ignore[no-untyped-def]
    status, _ = call(
        app, "POST", "/resource_classes", json.dumps({"name": "CUSTOM_UTF8"}).encode()
    )
    assert status == 201


@pytest.mark.parametrize(
    "value",
    ["1.3_9", "", "1. 3", "+1.3", "1.-0", "01.39", "1.039", "\uff11.\uff13", "1.3.0", "LATEST"],
)
def test_malformed_microversions_are_a_400(app, value: str) -> None:  # type: ignore[no-untyped-def]
    header = f"placement {value}"
    with pytest.raises(ApiError) as info:
        parse_header(header)
    assert info.value.status == 400
    environ_value = header.encode("utf-8").decode("latin-1")  # how a server hands it on
    status, answer = call(
        app, "GET", "/resource_providers", b"", **{"openstack-api-version": environ_value}
    )
    (entry,) = answer["errors"]
    assert status == 400 and "Invalid microversion: invalid version string" in entry["detail"]


def test_well_formed_microversions_still_parse() -> None:
    assert str(parse_header("placement 1.39")) == "1.39"
    assert str(parse_header("placement  1.0 ")) == "1.0"
    assert str(parse_header("compute 2.1")) == "1.0"
    assert str(parse_header("placement latest")) == "1.39"


def test_microversion_errors_do_not_grow_with_the_header() -> None:
    for text in ("9" * 5000, "1." + "9" * 5000, "x" * 8000):
        with pytest.raises(ApiError) as info:
            parse_header(f"placement {text}")
        assert info.value.status == 400 and len(info.value.message) < 120
