"""Placement's microversions: parse ``OpenStack-API-Version: placement X.Y``.

A request names the version it speaks; no header means the oldest (1.0), ``latest``
the newest (1.39). A value that is not ``X.Y`` is a 400, a well-formed version this
service does not offer a 406 (the error body then carries ``min_version`` and
``max_version``).

>>> parse_header(None)
Version(major=1, minor=0)
>>> parse_header("placement latest, compute 2.1")
Version(major=1, minor=39)
>>> str(parse_header("placement 1.14"))
'1.14'
"""

from __future__ import annotations

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


MIN_VERSION = Version(1, 0)
MAX_VERSION = Version(1, 39)


def _requested(header: str) -> str | None:
    """The version text for ``placement`` in a (possibly folded) header: the last
    ``<service> <version>`` entry naming this service wins."""
    for entry in reversed(header.split(",")):
        parts = entry.strip().split(None, 1)
        if len(parts) == 2 and parts[0].lower() == SERVICE:
            return parts[1].strip()
    return None


def parse_header(header: str | None) -> Version:
    """The version a request asks for (see the module docstring).

    Raises :class:`ApiError` 400 for a malformed version and 406 for one outside
    ``MIN_VERSION..MAX_VERSION``.
    """
    text = _requested(header) if header else None
    if text is None:
        return MIN_VERSION
    if text == "latest":
        return MAX_VERSION
    major, _, minor = text.partition(".")
    try:
        version = Version(int(major), int(minor))
    except ValueError:
        raise ApiError(400, f"Invalid microversion: invalid version string: {text}") from None
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ApiError(
            406,
            f"Invalid microversion: Unacceptable version header: {text}",
            extra={"max_version": str(MAX_VERSION), "min_version": str(MIN_VERSION)},
        )
    return version
