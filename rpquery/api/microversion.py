"""Placement's microversions: parse ``OpenStack-API-Version: placement X.Y``.

A request names the version it speaks; no header means the oldest (1.0), ``latest``
the newest (1.39). A value that is not ``X.Y`` (ASCII digits, no leading zeros, nothing
else) is a 400, and so is an entry naming ``placement`` with no version; a well-formed
version this service does not offer is a 406 (the error body then carries
``min_version`` and ``max_version``). Placement 16.0 reads the version with Python's
``int()``, so it takes ``1.3_9`` for 1.39, ``1. 3`` for 1.3 and ``placement`` alone for
1.0; rpquery refuses them with the 400 Placement gives ``1.3.0``.

>>> parse_header(None)
Version(major=1, minor=0)
>>> parse_header("placement latest, compute 2.1")
Version(major=1, minor=39)
>>> str(parse_header("placement 1.14"))
'1.14'
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from rpquery.api.errors import ApiError

__all__ = ["HEADER", "MAX_VERSION", "MIN_VERSION", "SERVICE", "Version", "parse_header"]

SERVICE = "placement"
HEADER = "openstack-api-version"


class Version(NamedTuple):
    """A microversion; compares like a tuple: ``Version(1, 14) >= (1, 10)``."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def of(cls, text: str) -> Version:
        """``"1.14"`` → ``Version(1, 14)`` (no range check)."""
        major, minor = text.split(".")
        return cls(int(major), int(minor))


_VERSION_TEXT = re.compile(r"(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})", re.ASCII)
#: How much of a refused version an error message quotes.
_QUOTED = 40

MIN_VERSION = Version(1, 0)
MAX_VERSION = Version(1, 39)


def _requested(header: str) -> str | None:
    """The version text for ``placement`` in a (possibly folded) header: the last
    entry naming this service wins; ``""`` when it names no version."""
    for entry in reversed(header.split(",")):
        parts = entry.strip().split(None, 1)
        if parts and parts[0].lower() == SERVICE:
            return parts[1].strip() if len(parts) == 2 else ""
    return None


def parse_header(header: str | None) -> Version:
    """The version a request asks for (see the module docstring); the answer for a
    header of up to :data:`_KEPT` characters is kept (clients send a few values).

    Raises :class:`ApiError` 400 for a malformed version and 406 for one outside
    ``MIN_VERSION..MAX_VERSION``.

    >>> parse_header("placement 1.3_9")
    Traceback (most recent call last):
    ...
    rpquery.api.errors.ApiError: Invalid microversion: invalid version string: 1.3_9
    """
    if header and len(header) <= _KEPT:
        return _parsed(header)
    return _parse(header)


def _parse(header: str | None) -> Version:
    text = _requested(header) if header else None
    if text is None:
        return MIN_VERSION
    if text == "latest":
        return MAX_VERSION
    shown = text if len(text) <= _QUOTED else f"{text[:_QUOTED]}..."
    match = _VERSION_TEXT.fullmatch(text)
    if match is None:
        raise ApiError(400, f"Invalid microversion: invalid version string: {shown}")
    version = Version(int(match[1]), int(match[2]))
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ApiError(
            406,
            f"Invalid microversion: Unacceptable version header: {shown}",
            extra={"max_version": str(MAX_VERSION), "min_version": str(MIN_VERSION)},
        )
    return version


#: The longest header whose version is kept, and how many are (a refused one never is).
_KEPT = 64
_parsed = functools.lru_cache(maxsize=128)(_parse)
