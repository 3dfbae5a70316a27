"""What the REST app keeps between requests answers as if worked out anew: the HTTP date
of ``last-modified`` (formatted once a second), the microversion of a header and the
``Accept`` check (kept per header value), and the local request id (a fresh uuid4 each
request, written without ``uuid.UUID``)."""

from __future__ import annotations

import datetime as dt
import time
import uuid

import pytest
from falcon.util import dt_to_http

from rpquery.api import request_id, util
from rpquery.api.errors import ApiError
from rpquery.api.microversion import parse_header
from rpquery.api.routing import _accepts_json


def _same_second(read: object) -> tuple[int, object]:
    """``read()`` and the second it ran in (asked again if the clock ticked meanwhile)."""
    while True:
        before = int(time.time())
        value = read() if callable(read) else read
        if int(time.time()) == before:
            return before, value


def test_the_http_date_is_nows_and_moves_with_the_clock() -> None:
    second, text = _same_second(util._http_now)
    assert text == dt_to_http(dt.datetime.fromtimestamp(second, dt.UTC))
    assert text == dt_to_http(dt.datetime.now(dt.UTC)) or int(time.time()) != second
    time.sleep(second + 1.05 - time.time())
    later, moved = _same_second(util._http_now)
    assert later > second and moved != text
    assert moved == dt_to_http(dt.datetime.fromtimestamp(later, dt.UTC))


@pytest.mark.parametrize(
    "header", ["placement 1.3_9", "placement 2.0", "placement", "placement " + "9" * 100]
)
def test_a_refused_microversion_is_refused_every_time(header: str) -> None:
    statuses = []
    for _ in range(2):
        with pytest.raises(ApiError) as refused:
            parse_header(header)
        statuses.append(refused.value.status)
    assert statuses[0] == statuses[1] and statuses[0] in (400, 406)


def test_a_kept_microversion_is_the_headers_own() -> None:
    assert [
        str(parse_header(h)) for h in ("placement 1.14", "placement 1.2", "placement 1.14")
    ] == [
        "1.14",
        "1.2",
        "1.14",
    ]
    long = "compute 2.1, " * 10 + "placement 1.20"
    assert len(long) > 64 and str(parse_header(long)) == "1.20"


def test_the_accept_check_is_the_headers_own() -> None:
    assert [_accepts_json(a) for a in ("text/html", "application/json", "text/html")] == [
        False,
        True,
        False,
    ]
    long = "text/html;q=0.9, " * 20 + "application/json;q=0"
    assert len(long) > 256 and not _accepts_json(long)


def test_each_request_id_is_a_fresh_uuid4() -> None:
    ids = [request_id.ids_for({}).request_id for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for value in ids:
        assert request_id.valid_global_id(value)
        parsed = uuid.UUID(value[4:])
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert f"req-{parsed}" == value
    # every bit but the version and variant ones varies
    seen_ones = 0
    for value in ids:
        seen_ones |= uuid.UUID(value[4:]).int
    assert bin(seen_ones).count("1") == 128 - 4
