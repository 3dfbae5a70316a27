"""The shared validators (rpquery._validation) and readable error messages (issue 15,
items 5, 7 and 14), without a database."""

from __future__ import annotations

import pytest

from rpquery import _validation as v
from rpquery.errors import InvalidRequest, readable_detail
from rpquery.read.request import parse_candidates, parse_providers

CANON = "e10927c4-8bc9-465d-ac60-d2f79f7e4a00"


@pytest.mark.parametrize(
    "form",
    [
        CANON,
        CANON.upper(),
        CANON.replace("-", ""),
        CANON.replace("-", "").upper(),
        "{" + CANON + "}",
        "urn:uuid:" + CANON,
        "urn:uuid:" + CANON.upper(),
    ],
)
def test_7_every_accepted_uuid_form_is_canonicalised(form: str) -> None:
    assert v.check_uuid(form, "rpquery.x.bad_uuid") == CANON


@pytest.mark.parametrize(
    "bad",
    [
        CANON + "\n",
        "\n" + CANON,
        " " + CANON,
        CANON[:-1],
        CANON + "0",
        "{" + CANON,
        CANON + "}",
        "URN:UUID:" + CANON,
        "urn:uuid:{" + CANON + "}",
        CANON.replace("-", "", 1),
        CANON[:8] + "-" + CANON[9:].replace("-", ""),
        CANON.replace("e", "g"),
        "1_" + CANON.replace("-", "")[2:],
        "",
        None,
        5,
        [CANON],
        CANON.encode(),
    ],
)
def test_7_other_forms_and_types_are_refused(bad: object) -> None:
    with pytest.raises(InvalidRequest) as err:
        v.check_uuid(bad, "rpquery.x.bad_uuid")
    assert err.value.code == "rpquery.x.bad_uuid"


def test_5_patterns_match_whole_strings() -> None:
    from rpquery.models import check_consumer_type
    from rpquery.store.catalog import check_resource_class_name, check_trait_name

    for call, good in [
        (check_trait_name, "CUSTOM_X"),
        (check_resource_class_name, "CUSTOM_X"),
        (check_consumer_type, "INSTANCE"),
    ]:
        assert call(good) == good
        for bad in (good + "\n", good + "\r\n", "\n" + good):
            with pytest.raises(InvalidRequest):
                call(bad)
    with pytest.raises(InvalidRequest) as err:
        parse_candidates({"resources_A\n": "VCPU:1"})
    assert err.value.code == "rpquery.request.bad_suffix"


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (1, True),
        (v.MAX_INT, True),
        (v.MAX_INT + 1, False),
        (2**63, False),
        (0, False),
        (True, False),
        (1.0, False),
        ("1", False),
        (None, False),
    ],
)
def test_2_bounded_integers(value: object, ok: bool) -> None:
    if ok:
        assert v.check_int(value, "c", "n", minimum=1) == value
    else:
        with pytest.raises(InvalidRequest):
            v.check_int(value, "c", "n", minimum=1)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (1, True),
        (0.5, True),
        (3.4e38, True),
        (v.MAX_RATIO, True),
        (3.41e38, False),
        (float("inf"), False),
        (float("-inf"), False),
        (float("nan"), False),
        (1e308, False),
        (0, False),
        (-1.0, False),
        (10**400, False),
        (True, False),
        ("1.0", False),
        (None, False),
    ],
)
def test_1_ratios(value: object, ok: bool) -> None:
    if ok:
        assert v.check_ratio(value, "c") == float(value)  # type: ignore[arg-type]
    else:
        with pytest.raises(InvalidRequest):
            v.check_ratio(value, "c")


@pytest.mark.parametrize("bad", ["a\x00b", "\x00", "x\ud800", "\udfff", "ok\udc80ok"])
def test_3_4_text_with_nul_or_lone_surrogates_is_refused(bad: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        v.check_text(bad, "rpquery.x.bad_text", "name")
    assert err.value.code == "rpquery.x.bad_text"
    assert err.value.token == bad
    with pytest.raises(InvalidRequest) as err:
        parse_providers({"name": bad})
    assert err.value.code == "rpquery.request.bad_text"


def test_text_accepts_any_other_unicode() -> None:
    assert v.check_text("héllo 🎉 \t tab", "c", "name") == "héllo 🎉 \t tab"
    with pytest.raises(InvalidRequest):
        v.check_external_id("   ", "c", "project id")
    with pytest.raises(InvalidRequest):
        v.check_external_id("p" * 256, "c", "project id")


# ------------------------------------------------------------------ 14. readable messages


def test_14_a_100k_character_trait_gives_a_short_message_and_keeps_code_and_token() -> None:
    trait = "CUSTOM_" + "a" * 100_000
    with pytest.raises(InvalidRequest) as err:
        parse_candidates({"resources": "VCPU:1", "required": trait})
    exc = err.value
    assert exc.code == "rpquery.trait.bad_name"
    assert exc.token == trait
    assert len(str(exc)) < 300
    assert "…(100007 chars)" in str(exc)
    assert exc.as_dict()["detail"] == exc.detail
    assert len(exc.detail) < 300


def test_14_long_values_that_are_not_the_token_are_cut_too() -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_candidates({"resources": "VCPU:1", "unknown_" + "x" * 50_000: "1"})
    assert len(err.value.detail) < 300
    detail = readable_detail("x" * 5000, None)
    assert len(detail) < 1100 and detail.endswith("…(5000 chars)")


def test_14_short_tokens_are_shown_whole() -> None:
    detail = readable_detail("invalid trait name 'lower'", "lower")
    assert detail == "invalid trait name 'lower'"
