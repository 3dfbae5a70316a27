"""Request parsing: Placement syntax, typed constructors, every error path (code and
token), and hypothesis fuzzing that finds nothing but ``InvalidRequest``. No database."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpquery.errors import InvalidRequest
from rpquery.read.request import (
    CandidatesRequest,
    RequestGroup,
    parse_candidates,
    parse_providers,
)

AGG1 = "11111111-2222-4333-8444-555555555555"
AGG2 = "66666666-7777-4888-8999-aaaaaaaaaaaa"


def test_full_syntax() -> None:
    r = parse_candidates(
        {
            "resources": "VCPU:1, MEMORY_MB:512",
            "required": [" HW_CPU_X86_AVX2 ,!CUSTOM_GPU", "in:CUSTOM_A,CUSTOM_B"],
            "member_of": [f"in:{AGG1},{AGG2}", f"!{AGG2}"],
            "resources_NET": "SRIOV_NET_VF:1",
            "required_NET": "CUSTOM_PHYSNET_A",
            "resources_X": "VCPU:1",
            "group_policy": "isolate",
            "root_required": "COMPUTE_STATUS_DISABLED,!HW_CPU_X86_SSE",
            "limit": "5",
        }
    )
    g = r.group("")
    assert dict(g.resources) == {"VCPU": 1, "MEMORY_MB": 512}
    assert g.required == (
        frozenset({"HW_CPU_X86_AVX2"}),
        frozenset({"CUSTOM_A", "CUSTOM_B"}),
    )
    assert g.forbidden == {"CUSTOM_GPU"} and g.forbidden_aggs == {AGG2}
    assert g.member_of == (frozenset({AGG1, AGG2}),)
    assert r.group("_NET").required == (frozenset({"CUSTOM_PHYSNET_A"}),)
    assert (r.group_policy, r.limit) == ("isolate", 5)
    assert r.root_required == {"COMPUTE_STATUS_DISABLED"}
    assert r.root_forbidden == {"HW_CPU_X86_SSE"}


def test_query_string_equals_multidict() -> None:
    qs = f"resources=VCPU:1&required=!CUSTOM_GPU&required=CUSTOM_A&member_of=!in:{AGG1},{AGG2}"
    md = {
        "resources": "VCPU:1",
        "required": ["!CUSTOM_GPU", "CUSTOM_A"],
        "member_of": f"!in:{AGG1},{AGG2}",
    }
    assert parse_candidates(qs) == parse_candidates(md)


def test_typed_constructor_validates() -> None:
    r = CandidatesRequest(groups=(RequestGroup(resources={"VCPU": 1}),), limit=3)
    assert r.limit == 3 and hash(r) == hash(
        CandidatesRequest(groups=(RequestGroup(resources={"VCPU": 1}),), limit=3)
    )
    with pytest.raises(InvalidRequest) as err:
        RequestGroup(resources={"VCPU": 0})
    assert err.value.code == "rpquery.request.bad_amount"


def test_same_subtree_and_resourceless() -> None:
    r = parse_candidates(
        "resources_A=VCPU:1&required_B=HW_NUMA_ROOT&same_subtree=_A,_B&group_policy=none"
    )
    assert r.same_subtree == (("_A", "_B"),)
    assert dict(r.group("_B").resources) == {}


def test_providers_request() -> None:
    p = parse_providers(f"name=cn1&uuid={AGG1}&resources=VCPU:1&required=!CUSTOM_GPU")
    assert (p.name, p.uuid, p.filters.forbidden) == ("cn1", AGG1, {"CUSTOM_GPU"})
    with pytest.raises(InvalidRequest) as err:
        parse_providers("resources_A=VCPU:1")
    assert err.value.code == "rpquery.request.unknown_parameter"


BAD = [
    ("resources=VCPU:1&required=CUSTOM_A,!CUSTOM_A", "rpquery.trait.conflict", "CUSTOM_A"),
    (  # every trait of an any-of set forbidden (one forbidden alone is valid)
        "resources=VCPU:1&required=in:CUSTOM_A,CUSTOM_B&required=!CUSTOM_B,!CUSTOM_A",
        "rpquery.trait.conflict",
        "CUSTOM_A",
    ),
    ("resources=VCPU:1&required=! CUSTOM_A", "rpquery.trait.bad_forbidden", "! CUSTOM_A"),
    ("resources=VCPU:1&required=!", "rpquery.trait.bad_forbidden", "!"),
    ("resources=VCPU:1&required=!!CUSTOM_A", "rpquery.trait.bad_forbidden", "!!CUSTOM_A"),
    (
        "resources=VCPU:1&required=in:CUSTOM_A,!CUSTOM_B",
        "rpquery.trait.bad_forbidden",
        "!CUSTOM_B",
    ),
    ("resources=VCPU:1&required=custom_a", "rpquery.trait.bad_name", "custom_a"),
    ("resources=VCPU:1&required=", "rpquery.request.empty_value", "required"),
    ("resources=VCPU:1&required=CUSTOM_A,,CUSTOM_B", "rpquery.request.empty_value", "required"),
    ("resources=", "rpquery.request.empty_value", "resources"),
    ("resources=VCPU:0", "rpquery.request.bad_amount", "VCPU:0"),
    ("resources=VCPU:-1", "rpquery.request.bad_amount", "VCPU:-1"),
    ("resources=VCPU:1.5", "rpquery.request.bad_amount", "VCPU:1.5"),
    ("resources=VCPU", "rpquery.request.bad_resources", "VCPU"),
    ("resources=VCPU:1,VCPU:2", "rpquery.request.duplicate_resource", "VCPU"),
    ("resources=vcpu:1", "rpquery.resource_class.bad_name", "vcpu"),
    ("resources=VCPU:1&resources=MEMORY_MB:1", "rpquery.request.duplicate_parameter", "resources"),
    (
        "resources=VCPU:1&root_required=CUSTOM_A&root_required=!CUSTOM_B",
        "rpquery.request.duplicate_parameter",
        "root_required",
    ),
    ("resources=VCPU:1&member_of=not-a-uuid", "rpquery.request.bad_aggregate", "not-a-uuid"),
    (
        f"resources=VCPU:1&member_of={AGG1},{AGG2}",
        "rpquery.request.bad_aggregate",
        f"{AGG1},{AGG2}",
    ),
    ("resources=VCPU:1&in_tree=xyz", "rpquery.request.bad_in_tree", "xyz"),
    ("resources=VCPU:1&limit=0", "rpquery.request.bad_limit", "0"),
    ("resources=VCPU:1&limit=ten", "rpquery.request.bad_limit", "ten"),
    ("resources=VCPU:1&group_policy=maybe", "rpquery.request.bad_group_policy", "maybe"),
    (
        "resources_A=VCPU:1&resources_B=VCPU:1",
        "rpquery.request.group_policy_missing",
        "group_policy",
    ),
    ("resources_A=VCPU:1&same_subtree=_A,_Z", "rpquery.request.unknown_suffix", "_Z"),
    (
        "resources_A=VCPU:1&required_B=CUSTOM_A&group_policy=none",
        "rpquery.request.resourceless_group",
        "_B",
    ),
    (
        "required=CUSTOM_A&resources_A=VCPU:1",
        "rpquery.request.resourceless_unsuffixed",
        "resources",
    ),
    ("required=CUSTOM_A", "rpquery.request.no_resources", "resources"),
    ("resources!=VCPU:1", "rpquery.request.bad_suffix", "resources!"),
    ("resources" + "x" * 65 + "=VCPU:1", "rpquery.request.bad_suffix", "resources" + "x" * 65),
    ("resources=VCPU:1&colour=blue", "rpquery.request.unknown_parameter", "colour"),
    (
        "resources=VCPU:1&root_required=in:CUSTOM_A",
        "rpquery.request.bad_root_required",
        "in:CUSTOM_A",
    ),
    ("resources=VCPU:1&root_required=CUSTOM_A,!CUSTOM_A", "rpquery.trait.conflict", "CUSTOM_A"),
]


@pytest.mark.parametrize(("query", "code", "token"), BAD)
def test_error_paths(query: str, code: str, token: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_candidates(query)
    assert (err.value.code, err.value.token) == (code, token)


def test_bad_params_type() -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_candidates(42)  # type: ignore[arg-type]
    assert err.value.code == "rpquery.request.bad_params"
    with pytest.raises(InvalidRequest):
        parse_candidates({"resources": [1]})  # type: ignore[list-item]


def test_typed_errors() -> None:
    cases = [
        (lambda: RequestGroup(suffix="bad suffix"), "rpquery.request.bad_suffix"),
        (lambda: RequestGroup(required=(frozenset(),)), "rpquery.request.empty_value"),
        (
            lambda: CandidatesRequest(
                groups=(RequestGroup(resources={"VCPU": 1}), RequestGroup(resources={"VCPU": 1}))
            ),
            "rpquery.request.duplicate_group",
        ),
        (
            lambda: CandidatesRequest(groups=(RequestGroup(resources={"VCPU": 1}),), limit=0),
            "rpquery.request.bad_limit",
        ),
    ]
    for make, code in cases:
        with pytest.raises(InvalidRequest) as err:
            make()
        assert err.value.code == code


KEYS = st.sampled_from(
    [
        "resources",
        "required",
        "member_of",
        "in_tree",
        "resources_A",
        "required_A",
        "same_subtree",
        "group_policy",
        "root_required",
        "limit",
        "resources1",
        "bogus",
    ]
)
ATOMS = st.sampled_from(
    [
        "VCPU:1",
        "MEMORY_MB:0",
        "CUSTOM_A",
        "!CUSTOM_A",
        "in:",
        "!",
        ",",
        " ",
        "_A",
        AGG1,
        "isolate",
        "none",
        "3",
        "-1",
        "in:CUSTOM_B,CUSTOM_C",
        "!in:" + AGG2,
        "é",
        "%00",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(KEYS, st.lists(st.one_of(ATOMS, st.text(max_size=6)), max_size=3).map("".join)),
        max_size=6,
    )
)
def test_fuzz_only_invalid_request(pairs: list[tuple[str, str]]) -> None:
    params: dict[str, list[str]] = {}
    for key, value in pairs:
        params.setdefault(key, []).append(value)
    try:
        parse_candidates(params)
    except InvalidRequest as exc:
        assert exc.code.startswith("rpquery.")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_fuzz_query_strings(qs: str) -> None:
    for parse in (parse_candidates, parse_providers):
        try:
            parse(qs)
        except InvalidRequest as exc:
            assert exc.code.startswith("rpquery.")
