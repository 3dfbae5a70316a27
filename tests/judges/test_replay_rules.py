"""The replay's comparison forgives only what tests/judges/replay.py lists, and names the request.

Each test replays a hand-made exchange against a tiny WSGI app that answers a fixed body.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from tests.judges import replay

UUID_A = "11111111-1111-4111-8111-111111111111"
UUID_B = "22222222-2222-4222-8222-222222222222"


def exchange(
    answer: Any,
    *,
    status: int = 200,
    method: str = "GET",
    path: str = "/x",
    body: str = "",
    location: str = "",
    i: int = 0,
) -> dict[str, Any]:
    return {
        "case": "case-1",
        "i": i,
        "method": method,
        "path": path,
        "query": "",
        "body": body,
        "headers": {"x-auth-token": "admin"},
        "status": status,
        "answer_headers": {"location": location} if location else {},
        "answer": answer if isinstance(answer, str) else json.dumps(answer),
    }


def app_answering(*answers: tuple[int, Any, str]) -> Callable[..., Iterable[bytes]]:
    """A WSGI app giving ``(status, body, location)`` answers in turn."""
    queue = list(answers)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        status, body, location = queue.pop(0)
        headers = [("Location", location)] if location else []
        start_response(f"{status} X", headers)
        return [(body if isinstance(body, str) else json.dumps(body)).encode()]

    return app


def error(detail: str, request_id: str) -> dict[str, Any]:
    return {
        "errors": [
            {"status": 409, "title": "Conflict", "detail": detail, "request_id": request_id}
        ]
    }


def test_request_ids_and_key_order_are_forgiven() -> None:
    placement = exchange(error("conflict", "req-1"), status=409)
    ours = {
        "errors": [
            {"request_id": "req-2", "detail": "conflict", "title": "Conflict", "status": 409}
        ]
    }
    assert replay.replay_case(app_answering((409, ours, "")), [placement]) == []


def test_an_error_text_that_differs_is_named_with_its_request() -> None:
    placement = exchange(
        error("Inventory in use.", "req-1"),
        status=409,
        method="PUT",
        path=f"/resource_providers/{UUID_A}/inventories",
        i=7,
    )
    found = replay.replay_case(app_answering((409, error("in use", "req-2"), "")), [placement])
    assert len(found) == 1
    report = replay.report(found)
    assert f"case-1 request 7: PUT /resource_providers/{UUID_A}/inventories" in report
    assert '-   "detail": "Inventory in use."' in report


def test_a_generation_that_differs_is_a_difference() -> None:
    placement = exchange({"resource_provider_generation": 4, "allocations": {}})
    ours = {"resource_provider_generation": 5, "allocations": {}}
    assert len(replay.replay_case(app_answering((200, ours, "")), [placement])) == 1


def test_traits_compare_as_sets_but_other_lists_in_order() -> None:
    traits = exchange({"traits": ["B", "A"], "resource_provider_generation": 1})
    assert (
        replay.replay_case(
            app_answering((200, {"traits": ["A", "B"], "resource_provider_generation": 1}, "")),
            [traits],
        )
        == []
    )
    usages = exchange({"resource_providers": [{"name": "b"}, {"name": "a"}]})
    swapped = {"resource_providers": [{"name": "a"}, {"name": "b"}]}
    assert len(replay.replay_case(app_answering((200, swapped, "")), [usages])) == 1


def test_providers_of_a_consumer_compare_in_order() -> None:
    path = f"/allocations/{UUID_A}"
    placement = exchange(json.dumps({"allocations": {"p2": {}, "p1": {}}}), path=path)
    ours = json.dumps({"allocations": {"p1": {}, "p2": {}}})
    found = replay.replay_case(app_answering((200, ours, "")), [placement])
    assert len(found) == 1
    assert "providers in order" in found[0].diff()


def test_a_generated_provider_uuid_is_paired_with_rpquery_s() -> None:
    created = exchange(
        "",
        status=201,
        method="POST",
        path="/resource_providers",
        body='{"name": "rp"}',
        location=f"http://{UUID_B}/placement/resource_providers/{UUID_A}",
    )
    shown = exchange({"uuid": UUID_A, "name": "rp"}, path=f"/resource_providers/{UUID_A}", i=1)
    mine = "33333333-3333-4333-8333-333333333333"
    seen: list[str] = []
    app = app_answering(
        (201, "", f"/placement/resource_providers/{mine}"), (200, {"uuid": mine, "name": "rp"}, "")
    )

    def spying(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        seen.append(environ["PATH_INFO"])
        return app(environ, start_response)

    assert replay.replay_case(spying, [created, shown]) == []
    assert seen == ["/resource_providers", f"/resource_providers/{mine}"]
