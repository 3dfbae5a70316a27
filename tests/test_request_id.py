"""Request ids as OpenStack keeps them (rpquery.api.request_id): oslo.middleware's rule for
an inbound ``X-OpenStack-Request-ID``, a local id on every answer (auth_token's 401s
too), and both ids on every log line made while the request runs, errors included."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator

import pytest
from oslo_middleware import request_id as oslo_request_id

from rpquery.api import make_app, request_id
from rpquery.api.routing import route
from tests.api_client import WsgiClient

GLOBAL = f"req-{uuid.uuid4()}"
HEADERS = {"x-auth-token": "admin", "accept": "application/json"}


def test_the_inbound_rule_is_oslo_middlewares() -> None:
    samples = [GLOBAL, GLOBAL.upper(), GLOBAL[4:], GLOBAL + "x", "req-", "", "req-1-2-3-4-5",
               f"req-{uuid.uuid4().hex}", f" {GLOBAL}", "req-" + "g" * 8 + GLOBAL[12:]]
    for sample in samples:
        expected = bool(re.match(oslo_request_id.ID_FORMAT, sample))
        assert request_id.valid_global_id(sample) is expected, sample


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    handler = _Records()
    request_id.install_log_filter(handler)
    logger = logging.getLogger("rpquery")
    before = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.lines
    logger.removeHandler(handler)
    logger.setLevel(before)


def _logs(req, resp) -> None:  # type: ignore[no-untyped-def]
    logging.getLogger("rpquery.api.test").info("handling")
    if req.get_param("fail"):
        raise RuntimeError("boom")
    resp.content_type = "application/json"
    resp.text = "{}"


def test_ids_on_answers_and_every_log_line(db, log_lines) -> None:  # type: ignore[no-untyped-def]
    app = make_app(db, routes=[route("/probe", "GET", _logs, "placement:traits:list")])
    client = WsgiClient(app)
    answer = client.simulate_get("/probe", headers={**HEADERS, "x-openstack-request-id": GLOBAL})
    local = answer.headers["x-openstack-request-id"]
    assert answer.status_code == 200 and request_id.valid_global_id(local) and local != GLOBAL
    assert log_lines == [line for line in log_lines if f"[{local} {GLOBAL} admin admin]" in line]
    assert len(log_lines) == 1 and log_lines[0].endswith("handling")
    # an invalid inbound id is dropped (logged as "-"), never echoed
    answer = client.simulate_get("/probe?fail=1", headers={**HEADERS,
                                                            "x-openstack-request-id": "evil"})
    local = answer.headers["x-openstack-request-id"]
    assert answer.status_code == 500 and "evil" not in answer.text
    mine = [line for line in log_lines if f"[{local} - admin admin]" in line]
    assert len(mine) == 2 and "unexpected error: boom" in mine[1]
    # outside a request, the ids are "-"
    logging.getLogger("rpquery.api.test").info("idle")
    assert "[- - - -] idle" in log_lines[-1]


def test_the_outer_middleware_ids_answers_it_did_not_make() -> None:
    def refuse(environ, start_response):  # type: ignore[no-untyped-def]
        assert environ[request_id.ENV_GLOBAL_REQUEST_ID] == GLOBAL
        assert request_id.current().request_id == environ[request_id.ENV_REQUEST_ID]
        start_response("401 Unauthorized", [("content-type", "text/plain")])
        return [b"no"]

    seen: list[tuple[str, list[tuple[str, str]]]] = []
    wrapped = request_id.RequestIdMiddleware(refuse)
    wrapped({"HTTP_X_OPENSTACK_REQUEST_ID": GLOBAL}, lambda s, h, e=None: seen.append((s, h)))
    (status, headers), = seen
    ids = dict(headers)
    assert status.startswith("401") and request_id.valid_global_id(ids["x-openstack-request-id"])
    assert request_id.current() == request_id.RequestIds()
