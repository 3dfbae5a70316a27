"""The tag codec and the tag limits, without a database: round trips over arbitrary
Unicode, the backend rule on every accepted tag, boundaries of every limit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpquery.errors import InvalidRequest
from rpquery.tags import codec
from rpquery.tags.backend import GANETI_TAG_RE, ganeti_rejects
from rpquery.tags.model import (
    DEFAULT_CONFIG,
    TagConfig,
    validate_instance,
    validate_namespace,
    validate_tag,
    validate_tags,
)

# Any Unicode scalar value (lone surrogates cannot be UTF-8 and are rejected apart).
unicode_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=80)


@settings(max_examples=400, deadline=None)
@given(unicode_text)
def test_round_trip_over_arbitrary_unicode(text: str) -> None:
    encoded = codec.encode(text)
    assert codec.ENCODED_ALPHABET.match(encoded)
    assert "~" not in encoded and "%" not in encoded and "_" not in encoded
    assert codec.decode(encoded) == text


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(st.text(min_size=1, max_size=20), unicode_text),
    st.sampled_from(sorted(DEFAULT_CONFIG.prefixes)),
)
def test_every_accepted_tag_passes_the_backend_rule(text: str, namespace: str) -> None:
    try:
        validate_tag(DEFAULT_CONFIG, namespace, text)
    except InvalidRequest as exc:
        assert exc.code.startswith("rpquery.tags.")
        return
    form = DEFAULT_CONFIG.backend_form(namespace, text)
    assert GANETI_TAG_RE.match(form) and len(form) <= 128
    assert ganeti_rejects(form) is None
    assert DEFAULT_CONFIG.parse_backend_form(form) == (namespace, text)


@pytest.mark.parametrize(
    ("tag", "encoded"),
    [
        ("web", "web"),
        ("a b", "a+b"),
        ("a_b", "a*b"),
        ("a~b", "a/7Eb"),
        ("a+b", "a/2Bb"),
        ("a*b", "a/2Ab"),
        ("100%", "100/25"),
        ("é", "/C3/A9"),
        ("cyclades:system:x", "cyclades/3Asystem/3Ax"),
    ],
)
def test_known_encodings(tag: str, encoded: str) -> None:
    assert codec.encode(tag) == encoded
    assert codec.decode(encoded) == tag


def test_decode_exactly_once() -> None:
    once = codec.encode("50%")
    assert once == "50/25"
    assert codec.decode(once) == "50%"
    # Decoding the result again would be a second decode: "50%" is not an encoding.
    with pytest.raises(InvalidRequest) as err:
        codec.decode(codec.decode(once))
    assert err.value.code == "rpquery.tags.bad_encoding"


@pytest.mark.parametrize("bad", ["a b", "a~b", "a_b", "/zz", "/c3/a9", "/41", "/C3", "a%20"])
def test_decode_refuses_what_encode_cannot_produce(bad: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        codec.decode(bad)
    assert err.value.code == "rpquery.tags.bad_encoding" and err.value.token == bad


def test_lone_surrogate_is_rejected() -> None:
    with pytest.raises(InvalidRequest) as err:
        validate_tag(DEFAULT_CONFIG, "user", "a\ud800")
    assert err.value.code == "rpquery.tags.not_unicode"


# ------------------------------------------------------------------ limits


@pytest.mark.parametrize(
    ("tag", "code"),
    [
        ("", "rpquery.tags.empty"),
        ("x" * 61, "rpquery.tags.too_long"),
        ("a/b", "rpquery.tags.bad_character"),
        ("a,b", "rpquery.tags.bad_character"),
        # 60 characters, but 3 encoded bytes each: the backend form is far over 128.
        ("é" * 20, "rpquery.tags.backend_rejects"),
    ],
)
def test_excl_tags_past_the_limits(tag: str, code: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        validate_tag(DEFAULT_CONFIG, "user", tag)
    assert err.value.code == code
    assert err.value.token is not None


def test_incl_tags_at_the_limits() -> None:
    assert validate_tag(DEFAULT_CONFIG, "user", "x" * 60) == "x" * 60
    assert validate_tag(DEFAULT_CONFIG, "user", "a") == "a"
    # "cyclades:user:" is 14 characters; "é" encodes to 6: 14 + 6*19 = 128 exactly.
    at_limit = "é" * 19
    assert len(DEFAULT_CONFIG.backend_form("user", at_limit)) == 128
    assert validate_tag(DEFAULT_CONFIG, "user", at_limit) == at_limit
    # The longer system prefix pushes the same tag over the backend's limit.
    with pytest.raises(InvalidRequest) as err:
        validate_tag(DEFAULT_CONFIG, "system", at_limit)
    assert err.value.code == "rpquery.tags.backend_rejects"


def test_tag_count_at_and_past_the_limit() -> None:
    fifty = [f"t{i}" for i in range(50)]
    assert len(validate_tags(DEFAULT_CONFIG, "user", fifty + ["t0"])) == 50  # duplicates drop
    with pytest.raises(InvalidRequest) as err:
        validate_tags(DEFAULT_CONFIG, "user", [*fifty, "t50"])
    assert err.value.code == "rpquery.tags.too_many" and err.value.token == "t50"


def test_namespaces_and_instances_are_validated() -> None:
    assert validate_namespace(DEFAULT_CONFIG, "system") == "system"
    for bad in ("admin", "", "USER", "cyclades:user:"):
        with pytest.raises(InvalidRequest) as err:
            validate_namespace(DEFAULT_CONFIG, bad)
        assert err.value.code == "rpquery.tags.unknown_namespace"
    assert validate_instance("6F1C0A52-9F54-4D39-9D1C-1F0F5D3B2A11")[:4] == "6f1c"
    for bad in ("", "i-1", "6f1c0a52-9f54-4d39-9d1c-1f0f5d3b2a1x"):
        with pytest.raises(InvalidRequest) as err:
            validate_instance(bad)
        assert err.value.code == "rpquery.tags.bad_instance"


def test_config_prefixes_are_configurable_and_must_not_overlap() -> None:
    cfg = TagConfig(prefixes={"user": "acme:u:", "ops": "acme:ops:"})
    assert cfg.backend_form("ops", "x y") == "acme:ops:x+y"
    assert cfg.parse_backend_form("acme:u:x") == ("user", "x")
    assert cfg.parse_backend_form("cyclades:user:x") is None
    with pytest.raises(ValueError):
        TagConfig(prefixes={"user": "a:", "system": "a:b:"})
    with pytest.raises(ValueError):
        TagConfig(prefixes={"user": "bad prefix:"})


def test_foreign_or_broken_backend_tags_are_not_ours() -> None:
    assert DEFAULT_CONFIG.parse_backend_form("ganeti:foo") is None
    assert DEFAULT_CONFIG.parse_backend_form("cyclades:user:a_b") is None  # "_" never encoded
    assert DEFAULT_CONFIG.parse_backend_form("cyclades:user:") is None
    assert DEFAULT_CONFIG.parse_backend_form("cyclades:user:a/2Fb") is None  # decodes to "a/b"
    assert DEFAULT_CONFIG.parse_backend_form("cyclades:user:" + "x" * 61) is None


@pytest.mark.parametrize(
    "module",
    [
        "codec",
        "model",
        "backend",
        "fake_db",
        "conflicts",
        "plan",
        "rows",
        "store",
        "outcomes",
        "reconcile",
        "query",
    ],
)
def test_docstring_examples_hold(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"rpquery.tags.{module}"))
    assert result.failed == 0 and result.attempted > 0
