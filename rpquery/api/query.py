"""Placement's version gates and messages for the shared query parameters
(``resources``, ``required``, ``member_of``, ``in_tree``), checked before the query goes
to :mod:`rpquery.read.request`, whose parser then does the real work.

Placement accepts more syntax at each microversion (forbidden traits from 1.22,
repeated ``member_of`` from 1.24, forbidden aggregates from 1.32, ``in:`` traits and
repeated ``required`` from 1.39); the library parses the newest syntax, so the API
refuses, with Placement's messages, what the requested version does not have.
"""

from __future__ import annotations

from rpquery.api.errors import ApiError
from rpquery.api.microversion import Version
from rpquery.api.util import is_uuid_like

__all__ = ["check_in_tree", "check_member_of", "check_required", "check_resources"]

_BAD_QS = "Invalid query string parameters"


def check_resources(value: str) -> None:
    """``CLASS:AMOUNT,...`` with positive integer amounts (Placement's messages)."""
    form = "Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024."
    if not value.strip():
        raise ApiError(400, f"Badly formed resources parameter. {form} Got: empty string.")
    for item in value.split(","):
        parts = item.split(":")
        if len(parts) != 2:
            raise ApiError(400, f"Badly formed resources parameter. {form} Got: {item}.")
        name, amount = parts
        try:
            number = int(amount)
        except ValueError:
            raise ApiError(
                400,
                f"Requested resource {name} expected positive integer amount. Got: {amount}.",
            ) from None
        if number < 1:
            raise ApiError(400, f"Requested resource {name} requires amount >= 1. Got: {number}.")


def check_required(key: str, values: list[str], version: Version) -> list[str]:
    """The ``required`` values the version reads (only the last one before 1.39),
    refusing ``!`` before 1.22 and ``in:`` before 1.39."""
    allow_forbidden, allow_any = version >= (1, 22), version >= (1, 39)
    if not allow_any:
        values = values[-1:]
    for value in values:
        if value.startswith("in:"):
            _check_any_traits(value, allow_any)
            continue
        traits = [t.strip() for t in value.split(",")]
        form = "HW_CPU_X86_VMX,!CUSTOM_MAGIC" if allow_forbidden else "HW_CPU_X86_VMX,CUSTOM_MAGIC"
        if not all(t.lstrip("!") for t in traits):
            raise ApiError(
                400,
                f"{_BAD_QS}: Expected '{key}' parameter value of the form: {form}. "
                f"Got an empty trait in: {value}",
            )
        if not allow_forbidden and any(t.startswith("!") for t in traits):
            raise ApiError(
                400,
                f"{_BAD_QS}: Expected '{key}' parameter value of the form: "
                f"HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: {value}",
            )
    return values


def _check_any_traits(value: str, allowed: bool) -> None:
    if not allowed:
        raise ApiError(
            400,
            f"{_BAD_QS}: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since "
            f"microversion 1.39. Got: {value}",
        )
    traits = [t.strip() for t in value[3:].split(",")]
    if not all(traits):
        raise ApiError(
            400,
            f"{_BAD_QS}: Expected 'required' parameter value of the form: "
            f"in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: {value}",
        )
    if any(t.startswith("!") for t in traits):
        raise ApiError(
            400,
            f"{_BAD_QS}: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support "
            f"forbidden traits. Got: {value}",
        )


def check_member_of(key: str, values: list[str], version: Version) -> None:
    """Repeated ``member_of`` from 1.24, ``!`` from 1.32, ``in:`` for several uuids."""
    suffix = key[len("member_of") :]
    if version < (1, 24) and len(values) > 1:
        raise ApiError(400, f"Multiple member_of{suffix} parameters are not supported")
    for value in values:
        if "," in value and not value.startswith(("in:", "!in:")):
            raise ApiError(
                400,
                "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' "
                f"keyword using the valid microversion. Got: {value}",
            )
        forbidden = value.startswith("!")
        body = value[1:] if forbidden else value
        uuids = body[3:].split(",") if body.startswith("in:") else [body]
        for agg in uuids:
            if not is_uuid_like(agg):
                raise ApiError(
                    400,
                    f"{_BAD_QS}: Expected 'member_of' parameter to contain valid UUID(s). "
                    f"Got: {agg}",
                )
        if forbidden and version < (1, 32):
            raise ApiError(
                400,
                f"Forbidden member_of{suffix} parameters are not supported in the specified "
                "microversion",
            )


def check_in_tree(key: str, value: str) -> None:
    if not is_uuid_like(value.strip()):
        raise ApiError(
            400,
            f"{_BAD_QS}: Expected '{key}' parameter to be a format of uuid. Got: {value}",
        )
