"""rpquery's own API routes ``/rpquery/why`` and ``/rpquery/headroom`` (outside
Placement's namespace), on every backend: the library's answers as JSON, bad input a
400, Placement's authentication in front."""

from __future__ import annotations

from rpquery.api import make_app
from rpquery.db import Database
from tests.api_client import WsgiClient
from tests.factories import provider

ADMIN = {"x-auth-token": "admin", "accept": "application/json"}


def _cloud(db: Database) -> WsgiClient:
    with db.begin() as conn:
        provider(conn, "incl_cn", inventory={"VCPU": 8})
        provider(conn, "excl_no_capacity", inventory={"VCPU": 2})
        provider(conn, "excl_forbidden_trait", inventory={"VCPU": 8}, traits=["CUSTOM_GPU"])
    return WsgiClient(make_app(db))


def test_why_route(db: Database) -> None:
    client = _cloud(db)
    r = client.simulate_get(
        "/rpquery/why?resources=VCPU:4&required=!CUSTOM_GPU&examples=1",
        headers=ADMIN,
    )
    assert r.status_code == 200, r.text
    assert r.json["hosts"] == 3 and r.json["fit"] == 1
    assert [(x["code"], x["count"]) for x in r.json["reasons"]] == [
        ("forbidden_trait", 1),
        ("no_capacity", 1),
    ]
    assert r.json["reasons"][1]["largest_free"] == 2.0
    assert r.json["fit_examples"][0]["name"] == "incl_cn"


def test_headroom_route(db: Database) -> None:
    client = _cloud(db)
    r = client.simulate_get("/rpquery/headroom?resources=VCPU:2&group_by=trait", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json["total"] == 9 and r.json["method"] == "sql"
    assert {h["name"]: h["count"] for h in r.json["hosts"]} == {
        "incl_cn": 4,
        "excl_forbidden_trait": 4,
        "excl_no_capacity": 1,
    }
    assert [(g["label"], g["count"]) for g in r.json["groups"]] == [
        ("(none)", 5),
        ("CUSTOM_GPU", 4),
    ]


def test_bad_input_is_400_and_a_token_is_needed(db: Database) -> None:
    client = _cloud(db)
    for path, qs in (
        ("/rpquery/why", "resources=VCPU:x"),
        ("/rpquery/why", "resources=VCPU:1&examples=-1"),
        ("/rpquery/headroom", "resources=VCPU:1&group_by=rack"),
        ("/rpquery/headroom", "resources=VCPU:1&required=CUSTOM_NOPE"),
    ):
        r = client.simulate_get(f"{path}?{qs}", headers=ADMIN)
        assert r.status_code == 400, (path, qs, r.text)
    assert client.simulate_get("/rpquery/why?resources=VCPU:1").status_code == 401
