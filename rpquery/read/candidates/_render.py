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
    "resources_texts",
    "summaries_json",
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
# requests or summaries share (a layout's template, a trait set's list, one piece of
# resources text per (class, capacity, used)) is written once and reused wherever it
# appears, and orjson embeds the texts (``orjson.Fragment``) in one call. Same content
# as ``json.dumps`` of :func:`render_rows` (orjson writes no spaces and non-ASCII as
# UTF-8; a summary's classes come in the order the database gave them).

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
#: The ASCII characters of :data:`_PLAIN` strings
_PLAIN_ASCII = bytes(sorted(set(range(0x20, 0x80)) - {ord('"'), ord("\\")}))


def _plain(text: str) -> bool:
    """Whether JSON writes ``text`` as it is (:data:`_PLAIN`): for ASCII text (uuids),
    nothing left once the plain characters are deleted (``bytes.translate``, ~5x the
    regular expression's speed on 10k uuids).

    >>> _plain("0b6e-4f"), _plain('a"b'), _plain("a\\nb"), _plain("é"), _plain("é\\x01")
    (True, False, False, True, False)
    """
    if text.isascii():
        return not text.encode().translate(None, _PLAIN_ASCII)
    return _PLAIN.fullmatch(text) is not None


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
    :func:`_shared_requests` serves).

    Candidates of one or two slots (one group of one or two classes, two one-class
    groups: the big answers) go straight from their picks to a template, with no
    layout work: which of five it is follows from two comparisons (same provider or
    not; their uuids' order and their ids' order), and it is filled without parsing a
    format: one provider's by ``uuid.join(pieces)``, two providers' by ``%``. Longer
    candidates go through :meth:`RequestRows.laid_out`."""
    uuid_by_id = rows.uuid_by_id
    if not _plain("".join(uuid_by_id.values())):
        return None
    chosen = rows.chosen
    if not chosen or len(chosen[0].picks) > 2:
        return _laid_out_json(rows)
    out: list[str] = []
    append = out.append
    by_slots: dict[int, _PairTemplates] = {}
    slots: object = None
    one: list[str] | None = None
    two: list[tuple[str, Callable[[Any], tuple[str, ...]]] | None] = []
    for c in chosen:
        if c.slots is not slots:  # every candidate of a batch shares its slots
            slots = c.slots
            found = by_slots.get(id(slots))
            if found is None:
                found = by_slots[id(slots)] = _PairTemplates(rows)
            templates = found
            one, two = found.one, found.two
        picks = c.picks
        a = picks[0]
        if len(picks) == 1 or a == picks[1]:
            if one is None:
                one = templates.make_one(c)
            append(uuid_by_id[a].join(one))
            continue
        b = picks[1]
        ua, ub = uuid_by_id[a], uuid_by_id[b]
        k = (ua < ub) * 2 + (a < b)
        pair = two[k] or templates.make_two(c, k)
        append(pair[0] % pair[1]((ua, ub)))
    return "[" + ",".join(out) + "]"


class _PairTemplates:
    """The templates of :func:`requests_json` for the candidates of one or two slots
    of one batch, each made on first use: ``one`` (one provider: one slot, or both
    slots on the same provider) as the pieces between its uuids, ``two[k]`` (two
    providers, ``k = 2 * (uuid a < uuid b) + (id a < id b)``) as a ``%`` template and
    the getter that orders ``(uuid a, uuid b)`` for it."""

    __slots__ = ("rows", "one", "two")

    def __init__(self, rows: RequestRows) -> None:
        self.rows = rows
        self.one: list[str] | None = None
        self.two: list[tuple[str, Callable[[Any], tuple[str, ...]]] | None] = [None] * 4

    def make_one(self, c: Any) -> list[str]:
        pieces, _ = _pieces(self._template(c, (0,) * len(c.picks)), 1)
        self.one = pieces
        return pieces

    def make_two(self, c: Any, k: int) -> tuple[str, Callable[[Any], tuple[str, ...]]]:
        pieces, order = _pieces(self._template(c, (0, 1)), 2)
        percent = "%s".join(piece.replace("%", "%%") for piece in pieces)
        pair = self.two[k] = (percent, itemgetter(*order) if len(order) > 1 else _one(order))
        return pair

    def _template(self, c: Any, pattern: tuple[int, ...]) -> str:
        allocs, maps = self.rows.layout(c, pattern)
        uu = [self.rows.uuid_by_id[p] for p in c.picks]
        return _template_for(c.picks, uu, allocs, maps)


def _one(order: Sequence[int]) -> Callable[[Any], tuple[str, ...]]:
    (k,) = order
    return lambda uu: (uu[k],)


#: Where :func:`_pieces` marks a template's fields: ``\x00`` never appears in a
#: template (orjson escapes control characters) nor in a plain uuid.
_FIELD = re.compile("\x00([0-9]+)\x01")


def _pieces(template: str, fields: int) -> tuple[list[str], list[int]]:
    """A :meth:`str.format` template of ``{0}``.. ``{fields - 1}`` as the text
    between its fields and the field of each gap, in order.

    >>> _pieces('{{"a":"{1}","b":["{0}"]}}', 2)
    (['{"a":"', '","b":["', '"]}'], [1, 0])
    """
    parts = _FIELD.split(template.format(*(f"\x00{k}\x01" for k in range(fields))))
    return parts[0::2], [int(k) for k in parts[1::2]]


def _template_for(
    picks: Sequence[int], uu: Sequence[str], allocs: Sequence[Any], maps: Sequence[Any]
) -> str:
    """The template of one candidate's layout and its providers' order: allocations by
    uuid, each suffix's providers by id."""
    alloc_order = tuple(sorted(range(len(allocs)), key=lambda i: uu[allocs[i][0]]))
    map_orders = tuple(
        ks if len(ks) == 1 else tuple(sorted(ks, key=picks.__getitem__)) for _, ks in maps
    )
    return _request_template(allocs, maps, alloc_order, map_orders)


def _laid_out_json(rows: RequestRows) -> str:
    """:func:`requests_json` of candidates of any length, through their layouts."""
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


def resources_texts(
    inventory: Sequence[Sequence[Any]], rc_names: Mapping[int, str]
) -> dict[int, str]:
    """Each provider's resources as Placement's JSON text from inventory columns
    ``(provider ids, class ids, capacities, usages)`` (see
    :meth:`~._results.SummaryRows.from_driver`): one ``str.format`` per inventory, no
    dicts. Capacity is ``int()`` of the statement's ``(total - reserved) *
    allocation_ratio`` (a float on every driver), as Placement computes it; usage an
    integer (``int()`` also takes MySQL's ``Decimal`` sums).

    >>> resources_texts(((1, 1, 2), (0, 1, 0), (8.0, 4.5, 2.0), (2, 0, 0)),
    ...     {0: "VCPU", 1: "MEMORY_MB"})
    {1: '{"VCPU":{"capacity":8,"used":2},"MEMORY_MB":{"capacity":4,"used":0}}', \
2: '{"VCPU":{"capacity":2,"used":0}}'}
    """
    keys = {rc: orjson.dumps(name).decode() for rc, name in rc_names.items()}
    written: dict[tuple[int, Any, Any], str] = {}
    pieces: dict[int, list[str]] = {}
    for rp, rc, capacity, used in zip(*inventory, strict=True):
        # one text per (class, capacity, used): they repeat across hosts of a kind
        # (19,114 inventories, 1,086 distinct at 5,000 hosts), and across requests
        piece = written.get((rc, capacity, used))
        if piece is None:
            piece = written[(rc, capacity, used)] = _piece(keys[rc], capacity, used)
        found = pieces.get(rp)
        if found is None:
            pieces[rp] = [piece]
        else:
            found.append(piece)
    return {rp: "{" + ",".join(found) + "}" for rp, found in pieces.items()}


#: At most this many texts in each cache of :func:`_piece` and :func:`_trait_list`
#: (emptied when full); a 5,000-host cloud has ~1,100 distinct pieces, ~400 trait sets
TEXT_CACHE_SIZE = 16384
_PIECES: dict[tuple[str, Any, Any], str] = {}
_TRAIT_LISTS: dict[tuple[frozenset[str], TraitKey | None], str] = {}


def _piece(key: str, capacity: Any, used: Any) -> str:
    """``"VCPU":{"capacity":8,"used":2}`` for the JSON-quoted class name ``key``, from a
    cache shared by requests: the text depends only on ``key``, ``int(capacity)`` and
    ``int(used)``, and values that compare equal (``8.0``, ``8``, ``Decimal(8)``) have
    the same ``int()``.

    >>> _piece('"VCPU"', 8.0, 2)
    '"VCPU":{"capacity":8,"used":2}'
    """
    cache_key = (key, capacity, used)
    found = _PIECES.get(cache_key)
    if found is None:
        if len(_PIECES) >= TEXT_CACHE_SIZE:
            _PIECES.clear()
        found = _PIECES[cache_key] = f'{key}:{{"capacity":{int(capacity)},"used":{int(used)}}}'
    return found


def _trait_list(names: frozenset[str], trait_key: TraitKey | None) -> str:
    """``names`` as a JSON list in ``trait_key`` order (default: by name), from a cache
    shared by requests (the same sets recur: one per kind of provider).

    >>> _trait_list(frozenset({"B", "A"}), None)
    '["A","B"]'
    """
    cache_key = (names, trait_key)
    found = _TRAIT_LISTS.get(cache_key)
    if found is None:
        if len(_TRAIT_LISTS) >= TEXT_CACHE_SIZE:
            _TRAIT_LISTS.clear()
        found = _TRAIT_LISTS[cache_key] = orjson.dumps(sorted(names, key=trait_key)).decode()
    return found


def summaries_json(rows: SummaryRows, trait_key: TraitKey | None) -> str:
    """Placement's ``provider_summaries`` as JSON text, sorted by uuid, straight from
    what the summary statements returned: per provider one ``str.format`` of its uuids,
    its resources' text (:meth:`~._results.SummaryRows.resources`) and its trait set's
    list, written once per distinct set in ``trait_key`` order (default: by name).
    Uuids that would need escaping go through orjson instead.

    >>> from rpquery.read.candidates._results import SummaryRows
    >>> summaries_json(SummaryRows.from_driver(
    ...     [(2, "u2", "n", 1, 1, None), (1, "u1", "cn", None, 1, "3,7")],
    ...     [(1, 0, 8.0, 2)], {3: "CUSTOM_B", 7: "A"}, {0: "VCPU"}), None)
    ... # doctest: +NORMALIZE_WHITESPACE
    '{"u1":{"resources":{"VCPU":{"capacity":8,"used":2}},"traits":["A","CUSTOM_B"],\
"parent_provider_uuid":null,"root_provider_uuid":"u1"},\
"u2":{"resources":{},"traits":[],"parent_provider_uuid":"u1","root_provider_uuid":"u1"}}'
    """
    _ids, uuids, _names, parents, roots, trait_texts = rows.providers
    listed: dict[str | None, str] = {
        text: _trait_list(names, trait_key) for text, names in rows.trait_sets.items()
    }
    listed[None] = "[]"
    uuid_by_id = rows.uuid_by_id
    rows_of = zip(uuids, parents, roots, rows.resources(), trait_texts, strict=True)
    if not _plain("".join(uuids)):
        fragment = orjson.Fragment
        return orjson.dumps(
            {
                uuid: {
                    "resources": fragment(resources),
                    "traits": fragment(listed[traits]),
                    "parent_provider_uuid": uuid_by_id[parent] if parent is not None else None,
                    "root_provider_uuid": uuid_by_id[root],
                }
                for uuid, parent, root, resources, traits in sorted(rows_of)
            }
        ).decode()
    quoted: dict[int | None, str] = {rp: f'"{uuid}"' for rp, uuid in uuid_by_id.items()}
    quoted[None] = "null"
    written = {
        uuid: f'"{uuid}":{{"resources":{resources},"traits":{listed[traits]},'
        f'"parent_provider_uuid":{quoted[parent]},"root_provider_uuid":{quoted[root]}}}'
        for uuid, parent, root, resources, traits in rows_of
    }
    return "{" + ",".join([written[uuid] for uuid in sorted(written)]) + "}"


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
