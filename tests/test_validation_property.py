"""Issue 15, item 6: every public validator and parser, fed arbitrary JSON values and
arbitrary text (lone surrogates, NUL, trailing newlines, huge integers, inf and nan
included), either answers or raises ``InvalidRequest``: never a bare ``TypeError``,
``AttributeError``, ``ValueError``, ``OverflowError`` or ``UnicodeEncodeError``.

``COVERED`` names the callables exercised; a test lists the package's public
``parse_*``/``validate_*``/``check_*``/``as_*`` functions so a new one is noticed."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rpquery
from rpquery import _validation as validation
from rpquery import models
from rpquery.aggregate_metadata import extra_specs
from rpquery.aggregate_metadata import metadata as am
from rpquery.errors import InvalidRequest
from rpquery.read import request
from rpquery.server_groups import groups as server_groups
from rpquery.server_groups import weighers
from rpquery.store import catalog
from rpquery.tags import conflicts, model, query
from rpquery.usage import reads as usages
from rpquery.write import inventory as inv_api
from rpquery.write import providers, reshaper
from rpquery.write.allocations import validate_requests

UUID = "e10927c4-8bc9-465d-ac60-d2f79f7e4a00"
INTERESTING_TEXT = [
    "",
    " ",
    "\n",
    "\x00",
    "\ud800",
    "\udfff",
    "VCPU",
    "MEMORY_MB",
    "CUSTOM_X",
    "CUSTOM_X\n",
    "HW_CPU_X86_AVX2",
    "INSTANCE",
    "INSTANCE\n",
    UUID,
    UUID.upper(),
    UUID + "\n",
    "urn:uuid:" + UUID,
    "{" + UUID + "}",
    "!CUSTOM_X",
    "in:" + UUID,
    "VCPU:1",
    "VCPU:2147483648",
    "2147483648",
    "1",
    "none",
    "isolate",
    "affinity",
    "anti-affinity",
    "user",
    "system",
    "max_server_per_host",
    "resources",
    "required",
    "member_of",
    "in_tree",
    "limit",
    "group_policy",
    "same_subtree",
    "root_required",
    "resources_A",
    "name",
    "uuid",
    "force_metadata_check",
    "!",
    "<or>",
    "a,b",
    "x" * 300,
]
text = st.one_of(
    st.sampled_from(INTERESTING_TEXT),
    st.text(st.characters(exclude_categories=()), max_size=20),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([0, -1, 2**31 - 1, 2**31, 2**63, 10**400]),
    st.floats(),
    st.sampled_from([float("inf"), float("nan"), 1e308, 3.5e38]),
    text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(text, inner, max_size=4),
    ),
    max_leaves=12,
)
anything = st.one_of(json_values, st.tuples(json_values, json_values), st.frozensets(text))


def _candidates_request(kwargs: dict[str, Any]) -> Any:
    groups = kwargs.pop("groups", ())
    if isinstance(groups, list):
        groups = [
            request.RequestGroup(**{k: v for k, v in g.items() if k in GROUP_FIELDS})
            if isinstance(g, dict)
            else g
            for g in groups
        ]
    return request.CandidatesRequest(groups=groups, **kwargs)


def _reshape(body: Any) -> Any:
    parsed = reshaper.parse_reshape_body(body)
    return reshaper.validate(parsed.inventories, parsed.allocations)


def _kwargs(names: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={n: anything for n in names})


GROUP_FIELDS = (
    "suffix",
    "resources",
    "required",
    "forbidden",
    "member_of",
    "forbidden_aggs",
    "in_tree",
)
CANDIDATE_FIELDS = (
    "groups",
    "group_policy",
    "root_required",
    "root_forbidden",
    "same_subtree",
    "limit",
)
INVENTORY_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")
CONSUMER_FIELDS = (
    "consumer_uuid",
    "project_id",
    "user_id",
    "consumer_type",
    "consumer_generation",
    "allocations",
)

#: name -> (callable taking one drawn value, strategy of that value)
COVERED: dict[str, tuple[Callable[[Any], Any], st.SearchStrategy[Any]]] = {
    "rpquery.read.request.parse_candidates": (request.parse_candidates, anything),
    "rpquery.read.request.parse_providers": (request.parse_providers, anything),
    "rpquery.read.request.as_candidates_request": (request.as_candidates_request, anything),
    "rpquery.read.request.as_providers_request": (request.as_providers_request, anything),
    "rpquery.read.request.parse_resources": (
        lambda v: request.parse_resources("resources", v),
        text,
    ),
    "rpquery.read.request.parse_required": (
        lambda v: request.parse_required("required", v),
        st.lists(text, max_size=3),
    ),
    "rpquery.read.request.parse_member_of": (
        lambda v: request.parse_member_of("member_of", v),
        st.lists(text, max_size=3),
    ),
    "rpquery.read.request.RequestGroup": (
        lambda kw: request.RequestGroup(**kw),
        _kwargs(GROUP_FIELDS),
    ),
    "rpquery.read.request.CandidatesRequest": (_candidates_request, _kwargs(CANDIDATE_FIELDS)),
    "rpquery.read.request.ProvidersRequest": (
        lambda kw: request.ProvidersRequest(**kw),
        _kwargs(("uuid", "name")),
    ),
    "rpquery.store.catalog.check_trait_name": (catalog.check_trait_name, anything),
    "rpquery.store.catalog.check_resource_class_name": (
        catalog.check_resource_class_name,
        anything,
    ),
    "rpquery.models.check_consumer_type": (models.check_consumer_type, anything),
    "rpquery.write.providers.check_name": (providers.check_name, anything),
    "rpquery.write.providers.check_generation": (providers.check_generation, anything),
    "rpquery.write.inventory.check_inventory": (
        lambda a: inv_api.check_inventory(a[0], models.Inventory(**a[1])),
        st.tuples(
            anything,
            st.fixed_dictionaries(
                {"total": anything}, optional={f: anything for f in INVENTORY_FIELDS[1:]}
            ),
        ),
    ),
    "rpquery.write.allocations.validate_requests": (
        lambda kw: validate_requests([models.ConsumerAllocations(**kw)]),
        st.fixed_dictionaries({f: anything for f in CONSUMER_FIELDS}),
    ),
    "rpquery.write.reshaper.parse_reshape_body": (_reshape, anything),
    "rpquery.usage.reads.check_consumer_type_name": (usages.check_consumer_type_name, anything),
    "rpquery.usage.reads.check_consumer_type_filter": (
        usages.check_consumer_type_filter,
        anything,
    ),
    "rpquery.server_groups._model.validate_group": (
        lambda a: server_groups.validate_group(*a),
        st.tuples(anything, anything, anything, anything, anything),
    ),
    "rpquery.aggregate_metadata.metadata.check_aggregate_uuid": (
        am.check_aggregate_uuid,
        anything,
    ),
    "rpquery.aggregate_metadata.metadata.check_key": (am.check_key, anything),
    "rpquery.aggregate_metadata.metadata.check_value": (
        lambda a: am.check_value(*a),
        st.tuples(text, anything),
    ),
    "rpquery.aggregate_metadata.metadata.validate_items": (am.validate_items, anything),
    "rpquery.aggregate_metadata.extra_specs.validate_extra_specs": (
        lambda a: extra_specs.validate_extra_specs(a[0], nova_compat=a[1]),
        st.tuples(anything, st.booleans()),
    ),
    "rpquery.server_groups.weighers.parse_multipliers": (weighers.parse_multipliers, anything),
    "rpquery.tags.model.validate_instance": (model.validate_instance, anything),
    "rpquery.tags.model.validate_namespace": (
        lambda v: model.validate_namespace(model.DEFAULT_CONFIG, v),
        anything,
    ),
    "rpquery.tags.model.validate_tag": (
        lambda a: model.validate_tag(model.DEFAULT_CONFIG, *a),
        st.tuples(anything, anything),
    ),
    "rpquery.tags.model.validate_tags": (
        lambda a: model.validate_tags(model.DEFAULT_CONFIG, *a),
        st.tuples(anything, anything),
    ),
    "rpquery.tags.query.parse_filter": (
        lambda a: query.parse_filter(*a[:4], namespace=a[4]),
        st.tuples(anything, anything, anything, anything, anything),
    ),
    "rpquery.tags.conflicts.parse_rules": (
        lambda a: conflicts.parse_rules(*a),
        st.tuples(anything, anything),
    ),
    "rpquery._validation.check_uuid": (lambda v: validation.check_uuid(v, "c"), anything),
    "rpquery._validation.check_text": (lambda v: validation.check_text(v, "c", "t"), anything),
    "rpquery._validation.check_external_id": (
        lambda v: validation.check_external_id(v, "c", "id"),
        anything,
    ),
    "rpquery._validation.check_name": (lambda v: validation.check_name(v, "c", "n"), anything),
    "rpquery._validation.check_int": (lambda v: validation.check_int(v, "c", "n"), anything),
    "rpquery._validation.check_ratio": (lambda v: validation.check_ratio(v, "c"), anything),
    "rpquery._validation.check_mapping": (
        lambda v: validation.check_mapping(v, "c", "m"),
        anything,
    ),
    "rpquery._validation.check_str_list": (
        lambda v: validation.check_str_list(v, "c", "l"),
        anything,
    ),
}

def _api(check: Callable[..., Any], *args: Any) -> Any:
    """The API layer refuses with an HTTP error (400/406) instead of ``InvalidRequest``;
    the same contract: an answer or a clean refusal, never a stray exception."""
    from rpquery.api.errors import ApiError

    try:
        return check(*args)
    except ApiError as exc:
        assert exc.status in (400, 406) and len(exc.message) <= 1100
        raise InvalidRequest("rpquery.api.refused", exc.message) from None


def _api_cases() -> dict[str, tuple[Callable[[Any], Any], st.SearchStrategy[Any]]]:
    from rpquery.api import microversion
    from rpquery.api import query as api_query
    from rpquery.api import util as api_util
    from rpquery.api.handlers import usages as usages_api
    from rpquery.api.microversion import Version

    texts = st.lists(text, max_size=3)
    latin1 = st.text(st.characters(max_codepoint=255), max_size=20)
    old, new = Version(1, 21), Version(1, 39)
    return {
        "rpquery.api.microversion.parse_header": (
            lambda v: _api(microversion.parse_header, v),
            st.one_of(st.none(), text, text.map(lambda t: f"placement {t}")),
        ),
        "rpquery.api.query.check_resources": (
            lambda v: _api(api_query.check_resources, v),
            text,
        ),
        "rpquery.api.query.check_required": (
            lambda v: (
                _api(api_query.check_required, "required", v, old),
                _api(api_query.check_required, "required", v, new),
            ),
            texts,
        ),
        "rpquery.api.query.check_member_of": (
            lambda v: _api(api_query.check_member_of, "member_of", v, new),
            texts,
        ),
        "rpquery.api.query.check_in_tree": (
            lambda v: _api(api_query.check_in_tree, "in_tree", v),
            text,
        ),
        # a PEP 3333 QUERY_STRING is latin-1 text
        "rpquery.api.util.parse_query": (
            lambda v: _api(api_util.parse_query, v),
            st.lists(latin1, max_size=4).map("&".join),
        ),
        # jsonschema's refusal quotes the schema and the parameters (as Placement's
        # does): values of up to 20 characters keep it within the bound
        "rpquery.api.util.validate_query": (
            lambda v: _api(api_util.validate_query, v, usages_api.SCHEMA_1_38),
            st.dictionaries(
                st.sampled_from(["project_id", "user_id", "consumer_type", "-"]), latin1
            ),
        ),
        "rpquery.api.util.parse_json": (
            lambda v: _api(api_util.parse_json, v),
            st.one_of(
                st.binary(max_size=200),
                st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
                st.text(max_size=50).map(lambda t: t.encode("utf-16")),
                st.integers(0, 100_000).map(lambda n: b"[" * n),
                st.integers(0, 60).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
            ),
        ),
    }


COVERED.update(_api_cases())

#: Public functions of those names that are not input validators, and why.
NOT_INPUT_VALIDATORS = {
    "rpquery.write.allocations.check_capacity": "checks a validated write against database state",
    "rpquery.tags.store.check_tag": "a read: validates through validate_instance/validate_tag",
}


def test_every_public_validator_and_parser_is_covered() -> None:
    found = set()
    for info in pkgutil.walk_packages(rpquery.__path__, "rpquery."):
        # alembic's env script (rpquery/schema, a link to schema/) runs only under alembic
        if info.name.startswith("rpquery.cli") or info.name == "rpquery.schema.env":
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                name.startswith(("parse_", "validate_", "check_", "as_"))
                and inspect.isfunction(obj)
                and obj.__module__ == info.name
            ):
                found.add(f"{info.name}.{name}")
    assert found - COVERED.keys() - NOT_INPUT_VALIDATORS.keys() == set()
    assert set(NOT_INPUT_VALIDATORS) <= found


@pytest.mark.parametrize("name", sorted(COVERED))
def test_only_invalid_request_comes_out(name: str) -> None:
    call, values = COVERED[name]

    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
    @given(values)
    def run(value: Any) -> None:
        try:
            call(value)
        except InvalidRequest as exc:
            assert exc.code.startswith("rpquery.") or exc.code == "c"
            assert len(exc.detail) <= 1100

    run()
