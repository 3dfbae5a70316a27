"""The compiled query-schema tests (:mod:`rpquery.api.query_schema`) accept exactly what
jsonschema accepts: every query schema of the API compiles, and on generated
parameters (names each schema knows, names its patterns match and miss, values its
patterns, lengths, enums and formats take and refuse) the compiled test and jsonschema
agree on each one. A refused query still gets jsonschema's error, word for word."""

from __future__ import annotations

import itertools
import random
import uuid
from typing import Any

import jsonschema
import pytest

from rpquery.api import schemas
from rpquery.api.errors import ApiError
from rpquery.api.handlers import allocation_candidates as candidates
from rpquery.api.handlers import usages
from rpquery.api.query_schema import compile_query_schema
from rpquery.api.util import _FORMATS, validate, validate_query

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
