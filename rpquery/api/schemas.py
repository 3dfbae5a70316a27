"""JSON schemas of request bodies and query strings, by microversion.

The constraints are those of OpenStack Placement's ``placement/schemas/*.py``
(Apache-2.0, © OpenStack Foundation), restated here so that jsonschema's messages match
Placement's: a schema error's text dumps the failing part of the schema in its key order,
so the keys are in Placement's order too (``tests/test_api_schemas.py`` compares every
schema with Placement's own). Built with plain dict merges instead of deep copies.
"""

from __future__ import annotations

from typing import Any

from rpquery.models import CONSUMER_TYPE_MAX_LENGTH, CONSUMER_TYPE_RE

__all__ = [
    "CONSUMER_TYPE",
    "CONSUMER_TYPE_FILTER",
    "CUSTOM_PATTERN",
    "CUSTOM_TRAIT",
    "LIST_PROVIDERS_1_0",
    "LIST_PROVIDERS_1_14",
    "LIST_PROVIDERS_1_18",
    "LIST_PROVIDERS_1_3",
    "LIST_PROVIDERS_1_4",
    "LIST_TRAITS",
    "NULLABLE_UUID",
    "POST_INVENTORY",
    "POST_PROVIDER",
    "POST_PROVIDER_1_14",
    "POST_RESOURCE_CLASS",
    "PUT_AGGREGATES",
    "PUT_AGGREGATES_1_19",
    "PUT_INVENTORIES",
    "PUT_INVENTORY",
    "PUT_INVENTORY_RECORD",
    "PUT_PROVIDER",
    "PUT_PROVIDER_1_14",
    "PUT_PROVIDER_TRAITS",
    "PUT_RESOURCE_CLASS",
    "RC_PATTERN",
    "Schema",
    "TRAIT",
    "UUID",
]

Schema = dict[str, Any]

UUID: Schema = {"type": "string", "format": "uuid"}
NULLABLE_UUID: Schema = {"anyOf": [UUID, {"type": "null"}]}
RC_PATTERN = "^[A-Z0-9_]+$"
CUSTOM_PATTERN = "^CUSTOM_[A-Z0-9_]+$"
#: ``consumer_type`` of an allocation body (1.38): the model's rule,
#: :data:`rpquery.models.CONSUMER_TYPE_RE` (Placement's ``CONSUMER_TYPE_PATTERN``)
CONSUMER_TYPE: Schema = {
    "type": "string",
    "pattern": CONSUMER_TYPE_RE.pattern,
    "minLength": 1,
    "maxLength": CONSUMER_TYPE_MAX_LENGTH,
}
#: ``consumer_type`` of ``GET /usages`` (1.38): a type, ``all`` or ``unknown``
#: (Placement's ``CONSUMER_TYPE_GET_PATTERN``)
CONSUMER_TYPE_FILTER: Schema = {
    **CONSUMER_TYPE,
    "pattern": f"{CONSUMER_TYPE_RE.pattern}|^all|^unknown$",
}


def _object(properties: Schema, required: tuple[str, ...] = (), **extra: Any) -> Schema:
    """An object schema, its keys in Placement's order: a JSON-schema error dumps the
    failing part of the schema as it is ordered (``jsonschema``: ``sort_dicts=False``),
    so the same order gives the same text (tests/test_api_schemas.py compares)."""
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    schema.update(extra)
    return schema


def _with(schema: Schema, **properties: Any) -> Schema:
    """``schema`` with more (or replaced) properties."""
    return {**schema, "properties": {**schema["properties"], **properties}}


def _without(schema: Schema, *names: str) -> Schema:
    props = {k: v for k, v in schema["properties"].items() if k not in names}
    return {**schema, "properties": props}


# ---------------------------------------------------------------- resource providers

POST_PROVIDER = _object({"name": {"type": "string", "maxLength": 200}, "uuid": UUID}, ("name",))
PUT_PROVIDER = _without(POST_PROVIDER, "uuid")
POST_PROVIDER_1_14 = _with(POST_PROVIDER, parent_provider_uuid=NULLABLE_UUID)
PUT_PROVIDER_1_14 = _without(POST_PROVIDER_1_14, "uuid")

LIST_PROVIDERS_1_0 = _object({"name": {"type": "string"}, "uuid": UUID})
LIST_PROVIDERS_1_3 = _with(LIST_PROVIDERS_1_0, member_of={"type": "string"})
LIST_PROVIDERS_1_4 = _with(LIST_PROVIDERS_1_3, resources={"type": "string"})
LIST_PROVIDERS_1_14 = _with(LIST_PROVIDERS_1_4, in_tree=UUID)
LIST_PROVIDERS_1_18 = _with(LIST_PROVIDERS_1_14, required={"type": "string"})

# ---------------------------------------------------------------- inventories

_MAX_INT = 2**31 - 1
_INVENTORY_FIELDS: Schema = {
    "resource_provider_generation": {"type": "integer"},
    "total": {"type": "integer", "maximum": _MAX_INT, "minimum": 1},
    "reserved": {"type": "integer", "maximum": _MAX_INT, "minimum": 0},
    "min_unit": {"type": "integer", "maximum": _MAX_INT, "minimum": 1},
    "max_unit": {"type": "integer", "maximum": _MAX_INT, "minimum": 1},
    "step_size": {"type": "integer", "maximum": _MAX_INT, "minimum": 1},
    "allocation_ratio": {"type": "number", "maximum": 3.40282e38},
}
POST_INVENTORY = _object(
    {**_INVENTORY_FIELDS, "resource_class": {"type": "string", "pattern": RC_PATTERN}},
    ("total", "resource_class"),
)
PUT_INVENTORY_RECORD = _object(dict(_INVENTORY_FIELDS), ("total",))
PUT_INVENTORY = _object(dict(_INVENTORY_FIELDS), ("total", "resource_provider_generation"))
PUT_INVENTORIES = _object(
    {
        "resource_provider_generation": {"type": "integer"},
        "inventories": {
            "type": "object",
            "patternProperties": {RC_PATTERN: PUT_INVENTORY_RECORD},
        },
    },
    ("resource_provider_generation", "inventories"),
)

# ---------------------------------------------------------------- resource classes

POST_RESOURCE_CLASS = _object(
    {"name": {"type": "string", "pattern": CUSTOM_PATTERN, "maxLength": 255}}, ("name",)
)
PUT_RESOURCE_CLASS = POST_RESOURCE_CLASS

# ---------------------------------------------------------------- traits and aggregates

TRAIT: Schema = {"type": "string", "minLength": 1, "maxLength": 255}
CUSTOM_TRAIT: Schema = {**TRAIT, "pattern": CUSTOM_PATTERN}
PUT_PROVIDER_TRAITS = _object(
    {
        "traits": {"type": "array", "items": TRAIT},
        "resource_provider_generation": {"type": "integer"},
    },
    ("traits", "resource_provider_generation"),
)
LIST_TRAITS = _object({"name": {"type": "string"}, "associated": {"type": "string"}})

_AGGREGATES: Schema = {"type": "array", "items": UUID, "uniqueItems": True}
PUT_AGGREGATES = _AGGREGATES
PUT_AGGREGATES_1_19 = _object(
    {"aggregates": _AGGREGATES, "resource_provider_generation": {"type": "integer"}},
    ("aggregates", "resource_provider_generation"),
)
