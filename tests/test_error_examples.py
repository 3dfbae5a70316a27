"""The inputs docs/errors.md gives for the codes that need no database really produce
those codes (the database ones are exercised by each area's tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rpquery.aggregate_metadata import metadata as am
from rpquery.db import Database
from rpquery.errors import RpqueryError
from rpquery.generator import CloudSpec, load_cloud
from rpquery.read.request import (
    CandidatesRequest,
    ProvidersRequest,
    RequestGroup,
    parse_candidates,
    parse_providers,
)
from rpquery.server_groups import groups as sg
from rpquery.server_groups import weighers
from rpquery.tags import codec, conflicts, model
from tests.test_docs import error_rows

U = "e10927c4-8bc9-465d-ac60-d2f79f7e4a00"
TAGS = model.DEFAULT_CONFIG
R1 = "resources=VCPU:1&"


def _group(rules: Any = None, policy: Any = "anti-affinity", **kw: Any) -> Any:
    args = {"name": "g", "policies": policy, "project_id": "p", "user_id": "u", **kw}
    return sg.validate_group(
        args["name"], args["policies"], args["project_id"], args["user_id"], rules
    )


EXAMPLES: dict[str, list[Callable[[], Any]]] = {
    "rpquery.request.bad_params": [
        lambda: parse_candidates(None),
        lambda: parse_candidates({"resources": None}),
        lambda: parse_providers({"name": 5}),
        lambda: RequestGroup(required=[5]),
    ],
    "rpquery.request.bad_text": [
        lambda: parse_providers({"name": "a\x00b"}),
        lambda: ProvidersRequest(name="\ud800"),
    ],
    "rpquery.request.unknown_parameter": [
        lambda: parse_candidates(R1 + "colour=red"),
        lambda: parse_providers("resources_A=VCPU:1"),
    ],
    "rpquery.request.bad_suffix": [
        lambda: parse_candidates("resources_$=VCPU:1"),
        lambda: RequestGroup(suffix="A\n"),
    ],
    "rpquery.request.duplicate_parameter": [lambda: parse_candidates(R1 + "resources=VCPU:2")],
    "rpquery.request.empty_value": [
        lambda: parse_candidates("resources="),
        lambda: parse_candidates(R1 + "required=A,,B"),
    ],
    "rpquery.request.bad_resources": [lambda: parse_candidates("resources=VCPU")],
    "rpquery.request.bad_amount": [
        lambda: parse_candidates("resources=VCPU:0"),
        lambda: parse_candidates("resources=VCPU:2147483648"),
        lambda: RequestGroup(resources={"VCPU": "1"}),
    ],
    "rpquery.request.duplicate_resource": [lambda: parse_candidates("resources=VCPU:1,VCPU:2")],
    "rpquery.request.bad_aggregate": [
        lambda: parse_candidates(R1 + "member_of=not-a-uuid"),
        lambda: parse_candidates(R1 + f"member_of={U},{U}"),
        lambda: RequestGroup(member_of=[[U + "\n"]]),
    ],
    "rpquery.request.bad_in_tree": [lambda: parse_candidates(R1 + "in_tree=42")],
    "rpquery.request.bad_uuid": [lambda: parse_providers("uuid=42")],
    "rpquery.request.bad_limit": [
        lambda: parse_candidates(R1 + "limit=0"),
        lambda: parse_candidates(R1 + "limit=2147483648"),
        lambda: CandidatesRequest(groups=(RequestGroup(resources={"VCPU": 1}),), limit="5"),
    ],
    "rpquery.request.bad_group_policy": [
        lambda: parse_candidates("resources_A=VCPU:1&group_policy=all")
    ],
    "rpquery.request.group_policy_missing": [
        lambda: parse_candidates("resources_A=VCPU:1&resources_B=VCPU:1")
    ],
    "rpquery.request.resourceless_group": [lambda: parse_candidates(R1 + "required_A=CUSTOM_X")],
    "rpquery.request.resourceless_unsuffixed": [
        lambda: parse_candidates("resources_A=VCPU:1&required=CUSTOM_X&group_policy=none")
    ],
    "rpquery.request.no_resources": [lambda: parse_candidates("required=CUSTOM_X")],
    "rpquery.request.bad_root_required": [
        lambda: parse_candidates(R1 + "root_required=in:CUSTOM_A,CUSTOM_B")
    ],
    "rpquery.request.duplicate_group": [
        lambda: CandidatesRequest(groups=(RequestGroup(resources={"VCPU": 1}),) * 2)
    ],
    "rpquery.trait.bad_name": [
        lambda: parse_candidates(R1 + "required=lower"),
        lambda: parse_candidates(R1 + "required=CUSTOM_" + "a" * 100_000),
    ],
    "rpquery.trait.bad_forbidden": [
        lambda: parse_candidates(R1 + "required=! CUSTOM_X"),
        lambda: parse_candidates(R1 + "required=!"),
        lambda: parse_candidates(R1 + "required=!!CUSTOM_X"),
        lambda: parse_candidates(R1 + "required=in:CUSTOM_A,!CUSTOM_B"),
    ],
    "rpquery.resource_class.bad_name": [lambda: parse_candidates("resources=vcpu:1")],
    "rpquery.server_group.bad_name": [lambda: _group(name=""), lambda: _group(name=5)],
    "rpquery.server_group.bad_project": [lambda: _group(project_id=None)],
    "rpquery.server_group.bad_user": [lambda: _group(user_id="")],
    "rpquery.server_group.no_policy": [lambda: _group(policy=[])],
    "rpquery.server_group.multiple_policies": [
        lambda: _group(policy=["affinity", "anti-affinity"])
    ],
    "rpquery.server_group.unknown_policy": [
        lambda: _group(policy="sticky"),
        lambda: _group(policy=None),
    ],
    "rpquery.server_group.unknown_rule": [lambda: _group({"max_servers": 2}), lambda: _group([1])],
    "rpquery.server_group.rule_not_allowed": [
        lambda: _group({"max_server_per_host": 2}, policy="affinity")
    ],
    "rpquery.server_group.bad_rule_value": [
        lambda v=v: _group({"max_server_per_host": v}) for v in (0, "two", 1.5, 2**31)
    ],
    "rpquery.aggregate_metadata.bad_key": [
        lambda k=k: am.validate_items({k: "v"}) for k in (" k", "", "k\x00", "\ud800")
    ],
    "rpquery.aggregate_metadata.bad_value": [
        lambda v=v: am.validate_items({"k": v}) for v in (5, "x" * 256, "\ud800")
    ],
    "rpquery.aggregate_metadata.exclusive_sentinel": [
        lambda: am.validate_items({"k": "<or> ! <or> 1"})
    ],
    "rpquery.aggregate_metadata.bad_force_metadata_check": [
        lambda: am.validate_items({"force_metadata_check": "yes"})
    ],
    "rpquery.aggregate_metadata.empty": [lambda: am.validate_items({})],
    "rpquery.extra_specs.bad_type": [
        lambda s=s: am.AggregateMetadataFilter(s) for s in (["ssd"], {"ssd": 1}, {"ssd": "a\x00"})
    ],
    "rpquery.extra_specs.exclusive_sentinel": [
        lambda: am.AggregateMetadataFilter({"ssd": "<or> ! <or> true"})
    ],
    "rpquery.extra_specs.bad_operand": [
        lambda: am.AggregateMetadataFilter({"cpus": ">="}),
        lambda: am.AggregateMetadataFilter({"cpus": ">= many"}),
    ],
    "rpquery.extra_specs.empty_or": [lambda: am.AggregateMetadataFilter({"ssd": "<or>"})],
    "rpquery.weigher.unknown": [lambda: weighers.WeigherConfig.build(["FastestWeigher"])],
    "rpquery.weigher.bad_multiplier": [
        lambda: weighers.parse_multipliers(["ServerGroupSoftAffinityWeigher"]),
        lambda: weighers.WeigherConfig.build(
            list(weighers.KNOWN_WEIGHERS), {"ServerGroupSoftAffinityWeigher": "-1"}
        ),
    ],
    "rpquery.tags.bad_instance": [
        lambda: model.validate_instance("i-1"),
        lambda: model.validate_instance(5),
    ],
    "rpquery.tags.unknown_namespace": [
        lambda: model.validate_namespace(TAGS, "admin"),
        lambda: model.validate_namespace(TAGS, ["user"]),
    ],
    "rpquery.tags.bad_list": [
        lambda: model.validate_tags(TAGS, "user", "web"),
        lambda: model.validate_tags(TAGS, "user", 5),
    ],
    "rpquery.tags.empty": [lambda: model.validate_tag(TAGS, "user", "")],
    "rpquery.tags.too_long": [lambda: model.validate_tag(TAGS, "user", "x" * 61)],
    "rpquery.tags.bad_character": [
        lambda t=t: model.validate_tag(TAGS, "user", t) for t in ("a/b", "a,b", "a\x00b")
    ],
    "rpquery.tags.not_unicode": [lambda: model.validate_tag(TAGS, "user", "\ud800")],
    "rpquery.tags.backend_rejects": [lambda: model.validate_tag(TAGS, "user", "é" * 20)],
    "rpquery.tags.too_many": [
        lambda: model.validate_tags(TAGS, "user", [f"t{i}" for i in range(51)])
    ],
    "rpquery.tags.bad_encoding": [lambda: codec.decode("a%b")],
    "rpquery.tags.bad_conflict": [
        lambda: conflicts.parse_rules("system", [("ha", "ha")]),
        lambda: conflicts.parse_rules("system", [["ha"]]),
    ],
    "rpquery.generator.bad_spec": [lambda: CloudSpec(hosts=0)],
    # refused before the database is touched
    "rpquery.generator.bad_option": [
        lambda: load_cloud(Database("sqlite://"), CloudSpec(hosts=1), summaries="later")
    ],
}


def test_every_example_code_has_a_row() -> None:
    assert sorted(EXAMPLES.keys() - error_rows().keys()) == []


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_the_documented_inputs_produce_the_code(code: str) -> None:
    for example in EXAMPLES[code]:
        with pytest.raises(RpqueryError) as err:
            example()
        assert err.value.code == code
        assert len(err.value.detail) < 1100
