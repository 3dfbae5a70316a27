"""The whole-cloud shortcuts of the candidate path against the general path they stand
for, on small random clouds and requests (the generators of
``tests/test_candidates_property.py``, uuids shuffled so their order is not the ids'):

- *lean* group statements (no room columns for a class no other group asks for; with
  several classes, optionally one row per provider with a mask of its classes) and
  the *plain* search (:func:`~rpquery.read.candidates._search.plain_candidates`: a
  product per anchor when nothing is checked at any pick) find the same candidates,
  in the same order, with the same steps, and go over the same budgets as every room
  column read and the walk over every anchor;
- a whole-cloud answer's summaries written from the inventory rows its group's
  statement read (``summary_rows``) are those the summary statements read;
- the allocation requests' JSON written from pick templates
  (:func:`~rpquery.read.candidates._render.requests_json`) is, byte for byte, the one
  written through layouts and orjson's of ``to_placement()``.

SQLite runs 40 examples, every backend with ``CI=true``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpquery.db import Database, reading
from rpquery.errors import TooComplex
from rpquery.read.candidates import _collect, _render, allocation_candidates
from rpquery.read.candidates._batches import Batch, select_roots
from rpquery.read.candidates._execute import Loaded, fetch_names, load_groups
from rpquery.read.candidates._render import _laid_out_json, requests_json
from rpquery.read.candidates._search import SearchBudget
from rpquery.read.candidates._sharing import fetch_sharing
from rpquery.read.candidates._summaries import fetch_summaries
from rpquery.read.request import CandidatesRequest, parse_candidates
from rpquery.store import dialects
from tests.conftest import IN_CI
from tests.reference import Cloud, Inv, Prov
from tests.test_candidates_property import clouds, insert, requests

EXAMPLES = int(os.environ.get("RPQUERY_PROPERTY_EXAMPLES", "30" if IN_CI else "40"))


@st.composite
def shuffled_clouds(draw: st.DrawFn) -> Cloud:
    """A random cloud whose uuids are dealt out anew: ids follow insertion order, so
    with the position's uuid the two orders would always agree."""
    cloud = draw(clouds(child_sharing=True))
    provs = list(cloud.p.values())
    for p, uuid in zip(provs, draw(st.permutations([p.uuid for p in provs])), strict=True):
        p.uuid = uuid
    return cloud


Found = tuple[list[tuple[int, tuple[int, ...]]], int] | str


def general_and_fast(
    db: Database, req: CandidatesRequest, max_steps: int, limit: int | None = None
) -> list[Found]:
    """The candidates of every anchor and the steps taken, read and searched the
    general way, then the fast way, then the fast way with a group's offers one row
    per provider (as on MySQL), then the fast way with the summaries' inventory rows
    read with a group's (:func:`check_summary_rows`): ``"too complex"`` when over
    ``max_steps``. With
    ``limit``, as a limited request searches (at most ``limit`` per anchor, stopping
    at ``limit`` in all): the fast way takes each anchor's first candidates from its
    product when the walk is plain (:func:`rpquery.read.candidates._collect_prefixes`)."""
    req = dataclasses.replace(req, limit=limit)
    out: list[Found] = []
    with reading(db) as conn:
        dialects.read_session_setup(conn)
        names = fetch_names(conn, req)
        sharing = fetch_sharing(conn, req, names)
        roots = select_roots(conn, req, names, (), Batch(), sharing.rc_ids)  # every root
        variants = ((False, False, False), (True, False, False), (True, True, False))
        for fast, grouped, summary in (*variants, (True, False, True)):
            loaded = load_groups(
                conn, req, names, roots, sharing, lean=fast, grouped=grouped, summary_rows=summary
            )
            found: list = []
            budget = SearchBudget(max_steps)
            try:
                _collect(loaded, req, found, set(), budget, limit, plain=fast)
            except TooComplex:
                out.append("too complex")
            else:
                out.append(([(c.root_id, c.picks) for c in found], budget.steps))
                if summary:
                    check_summary_rows(conn, loaded, found, names.rc_names)
    return out


#: how many answers :func:`check_summary_rows` compared
SUMMARISED = [0]


def check_summary_rows(
    conn: Any, loaded: Loaded, found: list[Any], rc_names: Mapping[int, str]
) -> None:
    """The summaries written from the inventory rows a group's statement read
    (``summary_rows``: every root, a group that carries them) are those the summary
    statements read on their own, for the trees of ``found``."""
    if loaded.inventory is None or not found:
        return
    root_of = loaded.data.root_of
    trees = {root_of[rp] for c in found for rp in c.picks}
    alone = fetch_summaries(conn, trees, rc_names, written=False)
    merged = fetch_summaries(conn, trees, rc_names, written=False, inventory=loaded.inventory)
    assert merged.render() == alone.render()
    assert orjson.loads(_render.summaries_json(merged, None)) == alone.render()
    SUMMARISED[0] += 1


def check_requests_json(db: Database, req: CandidatesRequest) -> int:
    """The templates' JSON of ``req``'s answer is the layouts' and ``to_placement``'s."""
    answer = allocation_candidates(db, req)
    rows = answer._request_rows
    if rows is None:
        return 0
    text = requests_json(rows)
    assert text is not None  # the generators' uuids are plain
    assert text == _laid_out_json(rows)
    assert text.encode() == orjson.dumps(answer.to_placement()["allocation_requests"])
    return len(rows.chosen)


def _backends() -> list[str]:
    return ["sqlite", "postgresql", "mysql"] if IN_CI else ["sqlite"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", _backends())
def test_fast_paths_equal_the_general_path(backend: str, request: pytest.FixtureRequest) -> None:
    db = request.getfixturevalue("_migrated")(backend)
    seen = {"examples": 0, "answers": 0, "over": 0}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(
        cloud=shuffled_clouds(),
        req=requests(),
        max_steps=st.sampled_from([1_000_000, 1_000_000, 3, 10, 30]),
        limit=st.sampled_from([None, None, 1, 2, 3, 5]),
    )
    def check(cloud: Cloud, req: CandidatesRequest, max_steps: int, limit: int | None) -> None:
        insert(db, cloud)
        general, fast, grouped, summary = general_and_fast(db, req, max_steps, limit)
        assert fast == general and grouped == general and summary == general
        seen["examples"] += 1
        seen["over"] += general == "too complex"
        seen["answers"] += check_requests_json(db, req) > 0

    summarised = SUMMARISED[0]
    check()
    # whole-cloud summaries from a group's rows were compared (most random requests
    # have a group that carries them)
    assert SUMMARISED[0] > summarised
    # the property ran and compared some non-empty answers (a share of them would be a
    # statistical bound that a run of unlucky draws fails: it did once in ~1,300)
    assert seen["examples"] > 0 and seen["answers"] > 0


#: Whole-cloud shapes of the bench cloud's kind: one group of one, two or three
#: classes (a NUMA host's classes on either node), two one-class groups, an isolated
#: pair, a granular group beside the unsuffixed one (VCPU asked twice: room columns).
SHAPES = (
    "resources=VCPU:1",
    "resources=VCPU:1,MEMORY_MB:512",
    "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10",
    "resources_A=VCPU:1&resources_B=MEMORY_MB:512&group_policy=none",
    "resources_A=VCPU:1&resources_B=MEMORY_MB:512&group_policy=isolate",
    "resources=VCPU:1,MEMORY_MB:512&resources_A=VCPU:1&group_policy=none",
)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mysql"])
def test_fast_paths_on_numa_hosts(backend: str, request: pytest.FixtureRequest) -> None:
    """Hosts with and without NUMA nodes (classes on the host or on either node, some
    used up), uuids in an order unlike the ids': every shape the same both ways."""
    db = request.getfixturevalue("_migrated")(backend)
    provs = []
    for h in range(6):
        host = f"h{h}"
        numa = h % 3 != 0
        own = {"VCPU": Inv(total=4), "MEMORY_MB": Inv(total=2048, max_unit=2048)}
        provs.append(
            Prov(
                host,
                inventory={"DISK_GB": Inv(total=100)} | ({} if numa else own),
                uuid=f"{(7 * h) % 10:08d}-0000-4000-8000-{h:012d}",
            )
        )
        for n in range(2 if numa else 0):
            provs.append(
                Prov(
                    f"{host}n{n}",
                    parent=host,
                    inventory={"VCPU": Inv(total=2), "MEMORY_MB": Inv(total=1024, max_unit=1024)},
                    used={"VCPU": 2} if (h, n) == (4, 1) else {},
                    uuid=f"{(3 * h + 5 * n) % 10:08d}-0000-4000-8000-{h:06d}{n + 1:06d}",
                )
            )
    insert(db, Cloud(provs))
    for query in SHAPES:
        req = parse_candidates(query)
        summarised = SUMMARISED[0]
        general, fast, grouped, summary = general_and_fast(db, req, 1_000_000)
        assert fast == general == grouped == summary and general != "too complex", query
        # its summaries from the group's rows (a shape with VCPU asked twice has no
        # group that carries them: every group needs room columns)
        assert SUMMARISED[0] == summarised + ("&resources_A=VCPU:1" not in query), query
        for limit in (1, 2, 3, 4, 7):
            general, fast, grouped, summary = general_and_fast(db, req, 1_000_000, limit)
            assert fast == general == grouped == summary and general != "too complex", (
                query,
                limit,
            )
        assert check_requests_json(db, req) > 0, query


#: Forbidden traits on hosts, on a NUMA node, on a node's host only: the one pass's
#: ``fits`` tests them by a ``NOT EXISTS`` against the holders read once
#: (``forbidden_once``; the correlated form on PostgreSQL).
FORBIDDEN = (
    "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_GPU",
    "resources=VCPU:1&required=!CUSTOM_GPU,!CUSTOM_SLOW",
    "resources=VCPU:1,MEMORY_MB:512&required=!CUSTOM_SLOW&member_of=!in:"
    "00000000-0000-4000-8000-00000000dead",
)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mysql"])
def test_forbidden_traits_in_the_one_pass(backend: str, request: pytest.FixtureRequest) -> None:
    """Summaries from the group's rows (the one pass) and the general path agree with
    forbidden traits, which exclude the providers holding them and only those."""
    db = request.getfixturevalue("_migrated")(backend)
    own = {"VCPU": Inv(total=4), "MEMORY_MB": Inv(total=2048, max_unit=2048)}
    node = {"VCPU": Inv(total=2), "MEMORY_MB": Inv(total=1024, max_unit=1024)}
    traits = {"h1": {"CUSTOM_GPU"}, "h3": {"CUSTOM_SLOW"}, "h4n0": {"CUSTOM_GPU"}}
    provs = []
    for h in range(6):
        numa = h >= 4
        provs.append(
            Prov(
                f"h{h}",
                inventory={} if numa else dict(own),
                traits=traits.get(f"h{h}", set()),
                uuid=f"{h:08d}-0000-4000-8000-{0:012d}",
            )
        )
        for n in range(2 if numa else 0):
            name = f"h{h}n{n}"
            provs.append(
                Prov(
                    name,
                    parent=f"h{h}",
                    inventory=dict(node),
                    traits=traits.get(name, set()),
                    uuid=f"{h:08d}-0000-4000-8000-{n + 1:012d}",
                )
            )
    insert(db, Cloud(provs))
    for query in FORBIDDEN:
        req = parse_candidates(query.replace("member_of=!in:", "member_of=!"))
        summarised = SUMMARISED[0]
        general, fast, grouped, summary = general_and_fast(db, req, 1_000_000)
        assert summary == general == fast and general != "too complex", query
        assert SUMMARISED[0] == summarised + 1, query
        answer = allocation_candidates(db, req).to_placement()
        used = {rp for ar in answer["allocation_requests"] for rp in ar["allocations"]}
        by_uuid = {p.uuid: p.name for p in provs}
        forbidden = {t for t in ("CUSTOM_GPU", "CUSTOM_SLOW") if f"!{t}" in query}
        holders = {name for name, held in traits.items() if held & forbidden}
        assert {by_uuid[u] for u in used} == {
            p.name for p in provs if p.inventory and p.name not in holders
        }, query
