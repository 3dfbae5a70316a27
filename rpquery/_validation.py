"""One rule per shared value kind: uuids, external ids, names and free text, bounded
integers, allocation ratios and whole-string patterns.

Every module that takes such a value from a caller checks it here, so one input gets
one answer on every backend and nothing a database would refuse, truncate or store
differently ever reaches it. Each check takes the caller's stable ``code`` and raises
:class:`~rpquery.errors.InvalidRequest` with it and the offending ``token``; a value of
the wrong type (an API layer passing JSON straight through) is refused the same way.

Uuids are accepted in the standard written forms, any case, and returned canonical
(lower case, hyphenated), the form that is stored and compared:

>>> check_uuid("E10927C48BC9465DAC60D2F79F7E4A00", "rpquery.provider.bad_uuid")
'e10927c4-8bc9-465d-ac60-d2f79f7e4a00'
>>> check_uuid("urn:uuid:e10927c4-8bc9-465d-ac60-d2f79f7e4a00", "rpquery.provider.bad_uuid")
'e10927c4-8bc9-465d-ac60-d2f79f7e4a00'
>>> check_uuid("e10927c4-8bc9-465d-ac60-d2f79f7e4a00\\n", "rpquery.provider.bad_uuid")
Traceback (most recent call last):
...
rpquery.errors.InvalidRequest: 'e10927c4-8bc9-465d-ac60-d2f79f7e4a00\\n' is not a uuid \
(rpquery.provider.bad_uuid)

Integers that reach an ``INTEGER`` column are bounded by :data:`MAX_INT`, Placement's
bound, before any statement is built:

>>> check_int(2**31, "rpquery.allocation.bad_amount", "amount of VCPU", minimum=1)
Traceback (most recent call last):
...
rpquery.errors.InvalidRequest: amount of VCPU must be an integer in 1..2147483647, got \
2147483648 (rpquery.allocation.bad_amount)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from rpquery.errors import invalid

#: The largest value of a signed 32-bit ``INTEGER`` column (Placement's ``MAX_INT``).
MAX_INT = 2_147_483_647
#: The largest allocation ratio: the largest single-precision float, Placement's bound.
MAX_RATIO = 3.40282e38

# The written forms of a uuid Python documents: hyphenated or 32 hex digits, either one
# braced or after "urn:uuid:". Placement's own check (oslo's is_uuid_like) also takes
# hyphens and prefixes anywhere inside; nobody writes those, so they are refused.
_UUID_RE = re.compile(
    r"(?:urn:uuid:|(?P<brace>\{))?"
    r"(?P<hex>[0-9a-fA-F]{8}(?P<dash>-?)[0-9a-fA-F]{4}(?P=dash)[0-9a-fA-F]{4}"
    r"(?P=dash)[0-9a-fA-F]{4}(?P=dash)[0-9a-fA-F]{12})"
    r"(?(brace)\})"
)
# NUL (PostgreSQL refuses it, the others store it) and lone surrogates (not encodable
# as UTF-8: every driver fails on them).
_BAD_TEXT_RE = re.compile("[\x00\ud800-\udfff]")


def _token(value: object, token: str | None) -> object:
    return value if token is None else token


# ---------------------------------------------------------------- patterns


def matches(pattern: re.Pattern[str], value: object) -> bool:
    """``value`` is a string matched by ``pattern`` as a whole (``fullmatch``: a
    trailing ``"\\n"`` never slips through as it does with ``$``).

    >>> matches(re.compile(r"CUSTOM_[A-Z0-9_]+"), "CUSTOM_X\\n"), matches(re.compile("a"), 1)
    (False, False)
    """
    return isinstance(value, str) and pattern.fullmatch(value) is not None


# ---------------------------------------------------------------- uuids


def canonical_uuid(value: object) -> str | None:
    """The canonical form of ``value`` if it is a uuid in an accepted form, else ``None``.

    >>> canonical_uuid("{E10927C4-8BC9-465D-AC60-D2F79F7E4A00}")
    'e10927c4-8bc9-465d-ac60-d2f79f7e4a00'
    >>> canonical_uuid("e10927c4-8bc9465d-ac60-d2f79f7e4a00") is None
    True
    """
    if not isinstance(value, str):
        return None
    found = _UUID_RE.fullmatch(value)
    if found is None:
        return None
    h = found["hex"].replace("-", "").lower()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def check_uuid(value: object, code: str, what: str = "uuid") -> str:
    """``value`` canonical (lower case, hyphenated), or ``InvalidRequest`` ``code``."""
    canonical = canonical_uuid(value)
    if canonical is None:
        label = f"{what} " if what != "uuid" else ""
        raise invalid(code, f"{label}{value!r} is not a uuid", value)
    return canonical


# ---------------------------------------------------------------- text


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text on every backend, or ``None``.

    >>> text_problem("a\\x00b"), text_problem("\\ud800"), text_problem("ok é")
    ('contains a NUL character', 'contains a lone surrogate (not valid Unicode text)', None)
    """
    bad = _BAD_TEXT_RE.search(value)
    if bad is None:
        return None
    if bad.group() == "\x00":
        return "contains a NUL character"
    return "contains a lone surrogate (not valid Unicode text)"


def check_text(
    value: object,
    code: str,
    what: str,
    *,
    max_length: int = 255,
    allow_empty: bool = False,
    allow_blank: bool = True,
) -> str:
    """A string of at most ``max_length`` characters that every backend stores as given:
    no NUL, no lone surrogate. Empty only with ``allow_empty``; whitespace-only only with
    ``allow_blank``.

    >>> check_text("web", "rpquery.server_group.bad_name", "name")
    'web'
    >>> check_text("w\\x00b", "rpquery.server_group.bad_name", "name")
    Traceback (most recent call last):
    ...
    rpquery.errors.InvalidRequest: name 'w\\x00b' contains a NUL character \
(rpquery.server_group.bad_name)
    """
    if not isinstance(value, str):
        raise invalid(code, f"{what} must be a string, got {type(value).__name__}", value)
    problem = text_problem(value)
    if problem is not None:
        raise invalid(code, f"{what} {value!r} {problem}", value)
    if (not value and not allow_empty) or (value and not value.strip() and not allow_blank):
        raise invalid(code, f"{what} must not be empty", value)
    if len(value) > max_length:
        raise invalid(code, f"{what} must be at most {max_length} characters", value)
    return value


def check_external_id(value: object, code: str, what: str) -> str:
    """A project or user id: opaque, 1 to 255 characters, not only whitespace, storable."""
    return check_text(value, code, what, max_length=255, allow_blank=False)


def check_name(value: object, code: str, what: str, *, max_length: int = 255) -> str:
    """A name (of a provider, a server group): storable, 1 to ``max_length`` characters,
    not only whitespace."""
    return check_text(value, code, what, max_length=max_length, allow_blank=False)


# ---------------------------------------------------------------- numbers


def check_int(
    value: object,
    code: str,
    what: str,
    *,
    minimum: int = 0,
    maximum: int = MAX_INT,
    token: str | None = None,
) -> int:
    """``value`` if it is an ``int`` (not ``bool``) in ``minimum..maximum``; the error's
    token is ``token`` when given, else the value."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        detail = f"{what} must be an integer in {minimum}..{maximum}, got {value!r}"
        raise invalid(code, detail, _token(value, token))
    return value


def check_ratio(
    value: object, code: str, what: str = "allocation_ratio", *, token: str | None = None
) -> float:
    """A finite number ``> 0`` and ``<= MAX_RATIO`` (Placement's bound), as a float.

    >>> check_ratio(16, "rpquery.inventory.bad_allocation_ratio")
    16.0
    >>> check_ratio(float("inf"), "rpquery.inventory.bad_allocation_ratio")
    Traceback (most recent call last):
    ...
    rpquery.errors.InvalidRequest: allocation_ratio must be a finite number in \
(0, 3.40282e+38], got inf (rpquery.inventory.bad_allocation_ratio)
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        try:
            number = float(value)  # type: ignore[arg-type]
        except OverflowError:
            ok = False
        else:
            ok = math.isfinite(number) and 0 < number <= MAX_RATIO
    if not ok:
        detail = f"{what} must be a finite number in (0, {MAX_RATIO:g}], got {value!r}"
        raise invalid(code, detail, _token(value, token))
    return number


# ---------------------------------------------------------------- JSON shapes


def check_mapping(value: object, code: str, what: str) -> dict[Any, Any]:
    """A mapping (JSON object) as a plain ``dict``; anything else is ``InvalidRequest``."""
    if not isinstance(value, Mapping):
        raise invalid(code, f"{what} must be a mapping, got {type(value).__name__}", value)
    return dict(value)


def check_str_list(value: object, code: str, what: str) -> list[str]:
    """A string, or a list or tuple of strings, as a list (a JSON array of strings)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise invalid(code, f"{what} must be a string or a list of strings", value)
    return list(items)
