"""Placement 1.39's JSON of the allocation-candidate results (:mod:`._results`): the last
step of the read path (parse → build → execute → results → render).

One renderer per result type — :func:`summary_body` and :func:`request_body` — serves
both the public objects (:class:`~._results.ProviderSummary`,
:class:`~._results.AllocationRequest`) and the search's compact rows
(:class:`~._results.SummaryRows`, :class:`~._results.RequestRows`), so the two forms
render alike. Every dict and list returned is new: callers may mutate them.

>>> request_body([("rp-1", [("VCPU", 1)])], [("", ["rp-1"])])
{'allocations': {'rp-1': {'resources': {'VCPU': 1}}}, 'mappings': {'': ['rp-1']}}
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:  # types only: _results imports this module
    from rpquery.read.candidates._results import (
        AllocationRequest,
        ProviderSummary,
        RequestRows,
        ResourceSummary,
        SummaryRows,
    )

__all__ = [
    "objects_json",
    "placement_json",
    "render_objects",
    "render_request",
    "render_request_rows",
    "render_rows",
    "render_summary",
    "render_summary_rows",
    "request_body",
    "requests_json",
    "shared_summaries",
    "summaries_from_columns",
    "summary_body",
]


def summary_body(
    resources: Iterable[tuple[str, ResourceSummary]],
    traits: list[str],
    parent_uuid: str | None,
    root_uuid: str,
) -> dict[str, Any]:
    """Placement's shape of one provider summary, from its parts in the order shown
    (classes and traits sorted by name): the one renderer of both
    :func:`render_summary` and :func:`render_summary_rows`."""
    return {
        "resources": {rc: {"capacity": r.capacity, "used": r.used} for rc, r in resources},
        "traits": traits,
        "parent_provider_uuid": parent_uuid,
        "root_provider_uuid": root_uuid,
    }


def request_body(
    allocations: Iterable[tuple[str, Iterable[tuple[str, int]]]],
    mappings: Iterable[tuple[str, Iterable[str]]],
) -> dict[str, Any]:
    """Placement's shape of one allocation request, from its parts in the order shown
    (providers by uuid, each one's classes by name; suffixes sorted): the one renderer
    of both :func:`render_request` and :func:`render_request_rows`."""
    return {
        "allocations": {rp: {"resources": dict(res)} for rp, res in allocations},
        "mappings": {s: list(rps) for s, rps in mappings},
    }


def render_summary(summary: ProviderSummary) -> dict[str, Any]:
    """One public :class:`~._results.ProviderSummary` (its ``to_placement``)."""
    return summary_body(
        sorted(summary.resources.items()),
        sorted(summary.traits),
        summary.parent_uuid,
        summary.root_uuid,
    )


def render_request(request: AllocationRequest) -> dict[str, Any]:
    """One public :class:`~._results.AllocationRequest` (its ``to_placement``)."""
    return request_body(
        sorted((rp, sorted(res.items())) for rp, res in request.allocations.items()),
        sorted(request.mappings.items()),
    )


def render_request_rows(rows: RequestRows) -> list[dict[str, Any]]:
    """Placement's ``allocation_requests``, equal to rendering
    :meth:`RequestRows.build`'s requests one by one. Every dict and list is new: callers may
    mutate them."""
    out = []
    for _c, picks, uu, allocs, maps in rows.laid_out():
        allocations = [(uu[k], res) for k, res in allocs]
        if len(allocations) > 1:
            allocations.sort()
        mappings = [
            (
                s,
                (uu[ks[0]],)
                if len(ks) == 1
                else map(uu.__getitem__, sorted(ks, key=picks.__getitem__)),
            )
            for s, ks in maps
        ]
        out.append(request_body(allocations, mappings))
    return out


def render_summary_rows(rows: SummaryRows) -> dict[str, Any]:
    """Placement's ``provider_summaries`` (sorted by uuid), equal to rendering
    :meth:`SummaryRows.build`'s summaries. Every dict and list is new: callers may mutate
    them."""
    uuid_by_id = rows.uuid_by_id
    trait_order: dict[int, tuple[str, ...]] = {}
    rc_order: dict[tuple[str, ...], tuple[str, ...]] = {}
    out: dict[str, Any] = {}
    for _, uuid, _, parent, root, resources, traits in sorted(rows.rows, key=itemgetter(1)):
        names = trait_order.get(id(traits))
        if names is None:
            names = trait_order[id(traits)] = tuple(sorted(traits))
        arrived = tuple(resources)
        order = rc_order.get(arrived)
        if order is None:
            order = rc_order[arrived] = tuple(sorted(arrived))
        out[uuid] = summary_body(
            zip(order, map(resources.__getitem__, order), strict=True),
            list(names),
            uuid_by_id[parent] if parent is not None else None,
            uuid_by_id[root],
        )
    return out


# ---------------------------------------------------------------- the JSON body, one pass
#
# For the bytes of a whole answer the parts need not be fresh: a value that many
# requests or summaries share (a layout's ``{"resources": {...}}``, a trait list, one
# ``{"capacity", "used"}`` pair) is built once and referenced wherever it appears, and
# orjson writes the whole answer in one call. Same content as ``json.dumps`` of
# :func:`render_rows` (orjson writes no spaces and non-ASCII as UTF-8).

TraitKey = Callable[[str], Any]


def _shared_requests(rows: RequestRows) -> list[dict[str, Any]]:
    """:func:`render_request_rows` with shared parts (one ``{"resources": ...}`` per
    layout and provider; the mappings of a layout whose suffixes map one slot each are
    written without sorting)."""
    out: list[dict[str, Any]] = []
    append = out.append
    resources: dict[int, dict[str, Any]] = {}
    single_maps: dict[int, Any] = {}
    for _c, picks, uu, allocs, maps in rows.laid_out():
        if len(allocs) == 1:
            k, res = allocs[0]
            body = resources.get(id(res))
            if body is None:
                body = resources[id(res)] = {"resources": dict(res)}
            allocations = {uu[k]: body}
        else:
            pairs = []
            for k, res in allocs:
                body = resources.get(id(res))
                if body is None:
                    body = resources[id(res)] = {"resources": dict(res)}
                pairs.append((uu[k], body))
            pairs.sort(key=itemgetter(0))
            allocations = dict(pairs)
        simple = single_maps.get(id(maps))
        if simple is None:
            simple = single_maps[id(maps)] = all(len(ks) == 1 for _, ks in maps)
        if simple:
            mappings = {s: [uu[ks[0]]] for s, ks in maps}
        else:
            mappings = {
                s: [uu[ks[0]]]
                if len(ks) == 1
                else [uu[k] for k in sorted(ks, key=picks.__getitem__)]
                for s, ks in maps
            }
        append({"allocations": allocations, "mappings": mappings})
    return out


#: Strings JSON writes as they are between quotes (no quote, backslash or control
#: character): provider uuids always are, so requests are written from templates.
_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')


def _braced(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _request_template(
    allocs: Sequence[tuple[int, Any]],
    maps: Sequence[tuple[str, Any]],
    alloc_order: Sequence[int],
    map_orders: Sequence[Sequence[int]],
) -> str:
    """One allocation request's JSON as a :meth:`str.format` template: ``{k}`` stands
    for the uuid of pick ``k``; providers in ``alloc_order``, each suffix's providers in
    its ``map_orders`` entry."""
    allocations = ",".join(
        f'"{{{allocs[i][0]}}}":'
        + _braced(orjson.dumps({"resources": dict(allocs[i][1])}).decode())
        for i in alloc_order
    )
    mappings = ",".join(
        _braced(orjson.dumps(s).decode()) + ":[" + ",".join(f'"{{{k}}}"' for k in ks) + "]"
        for (s, _), ks in zip(maps, map_orders, strict=True)
    )
    return '{{"allocations":{{' + allocations + '}},"mappings":{{' + mappings + "}}}}"


def requests_json(rows: RequestRows) -> str | None:
    """Placement's ``allocation_requests`` as JSON text, written from one template per
    layout (and order of its providers' uuids): per candidate one ``str.format`` of its
    uuids, no dicts. ``None`` when a uuid would need escaping (then
    :func:`_shared_requests` serves)."""
    if not _PLAIN.fullmatch("".join(rows.uuid_by_id.values())):
        return None
    out: list[str] = []
    append = out.append
    simple: dict[int, str] = {}
    general: dict[tuple[object, ...], str] = {}
    for _c, picks, uu, allocs, maps in rows.laid_out():
        template = simple.get(id(allocs))  # a layout's allocs tuple lives as long as rows
        if template is None:
            if len(allocs) == 1 and all(len(ks) == 1 for _, ks in maps):
                orders = [ks for _, ks in maps]
                template = simple[id(allocs)] = _request_template(allocs, maps, (0,), orders)
            else:
                alloc_order = tuple(sorted(range(len(allocs)), key=lambda i: uu[allocs[i][0]]))
                map_orders = tuple(
                    ks if len(ks) == 1 else tuple(sorted(ks, key=picks.__getitem__))
                    for _, ks in maps
                )
                key = (id(allocs), alloc_order, map_orders)
                template = general.get(key)
                if template is None:
                    template = general[key] = _request_template(
                        allocs, maps, alloc_order, map_orders
                    )
        append(template.format(*uu))
    return "[" + ",".join(out) + "]"


def shared_summaries(rows: SummaryRows, trait_key: TraitKey | None) -> dict[str, Any]:
    """:func:`render_summary_rows` with shared parts: one trait list per trait set, one
    ``{"capacity", "used"}`` per (capacity, used) pair; traits in ``trait_key`` order
    (default: by name)."""
    uuid_by_id = rows.uuid_by_id
    trait_lists: dict[int, list[str]] = {}
    rc_order: dict[tuple[str, ...], tuple[str, ...]] = {}
    amounts: dict[int, dict[str, int]] = {}
    out: dict[str, Any] = {}
    for _, uuid, _, parent, root, resources, traits in sorted(rows.rows, key=itemgetter(1)):
        names = trait_lists.get(id(traits))
        if names is None:
            names = trait_lists[id(traits)] = sorted(traits, key=trait_key)
        arrived = tuple(resources)
        order = rc_order.get(arrived)
        if order is None:
            order = rc_order[arrived] = tuple(sorted(arrived))
        body = {}
        for rc in order:
            r = resources[rc]
            pair = amounts.get(id(r))
            if pair is None:
                pair = amounts[id(r)] = {"capacity": r.capacity, "used": r.used}
            body[rc] = pair
        out[uuid] = {
            "resources": body,
            "traits": names,
            "parent_provider_uuid": uuid_by_id[parent] if parent is not None else None,
            "root_provider_uuid": uuid_by_id[root],
        }
    return out


def summaries_from_columns(
    inv_cols: Sequence[Sequence[Any]],
    trait_cols: Sequence[Sequence[Any]],
    rc_names: Mapping[int, str],
    uuid_by_id: Mapping[int, str],
    trait_key: TraitKey | None,
) -> dict[str, Any]:
    """:func:`shared_summaries` straight from the summary statements' columns (see
    :meth:`~._results.SummaryRows.from_driver`), in one pass over the rows: each
    provider's resources as (name, pair) items sorted once, one trait list per trait
    set, one ``{"capacity", "used"}`` per (capacity, used) value.

    >>> summaries_from_columns(
    ...     ((1, 1, 2), ("u1", "u1", "u2"), ("a", "a", "b"), (None, None, 1), (1, 1, 1),
    ...      (1, 0, None), (8.0, 4.0, None), (2, 0, None)),
    ...     ((1, 1), ("B", "A")), {0: "VCPU", 1: "MEMORY_MB"}, {1: "u1", 2: "u2"}, None)
    ... # doctest: +NORMALIZE_WHITESPACE
    {'u1': {'resources': {'MEMORY_MB': {'capacity': 8, 'used': 2},
                          'VCPU': {'capacity': 4, 'used': 0}},
            'traits': ['A', 'B'], 'parent_provider_uuid': None, 'root_provider_uuid': 'u1'},
     'u2': {'resources': {}, 'traits': [], 'parent_provider_uuid': 'u1',
            'root_provider_uuid': 'u1'}}
    """
    names_of: dict[int, list[str]] = {}
    for rp, name in zip(*trait_cols, strict=True):
        found = names_of.get(rp)
        if found is None:
            names_of[rp] = [name]
        else:
            found.append(name)
    trait_lists: dict[frozenset[str], list[str]] = {}
    traits_of: dict[int, list[str]] = {}
    for rp, found in names_of.items():
        key = frozenset(found)
        listed = trait_lists.get(key)
        if listed is None:
            listed = trait_lists[key] = sorted(key, key=trait_key)
        traits_of[rp] = listed
    rp_col, uuid_col, _, parent_col, root_col, rc_col, cap_col, used_col = inv_cols
    items_of: dict[int, list[tuple[str, dict[str, int]]]] = {}
    head: dict[str, tuple[int, Any, int]] = {}
    pairs: dict[tuple[Any, Any], dict[str, int]] = {}
    rows = zip(rp_col, uuid_col, parent_col, root_col, rc_col, cap_col, used_col, strict=True)
    for rp, uuid, parent, root, rc, capacity, used in rows:
        items = items_of.get(rp)
        if items is None:
            items = items_of[rp] = []
            head[uuid] = (rp, parent, root)
        if rc is not None:
            pair = pairs.get((capacity, used))
            if pair is None:
                # capacity is a float on every driver, SUM a Decimal on MySQL: int() both
                pair = pairs[(capacity, used)] = {"capacity": int(capacity), "used": int(used)}
            items.append((rc_names[rc], pair))
    empty: list[str] = []
    out: dict[str, Any] = {}
    for uuid in sorted(head):
        rp, parent, root = head[uuid]
        items = items_of[rp]
        if len(items) > 1:
            items.sort(key=itemgetter(0))
        out[uuid] = {
            "resources": dict(items),
            "traits": traits_of.get(rp, empty),
            "parent_provider_uuid": uuid_by_id[parent] if parent is not None else None,
            "root_provider_uuid": uuid_by_id[root],
        }
    return out


def placement_json(
    requests: RequestRows, summaries: SummaryRows, trait_key: TraitKey | None = None
) -> bytes:
    """The JSON body of a whole answer from the search's compact rows, in one pass:
    the content of :func:`render_rows` (traits in ``trait_key`` order, default by
    name), written by orjson."""
    text = requests_json(requests)
    return orjson.dumps(
        {
            "allocation_requests": _shared_requests(requests)
            if text is None
            else orjson.Fragment(text),
            "provider_summaries": summaries.placement_body(trait_key),
        }
    )


def objects_json(
    requests: Sequence[AllocationRequest],
    summaries: Mapping[str, ProviderSummary],
    trait_key: TraitKey | None = None,
) -> bytes:
    """The JSON body of a whole answer from the public objects (what
    :func:`placement_json` writes from rows).

    >>> objects_json((), {})
    b'{"allocation_requests":[],"provider_summaries":{}}'
    """
    body = render_objects(requests, summaries)
    if trait_key is not None:
        for summary in body["provider_summaries"].values():
            summary["traits"].sort(key=trait_key)
    return orjson.dumps(body)


def render_rows(requests: RequestRows, summaries: SummaryRows) -> dict[str, Any]:
    """A whole answer from the search's compact rows, without building the public objects
    (what :meth:`~._results.AllocationCandidates.to_placement` does when it has them)."""
    return {
        "allocation_requests": render_request_rows(requests),
        "provider_summaries": render_summary_rows(summaries),
    }


def render_objects(
    requests: Sequence[AllocationRequest], summaries: Mapping[str, ProviderSummary]
) -> dict[str, Any]:
    """A whole answer from the public objects (summaries sorted by uuid).

    >>> render_objects((), {})
    {'allocation_requests': [], 'provider_summaries': {}}
    """
    return {
        "allocation_requests": [render_request(a) for a in requests],
        "provider_summaries": {u: render_summary(s) for u, s in sorted(summaries.items())},
    }
