"""The aggregate-metadata flavor filter as a pure function
(docs/design.md#aggregate-metadata-filter).

No database here: :func:`host_passes` decides whether a host passes, given the flavor's
extra specs and the metadata of each aggregate the host belongs to. The policy in
:mod:`rpquery.aggregate_metadata.metadata` fetches the metadata and calls this module.

Why a separate evaluator: the rules (sentinels, ``<or>``, nova's operators, scoped
and namespaced keys, ``force_metadata_check`` per aggregate) are subtle, and a pure
function can be tested example by example against the examples of the filter's
document (docs/design.md#origins).

>>> host_passes({"key": "<or> 1 <or> ~"}, [{"key": "1"}])
True
>>> host_passes({"key": "<or> 1 <or> ~"}, [{"key": "2"}])
False
>>> host_passes({}, [{"key": "1", "force_metadata_check": "True"}])
False
>>> host_passes({"key": ">= 4"}, [{"key": "8"}], nova_compat=True)
True
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from rpquery._validation import text_problem
from rpquery.errors import InvalidRequest

__all__ = [
    "FORCE_KEY",
    "NUMERIC_OPS",
    "OPERATORS",
    "OR",
    "SCOPE",
    "SENTINELS",
    "STRING_OPS",
    "Alternative",
    "FlavorFilter",
    "FlavorKey",
    "HostKey",
    "ValueSpec",
    "force_check_enabled",
    "host_keys",
    "host_passes",
    "nova_match",
    "nova_passes",
    "split_key",
    "validate_extra_specs",
]

#: The scope of nova's AggregateInstanceExtraSpecsFilter; scoped keys are plain keys.
SCOPE = "aggregate_instance_extra_specs"
#: The reserved aggregate metadata key that turns on the flavor-side check.
FORCE_KEY = "force_metadata_check"
OR = "<or>"
ANY, OPTIONAL, ABSENT = "*", "~", "!"
SENTINELS = frozenset({ANY, OPTIONAL, ABSENT})


def _num(op: Callable[[float, float], bool]) -> Callable[[str, str], bool]:
    def compare(value: str, operand: str) -> bool:
        try:
            return op(float(value), float(operand))
        except ValueError:  # an unparsable host value fails this host, quietly
            return False

    return compare


#: nova's operators (``nova/scheduler/filters/extra_specs_ops.py``): ``=`` is ">=".
NUMERIC_OPS: dict[str, Callable[[str, str], bool]] = {
    "=": _num(operator.ge),
    "==": _num(operator.eq),
    "!=": _num(operator.ne),
    ">=": _num(operator.ge),
    "<=": _num(operator.le),
}
STRING_OPS: dict[str, Callable[[str, str], bool]] = {
    "s==": operator.eq,
    "s!=": operator.ne,
    "s>=": operator.ge,
    "s>": operator.gt,
    "s<=": operator.le,
    "s<": operator.lt,
    "<in>": lambda value, operand: operand in value,
}
OPERATORS = frozenset({*NUMERIC_OPS, *STRING_OPS, "<all-in>"})


# --------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Alternative:
    """One accepted value: a literal (``op is None``) or ``op`` with its operand words.

    >>> Alternative.parse(">= 4").matches("8"), Alternative.parse("1").matches("1 ")
    (True, False)
    """

    text: str
    op: str | None = None
    words: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Alternative:
        words = text.split()
        if words and words[0] in OPERATORS:
            return cls(text, words[0], tuple(words[1:]))
        return cls(text)

    def matches(self, value: str) -> bool:
        """Does a concrete ``value`` satisfy this alternative (nova's ``match``)?"""
        if self.op is None:
            return value == self.text
        if not self.words:
            return False
        if self.op == "<all-in>":
            return all(word in value for word in self.words)
        method = NUMERIC_OPS.get(self.op) or STRING_OPS[self.op]
        return method(value, self.words[0])

    def compatible(self, other: Alternative) -> bool:
        """Symmetric match between two sides that may both carry operators: a literal
        meets an operator when the operator accepts it; two operators meet only when
        they are the same constraint."""
        if self.op is None:
            return other.matches(self.text)
        if other.op is None:
            return self.matches(other.text)
        return (self.op, self.words) == (other.op, other.words)


@dataclass(frozen=True)
class ValueSpec:
    """A parsed value: the sentinels it carries and its other alternatives.

    >>> spec = ValueSpec.parse("<or> 1 <or> ~")
    >>> spec.optional, [a.text for a in spec.alternatives]
    (True, ['1'])
    """

    text: str
    any: bool = False
    optional: bool = False
    absent: bool = False
    alternatives: tuple[Alternative, ...] = ()

    @classmethod
    def parse(cls, text: str) -> ValueSpec:
        words = text.split()
        if words and words[0] == OR:
            parts = _split_or(words)
        else:
            parts = [text.strip() if text.strip() in SENTINELS else text]
        alternatives = tuple(Alternative.parse(p) for p in parts if p not in SENTINELS)
        return cls(text, ANY in parts, OPTIONAL in parts, ABSENT in parts, alternatives)

    @property
    def exclusive_violation(self) -> bool:
        """``!`` combined with anything else (rejected whenever it is written)."""
        return self.absent and (self.any or self.optional or bool(self.alternatives))

    def accepts(self, present: bool, match: Callable[[Alternative], bool]) -> bool:
        """Outcome for one key: ``present`` says whether the other side has it, and
        ``match`` tells whether one of that side's values meets an alternative."""
        if not present:
            return self.optional or self.absent
        return self.any or any(match(alt) for alt in self.alternatives)


def _split_or(words: list[str]) -> list[str]:
    """``["<or>", "1", "<or>", "s==", "a"]`` → ``["1", "s== a"]`` (empty parts dropped)."""
    parts: list[str] = []
    current: list[str] = []
    for word in [*words[1:], OR]:
        if word == OR:
            if current:
                parts.append(" ".join(current))
            current = []
        else:
            current.append(word)
    return parts


def split_key(key: str) -> tuple[str, bool] | None:
    """``(plain key, optional)`` for a flavor key, or ``None`` for the reserved key.

    ``aggregate_instance_extra_specs:k`` is the plain key ``k``; any other namespaced
    key (``hw:cpu_policy``) is optional: checked only where an aggregate has it.

    >>> split_key("aggregate_instance_extra_specs:ssd"), split_key("hw:cpu_policy")
    (('ssd', False), ('hw:cpu_policy', True))
    """
    scope, sep, rest = key.partition(":")
    if sep and scope == SCOPE:
        plain, optional = rest, False
    else:
        plain, optional = key, bool(sep)
    return None if plain == FORCE_KEY else (plain, optional)


def validate_extra_specs(extra_specs: object, *, nova_compat: bool = False) -> dict[str, str]:
    """Check a flavor's extra specs before anything reaches the database.

    Raises :class:`InvalidRequest`: ``rpquery.extra_specs.bad_type`` (not a mapping of
    strings), ``rpquery.extra_specs.exclusive_sentinel`` (``!`` combined with another
    value), ``rpquery.extra_specs.bad_operand`` (an operator without its operand, or a
    numeric operator with a non-numeric operand), ``rpquery.extra_specs.empty_or``.
    ``nova_compat=True`` checks the types only (nova accepts any string).
    """
    if not isinstance(extra_specs, Mapping):
        raise InvalidRequest(
            "rpquery.extra_specs.bad_type", "extra specs must be a JSON object of strings"
        )
    checked: dict[str, str] = {}
    for key, value in extra_specs.items():
        if (
            not isinstance(key, str)
            or not key
            or not isinstance(value, str)
            or text_problem(key)
            or text_problem(value)
        ):
            raise InvalidRequest(
                "rpquery.extra_specs.bad_type",
                f"extra spec {key!r}: keys must be non-empty strings and values strings, "
                "without NUL characters or lone surrogates",
                token=str(key),
            )
        if not nova_compat:
            _check_value(key, value)
        checked[key] = value
    return checked


def _check_value(key: str, value: str) -> None:
    spec = ValueSpec.parse(value)
    if spec.exclusive_violation:
        raise InvalidRequest(
            "rpquery.extra_specs.exclusive_sentinel",
            f"extra spec {key}={value!r}: '!' cannot be combined with other values",
            token=value,
        )
    if value.split()[:1] == [OR] and not (spec.alternatives or spec.any or spec.optional):
        raise InvalidRequest(
            "rpquery.extra_specs.empty_or", f"extra spec {key}={value!r}: empty <or>", token=value
        )
    for alt in spec.alternatives:
        if alt.op is not None and not _operand_ok(alt):
            raise InvalidRequest(
                "rpquery.extra_specs.bad_operand",
                f"extra spec {key}={value!r}: operator {alt.op} needs a "
                f"{'numeric ' if alt.op in NUMERIC_OPS else ''}operand",
                token=alt.text,
            )


def _operand_ok(alt: Alternative) -> bool:
    if not alt.words:
        return False
    if alt.op in NUMERIC_OPS:
        try:
            float(alt.words[0])
        except ValueError:
            return False
    return True


# --------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class FlavorKey:
    """One flavor extra spec after scope handling."""

    key: str
    optional: bool
    spec: ValueSpec


@dataclass(frozen=True)
class HostKey:
    """What a host offers for one key: the union over its aggregates."""

    entries: frozenset[Alternative]
    wildcard: bool = False

    def meets(self, alt: Alternative) -> bool:
        return self.wildcard or any(alt.compatible(entry) for entry in self.entries)


def force_check_enabled(metadata: Mapping[str, str]) -> bool:
    """``force_metadata_check`` is a real boolean: only "true" (any case) turns it on."""
    return metadata.get(FORCE_KEY, "").strip().lower() == "true"


def host_keys(aggregates: Iterable[Mapping[str, str]]) -> dict[str, HostKey]:
    """Union of the aggregates' metadata, values per key as a set.

    Values of aggregates without ``force_metadata_check`` are literal strings; those of
    aggregates with it are parsed (``<or>`` alternatives, operators, ``*`` as a
    wildcard).
    """
    entries: dict[str, set[Alternative]] = {}
    wildcard: set[str] = set()
    for metadata in aggregates:
        forced = force_check_enabled(metadata)
        for key, value in metadata.items():
            if key == FORCE_KEY:
                continue
            bucket = entries.setdefault(key, set())
            if not forced:
                bucket.add(Alternative(value))
                continue
            spec = ValueSpec.parse(value)
            bucket.update(spec.alternatives)
            if spec.any:
                wildcard.add(key)
    return {k: HostKey(frozenset(v), k in wildcard) for k, v in entries.items()}


@dataclass(frozen=True)
class FlavorFilter:
    """Parsed extra specs of one flavor; :meth:`passes` evaluates one host.

    >>> f = FlavorFilter.from_specs({"hw:cpu_policy": "shared"})
    >>> f.passes([{}]), f.passes([{"hw:cpu_policy": "dedicated"}])
    (True, False)
    """

    specs: Mapping[str, str]
    keys: tuple[FlavorKey, ...]
    offered: Mapping[str, tuple[Alternative, ...]]
    nova_compat: bool = False

    @classmethod
    def from_specs(
        cls, extra_specs: Mapping[str, str], *, nova_compat: bool = False
    ) -> FlavorFilter:
        specs = validate_extra_specs(extra_specs, nova_compat=nova_compat)
        keys: list[FlavorKey] = []
        offered: dict[str, list[Alternative]] = {}
        for raw_key, value in specs.items():
            split = split_key(raw_key)
            if split is None:
                continue
            key, optional = split
            spec = ValueSpec.parse(value)
            keys.append(FlavorKey(key, optional, spec))
            offered.setdefault(key, []).extend(spec.alternatives)
        frozen = {k: tuple(v) for k, v in offered.items()}
        return cls(specs, tuple(keys), frozen, nova_compat)

    @property
    def is_noop(self) -> bool:
        """True when no host can fail (nova-compatible mode with no extra specs)."""
        return self.nova_compat and not self.specs

    def passes(self, aggregates: Iterable[Mapping[str, str]]) -> bool:
        """Does a host in these aggregates (metadata mappings) pass?"""
        aggregates = list(aggregates)
        if self.nova_compat:
            return nova_passes(self.specs, aggregates)
        if not self._normal_check(host_keys(aggregates)):
            return False
        return all(self._force_check(m) for m in aggregates if force_check_enabled(m))

    def _normal_check(self, host: Mapping[str, HostKey]) -> bool:
        for fk in self.keys:
            have = host.get(fk.key)
            if have is None and fk.optional:
                continue
            if not fk.spec.accepts(have is not None, have.meets if have else _never):
                return False
        return True

    def _force_check(self, metadata: Mapping[str, str]) -> bool:
        """Every key of a forcing aggregate must be in the flavor and satisfy the
        aggregate's value (sentinels, ``<or>`` and operators allowed there)."""
        for key, value in metadata.items():
            if key == FORCE_KEY:
                continue
            offered = self.offered.get(key)
            present = offered is not None
            match = _meets_any(offered or ())
            if not ValueSpec.parse(value).accepts(present, match):
                return False
        return True


def _never(alt: Alternative) -> bool:
    return False


def _meets_any(offered: tuple[Alternative, ...]) -> Callable[[Alternative], bool]:
    return lambda alt: any(alt.compatible(o) for o in offered)


def host_passes(
    extra_specs: Mapping[str, str],
    aggregates: Iterable[Mapping[str, str]],
    *,
    nova_compat: bool = False,
) -> bool:
    """Does a host whose aggregates carry ``aggregates`` metadata pass the flavor?

    ``nova_compat=True`` gives nova's ``AggregateInstanceExtraSpecsFilter``: values
    split on commas, no sentinels, no ``force_metadata_check``, namespaced keys other
    than the scope ignored, a missing key fails.
    """
    return FlavorFilter.from_specs(extra_specs, nova_compat=nova_compat).passes(aggregates)


# --------------------------------------------------------------------- nova mode


def nova_match(value: str, req: str) -> bool:
    """nova's ``extra_specs_ops.match`` with parse failures as ``False``.

    >>> nova_match("2", "<or> 1 <or> 2"), nova_match("abc", ">= 1")
    (True, False)
    """
    words = req.split()
    if not words or (words[0] != OR and words[0] not in OPERATORS):
        return value == req
    if words[0] == OR:
        return value in words[1::2]
    return Alternative.parse(req).matches(value)


def nova_passes(extra_specs: Mapping[str, str], aggregates: Iterable[Mapping[str, str]]) -> bool:
    """nova's filter: every scoped or plain key must be present and match one value."""
    metadata: dict[str, set[str]] = {}
    for agg in aggregates:
        for key, value in agg.items():
            metadata.setdefault(key, set()).update(v.strip() for v in value.split(","))
    for key, req in extra_specs.items():
        scope, sep, rest = key.partition(":")
        if sep and scope != SCOPE:
            continue
        values = metadata.get(rest if sep else key)
        if not values or not any(nova_match(v, req) for v in values):
            return False
    return True
