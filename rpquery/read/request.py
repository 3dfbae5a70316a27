"""Parse Placement's query syntax into frozen, validated request objects (no database).

Two entry points: :func:`parse_candidates` (``GET /allocation_candidates``) and
:func:`parse_providers` (``GET /resource_providers``). Both take a query string or a
multi-dict (``{"required": ["A", "!B"]}``) as an API layer receives it. The typed
dataclasses can also be built directly; their ``__post_init__`` runs the same checks.

>>> req = parse_candidates("resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU&limit=10")
>>> req.groups[0].resources["VCPU"], sorted(req.groups[0].forbidden), req.limit
(1, ['CUSTOM_GPU'], 10)
>>> parse_candidates("resources=VCPU:1&required=! CUSTOM_GPU")
Traceback (most recent call last):
...
rpquery.errors.InvalidRequest: whitespace between '!' and the trait name in '! CUSTOM_GPU' \
(rpquery.trait.bad_forbidden)

Every problem raises :class:`InvalidRequest` with a stable code and ``token`` naming
the offending piece of input; the codes are listed in ``docs/read-path.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from urllib.parse import parse_qsl

from rpquery._validation import (
    MAX_INT,
    check_int,
    check_mapping,
    check_text,
    check_uuid,
    matches,
    text_problem,
)
from rpquery.errors import invalid
from rpquery.store.catalog import check_resource_class_name, check_trait_name

__all__ = [
    "GROUP_POLICIES",
    "SUFFIX_RE",
    "CandidatesRequest",
    "Params",
    "ProvidersRequest",
    "RequestGroup",
    "as_candidates_request",
    "as_providers_request",
    "parse_candidates",
    "parse_member_of",
    "parse_providers",
    "parse_required",
    "parse_resources",
]

SUFFIX_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_GROUP_KEY_RE = re.compile(r"(resources|required|member_of|in_tree)(.*)", re.DOTALL)
_GLOBAL_KEYS = frozenset({"group_policy", "root_required", "same_subtree", "limit"})
GROUP_POLICIES = ("none", "isolate")

Params = str | Mapping[str, str | Sequence[str]]


# ------------------------------------------------------------------ dataclasses


@dataclass(frozen=True)
class RequestGroup:
    """One request group: unsuffixed (``suffix=""``) or granular (``resources_GPU=...``).

    ``required`` is an AND of any-of sets: ``(frozenset({"A"}), frozenset({"B", "C"}))``
    means A and (B or C). ``member_of`` is the same for aggregate uuids.

    >>> g = RequestGroup(resources={"VCPU": 2}, forbidden=frozenset({"CUSTOM_GPU"}))
    >>> (g.suffix, dict(g.resources), g.is_granular)
    ('', {'VCPU': 2}, False)
    """

    suffix: str = ""
    resources: Mapping[str, int] = field(default_factory=dict)
    required: tuple[frozenset[str], ...] = ()
    forbidden: frozenset[str] = frozenset()
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggs: frozenset[str] = frozenset()
    in_tree: str | None = None

    def __post_init__(self) -> None:
        resources = check_mapping(self.resources, "rpquery.request.bad_params", "resources")
        object.__setattr__(self, "resources", MappingProxyType(resources))
        object.__setattr__(self, "required", _name_sets(self.required, "required"))
        object.__setattr__(self, "member_of", _name_sets(self.member_of, "member_of"))
        object.__setattr__(self, "forbidden", _names(self.forbidden, "forbidden"))
        object.__setattr__(self, "forbidden_aggs", _names(self.forbidden_aggs, "forbidden_aggs"))
        _validate_group(self)
        # aggregate and tree uuids are compared in their canonical form
        canonical = {
            a: check_uuid(a, "rpquery.request.bad_aggregate") for s in self.member_of for a in s
        }
        object.__setattr__(
            self, "member_of", tuple(frozenset(canonical[a] for a in s) for s in self.member_of)
        )
        forbidden_aggs = frozenset(
            check_uuid(a, "rpquery.request.bad_aggregate") for a in self.forbidden_aggs
        )
        object.__setattr__(self, "forbidden_aggs", forbidden_aggs)
        if self.in_tree is not None:
            object.__setattr__(
                self, "in_tree", check_uuid(self.in_tree, "rpquery.request.bad_in_tree")
            )

    def __hash__(self) -> int:
        return hash(
            (
                self.suffix,
                tuple(sorted(self.resources.items())),
                self.required,
                self.forbidden,
                self.member_of,
                self.forbidden_aggs,
                self.in_tree,
            )
        )

    @property
    def is_granular(self) -> bool:
        return bool(self.suffix)

    def trait_names(self) -> set[str]:
        return set().union(self.forbidden, *self.required)

    def required_trait_names(self) -> set[str]:
        return set().union(*self.required)


@dataclass(frozen=True)
class CandidatesRequest:
    """A whole ``GET /allocation_candidates`` request.

    >>> r = CandidatesRequest(groups=(RequestGroup(resources={"VCPU": 1}),), limit=5)
    >>> (len(r.groups), r.limit, r.group_policy)
    (1, 5, None)
    """

    groups: tuple[RequestGroup, ...]
    group_policy: str | None = None
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    same_subtree: tuple[tuple[str, ...], ...] = ()
    limit: int | None = None
    randomize: bool = False

    def __post_init__(self) -> None:
        groups = _sequence(self.groups, "groups")
        if not all(isinstance(g, RequestGroup) for g in groups):
            raise invalid(
                "rpquery.request.bad_params", "groups must be RequestGroup values", "groups"
            )
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "root_required", _names(self.root_required, "root_required"))
        object.__setattr__(self, "root_forbidden", _names(self.root_forbidden, "root_forbidden"))
        subtrees = tuple(
            tuple(_names_list(s, "same_subtree"))
            for s in _sequence(self.same_subtree, "same_subtree")
        )
        object.__setattr__(self, "same_subtree", subtrees)
        _validate_candidates(self)

    def group(self, suffix: str) -> RequestGroup:
        return next(g for g in self.groups if g.suffix == suffix)

    def trait_names(self) -> set[str]:
        return set().union(
            self.root_required, self.root_forbidden, *(g.trait_names() for g in self.groups)
        )

    def required_trait_names(self) -> set[str]:
        """Traits that must exist (forbidding an unknown trait is trivially satisfied)."""
        return set().union(self.root_required, *(g.required_trait_names() for g in self.groups))

    def resource_class_names(self) -> set[str]:
        return {rc for g in self.groups for rc in g.resources}


@dataclass(frozen=True)
class ProvidersRequest:
    """A ``GET /resource_providers`` request: every filter applies to the provider itself
    (its own traits and aggregates, forbidden ones too).

    >>> ProvidersRequest(name="cn1").name
    'cn1'
    """

    uuid: str | None = None
    name: str | None = None
    filters: RequestGroup = field(default_factory=RequestGroup)

    def __post_init__(self) -> None:
        if self.uuid is not None:
            object.__setattr__(self, "uuid", check_uuid(self.uuid, "rpquery.request.bad_uuid"))
        if self.name is not None:
            check_text(self.name, "rpquery.request.bad_text", "name", max_length=MAX_INT)
        if not isinstance(self.filters, RequestGroup):
            raise invalid(
                "rpquery.request.bad_params", "filters must be a RequestGroup", "filters"
            )

    def trait_names(self) -> set[str]:
        return self.filters.trait_names()


# ------------------------------------------------------------------ validation


def _sequence(value: object, what: str) -> tuple[object, ...]:
    if not isinstance(value, list | tuple | set | frozenset):
        raise invalid("rpquery.request.bad_params", f"{what} must be a list", what)
    return tuple(value)


def _names_list(value: object, what: str) -> list[str]:
    items = _sequence(value, what)
    if not all(isinstance(i, str) for i in items):
        raise invalid("rpquery.request.bad_params", f"{what} must hold strings only", what)
    return [str(i) for i in items]


def _names(value: object, what: str) -> frozenset[str]:
    """A set of names; each one is checked as a trait name or a uuid afterwards, so only
    the container and hashability are checked here (the parser's values pass as is)."""
    if isinstance(value, frozenset):
        return value
    if not isinstance(value, list | tuple | set):
        raise invalid("rpquery.request.bad_params", f"{what} must be a list", what)
    try:
        return frozenset(value)
    except TypeError:
        raise invalid(
            "rpquery.request.bad_params", f"{what} must hold strings only", what
        ) from None


def _name_sets(value: object, what: str) -> tuple[frozenset[str], ...]:
    if not isinstance(value, list | tuple):
        raise invalid("rpquery.request.bad_params", f"{what} must be a list", what)
    return tuple(_names(s, what) for s in value)


def _validate_group(g: RequestGroup) -> None:
    if g.suffix != "" and not matches(SUFFIX_RE, g.suffix):
        raise invalid(
            "rpquery.request.bad_suffix", f"bad group suffix {g.suffix!r}", str(g.suffix)
        )
    for rc, amount in g.resources.items():
        check_resource_class_name(rc)
        check_int(amount, "rpquery.request.bad_amount", f"amount of {rc}", minimum=1, token=rc)
    for names in (*g.required, g.forbidden):
        for name in names:
            check_trait_name(name)
    if any(not s for s in (*g.required, *g.member_of)):
        raise invalid(
            "rpquery.request.empty_value", "an any-of set is empty", g.suffix or "required"
        )


def _check_conflicts(g: RequestGroup) -> None:
    """Placement's rule for allocation candidates: a group is refused only when every
    trait of one of its ``required`` sets is also forbidden (a plain required trait is
    a set of one), so ``required=in:A,B&required=!B`` is valid (A and not B). Provider
    lists make no such check: a contradictory filter simply matches nothing."""
    for any_of in g.required:
        if any_of <= g.forbidden:
            names = sorted(any_of)
            what = f"trait {names[0]} is" if len(names) == 1 else f"traits {', '.join(names)} are"
            raise invalid(
                "rpquery.trait.conflict", f"{what} both required and forbidden", names[0]
            )


def _validate_candidates(r: CandidatesRequest) -> None:
    suffixes = [g.suffix for g in r.groups]
    dupes = {s for s in suffixes if suffixes.count(s) > 1}
    if dupes:
        token = sorted(dupes)[0]
        raise invalid("rpquery.request.duplicate_group", f"group {token!r} given twice", token)
    for g in r.groups:
        _check_conflicts(g)
    if not any(g.resources for g in r.groups):
        raise invalid(
            "rpquery.request.no_resources", "at least one group needs resources", "resources"
        )
    if r.group_policy is not None and r.group_policy not in GROUP_POLICIES:
        raise invalid(
            "rpquery.request.bad_group_policy",
            "group_policy must be none or isolate",
            str(r.group_policy),
        )
    if sum(1 for s in suffixes if s) > 1 and r.group_policy is None:
        raise invalid(
            "rpquery.request.group_policy_missing",
            "group_policy is required with two or more suffixed groups",
            "group_policy",
        )
    for names in (r.root_required, r.root_forbidden):
        for name in names:
            check_trait_name(name)
    both = sorted(r.root_required & r.root_forbidden)
    if both:
        raise invalid(
            "rpquery.trait.conflict", f"root trait {both[0]} required and forbidden", both[0]
        )
    _validate_subtrees(r, set(suffixes))
    if r.limit is not None:
        check_int(r.limit, "rpquery.request.bad_limit", "limit", minimum=1)


def _validate_subtrees(r: CandidatesRequest, suffixes: set[str]) -> None:
    in_subtree = {s for tree in r.same_subtree for s in tree}
    for tree in r.same_subtree:
        for s in tree:
            if not s or s not in suffixes:
                raise invalid(
                    "rpquery.request.unknown_suffix", f"same_subtree names unknown group {s!r}", s
                )
    for g in r.groups:
        if g.resources:
            continue
        if not g.suffix:
            raise invalid(
                "rpquery.request.resourceless_unsuffixed",
                "required/member_of/in_tree without unsuffixed resources",
                "resources",
            )
        if g.suffix not in in_subtree:
            raise invalid(
                "rpquery.request.resourceless_group",
                f"resourceless group {g.suffix!r} must be named in same_subtree",
                g.suffix,
            )


# ------------------------------------------------------------------ parsing helpers


def _multidict(params: Params) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if isinstance(params, str):
        pairs: Iterable[tuple[str, object]] = parse_qsl(params, keep_blank_values=True)
    elif isinstance(params, Mapping):
        pairs = [
            (str(k), v)
            for k, vals in params.items()
            for v in ([vals] if isinstance(vals, str) else _value_list(str(k), vals))
        ]
    else:
        raise invalid(
            "rpquery.request.bad_params", "params must be a query string or a mapping", ""
        )
    for key, value in pairs:
        if not isinstance(value, str):
            raise invalid(
                "rpquery.request.bad_params", f"value of {key} is not a string", str(key)
            )
        for text in (key, value):
            problem = text_problem(text)
            if problem is not None:
                raise invalid(
                    "rpquery.request.bad_text", f"parameter {key!r}: {text!r} {problem}", key
                )
        out.setdefault(key, []).append(value)
    return out


def _value_list(key: str, values: object) -> list[object]:
    if not isinstance(values, list | tuple):
        raise invalid(
            "rpquery.request.bad_params", f"value of {key} is not a string or a list", key
        )
    return list(values)


def _single(key: str, values: list[str]) -> str:
    if len(values) != 1:
        raise invalid("rpquery.request.duplicate_parameter", f"{key} may be given once", key)
    value = values[0].strip()
    if not value:
        raise invalid("rpquery.request.empty_value", f"{key} has an empty value", key)
    return value


def _items(key: str, value: str) -> list[str]:
    """Comma-separated items, each stripped; an empty item is an error."""
    items = [part.strip() for part in value.split(",")]
    if not value.strip() or any(not i for i in items):
        raise invalid("rpquery.request.empty_value", f"empty item in {key}={value!r}", key)
    return items


def parse_resources(key: str, value: str) -> dict[str, int]:
    """``"VCPU:2,MEMORY_MB:1024"`` → ``{"VCPU": 2, "MEMORY_MB": 1024}``.

    >>> parse_resources("resources", "VCPU:2, MEMORY_MB:1024")
    {'VCPU': 2, 'MEMORY_MB': 1024}
    """
    out: dict[str, int] = {}
    for item in _items(key, value):
        rc, sep, amount = item.partition(":")
        rc, amount = rc.strip(), amount.strip()
        if not sep or not rc:
            raise invalid(
                "rpquery.request.bad_resources", f"expected CLASS:AMOUNT, got {item!r}", item
            )
        check_resource_class_name(rc)
        if not re.fullmatch(r"[0-9]{1,10}", amount) or not 0 < int(amount) <= MAX_INT:
            raise invalid(
                "rpquery.request.bad_amount", f"bad amount in {item!r} (1..{MAX_INT})", item
            )
        if rc in out:
            raise invalid("rpquery.request.duplicate_resource", f"{rc} given twice in {key}", rc)
        out[rc] = int(amount)
    return out


def parse_required(key: str, values: list[str]) -> tuple[list[frozenset[str]], set[str]]:
    """Repeated ``required`` values → (AND of any-of sets, forbidden names).

    >>> parse_required("required", ["CUSTOM_A,!CUSTOM_B", "in:CUSTOM_C,CUSTOM_D"])[1]
    {'CUSTOM_B'}
    """
    required: list[frozenset[str]] = []
    forbidden: set[str] = set()
    for value in values:
        if value.strip().startswith("in:"):
            names = _items(key, value.strip()[3:])
            if any(n.startswith("!") for n in names):
                token = next(n for n in names if n.startswith("!"))
                raise invalid(
                    "rpquery.trait.bad_forbidden", "no forbidden traits inside in:", token
                )
            required.append(frozenset(check_trait_name(n) for n in names))
            continue
        for item in _items(key, value):
            if item.startswith("!"):
                forbidden.add(_forbidden_name(item))
            else:
                required.append(frozenset({check_trait_name(item)}))
    return required, forbidden


def _forbidden_name(item: str) -> str:
    name = item[1:]
    if not name:
        raise invalid("rpquery.trait.bad_forbidden", "'!' without a trait name", item)
    if name != name.lstrip() or name.startswith("!"):
        raise invalid(
            "rpquery.trait.bad_forbidden",
            f"whitespace between '!' and the trait name in {item!r}",
            item,
        )
    return check_trait_name(name)


def parse_member_of(key: str, values: list[str]) -> tuple[list[frozenset[str]], set[str]]:
    """Repeated ``member_of`` values → (AND of any-of uuid sets, forbidden uuids)."""
    member_of: list[frozenset[str]] = []
    forbidden: set[str] = set()
    for raw in values:
        value = raw.strip()
        negate = value.startswith("!")
        body = value[1:] if negate else value
        if body.startswith("in:"):
            uuids = [check_uuid(u, "rpquery.request.bad_aggregate") for u in _items(key, body[3:])]
        elif "," in body:
            raise invalid("rpquery.request.bad_aggregate", "several aggregates need in:", value)
        else:
            uuids = [check_uuid(body.strip(), "rpquery.request.bad_aggregate")]
        if negate:
            forbidden.update(uuids)
        else:
            member_of.append(frozenset(uuids))
    return member_of, forbidden


# ------------------------------------------------------------------ parse entry points


def _group_from(suffix: str, params: dict[str, list[str]]) -> RequestGroup:
    res_key, req_key, mem_key, tree_key = (
        f"{p}{suffix}" for p in ("resources", "required", "member_of", "in_tree")
    )
    resources = (
        parse_resources(res_key, _single(res_key, params[res_key])) if res_key in params else {}
    )
    required, forbidden = parse_required(req_key, params.get(req_key, []))
    member_of, forbidden_aggs = parse_member_of(mem_key, params.get(mem_key, []))
    in_tree = (
        check_uuid(_single(tree_key, params[tree_key]), "rpquery.request.bad_in_tree")
        if tree_key in params
        else None
    )
    return RequestGroup(
        suffix=suffix,
        resources=resources,
        required=tuple(required),
        forbidden=frozenset(forbidden),
        member_of=tuple(member_of),
        forbidden_aggs=frozenset(forbidden_aggs),
        in_tree=in_tree,
    )


def _split_keys(params: dict[str, list[str]], allowed_globals: frozenset[str]) -> list[str]:
    """The group suffixes present (``""`` first); unknown keys are errors."""
    suffixes: set[str] = set()
    for key in params:
        match = _GROUP_KEY_RE.fullmatch(key)
        if key in allowed_globals:
            continue
        if not match:
            raise invalid("rpquery.request.unknown_parameter", f"unknown parameter {key!r}", key)
        suffix = match.group(2)
        if suffix and not matches(SUFFIX_RE, suffix):
            raise invalid("rpquery.request.bad_suffix", f"bad group suffix in {key!r}", key)
        suffixes.add(suffix)
    return sorted(suffixes)


def _parse_limit(params: dict[str, list[str]]) -> int | None:
    if "limit" not in params:
        return None
    raw = _single("limit", params["limit"])
    if not re.fullmatch(r"[0-9]{1,10}", raw) or not 0 < int(raw) <= MAX_INT:
        raise invalid(
            "rpquery.request.bad_limit", f"limit must be an integer in 1..{MAX_INT}", raw
        )
    return int(raw)


def _parse_root_required(values: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    required: set[str] = set()
    forbidden: set[str] = set()
    for value in values:
        if value.strip().startswith("in:"):
            raise invalid("rpquery.request.bad_root_required", "root_required takes no in:", value)
        for item in _items("root_required", value):
            if item.startswith("!"):
                forbidden.add(_forbidden_name(item))
            else:
                required.add(check_trait_name(item))
    return frozenset(required), frozenset(forbidden)


def parse_candidates(params: Params) -> CandidatesRequest:
    """Parse a ``GET /allocation_candidates`` query (string or multi-dict).

    >>> r = parse_candidates({"resources_PF": "SRIOV_NET_VF:1", "resources": "VCPU:1"})
    >>> [g.suffix for g in r.groups]
    ['', '_PF']
    """
    multi = _multidict(params)
    suffixes = _split_keys(multi, _GLOBAL_KEYS)
    groups = tuple(_group_from(s, multi) for s in suffixes)
    policy = _single("group_policy", multi["group_policy"]) if "group_policy" in multi else None
    if len(multi.get("root_required", [])) > 1:  # Placement answers 400 (no AND of them)
        raise invalid(
            "rpquery.request.duplicate_parameter",
            "root_required may be given once",
            "root_required",
        )
    root_req, root_forb = _parse_root_required(multi.get("root_required", []))
    subtrees = tuple(tuple(_items("same_subtree", v)) for v in multi.get("same_subtree", []))
    return CandidatesRequest(
        groups=groups,
        group_policy=policy,
        root_required=root_req,
        root_forbidden=root_forb,
        same_subtree=subtrees,
        limit=_parse_limit(multi),
    )


def parse_providers(params: Params) -> ProvidersRequest:
    """Parse a ``GET /resource_providers`` query (no suffixes, no group options).

    >>> parse_providers("required=HW_CPU_X86_AVX2&member_of=in:" + "1" * 32).filters.required
    (frozenset({'HW_CPU_X86_AVX2'}),)
    """
    multi = _multidict(params)
    suffixes = _split_keys(multi, frozenset({"uuid", "name"}))
    if any(suffixes):
        token = next(s for s in suffixes if s)
        raise invalid(
            "rpquery.request.unknown_parameter", "resource provider lists take no suffix", token
        )
    uuid = (
        check_uuid(_single("uuid", multi["uuid"]), "rpquery.request.bad_uuid")
        if "uuid" in multi
        else None
    )
    name = _single("name", multi["name"]) if "name" in multi else None
    return ProvidersRequest(uuid=uuid, name=name, filters=_group_from("", multi))


def as_candidates_request(request: CandidatesRequest | Params) -> CandidatesRequest:
    """Accept a typed request or anything :func:`parse_candidates` takes."""
    return request if isinstance(request, CandidatesRequest) else parse_candidates(request)


def as_providers_request(request: ProvidersRequest | Params) -> ProvidersRequest:
    """Accept a typed request or anything :func:`parse_providers` takes."""
    return request if isinstance(request, ProvidersRequest) else parse_providers(request)
