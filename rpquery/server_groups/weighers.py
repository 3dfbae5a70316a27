"""Weigher configuration and the weight maths of the soft server-group policies
(docs/server-groups.md).

Soft policies do not filter hosts, they *order* them. Which weighers exist is explicit
configuration, as in nova's ``weight_classes``: a request whose group needs a weigher
that is not enabled is rejected (``rpquery.weigher.not_enabled``) instead of being
scheduled silently without it. Each weigher has a multiplier (``>= 0``, default 1.0).

A host's weight is its raw value (members of the group on it, negated for
soft-anti-affinity) min–max normalised over the candidate hosts, times the multiplier:

>>> group_weights({1: 2, 2: 1}, [1, 2, 3], negate=False, multiplier=1.0)
{1: 1.0, 2: 0.5, 3: 0.0}
>>> group_weights({1: 2, 2: 1}, [1, 2, 3], negate=True, multiplier=2.0)
{1: 0.0, 2: 1.0, 3: 2.0}
>>> group_weights({}, [1, 2], negate=True, multiplier=1.0)
{1: 0.0, 2: 0.0}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from rpquery._validation import check_str_list
from rpquery.errors import InvalidRequest

__all__ = [
    "DEFAULT_MULTIPLIER",
    "DEFAULT_WEIGHERS",
    "KNOWN_WEIGHERS",
    "SOFT_AFFINITY",
    "SOFT_ANTI_AFFINITY",
    "WeigherConfig",
    "group_weights",
    "normalize",
    "parse_multipliers",
]

SOFT_AFFINITY = "ServerGroupSoftAffinityWeigher"
SOFT_ANTI_AFFINITY = "ServerGroupSoftAntiAffinityWeigher"

#: Every weigher rpquery knows, by its nova name.
KNOWN_WEIGHERS: tuple[str, ...] = (SOFT_AFFINITY, SOFT_ANTI_AFFINITY)

DEFAULT_MULTIPLIER = 1.0


def _check_name(name: str) -> str:
    if name not in KNOWN_WEIGHERS:
        raise InvalidRequest(
            "rpquery.weigher.unknown",
            f"unknown weigher {name!r}; known: {', '.join(KNOWN_WEIGHERS)}",
            token=name,
        )
    return name


def _check_multiplier(name: str, value: float | int | str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number < 0:
        raise InvalidRequest(
            "rpquery.weigher.bad_multiplier",
            f"multiplier of {name} must be a finite number >= 0, got {value!r}",
            token=str(value),
        )
    return number


@dataclass(frozen=True)
class WeigherConfig:
    """Which weighers are enabled, and their multipliers (missing → 1.0).

    >>> cfg = WeigherConfig.build([SOFT_AFFINITY], {SOFT_AFFINITY: "2.5"})
    >>> cfg.multiplier(SOFT_AFFINITY)
    2.5
    >>> cfg.require(SOFT_ANTI_AFFINITY)
    Traceback (most recent call last):
    ...
    rpquery.errors.InvalidRequest: ... (rpquery.weigher.not_enabled)
    """

    enabled: frozenset[str]
    multipliers: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.enabled:
            _check_name(name)
        checked = {_check_name(n): _check_multiplier(n, v) for n, v in self.multipliers.items()}
        object.__setattr__(self, "multipliers", MappingProxyType(checked))

    @classmethod
    def build(
        cls, enabled: Iterable[str], multipliers: Mapping[str, float | str] | None = None
    ) -> WeigherConfig:
        """Validate plain input (names, numbers or numeric strings) into a config."""
        parsed = {n: _check_multiplier(n, v) for n, v in (multipliers or {}).items()}
        return cls(frozenset(enabled), parsed)

    def multiplier(self, name: str) -> float:
        return self.multipliers.get(name, DEFAULT_MULTIPLIER)

    def require(self, name: str) -> None:
        """Raise ``InvalidRequest`` (``rpquery.weigher.not_enabled``) unless enabled."""
        if name not in self.enabled:
            raise InvalidRequest(
                "rpquery.weigher.not_enabled",
                f"the request needs weigher {name}, which is not enabled",
                token=name,
            )


#: Both soft-policy weighers enabled with multiplier 1.0.
DEFAULT_WEIGHERS = WeigherConfig(frozenset(KNOWN_WEIGHERS))


def parse_multipliers(items: Iterable[str]) -> dict[str, str]:
    """``["NAME=2.0", ...]`` (the CLI's ``--weigher-multiplier``) → ``{"NAME": "2.0"}``.

    >>> parse_multipliers(["ServerGroupSoftAffinityWeigher=2"])
    {'ServerGroupSoftAffinityWeigher': '2'}
    """
    out: dict[str, str] = {}
    code = "rpquery.weigher.bad_multiplier"
    for item in check_str_list(items, code, "weigher multipliers"):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidRequest(
                "rpquery.weigher.bad_multiplier",
                f"expected NAME=MULTIPLIER, got {item!r}",
                token=item,
            )
        out[name.strip()] = value.strip()
    return out


def normalize(raw: Mapping[int, float], keys: Sequence[int]) -> dict[int, float]:
    """Min–max normalise ``raw`` over ``keys`` to 0..1 (missing keys count 0; all equal → 0).

    >>> normalize({1: 4.0, 2: 2.0}, [1, 2, 3])
    {1: 1.0, 2: 0.5, 3: 0.0}
    >>> normalize({1: 3.0, 2: 3.0}, [1, 2])
    {1: 0.0, 2: 0.0}
    """
    values = {k: float(raw.get(k, 0.0)) for k in keys}
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    if high == low:
        return dict.fromkeys(values, 0.0)
    span = high - low
    return {k: (v - low) / span for k, v in values.items()}


def group_weights(
    counts: Mapping[int, int], root_ids: Sequence[int], *, negate: bool, multiplier: float
) -> dict[int, float]:
    """Weight per candidate host from the group's member counts on each host."""
    sign = -1.0 if negate else 1.0
    raw = {root: sign * counts.get(root, 0) for root in root_ids}
    return {k: w * multiplier for k, w in normalize(raw, root_ids).items()}
