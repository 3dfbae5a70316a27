"""``GET /allocation_candidates`` (1.10+) on :func:`rpquery.read.candidates.allocation_candidates`.

What changes with the microversion: the accepted parameters (the query schemas below
keep Placement's constraints, Apache-2.0, OpenStack Placement
``placement/schemas/allocation_candidate.py``; forbidden traits from 1.22, forbidden
aggregates from 1.32, ``in:`` traits from 1.39), allocation requests as lists before
1.12, ``mappings`` from 1.34, summaries with traits from 1.17, with every class (not only
the requested ones) from 1.27 and with parent/root uuids from 1.29, and nested trees
invisible before 1.29 (:func:`rpquery.read.candidates.exclude_nested`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
from collections.abc import Mapping
from typing import Any

import falcon

from rpquery.api import errors
from rpquery.api import query as gates
from rpquery.api.errors import ApiError
from rpquery.api.microversion import Version
from rpquery.api.routing import route
from rpquery.api.util import ctx, parse_query, send_json, send_json_bytes, validate_query, want
from rpquery.errors import InvalidRequest
from rpquery.read import candidates
from rpquery.read.request import CandidatesRequest, parse_candidates
from rpquery.store import catalog
from rpquery.write import providers

__all__ = ["ROUTES"]

# ---------------------------------------------------------------- schemas (Placement's)

SCHEMA_1_10: dict[str, Any] = {
    "type": "object",
    "properties": {"resources": {"type": "string"}},
    "required": ["resources"],
    "additionalProperties": False,
}
SCHEMA_1_16 = copy.deepcopy(SCHEMA_1_10)
SCHEMA_1_16["properties"]["limit"] = {
    "type": ["integer", "string"],
    "pattern": "^[1-9][0-9]*$",
    "minimum": 1,
    "minLength": 1,
}
SCHEMA_1_17 = copy.deepcopy(SCHEMA_1_16)
SCHEMA_1_17["properties"]["required"] = {"type": ["string"]}
SCHEMA_1_21 = copy.deepcopy(SCHEMA_1_17)
SCHEMA_1_21["properties"]["member_of"] = {"type": ["string"]}


def _grouped(suffix: str, kinds: tuple[str, ...]) -> dict[str, Any]:
    schema = copy.deepcopy(SCHEMA_1_21)
    for key in ("resources", "required", "member_of"):
        del schema["properties"][key]
    del schema["required"]
    schema["patternProperties"] = {f"^{k}({suffix})?$": {"type": "string"} for k in kinds}
    schema["properties"]["group_policy"] = {"type": "string", "enum": ["none", "isolate"]}
    return schema


SCHEMA_1_25 = _grouped("[1-9][0-9]*", ("resources", "required", "member_of"))
SCHEMA_1_31 = _grouped("[1-9][0-9]*", ("resources", "required", "member_of", "in_tree"))
SCHEMA_1_33 = _grouped("[a-zA-Z0-9_-]{1,64}", ("resources", "required", "member_of", "in_tree"))
SCHEMA_1_35 = copy.deepcopy(SCHEMA_1_33)
SCHEMA_1_35["properties"]["root_required"] = {"type": ["string"]}
SCHEMA_1_36 = copy.deepcopy(SCHEMA_1_35)
SCHEMA_1_36["properties"]["same_subtree"] = {"type": ["string"]}

_SCHEMAS = (
    ((1, 36), SCHEMA_1_36),
    ((1, 35), SCHEMA_1_35),
    ((1, 33), SCHEMA_1_33),
    ((1, 31), SCHEMA_1_31),
    ((1, 25), SCHEMA_1_25),
    ((1, 21), SCHEMA_1_21),
    ((1, 17), SCHEMA_1_17),
    ((1, 16), SCHEMA_1_16),
)


def _schema(version: Version) -> dict[str, Any]:
    return next((s for v, s in _SCHEMAS if version >= v), SCHEMA_1_10)


# ---------------------------------------------------------------- request

#: Distinct (query string, microversion) pairs whose parsed request is kept, and the
#: longest query string kept (a longer one is parsed every time: the cache stays small).
PARSED_CACHE_SIZE = 1024
PARSED_CACHE_QUERY = 4096


_GROUP_KEY = re.compile(r"^(resources|required|member_of|in_tree)([a-zA-Z0-9_-]{1,64})?$")


def _groups(version: Version, params: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """The request groups by suffix, each value checked with Placement's messages and
    version gates (:mod:`rpquery.api.query`); ``required`` values as the version reads
    them (the last one only before 1.39)."""
    groups: dict[str, dict[str, Any]] = {}
    for key, values in params.items():
        found = _GROUP_KEY.match(key)
        if not found:
            continue
        kind, suffix = found.group(1), found.group(2) or ""
        if kind == "resources":
            for value in values:
                gates.check_resources(value)
        elif kind == "required":
            values = gates.check_required(key, values, version)
            params[key] = values
        elif kind == "member_of":
            gates.check_member_of(key, values, version)
        else:
            gates.check_in_tree(key, values[-1])
        groups.setdefault(suffix, {})[kind] = values
    return groups


def _check_groups(
    version: Version, groups: dict[str, dict[str, Any]], params: dict[str, list[str]]
) -> None:
    """Placement's checks of the groups as a whole (``lib.RequestGroup``)."""
    resourceless = [s for s, g in groups.items() if "resources" not in g]
    if version >= (1, 36):
        subtrees = [{x.strip() for x in v.split(",")} for v in params.get("same_subtree", [])]
        if any("" in s for s in subtrees):
            raise ApiError(
                400,
                "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
                code=errors.QUERYPARAM_BAD_VALUE,
            )
        in_subtree = set().union(*subtrees)
        if len(resourceless) == len(groups):
            raise ApiError(
                400,
                "There must be at least one resources or resources[$S] parameter.",
                code=errors.QUERYPARAM_MISSING_VALUE,
            )
        bad = [s for s in resourceless if s not in in_subtree]
        if bad:
            raise ApiError(
                400,
                "Resourceless suffixed group request should be specified in "
                f"`same_subtree` query param: bad group(s) - {bad}.",
                code=errors.QUERYPARAM_BAD_VALUE,
            )
        unknown = [s for s in sorted(in_subtree) if s not in groups]
        if unknown:
            raise ApiError(
                400,
                f"Real suffixes should be specified in `same_subtree`: "
                f"{unknown} not found in {list(groups)}.",
                code=errors.QUERYPARAM_BAD_VALUE,
            )
        return
    orphans = [f"required{s}" for s in resourceless if "required" in groups[s]]
    if orphans:
        raise ApiError(
            400,
            "All traits parameters must be associated with resources.  "
            f"Found the following orphaned traits keys: {', '.join(orphans)}",
        )
    orphans = [f"member_of{s}" for s in resourceless if "member_of" in groups[s]]
    if orphans:
        raise ApiError(
            400,
            "All member_of parameters must be associated with resources. "
            f"Found the following orphaned member_of keys: {', '.join(orphans)}",
        )
    if resourceless:
        raise ApiError(400, "All request groups must specify resources.")
    if not groups:
        raise ApiError(
            400, "At least one request group (`resources` or `resources{$S}`) is required."
        )


def _request(req: falcon.Request) -> CandidatesRequest:
    """The request's query as the request's microversion reads it: :func:`_parse`, whose
    answer depends on nothing else and is frozen, so it is kept for the next request
    with the same query (a flavor's requests repeat theirs): :data:`PARSED_CACHE_SIZE`
    queries of up to :data:`PARSED_CACHE_QUERY` characters. A refused query raises
    every time."""
    text, version = req.query_string, ctx(req).version
    if len(text) > PARSED_CACHE_QUERY:
        return _parse(text, version)
    return _parsed(text, version)


def _parse(query_string: str, version: Version) -> CandidatesRequest:
    """``query_string`` checked with Placement's messages at ``version`` and parsed."""
    params = parse_query(query_string)
    validate_query({k: v[-1] for k, v in params.items()}, _schema(version))
    if len(params.get("root_required", [])) > 1:
        raise ApiError(
            400,
            "Query parameter 'root_required' may be specified only once.",
            code=errors.ILLEGAL_DUPLICATE_QUERYPARAM,
        )
    groups = _groups(version, params)
    _check_groups(version, groups, params)
    granular = [s for s in groups if s]
    if len(granular) > 1 and "group_policy" not in params:
        raise ApiError(
            400,
            'The "group_policy" parameter is required when specifying '
            'more than one "resources{N}" parameter.',
        )
    for key in ("limit", "group_policy"):  # Placement reads the first one
        if key in params:
            params[key] = params[key][:1]
    _check_root_required(params.get("root_required", []))
    try:
        return parse_candidates(params)
    except InvalidRequest as error:
        conflicts = trait_conflicts(params, any_of=version >= (1, 39))
        if error.code == "rpquery.trait.conflict" and conflicts:
            raise ApiError(400, conflicts) from None
        raise _library_error(error) from None


_parsed = functools.lru_cache(maxsize=PARSED_CACHE_SIZE)(_parse)


def _check_root_required(values: list[str]) -> None:
    names = [n.strip() for v in values for n in v.split(",")]
    both = sorted({n for n in names if not n.startswith("!")} & {n[1:] for n in names})
    if both:
        raise ApiError(
            400,
            f"Conflicting required and forbidden traits found in root_required: {', '.join(both)}",
            code=errors.QUERYPARAM_BAD_VALUE,
        )


def trait_conflicts(params: dict[str, list[str]], *, any_of: bool) -> str:
    """Placement's message for a request group whose required traits (a plain trait, or
    every trait of an ``in:`` set) are also forbidden: each such set of every group,
    sorted (``lib.RequestGroup._check_forbidden``); ``""`` when there is none. Before
    1.39 (``any_of`` false) only the last ``required{S}`` value counts, as there.

    >>> trait_conflicts({"required": ["A,!A"], "required1": ["in:B,C", "!B,!C"]}, any_of=True)
    'Conflicting required and forbidden traits found in the following traits keys: \
required1: (B, C), required: (A)'
    """
    found = []
    for key, values in params.items():
        if not key.startswith("required"):
            continue
        required: list[set[str]] = []
        forbidden: set[str] = set()
        for value in values if any_of else values[-1:]:
            if value.startswith("in:"):
                required.append({name.strip() for name in value[3:].split(",")})
                continue
            names = [name.strip() for name in value.split(",")]
            forbidden |= {name.lstrip("!") for name in names if name.startswith("!")}
            required += [{name} for name in names if not name.startswith("!")]
        found += [f"{key}: ({', '.join(sorted(s))})" for s in required if s <= forbidden]
    if not found:
        return ""
    return (
        "Conflicting required and forbidden traits found in the following traits keys: "
        + ", ".join(sorted(found))
    )


def _library_error(error: InvalidRequest) -> ApiError:
    if error.code.startswith("rpquery.resource_class"):
        return ApiError(
            400,
            "Invalid resource class in resources parameter: No such "
            f"resource class {error.token}.",
        )
    if error.code.startswith("rpquery.trait"):
        return ApiError(400, f"No such trait(s): {error.token}.")
    return ApiError(400, f"Invalid query string parameters: {error.detail}")


# ---------------------------------------------------------------- response


def _class_rank(req: falcon.Request, answer: candidates.AllocationCandidates) -> Any:
    """A resource class's id, the key Placement orders an allocation request's resources
    by: a standard class's index, a custom class's id (from 10000, in creation order)."""
    standard = {name: i for i, name in enumerate(catalog.STANDARD_RESOURCE_CLASSES)}
    used = {
        rc for ar in answer.allocation_requests for res in ar.allocations.values() for rc in res
    }
    ids: dict[str, int] = {}
    if used - standard.keys():
        with ctx(req).db.connect() as conn:
            ids = catalog.resource_class_ids(conn, used - standard.keys())
    return lambda rc: standard.get(rc, ids.get(rc, 1 << 40))


def placement_order(
    allocations: Mapping[str, Mapping[str, int]], rank: Any
) -> dict[str, dict[str, int]]:
    """One allocation request's providers as Placement lists them: it builds the request
    with one resource per class in class id order, then groups them by provider, so a
    provider comes where its first class does, and its classes in id order.

    >>> rank = {"VCPU": 0, "MEMORY_MB": 1, "DISK_GB": 2}.get
    >>> placement_order({"shared": {"DISK_GB": 80}, "cn": {"MEMORY_MB": 1, "VCPU": 1}}, rank)
    {'cn': {'VCPU': 1, 'MEMORY_MB': 1}, 'shared': {'DISK_GB': 80}}
    """
    ordered: dict[str, dict[str, int]] = {}
    pairs = sorted(
        (rank(rc), rp, rc, n) for rp, res in allocations.items() for rc, n in res.items()
    )
    for _, rp, rc, amount in pairs:
        ordered.setdefault(rp, {})[rc] = amount
    return ordered


def _requests_body(req: falcon.Request, answer: candidates.AllocationCandidates) -> list[Any]:
    rank = _class_rank(req, answer)
    if not want(req, (1, 12)):
        return [
            {
                "allocations": [
                    {"resource_provider": {"uuid": rp}, "resources": res}
                    for rp, res in placement_order(ar.allocations, rank).items()
                ]
            }
            for ar in answer.allocation_requests
        ]
    out = []
    for ar in answer.allocation_requests:
        entry: dict[str, Any] = {
            "allocations": {
                rp: {"resources": res} for rp, res in placement_order(ar.allocations, rank).items()
            }
        }
        if want(req, (1, 34)):
            entry["mappings"] = {s: list(rps) for s, rps in sorted(ar.mappings.items())}
        out.append(entry)
    return out


def _summaries_body(
    req: falcon.Request, answer: candidates.AllocationCandidates, wanted: CandidatesRequest
) -> dict[str, Any]:
    every_class = want(req, (1, 27))
    requested = wanted.resource_class_names()
    out: dict[str, Any] = {}
    for uuid, summary in sorted(answer.provider_summaries.items()):
        entry: dict[str, Any] = {
            "resources": {
                rc: {"capacity": r.capacity, "used": r.used}
                for rc, r in sorted(summary.resources.items())
                if every_class or rc in requested
            }
        }
        if want(req, (1, 17)):
            entry["traits"] = sorted(summary.traits)
        if want(req, (1, 29)):
            entry["parent_provider_uuid"] = summary.parent_uuid
            entry["root_provider_uuid"] = summary.root_uuid
        out[uuid] = entry
    return out


def list_candidates(req: falcon.Request, resp: falcon.Response) -> None:
    wanted = _request(req)
    db = ctx(req).db
    blind = not want(req, (1, 29)) and providers.has_nested(db)
    search = dataclasses.replace(wanted, limit=None) if blind else wanted
    if want(req, (1, 34)):  # (so not blind)
        # The library's own body is 1.34+'s, written in one pass (orjson) from the
        # answer's compact rows. Its summaries are already those of the trees the
        # requests allocate from (what _trees_used keeps below).
        send_json_bytes(req, resp, _body(db, search, ctx(req).candidate_options))
        return
    try:
        answer = candidates.allocation_candidates(db, search, options=ctx(req).candidate_options)
    except InvalidRequest as error:
        raise _library_error(error) from None
    if blind:
        answer = candidates.exclude_nested(answer, wanted.limit)
    summaries = _summaries_body(req, answer, wanted)
    body = {"allocation_requests": _requests_body(req, answer), "provider_summaries": summaries}
    kept = _trees_used(answer)
    for uuid in [u for u in summaries if u not in kept]:
        del summaries[uuid]
    for summary in summaries.values():
        if "traits" in summary:
            summary["traits"].sort(key=_trait_order)
    send_json(req, resp, body)


def _body(
    db: Any, search: CandidatesRequest, options: candidates.CandidateOptions | None = None
) -> bytes:
    """The 1.34+ body of ``search``'s answer (the collector paused until the answer
    is freed: :func:`~rpquery.read.candidates.allocation_candidates_json`)."""
    try:
        return candidates.allocation_candidates_json(
            db, search, trait_key=_trait_order, options=options
        )
    except InvalidRequest as error:
        raise _library_error(error) from None


def _trees_used(answer: candidates.AllocationCandidates) -> set[str]:
    """Providers of the trees the allocation requests take from: Placement's summaries
    (the anchor tree of a candidate made of sharing providers alone is not one)."""
    summaries = answer.provider_summaries
    roots = {
        summaries[rp].root_uuid
        for ar in answer.allocation_requests
        for rps in (ar.allocations, *ar.mappings.values())
        for rp in rps
    }
    return {u for u, s in summaries.items() if s.root_uuid in roots}


def _trait_order(name: str) -> tuple[bool, str]:
    """Standard traits before custom ones, as Placement lists them (by id)."""
    return name.startswith("CUSTOM_"), name


ROUTES = [
    route(
        "/allocation_candidates",
        "GET",
        list_candidates,
        "placement:allocation_candidates:list",
        since="1.10",
        accept=True,
    ),
]
