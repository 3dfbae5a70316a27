"""A query string's parameters checked against its JSON schema without jsonschema's
walk, when they pass.

A query schema (``GET /allocation_candidates``, ``/usages``, ``/resource_providers``,
``/traits``) is an object of string-valued properties, so its checks come down to a few
string tests per parameter: a ``pattern``, a length, an ``enum``, a ``format``. jsonschema
walks the schema for every request (~20-30 us a request, a validator per keyword and
subschema); :func:`compile_query_schema` turns the schema into those tests once, and
:func:`rpquery.api.util.validate_query` asks jsonschema only when they fail, for the
message of the error it reports (so every refusal is worded as before).

The tests accept exactly what jsonschema accepts for a mapping of strings (the
keywords' meaning for a string instance, ``pattern`` by ``re.search`` as jsonschema
does); a schema with any other keyword, or an object keyword other than
``properties``, ``patternProperties``, ``required`` and ``additionalProperties``, is not
compiled (``None``) and jsonschema checks every request.

>>> check = compile_query_schema({
...     "type": "object",
...     "properties": {"limit": {"type": ["integer", "string"], "pattern": "^[1-9][0-9]*$"}},
...     "additionalProperties": False,
... }, lambda value, format: True)
>>> check({"limit": "10"}), check({"limit": "0"}), check({"other": "1"})
(True, False, False)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["QueryCheck", "compile_query_schema"]

#: Whether a mapping of parameter names to string values is valid.
QueryCheck = Callable[[Mapping[str, str]], bool]
#: ``(value, format name) -> conforms`` (a jsonschema ``FormatChecker``'s ``conforms``).
FormatTest = Callable[[str, str], bool]
#: Whether a string passes (any true value).
ValueCheck = Callable[[str], object]

_OBJECT_KEYWORDS = frozenset(
    {"type", "properties", "patternProperties", "required", "additionalProperties"}
)
#: Keywords that hold for any string (they constrain numbers, or only annotate).
_NUMERIC_OR_NOTES = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "description",
        "title",
    }
)
_STRING_KEYWORDS = frozenset({"type", "pattern", "minLength", "maxLength", "enum", "format"})


def compile_query_schema(schema: Mapping[str, Any], conforms: FormatTest) -> QueryCheck | None:
    """The tests of ``schema`` for a mapping of strings, or ``None`` when ``schema``
    uses a keyword they do not cover."""
    if not set(schema) <= _OBJECT_KEYWORDS or schema.get("type", "object") != "object":
        return None
    additional = schema.get("additionalProperties", True)
    if additional not in (True, False):
        return None
    properties: dict[str, ValueCheck] = {}
    for name, sub in schema.get("properties", {}).items():
        found = _value_check(sub, conforms)
        if found is None:
            return None
        properties[name] = found
    patterns: list[tuple[re.Pattern[str], ValueCheck]] = []
    for pattern, sub in schema.get("patternProperties", {}).items():
        found = _value_check(sub, conforms)
        if found is None:
            return None
        patterns.append((re.compile(pattern), found))
    return _object_check(properties, patterns, tuple(schema.get("required", ())), additional)


def _object_check(
    properties: dict[str, ValueCheck],
    patterns: list[tuple[re.Pattern[str], ValueCheck]],
    required: tuple[str, ...],
    additional: bool,
) -> QueryCheck:
    """jsonschema's object rules: every required name present; a name's value passes
    its property's test and the test of every pattern the name matches; a name neither
    a property nor matching a pattern only if additional properties are allowed."""

    def check(params: Mapping[str, str]) -> bool:
        for name in required:
            if name not in params:
                return False
        for name, value in params.items():
            if type(value) is not str:
                return False
            test = properties.get(name)
            if test is not None and not test(value):
                return False
            matched = test is not None
            for pattern, by_pattern in patterns:
                if pattern.search(name):
                    matched = True
                    if not by_pattern(value):
                        return False
            if not matched and not additional:
                return False
        return True

    return check


def _value_check(schema: Any, conforms: FormatTest) -> ValueCheck | None:
    """The test a string passes under ``schema``, or ``None`` (an unknown keyword)."""
    if not isinstance(schema, Mapping) or not set(schema) <= _STRING_KEYWORDS | _NUMERIC_OR_NOTES:
        return None
    kind = schema.get("type", "string")
    kinds = [kind] if isinstance(kind, str) else list(kind)
    if "string" not in kinds:
        return _never
    tests: list[ValueCheck] = []
    if "pattern" in schema:
        tests.append(re.compile(schema["pattern"]).search)
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    if low or high is not None:
        tests.append(lambda value: len(value) >= low and (high is None or len(value) <= high))
    if "enum" in schema:
        choices = [c for c in schema["enum"] if isinstance(c, str)]
        tests.append(lambda value: value in choices)
    if "format" in schema:
        name = schema["format"]
        tests.append(lambda value: conforms(value, name))
    if not tests:
        return _always
    if len(tests) == 1:
        return tests[0]
    return lambda value: all(test(value) for test in tests)


def _always(value: str) -> bool:
    return True


def _never(value: str) -> bool:
    return False
