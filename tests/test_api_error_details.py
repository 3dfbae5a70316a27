"""Every error ``detail`` is one line of bounded length, as clients read it.

The OpenStack client prints only the last line of a ``detail`` (osc-placement:
``detail.split('\\n')[-1].strip()``); a JSON-schema error spread over a dozen lines
showed an operator ``'NOT_CUSTOM' (HTTP 400)`` instead of the reason. And a detail must not
grow with the input: a schema error on a 100 KB value quotes a few hundred characters.
"""

from __future__ import annotations

import json
import re

import pytest

from rpquery.api.app import make_app
from rpquery.api.errors import QUOTED, ApiError, one_line, render
from rpquery.db import Database
from rpquery.errors import DETAIL_SHOWN
from tests.api_client import WsgiClient

HEADERS = {
    "X-Auth-Token": "admin",
    "OpenStack-API-Version": "placement 1.39",
    "Accept": "application/json",
    "Content-Type": "application/json",
}
ENVIRON = {"REQUEST_METHOD": "POST", "HTTP_ACCEPT": "application/json"}


def message_of(detail: str) -> str:
    """What follows the status explanation (Placement's layout: explanation, blank line)."""
    explanation, message = detail.split("\n\n", 1)
    assert "\n" not in explanation
    return message


@pytest.mark.parametrize("accept", ["application/json", "text/plain", "text/html"])
def test_a_message_on_several_lines_is_rendered_on_one(accept: str) -> None:
    error = ApiError(409, "first line\nsecond line\r\n  third")
    environ = {**ENVIRON, "HTTP_ACCEPT": accept}
    media, body = render(error, environ, version=(1, 39), request_id=None)
    text = body.decode()
    if media == "application/json":
        text = json.loads(text)["errors"][0]["detail"]
    assert "first line second line   third" in text
    assert "first line\n" not in text


def test_a_long_message_is_cut_and_says_how_long() -> None:
    cut = one_line("x" * 50_000)
    assert len(cut) < DETAIL_SHOWN + 20 and cut.endswith("…(50000 chars)")


@pytest.fixture
def client(sqlite_db: Database) -> WsgiClient:
    return WsgiClient(make_app(sqlite_db, auth="noauth2"))


def post(client: WsgiClient, path: str, body: object) -> dict[str, object]:
    got = client.simulate_request("POST", path, body=json.dumps(body), headers=HEADERS)
    assert got.status_code == 400, got.text
    return dict(got.json["errors"][0])


def test_the_clients_last_line_names_the_reason(client: WsgiClient) -> None:
    detail = str(post(client, "/resource_classes", {"name": "NOT_CUSTOM"})["detail"])
    last = detail.split("\n")[-1].strip()  # what osc-placement shows
    assert last.startswith("JSON does not validate: 'NOT_CUSTOM' does not match")
    assert "Failed validating 'pattern' in schema['properties']['name']" in last


def test_a_schema_error_quotes_a_bounded_part_of_the_input(client: WsgiClient) -> None:
    body = {"name": "CUSTOM_" + "A" * 100_000}
    message = message_of(str(post(client, "/resource_classes", body)["detail"]))
    assert "\n" not in message and len(message) < 3 * QUOTED + 400, len(message)
    cuts = re.findall(r"…\((\d+) chars\)", message)  # the message's quote and the dump's
    assert len(cuts) == 2 and all(int(n) > 100_000 for n in cuts), message
    assert "Failed validating 'maxLength' in schema['properties']['name']" in message
