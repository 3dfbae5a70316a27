"""The compiled query-schema tests (:mod:`rpquery.api.query_schema`) accept exactly what
jsonschema accepts: every query schema of the API compiles, and on generated
parameters (names each schema knows, names its patterns match and miss, values its
patterns, lengths, enums and formats take and refuse) the compiled test and jsonschema
agree on each one. A refused query still gets jsonschema's error, word for word.
A ``GET /allocation_candidates`` query is parsed once per query string and microversion
(on every backend): the kept reading never stands for another version, a refused
query, or what the database holds."""

from __future__ import annotations

import itertools
import random
import uuid
from typing import Any

import jsonschema
import pytest

from rpquery.api import make_app, schemas
from rpquery.api.errors import ApiError
from rpquery.api.handlers import allocation_candidates as candidates
from rpquery.api.handlers import usages
from rpquery.api.query_schema import compile_query_schema
from rpquery.api.util import _FORMATS, validate, validate_query
from tests.api_client import Result, WsgiClient
from tests.factories import provider

QUERY_SCHEMAS: dict[str, dict[str, Any]] = {
    "candidates 1.10": candidates.SCHEMA_1_10,
    **{f"candidates {v[0]}.{v[1]}": s for v, s in candidates._SCHEMAS},
    "usages 1.9": usages.SCHEMA_1_9,
    "usages 1.38": usages.SCHEMA_1_38,
    "providers 1.0": schemas.LIST_PROVIDERS_1_0,
    "providers 1.3": schemas.LIST_PROVIDERS_1_3,
    "providers 1.4": schemas.LIST_PROVIDERS_1_4,
    "providers 1.14": schemas.LIST_PROVIDERS_1_14,
    "providers 1.18": schemas.LIST_PROVIDERS_1_18,
    "traits": schemas.LIST_TRAITS,
}

NAMES = [
    "resources", "resources1", "resources_NET1", "resources0", "resources01",
    "resources" + "x" * 65, "resources-a_B9", "resources!", "required", "required2",
    "member_of", "member_of_X", "in_tree", "in_tree3", "limit", "group_policy",
    "root_required", "same_subtree", "project_id", "user_id", "consumer_type", "name",
    "uuid", "associated", "", "other", "RESOURCES",
]  # fmt: skip
VALUES = [
    "", " ", "0", "1", "10", "01", "-1", "1.5", "VCPU:1", "none", "isolate", "Isolate",
    "all", "unknown", "INSTANCE", "MIGRATION", "instance", "all_of_it", "a" * 255,
    "a" * 256, "x" * 5000, "é", "10\n", "in:A,B", str(uuid.UUID(int=7)),
    uuid.UUID(int=7).hex, str(uuid.UUID(int=7)).upper(), "not-a-uuid",
]  # fmt: skip


def _is_valid(schema: dict[str, Any], params: dict[str, str]) -> bool:
    cls = jsonschema.validators.validator_for(schema)
    return bool(cls(schema, format_checker=_FORMATS).is_valid(params))


def _cases(schema: dict[str, Any], seed: int) -> list[dict[str, str]]:
    """Single parameters, every required one with each value, and random mixes."""
    rng = random.Random(seed)
    required = schema.get("required", [])
    cases = [{name: value} for name, value in itertools.product(NAMES, VALUES)]
    cases += [{**dict.fromkeys(required, v), "limit": w} for v in VALUES for w in ("5", "")]
    for _ in range(3000):
        names = rng.sample(NAMES, rng.randint(0, 5)) + rng.sample(required, len(required))
        cases.append({name: rng.choice(VALUES) for name in names})
    return cases


@pytest.mark.parametrize("name", sorted(QUERY_SCHEMAS))
def test_compiled_check_agrees_with_jsonschema(name: str) -> None:
    schema = QUERY_SCHEMAS[name]
    check = compile_query_schema(schema, _FORMATS.conforms)
    assert check is not None, f"{name} does not compile: every request would walk jsonschema"
    verdicts = {True: 0, False: 0}
    for params in _cases(schema, seed=len(name)):
        expected = _is_valid(schema, params)
        assert bool(check(params)) is expected, (name, params)
        verdicts[expected] += 1
    assert verdicts[True] > 50 and verdicts[False] > 50, verdicts  # both sides exercised


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
        {"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 1},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "array"},
    ],
)
def test_a_schema_beyond_the_tests_is_not_compiled(schema: dict[str, Any]) -> None:
    assert compile_query_schema(schema, _FORMATS.conforms) is None


def test_a_refused_query_gets_jsonschemas_error() -> None:
    params = {"resources": "VCPU:1", "limit": "0"}
    with pytest.raises(ApiError) as refused:
        validate_query(params, candidates.SCHEMA_1_36)
    with pytest.raises(ApiError) as walked:
        validate(params, candidates.SCHEMA_1_36, "Invalid query string parameters")
    assert refused.value.status == 400
    assert str(refused.value).startswith(
        "Invalid query string parameters: '0' does not match '^[1-9][0-9]*$'"
    )
    assert str(refused.value) == str(walked.value)
    validate_query({"resources": "VCPU:1", "limit": "10"}, candidates.SCHEMA_1_36)


# ---------------------------------------------------------------- parsed queries kept

FORBID = "/allocation_candidates?resources=VCPU:1&required=!HW_CPU_X86_AVX2&limit=2"


def _ask(client: WsgiClient, path: str, version: str = "1.39") -> Result:
    headers = {"x-auth-token": "admin", "openstack-api-version": f"placement {version}"}
    return client.simulate_request("GET", path, headers=headers)


def test_a_kept_query_is_read_again_at_another_microversion(db: Any) -> None:
    """The parsed query is kept per query string *and* microversion: a forbidden trait
    taken at 1.39 is still refused at 1.21, and the 1.39 answer is the same after that
    refusal; a refused query is refused again (never kept)."""
    with db.begin() as conn:
        cn1 = provider(conn, "cn1", inventory={"VCPU": 8})
    client = WsgiClient(make_app(db))
    first = _ask(client, FORBID)
    assert first.status_code == 200, first.text
    assert list(first.json["allocation_requests"][0]["allocations"]) == [cn1.uuid]
    for _ in range(2):
        old = _ask(client, FORBID, "1.21")
        assert old.status_code == 400
        assert "Expected 'required' parameter value of the form" in old.text
    assert _ask(client, FORBID).text == first.text
    bad = "/allocation_candidates?resources=VCPU:0"
    assert [_ask(client, bad).status_code for _ in range(2)] == [400, 400]


def test_a_kept_query_sees_the_database_as_it_is_now(db: Any) -> None:
    """Only the query's reading is kept, never what the database said: a class that
    did not exist, then does, and inventory added between two identical requests."""
    client = WsgiClient(make_app(db))
    path = "/allocation_candidates?resources=CUSTOM_MAGIC:1"
    unknown = _ask(client, path)
    assert unknown.status_code == 400 and "No such resource class CUSTOM_MAGIC" in unknown.text
    with db.begin() as conn:
        cn1 = provider(conn, "cn1", inventory={"CUSTOM_MAGIC": 4})
    found = _ask(client, path)
    assert found.status_code == 200, found.text
    assert list(found.json["provider_summaries"]) == [cn1.uuid]
    with db.begin() as conn:
        cn2 = provider(conn, "cn2", inventory={"CUSTOM_MAGIC": 4})
    assert sorted(_ask(client, path).json["provider_summaries"]) == sorted([cn1.uuid, cn2.uuid])


def test_a_long_query_is_answered_and_not_kept(db: Any) -> None:
    """A query longer than PARSED_CACHE_QUERY is parsed every time (the cache stays
    small whatever callers send) and answered as a short one."""
    with db.begin() as conn:
        provider(conn, "cn1", inventory={"VCPU": 8})
    client = WsgiClient(make_app(db))
    short = "/allocation_candidates?resources=VCPU:1&limit=5"
    long_path = short + "&limit=5" * (candidates.PARSED_CACHE_QUERY // 8)
    assert len(long_path) > candidates.PARSED_CACHE_QUERY
    before = candidates._parsed.cache_info().currsize
    answer = _ask(client, long_path)
    assert answer.status_code == 200, answer.text
    assert candidates._parsed.cache_info().currsize == before
    assert answer.text == _ask(client, short).text
