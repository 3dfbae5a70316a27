"""The API framework through the WSGI app: microversion negotiation, errors, auth,
content checks, routing (405/404), request ids — on every backend."""

from __future__ import annotations

import json

import falcon
import falcon.testing
import pytest

from rpquery.api import make_app
from rpquery.api.auth import Identity
from rpquery.api.errors import ApiError, error_media_type
from rpquery.api.microversion import parse_header
from rpquery.api.routing import route
from rpquery.api.util import json_body, send_json
from tests.api_client import WsgiClient

ADMIN = {"x-auth-token": "admin", "accept": "application/json"}


@pytest.fixture
def client(db):  # type: ignore[no-untyped-def]
    return WsgiClient(make_app(db))


def _v(version: str) -> dict[str, str]:
    return {**ADMIN, "openstack-api-version": f"placement {version}"}


def test_version_header_parsing() -> None:
    assert str(parse_header(None)) == "1.0"
    assert str(parse_header("placement latest")) == "1.39"
    assert str(parse_header("compute 2.1, placement 1.14")) == "1.14"
    assert str(parse_header("compute 2.1")) == "1.0"
    for bad, status in (
        ("placement 1.2.3", 400),
        ("placement pony", 400),
        ("placement 1.40", 406),
        ("placement 0.5", 406),
    ):
        with pytest.raises(ApiError) as info:
            parse_header(bad)
        assert info.value.status == status


def test_root_document_and_version_echo(client) -> None:  # type: ignore[no-untyped-def]
    r = client.simulate_get("/", headers={"openstack-api-version": "placement latest"})
    assert r.status_code == 200
    assert r.headers["openstack-api-version"] == "placement 1.39"
    assert r.headers["vary"] == "openstack-api-version"
    assert r.headers["x-openstack-request-id"].startswith("req-")
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["last-modified"].endswith(" GMT")
    version = r.json["versions"][0]
    assert (version["id"], version["min_version"], version["max_version"]) == (
        "v1.0",
        "1.0",
        "1.39",
    )
    old = client.simulate_get("/")
    assert old.headers["openstack-api-version"] == "placement 1.0"
    assert "last-modified" not in old.headers and "cache-control" not in old.headers


def test_bad_and_unsupported_versions(client) -> None:  # type: ignore[no-untyped-def]
    r = client.simulate_get(
        "/", headers={"accept": "application/json", "openstack-api-version": "placement 0.5"}
    )
    assert r.status_code == 406
    error = r.json["errors"][0]
    assert error["title"] == "Not Acceptable"
    assert "Unacceptable version header: 0.5" in error["detail"]
    assert (error["min_version"], error["max_version"]) == ("1.0", "1.39")
    r = client.simulate_get(
        "/",
        headers={"accept": "application/json", "openstack-api-version": "placement pony.horse"},
    )
    assert r.status_code == 400
    assert "invalid version string: pony.horse" in r.json["errors"][0]["detail"]
    html = client.simulate_get(
        "/", headers={"accept": "text/html", "openstack-api-version": "placement 0.5"}
    )
    assert html.status_code == 406 and html.headers["content-type"].startswith("text/html")


def test_error_body_code_from_1_23_and_request_id(client) -> None:  # type: ignore[no-untyped-def]
    old = client.simulate_get("/no/such/path", headers=_v("1.22"))
    assert old.status_code == 404 and "code" not in old.json["errors"][0]
    new = client.simulate_get("/no/such/path", headers=_v("1.23"))
    error = new.json["errors"][0]
    assert error["code"] == "placement.undefined_code"
    assert error["request_id"] == new.headers["x-openstack-request-id"]
    assert new.headers["openstack-api-version"] == "placement 1.23"
    assert new.headers["vary"] == "openstack-api-version"


def test_405_lists_allowed_methods(client) -> None:  # type: ignore[no-untyped-def]
    r = client.simulate_post("/", headers={"content-type": "application/xml"})
    assert r.status_code == 405
    assert r.headers["allow"] == "GET"
    assert r.headers["openstack-api-version"] == "placement 1.0"


def test_noauth2(client) -> None:  # type: ignore[no-untyped-def]
    assert client.simulate_get("/").status_code == 200
    assert client.simulate_get("/healthcheck").status_code == 200
    assert (
        client.simulate_get("/anything", headers={"accept": "application/json"}).status_code == 401
    )


def test_content_length_needs_content_type(client) -> None:  # type: ignore[no-untyped-def]
    r = client.simulate_get("/", body="{}", headers={"content-type": ""})
    assert r.status_code == 400
    assert "content-type header required" in r.text


def _echo(req: falcon.Request, resp: falcon.Response) -> None:
    body = json_body(
        req, {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
    )
    send_json(req, resp, body, status=201)


def _app_with_echo(db):  # type: ignore[no-untyped-def]
    routes = [route("/echo", "POST", _echo, "placement:echo", since="1.2", body=True, accept=True)]
    seen: list[str] = []

    def authorizer(identity: Identity, rule: str, target: object) -> None:
        seen.append(rule)
        if not identity.is_admin:
            raise ApiError(403, f"Policy does not allow {rule} to be performed.")

    return WsgiClient(make_app(db, routes=routes, authorizer=authorizer)), seen


def test_route_version_content_policy_and_json_checks(db) -> None:  # type: ignore[no-untyped-def]
    client, seen = _app_with_echo(db)
    ok = json.dumps({"name": "x"})
    ctype = {"content-type": "application/json"}
    assert (
        client.simulate_post("/echo", body=ok, headers={**_v("1.1"), **ctype}).status_code == 404
    )
    assert (
        client.simulate_post(
            "/echo", body=ok, headers={**_v("1.2"), "content-type": "text/plain"}
        ).status_code
        == 415
    )
    assert (
        client.simulate_post(
            "/echo", body=ok, headers={**_v("1.2"), **ctype, "accept": "text/plain"}
        ).status_code
        == 406
    )
    user = {**_v("1.2"), **ctype, "x-auth-token": "alice"}
    denied = client.simulate_post("/echo", body=ok, headers=user)
    assert denied.status_code == 403 and "placement:echo" in denied.text
    assert seen == ["placement:echo"]
    bad = client.simulate_post("/echo", body="{", headers={**_v("1.2"), **ctype})
    assert bad.status_code == 400 and "Malformed JSON" in bad.text
    invalid = client.simulate_post("/echo", body="{}", headers={**_v("1.2"), **ctype})
    assert invalid.status_code == 400
    assert "JSON does not validate: 'name' is a required property" in invalid.text
    good = client.simulate_post("/echo", body=ok, headers={**_v("1.2"), **ctype})
    assert good.status_code == 201 and good.json == {"name": "x"}


def test_error_media_type_follows_accept() -> None:
    assert error_media_type(None) == "application/json"
    assert error_media_type("application/json") == "application/json"
    assert error_media_type("*/*") == "application/json"
    assert error_media_type("text/html") == "text/html"
    assert error_media_type("text/plain") == "text/plain"
    assert error_media_type("text/html;q=0.5, application/json") == "application/json"


def test_cors_for_configured_origins(db) -> None:  # type: ignore[no-untyped-def]
    client = WsgiClient(
        make_app(
            db, cors_origins=["http://ok.example"], cors_allow_headers=["openstack-api-version"]
        )
    )
    preflight = {"access-control-request-method": "GET"}
    ok = client.simulate_options("/", headers={**preflight, "origin": "http://ok.example"})
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-headers"] == "openstack-api-version"
    other = client.simulate_options("/", headers={**preflight, "origin": "http://bad.example"})
    assert other.status_code == 200 and "access-control-allow-headers" not in other.headers
    get = client.simulate_get("/", headers={"origin": "http://ok.example"})
    assert get.headers["access-control-allow-origin"] == "http://ok.example"
    bad = client.simulate_get("/", headers={"origin": "http://bad.example"})
    assert "access-control-allow-origin" not in bad.headers
    plain = WsgiClient(make_app(db))
    assert plain.simulate_options("/", headers=preflight).status_code == 405


def test_utf8_decoded_path_is_tolerated(db) -> None:  # type: ignore[no-untyped-def]
    """httpx's WSGI transport puts a UTF-8-decoded PATH_INFO in the environ (PEP 3333
    wants latin-1): still a 404, not a crash."""
    app = make_app(db)
    environ = falcon.testing.create_environ(
        "/x", headers={"accept": "application/json", "x-auth-token": "admin"}
    )
    environ["PATH_INFO"] = "/resources_providers/\u2603"
    seen: list[str] = []
    body = b"".join(app(environ, lambda status, headers: seen.append(status)))
    assert seen == ["404 Not Found"] and json.loads(body)["errors"][0]["status"] == 404


def test_schemas_are_checked_once_not_per_request(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """jsonschema.validate checks the schema itself on every call (~10 ms for the provider
    list's); the API builds one checked validator per schema."""
    import jsonschema

    from rpquery.api import util

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    cls = jsonschema.validators.validator_for(schema)
    calls: list[object] = []
    original = cls.check_schema
    monkeypatch.setattr(
        cls, "check_schema", classmethod(lambda c, s: calls.append(s) or original(s))
    )
    for _ in range(3):
        util.validate({"n": 1}, schema, "prefix")
    with pytest.raises(ApiError) as info:
        util.validate({"n": "x"}, schema, "Invalid query string parameters")
    assert "Invalid query string parameters: 'x' is not of type 'integer'" in info.value.message
    assert calls == [schema]
