"""``GET /allocation_candidates``: which combinations of providers could host a request.

>>> from rpquery.db import Database
>>> db = Database("sqlite://"); db.upgrade()
>>> allocation_candidates(db, "resources=VCPU:1").allocation_requests
()

How one request runs (a fixed number of statements, whatever the cloud's size):

1. names → ids and the sharing pairs (one statement, which also carries PostgreSQL's
   session settings; on PostgreSQL the read runs in autocommit mode: no ``BEGIN``, no
   ``ROLLBACK``);
2. anchor roots (``root_required``, policy ``where`` clauses; with ``limit`` and no
   policy needing every host, a batch of roots in id order, ``ORDER BY``/``LIMIT``, so
   only a batch of trees is looked at; steps 2-4 run again for the next batch until
   ``limit`` roots gave a candidate (``limit`` candidates under a depth-first
   ``max_candidates``): :class:`~rpquery.read.candidates._batches.Batches`;
   on a cloud of at most ``Batches.ONE_BATCH`` roots, one batch of every root);
3. one statement per request group with capacity, usage, traits and aggregates
   (:mod:`rpquery.read.candidates._sql`);
4. the pruning search (:mod:`rpquery.read.candidates._search`, lazy, under a step budget:
   :func:`search_budget`), then policies' ``keep`` and ``weigh``, then ``limit``,
   round-robin over the roots (:mod:`rpquery.read.candidates._spread`, which also
   holds Placement's candidate options);
5. provider summaries for the trees the returned candidates allocate from (one
   statement for at most ``SUMMARY_SMALL`` trees, else two or three).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import chain, islice
from operator import attrgetter
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.sql import Executable

from rpquery.db import Database, read_retrying, reading
from rpquery.errors import InvalidRequest
from rpquery.policies.base import HostPolicy
from rpquery.read._policies import keep_and_weigh
from rpquery.read.candidates import _sql as q
from rpquery.read.candidates._batches import (
    Batch,
    Batches,
    select_roots,
    small_cloud,
    walk_key,
)
from rpquery.read.candidates._execute import (
    Loaded,
    fetch_names,
    load_groups,
    statements_for,
)
from rpquery.read.candidates._results import (
    AllocationCandidates,
    AllocationRequest,
    ProviderSummary,
    RequestRows,
    ResourceSummary,
    paused_gc,
)
from rpquery.read.candidates._search import (
    DEFAULT_MAX_STEPS,
    RawCandidate,
    SearchBudget,
    is_plain,
    plain_candidates,
    plain_prefix,
    plan_slots,
    search_anchor,
)
from rpquery.read.candidates._sharing import fetch_names_sharing, pairs_per_batch
from rpquery.read.candidates._spread import (
    DEFAULT_OPTIONS,
    CandidateOptions,
    SearchPlan,
    Spread,
    arrange,
    search_plan,
    searched_request,
    shuffled,
)
from rpquery.read.candidates._summaries import fetch_summaries, fetch_uuids
from rpquery.read.request import CandidatesRequest, Params, as_candidates_request
from rpquery.store import dialects


def allocation_candidates(
    db: Database | Connection,
    request: CandidatesRequest | Params,
    *,
    policies: Sequence[HostPolicy] = (),
    max_search_steps: int | None = None,
    options: CandidateOptions | None = None,
) -> AllocationCandidates:
    """Allocation candidates for ``request`` (typed, query string or multi-dict).

    The search may take at most ``max_search_steps`` steps (see :func:`search_budget`
    for the default); past it the request fails with ``TooComplex``
    (``rpquery.candidates.too_complex``). ``options``: Placement's
    ``[placement]`` candidate options (:class:`CandidateOptions`: random sample,
    ``max_allocation_candidates``, generation strategy); by default none of them.
    A limited answer takes the first candidate of each root before the second of any
    (docs/read-path.md, *Order of limited answers and Placement's candidate
    options*)."""
    req = as_candidates_request(request)
    budget = search_budget(db, max_search_steps)
    opts = DEFAULT_OPTIONS if options is None else options

    def work(conn: Connection) -> AllocationCandidates:
        # gc: ~10^5 acyclic rows at whole-cloud scale
        with paused_gc(), dialects.unprepared(conn, repeats=small_cloud(conn)):
            return _run(conn, req, policies, budget, opts)

    # autocommit: the statements need no common snapshot (at READ COMMITTED each has its
    # own anyway); a connection the server closed is found by the first statement, not
    # by a ping
    return read_retrying(db, work, autocommit=True)


def allocation_candidates_json(
    db: Database | Connection,
    request: CandidatesRequest | Params,
    *,
    policies: Sequence[HostPolicy] = (),
    max_search_steps: int | None = None,
    trait_key: Callable[[str], Any] | None = None,
    options: CandidateOptions | None = None,
) -> bytes:
    """:func:`allocation_candidates`' answer as Placement 1.39's JSON body
    (:meth:`AllocationCandidates.to_placement_json`), the cyclic garbage collector
    paused until the answer is freed: a whole-cloud answer is ~10^5 objects, none in a
    cycle, and a collection when the library call returns, or while the body is
    written, would walk them all for nothing (11-18 ms at 5,000 hosts on a 2-core
    machine at load ~5). The API's ``GET /allocation_candidates`` (1.34+) sends it.

    >>> db = Database("sqlite://"); db.upgrade()
    >>> allocation_candidates_json(db, "resources=VCPU:1")
    b'{"allocation_requests":[],"provider_summaries":{}}'
    """
    with paused_gc():
        answer = allocation_candidates(
            db, request, policies=policies, max_search_steps=max_search_steps, options=options
        )
        body = answer.to_placement_json(trait_key=trait_key)
        del answer  # freed by reference counting, before the collector is back
    return body


ENV_MAX_SEARCH_STEPS = "RPQUERY_MAX_SEARCH_STEPS"


def search_budget(db: Database | Connection, max_search_steps: int | None) -> SearchBudget:
    """The step budget of one request: ``max_search_steps`` if given, else the
    Database's (``Database(url, max_search_steps=...)``), else the environment's
    ``RPQUERY_MAX_SEARCH_STEPS``, else ``DEFAULT_MAX_STEPS`` (1,000,000). A budget that
    is not an integer ≥ 1 is ``rpquery.request.bad_max_search_steps``.

    >>> search_budget(Database("sqlite://", max_search_steps=500), None)
    SearchBudget(max_steps=500, steps=0)
    """
    value: object = max_search_steps
    source = "max_search_steps"
    if value is None and isinstance(db, Database) and db.max_search_steps is not None:
        value, source = db.max_search_steps, "Database.max_search_steps"
    raw = os.environ.get(ENV_MAX_SEARCH_STEPS, "").strip()
    if value is None and raw:
        value = int(raw) if raw.isascii() and raw.isdigit() else raw
        source = ENV_MAX_SEARCH_STEPS
    if value is None:
        value = DEFAULT_MAX_STEPS
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidRequest(
            "rpquery.request.bad_max_search_steps",
            f"{source} must be an integer >= 1, not {value!r}",
            token=str(value)[:100],
        )
    return SearchBudget(value)


def _run(
    conn: Connection,
    req: CandidatesRequest,
    policies: Sequence[HostPolicy],
    budget: SearchBudget,
    options: CandidateOptions = DEFAULT_OPTIONS,
) -> AllocationCandidates:
    every_candidate = any(p.needs_all_candidates for p in policies)
    how = search_plan(req.limit, options, randomize=req.randomize, every_candidate=every_candidate)
    searched_req = searched_request(req, how)
    stop = how.target
    found: list[RawCandidate] = []
    seen: set[tuple[object, ...]] = set()
    root_of: dict[int, int] = {}
    spreading = Spread(stop, budget) if how.mode == "spread" and stop else None
    key: Hashable = walk_key(conn, req)
    if spreading is not None:
        key = (key, "spread")  # roots per candidate-giving root, not per candidate
    plan = Batches(stop, randomize=how.mode == "random", key=key, cloud=conn.engine.url)
    # a walk in small batches may read each batch's sharing pairs, not the cloud's
    names, sharing = fetch_names_sharing(conn, req, pairs_per_batch(conn, plan.first()))
    batch: Batch | None = plan.first()
    # every batch's inventory columns, while each batch's group statements read them
    # with their rows (else None: the summaries read theirs, or have the database write
    # them)
    inventory: list[list[Any]] | None = [[], [], [], []]
    every_root = batch == Batch()
    # the root of every inventory, when one batch of every root read them all
    cloud_roots: Sequence[int] | None = None
    while batch is not None:
        roots = select_roots(conn, searched_req, names, policies, batch, sharing.rc_ids)
        searched = 0
        if roots.ids != []:
            loaded = load_groups(conn, req, names, roots, sharing, summary_rows=True, give_up=True)
            if loaded.hopeless:  # no candidate (and no tree of this batch to summarise)
                got = spreading.viable if spreading is not None else len(found)
                batch = plan.next(batch, roots, got, len(loaded.anchors))
                continue
            if spreading is not None:
                searched = spreading.add(loaded)
            else:
                searched = _collect(loaded, searched_req, found, seen, budget, stop)
            root_of.update(loaded.data.root_of)
            if inventory is not None and loaded.inventory is not None:
                for column, more in zip(inventory, loaded.inventory, strict=True):
                    column.extend(more)
                if every_root:
                    cloud_roots = loaded.inventory_roots
            else:
                inventory = None
        got = spreading.viable if spreading is not None else len(found)
        batch = plan.next(batch, roots, got, searched)
    if spreading is not None:
        found = spreading.answer()
    elif how.mode == "depth" and stop is not None:
        del found[stop:]
    chosen = _apply_policies(conn, found, policies, req, how)
    return _summarise(conn, chosen, names, root_of, inventory, cloud_roots)


def _collect(
    loaded: Loaded,
    req: CandidatesRequest,
    found: list[RawCandidate],
    seen: set[tuple[object, ...]],
    budget: SearchBudget,
    stop: int | None,
    *,
    plain: bool = True,
) -> int:
    """Search every anchor of the batch into ``found``. With ``limit``, at most
    ``limit`` candidates per anchor (policies keep, weigh and shuffle whole trees, so
    a tree's later candidates could never be returned), and the whole search stops at
    ``stop`` candidates. Returns how many anchors it searched.

    Without ``limit``, when the walk would only enumerate (:func:`is_plain`: nothing
    to check at any pick), the batch's candidates are the products of each anchor's
    choices (:func:`plain_candidates`: same order, same steps); with ``limit`` and
    no sharing provider in the batch, each anchor's first candidates are its
    product's first tuples (:func:`_collect_prefixes`). ``plain=False`` always walks
    (tests compare the two)."""
    shared = loaded.sharing_ids
    slots, data, rules = loaded.slots, loaded.data, loaded.rules
    limit = stop if stop is not None and not req.randomize else None
    per_anchor = req.limit
    allocating = [j for j, slot in enumerate(slots) if slot.rc_amounts]
    plan = plan_slots(slots, rules)
    made = None
    if plain and limit is None and per_anchor is None and is_plain(plan, rules):
        # None when over the budget: then the walk raises where it goes over
        made = plain_candidates(loaded.anchors, slots, budget)
        if made is not None and not shared:
            found.extend(made)
            return len(loaded.anchors)
    if plain and per_anchor is not None and not shared and is_plain(plan, rules):
        return _collect_prefixes(loaded, found, budget, limit, per_anchor)
    walks: Iterable[Iterable[RawCandidate]] = (
        (search_anchor(root, slots, data, rules, plan, budget) for root in loaded.anchors)
        if made is None
        else (made,)  # every anchor's, one after the other (no limit: nothing stops)
    )
    for searched, candidates in enumerate(walks, 1):
        taken = 0
        for cand in candidates:
            # Only a candidate made of sharing providers alone can be reached from
            # several anchors; any other is unique to its tree.
            if shared and all(cand.picks[j] in shared for j in allocating):
                key = cand.key()
                if key in seen:
                    continue
                seen.add(key)
            found.append(cand)
            taken += 1
            if limit is not None and len(found) >= limit:
                return searched
            if per_anchor is not None and taken >= per_anchor:
                break
    return len(loaded.anchors)


def _collect_prefixes(
    loaded: Loaded, found: list[RawCandidate], budget: SearchBudget, limit: int | None, take: int
) -> int:
    """:func:`_collect` of a plain walk (:func:`is_plain`) with a ``limit``: each
    anchor's first ``take`` candidates, or fewer when ``limit`` is reached, are its
    product's first tuples (:func:`plain_prefix`: the walk's order and steps), with no
    walk per anchor (nova's ``limit=1000``: ~500 anchors of a few candidates each).
    Returns how many anchors it searched."""
    slots = loaded.slots
    per_slot = [slot.choices for slot in slots]
    for searched, root in enumerate(loaded.anchors, 1):
        lists = [choices.get(root) for choices in per_slot]
        if not all(lists):  # a slot nobody can fill: the walk does nothing
            continue
        want = take if limit is None else min(take, limit - len(found))
        made = plain_prefix(root, slots, lists, want, budget)  # type: ignore[arg-type]
        if made is None:  # over the budget: the walk raises where it goes over
            made = list(islice(_walk(loaded, root, budget), want))
        found.extend(made)
        if limit is not None and len(found) >= limit:
            return searched
    return len(loaded.anchors)


def _walk(loaded: Loaded, root: int, budget: SearchBudget) -> Iterable[RawCandidate]:
    plan = plan_slots(loaded.slots, loaded.rules)
    return search_anchor(root, loaded.slots, loaded.data, loaded.rules, plan, budget)


def _apply_policies(
    conn: Connection,
    found: list[RawCandidate],
    policies: Sequence[HostPolicy],
    req: CandidatesRequest,
    how: SearchPlan | None = None,
) -> list[RawCandidate]:
    """Policies' ``keep`` then ``weigh`` (once each, on surviving roots), shuffled
    first when the plan says so, then ``limit`` in the order of limited answers
    (:func:`~._spread.arrange`: round-robin over roots)."""
    shuffle = how.shuffle if how is not None else req.randomize
    if policies:
        found = keep_and_weigh(conn, found, _root_id, policies, shuffle=shuffle)
    elif shuffle:
        found = shuffled(found)
    return arrange(found, req.limit)


_root_id = attrgetter("root_id")
_root_uuid = attrgetter("root_uuid")
_picks = attrgetter("picks")


def _summarise(
    conn: Connection,
    chosen: list[RawCandidate],
    names: q.Names,
    root_of: dict[int, int],
    inventory: Sequence[Sequence[Any]] | None = None,
    cloud_roots: Sequence[int] | None = None,
) -> AllocationCandidates:
    """Summaries of the trees the returned candidates allocate from, then the answer in
    compact form: requests stay picks (ids) until rendered or asked for
    (:class:`RequestRows`). ``inventory``: every inventory of (at least) those trees,
    read with a group's rows (:func:`load_groups` ``summary_rows``), else read here.
    ``cloud_roots``: the root of each of those inventories, when one batch of every
    root read them (:func:`fetch_summaries`: most of the cloud's trees summarised read
    every provider's trait ids at once).

    As Placement: a tree is summarised when some returned request allocates from one of
    its providers. The anchor of a candidate made of sharing providers alone, and the
    provider of a resourceless group outside those trees, are not summarised; their
    uuids (the request's ``root_uuid``, its ``mappings``) come from one more small
    statement, run only in that case."""
    if not chosen:
        return AllocationCandidates()
    # Every batch's slots come in the same order (the request's groups), so the first
    # candidate's tell which slots allocate (all but resourceless groups').
    every_slot = all(slot.rc_amounts for slot in chosen[0].slots)
    if every_slot:
        trees = set(map(root_of.__getitem__, chain.from_iterable(map(_picks, chosen))))
    else:
        trees = {
            root_of[rp]
            for c in chosen
            for slot, rp in zip(c.slots, c.picks, strict=True)
            if slot.rc_amounts
        }
    summaries = fetch_summaries(
        conn, trees, names.rc_names, inventory=inventory, cloud_roots=cloud_roots
    )
    uuid_by_id = summaries.uuid_by_id
    outside = set(map(_root_id, chosen)) - trees
    if not every_slot:  # a resourceless group's provider may be outside those trees
        outside.update(rp for c in chosen for rp in c.picks if root_of[rp] not in trees)
    if outside:
        uuid_by_id = {**fetch_uuids(conn, outside), **uuid_by_id}
    return AllocationCandidates.from_rows(
        RequestRows(chosen, uuid_by_id, names.rc_names), summaries
    )


def exclude_nested(answer: AllocationCandidates, limit: int | None = None) -> AllocationCandidates:
    """The answer as Placement gives it before microversion 1.29, blind to nested
    trees: only allocation requests taking from at most one provider per tree, then
    ``limit`` (round-robin over roots, as any limited answer), and only the summaries
    of providers those requests use. Run the search without a limit first (the limit
    applies after this filter). Call it only when the
    cloud has nested providers (:func:`rpquery.write.providers.has_nested`): Placement leaves
    a flat cloud's answer alone.

    >>> exclude_nested(AllocationCandidates()).to_placement()
    {'allocation_requests': [], 'provider_summaries': {}}
    """
    summaries = answer.provider_summaries
    kept = [
        ar
        for ar in answer.allocation_requests
        if len({summaries[rp].root_uuid for rp in ar.allocations}) == len(ar.allocations)
    ]
    if limit is not None:  # the order of limited answers: round-robin over roots
        kept = arrange(kept, limit, root_of=_root_uuid)
    used = {rp for ar in kept for rp in ar.allocations}
    return AllocationCandidates(kept, {u: s for u, s in summaries.items() if u in used})


def candidate_statements(
    db_or_conn: Database | Connection, request: CandidatesRequest | Params
) -> list[Executable]:
    """The main statements ``request`` builds (anchor roots, sharing pairs, one per
    group), as for a full answer, to read or compile per dialect (golden SQL tests).

    They are templates: the per-batch statements take the anchor roots found at run
    time as bind parameters (``root_ids``), so they cannot be sent as they are. To see
    and EXPLAIN what a request really sends, with its values, trace a run instead
    (``db.add_tracer``), as ``rpquery explain`` and ``make bench`` do."""
    req = as_candidates_request(request)
    with reading(db_or_conn) as conn:
        names = fetch_names(conn, req)
    return statements_for(req, names)


__all__ = [
    "AllocationCandidates",
    "AllocationRequest",
    "CandidateOptions",
    "ProviderSummary",
    "ResourceSummary",
    "allocation_candidates",
    "allocation_candidates_json",
    "candidate_statements",
    "exclude_nested",
]
