"""The flavor filter as a pure function: every example of its document
(docs/design.md#origins), each operator, parse failures, several aggregates per host,
and nova's behaviour (no database)."""

from __future__ import annotations

import pytest

from rpquery.aggregate_metadata.extra_specs import (
    FlavorFilter,
    ValueSpec,
    host_passes,
    nova_match,
    validate_extra_specs,
)
from rpquery.errors import InvalidRequest
from tests.seed000_examples import EXAMPLES, FMC, Example, cases


@pytest.mark.parametrize(("example", "flavor"), cases(), ids=[f"{e.name}-{f}" for e, f in cases()])
def test_document_example(example: Example, flavor: str) -> None:
    specs = example.flavors[flavor]
    passed = {
        name for name, metadata in example.aggregates.items() if host_passes(specs, [metadata])
    }
    assert passed == example.passes[flavor]


def test_every_document_example_is_covered() -> None:
    names = {e.name for e in EXAMPLES}
    assert {"opening", "use case 7", "use case 6, second example"} <= names
    assert sum(len(e.flavors) for e in EXAMPLES) == 33


# ------------------------------------------------------------------ operators


@pytest.mark.parametrize(
    ("spec", "incl", "excl"),
    [
        ("= 4", ["4", "8", "4.5"], ["3", "3.99"]),  # nova: '=' means >=
        ("== 4", ["4", "4.0"], ["5"]),
        ("!= 4", ["5", "4.1"], ["4", "4.0"]),
        (">= 4", ["4", "16"], ["2"]),
        ("<= 4", ["4", "1"], ["5"]),
        ("s== abc", ["abc"], ["ABC", "abcd"]),
        ("s!= abc", ["abd", "ABC"], ["abc"]),
        ("s>= b", ["b", "c"], ["a"]),
        ("s> b", ["c", "ba"], ["b", "a"]),
        ("s<= b", ["b", "a"], ["c"]),
        ("s< b", ["a"], ["b", "c"]),
        ("<in> avx", ["avx", "sse,avx2"], ["sse"]),
        ("<all-in> avx sse", ["avx sse", "sse4 avx2"], ["avx", "sse"]),
        ("<or> 1 <or> 3", ["1", "3"], ["2", "1 <or> 3"]),
        ("<or> >= 8 <or> s== small", ["8", "small"], ["4", "big"]),
    ],
)
def test_each_operator(spec: str, incl: list[str], excl: list[str]) -> None:
    for value in incl:
        assert host_passes({"key": spec}, [{"key": value}]), value
    for value in excl:
        assert not host_passes({"key": spec}, [{"key": value}]), value


@pytest.mark.parametrize("bad", ["abc", "", "4 cores", "0x10"])
@pytest.mark.parametrize("op", ["=", "==", "!=", ">=", "<="])
def test_unparsable_numeric_value_fails_host_without_exception(op: str, bad: str) -> None:
    assert not host_passes({"key": f"{op} 4"}, [{"key": bad}])
    assert not host_passes({"key": f"{op} 4"}, [{"key": bad}], nova_compat=True)


def test_unparsable_value_in_one_aggregate_does_not_hide_a_good_one() -> None:
    assert host_passes({"key": ">= 4"}, [{"key": "lots"}, {"key": "8"}])


def test_operator_in_forcing_aggregate_checks_the_flavor_value() -> None:
    agg = {"ram_gb": ">= 64", FMC: "True"}
    assert host_passes({"ram_gb": "128"}, [agg])
    assert not host_passes({"ram_gb": "32"}, [agg])
    assert not host_passes({"ram_gb": "plenty"}, [agg])
    assert not host_passes({}, [agg])


# ------------------------------------------------------------------ several aggregates


def test_union_over_aggregates_values_as_a_set() -> None:
    aggs = [{"key": "1"}, {"key": "2"}, {"ssd": "true"}]
    assert host_passes({"key": "2", "ssd": "true"}, aggs)
    assert host_passes({"key": "<or> 3 <or> 1"}, aggs)
    assert not host_passes({"key": "3"}, aggs)
    assert not host_passes({"key": "!"}, aggs)
    assert host_passes({"other": "~"}, aggs)


def test_force_check_is_per_aggregate() -> None:
    forcing = {"gpu": "*", FMC: "true"}  # case-insensitive
    plain = {"key": "1"}
    assert host_passes({"gpu": "a100", "key": "1"}, [forcing, plain])
    assert not host_passes({"key": "1"}, [forcing, plain])  # forcing wants gpu
    assert host_passes({"key": "1"}, [plain, {"gpu": "*", FMC: "False"}])


def test_opening_example_equivalence_of_any_or_optional_in_forcing_aggregate() -> None:
    forcing = {"key": "<or> * <or> ~", FMC: "True"}
    for specs in ({}, {"key": "1"}, {"key": "*"}, {"other": "~"}):
        assert host_passes(specs, [forcing])  # the forced check asks nothing of the flavor


def test_forcing_aggregate_checks_namespaced_keys_too() -> None:
    agg = {"hw:cpu_policy": "dedicated", FMC: "True"}
    assert not host_passes({}, [agg])
    assert host_passes({"hw:cpu_policy": "dedicated"}, [agg])


def test_scoped_key_is_a_plain_key() -> None:
    specs = {"aggregate_instance_extra_specs:ssd": "true"}
    assert host_passes(specs, [{"ssd": "true"}])
    assert not host_passes(specs, [{}])  # not optional, unlike other namespaces
    assert host_passes({"hw:ssd": "true"}, [{}])


def test_reserved_key_in_flavor_is_ignored() -> None:
    assert host_passes({FMC: "True"}, [{}])


# ------------------------------------------------------------------ nova mode


def test_nova_mode_comma_split_union() -> None:
    aggs = [{"cpu": "avx, sse"}, {"cpu": "avx2"}]
    assert host_passes({"cpu": "sse"}, aggs, nova_compat=True)
    assert host_passes({"cpu": "avx2"}, aggs, nova_compat=True)
    assert not host_passes({"cpu": "sse"}, aggs)  # literal "avx, sse" in document mode


def test_nova_mode_ignores_other_namespaces_and_missing_key_fails() -> None:
    assert host_passes({"hw:cpu_policy": "shared"}, [{"hw:cpu_policy": "x"}], nova_compat=True)
    assert not host_passes({"key": "~"}, [{}], nova_compat=True)  # no sentinels
    assert not host_passes({"aggregate_instance_extra_specs:k": "1"}, [{}], nova_compat=True)
    assert host_passes({}, [{"key": "1", FMC: "True"}], nova_compat=True)


def test_nova_mode_checks_types_only() -> None:
    assert FlavorFilter.from_specs({"k": "<or> ! <or> 1"}, nova_compat=True).nova_compat
    with pytest.raises(InvalidRequest) as err:
        FlavorFilter.from_specs({"k": 1}, nova_compat=True)  # type: ignore[dict-item]
    assert err.value.code == "rpquery.extra_specs.bad_type"


def test_nova_mode_or_is_word_based() -> None:
    assert nova_match("2", "<or> 1 <or> 2")
    assert not nova_match("<or>", "<or> 1 <or> 2")
    assert nova_match("x", "x")
    assert not nova_match("1", "<in>")  # operator without operand


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("specs", "code"),
    [
        ({"key": "<or> ! <or> 1"}, "rpquery.extra_specs.exclusive_sentinel"),
        ({"key": "<or> ! <or> ~"}, "rpquery.extra_specs.exclusive_sentinel"),
        ({"key": ">= many"}, "rpquery.extra_specs.bad_operand"),
        ({"key": "<in>"}, "rpquery.extra_specs.bad_operand"),
        ({"key": "<or>"}, "rpquery.extra_specs.empty_or"),
        ({"key": 1}, "rpquery.extra_specs.bad_type"),
        (["key"], "rpquery.extra_specs.bad_type"),
    ],
)
def test_bad_extra_specs_rejected(specs: object, code: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        validate_extra_specs(specs)
    assert err.value.code == code
    with pytest.raises(InvalidRequest):
        FlavorFilter.from_specs(specs)  # type: ignore[arg-type]


def test_value_spec_parsing() -> None:
    spec = ValueSpec.parse("<or> * <or> ~ <or> s== a b")
    assert (spec.any, spec.optional, spec.absent) == (True, True, False)
    assert [(a.op, a.words) for a in spec.alternatives] == [("s==", ("a", "b"))]
    assert ValueSpec.parse(" ! ").absent
    assert not ValueSpec.parse("1 <or> 2").alternatives[0].op  # <or> only leading
