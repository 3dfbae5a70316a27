"""Property test: on small random clouds (≤ 12 providers, nested trees, sharing
providers, roots or children, providers in several aggregates) and random requests
(any-of and forbidden traits, repeated ``member_of``, resourceless groups under
``isolate``, some with identical granular groups), rpquery's candidate set equals the
brute-force reference of ``tests/reference.py`` and its summaries cover exactly the
trees the candidates allocate from; with ``limit`` it is a subset of that size.

SQLite runs 60 examples by default; with ``CI=true`` every backend runs (30
examples each, to keep the suite's budget).
"""

from __future__ import annotations

import dataclasses
import os

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rpquery.db import Database
from rpquery.errors import InvalidRequest
from rpquery.read.candidates import AllocationCandidates, allocation_candidates
from rpquery.read.request import CandidatesRequest, RequestGroup
from tests.conftest import IN_CI, empty_database
from tests.factories import allocate, provider, trait_id
from tests.reference import (
    SHARING,
    Cloud,
    Inv,
    Prov,
    iter_keys,
    reference_candidates,
    summarised,
)

RCS = ("VCPU", "MEMORY_MB", "DISK_GB")
TRAITS = ("CUSTOM_A", "CUSTOM_B", "CUSTOM_C")
AGGS = ("a0000000-0000-4000-8000-000000000001", "a0000000-0000-4000-8000-000000000002")
EXAMPLES = int(os.environ.get("RPQUERY_PROPERTY_EXAMPLES", "30" if IN_CI else "60"))


def sometimes(names: tuple[str, ...]) -> st.SearchStrategy[tuple[str, ...]]:
    """No name three times out of four, else one of ``names``."""
    return st.sampled_from([(), (), ()] * len(names) + [(n,) for n in names])


@st.composite
def inventories(draw: st.DrawFn) -> dict[str, Inv]:
    out = {}
    for rc in draw(st.sets(st.sampled_from(RCS), min_size=1, max_size=2)):
        total = draw(st.integers(1, 6))
        out[rc] = Inv(
            total=total,
            reserved=draw(st.sampled_from((0, 0, 1))),
            max_unit=draw(st.integers(1, 6)),
            step_size=draw(st.sampled_from((1, 1, 2))),
            # 1.4 is 1.39999998 as MariaDB's 32-bit FLOAT: (5 or 6 - 1) x 1.4 must give 7
            allocation_ratio=draw(st.sampled_from((1.0, 1.5, 1.4))),
        )
    return out


def provider_uuid(i: int) -> str:
    """Uuids fixed by position, so requests can name a tree (``in_tree``) up front."""
    return f"00000000-0000-4000-8000-{i:012d}"


@st.composite
def clouds(draw: st.DrawFn, child_sharing: bool = False) -> Cloud:
    """Random clouds; sharing providers are roots, or any provider without children
    with ``child_sharing``."""
    provs: list[Prov] = []
    for i in range(draw(st.integers(1, 12))):
        parents = [p.name for p in provs if SHARING not in p.traits]
        parent = draw(st.one_of(st.none(), st.sampled_from(parents))) if parents else None
        sharing = (parent is None or child_sharing) and draw(st.integers(0, 4)) == 0
        inv = draw(inventories())
        provs.append(
            Prov(
                name=f"p{i}",
                uuid=provider_uuid(i),
                parent=parent,
                inventory=inv,
                used={rc: draw(st.sampled_from((0, 0, 1, 2))) for rc in inv},
                traits=set(draw(st.sets(st.sampled_from(TRAITS), max_size=2)))
                | ({SHARING} if sharing else set()),
                aggs=set(draw(st.sets(st.sampled_from(AGGS), max_size=2))),
            )
        )
    return Cloud(provs)


@st.composite
def groups(draw: st.DrawFn, suffix: str, resourceless: bool = False) -> RequestGroup:
    resources = (
        {}
        if resourceless
        else {
            rc: draw(st.integers(1, 2))
            for rc in draw(
                st.sets(st.sampled_from(RCS), min_size=1, max_size=2 if not suffix else 1)
            )
        }
    )
    required = tuple(
        frozenset(s)
        for s in draw(
            st.lists(
                st.sets(st.sampled_from(TRAITS), min_size=1, max_size=2),
                max_size=1,
                min_size=1 if resourceless else 0,
            )
        )
    )
    # repeated member_of (an AND of any-of sets) one time in three
    member_of = draw(
        st.one_of(
            st.just(()),
            st.just(()),
            st.lists(st.frozensets(st.sampled_from(AGGS), min_size=1), min_size=1, max_size=2),
        )
    )
    return RequestGroup(
        suffix=suffix,
        resources=resources,
        required=required,
        # may overlap a required any-of set: valid unless it forbids all of one set
        forbidden=frozenset(draw(sometimes(TRAITS))),
        member_of=tuple(member_of),
        forbidden_aggs=frozenset(draw(sometimes(AGGS))),
        in_tree=draw(st.sampled_from([None] * 12 + [provider_uuid(i) for i in range(3)])),
    )


@st.composite
def requests(draw: st.DrawFn) -> CandidatesRequest:
    gs = []
    if draw(st.booleans()):
        gs.append(draw(groups("")))
    n_granular = draw(st.integers(0 if gs else 1, 2))
    gs.extend(draw(groups(f"_{i}")) for i in range(n_granular))
    if n_granular:  # identical groups: the search walks them once per multiset
        twins = draw(st.integers(0, 1 if gs[0].suffix == "" else 2))
        gs.extend(dataclasses.replace(gs[-1], suffix=f"_T{i}") for i in range(twins))
    subtree: tuple[tuple[str, ...], ...] = ()
    if n_granular and draw(st.booleans()):
        gs.append(draw(groups("_R", resourceless=True)))
        subtree = (("_0", "_R"),)
    try:
        return CandidatesRequest(
            groups=tuple(gs),
            group_policy=draw(st.sampled_from(("none", "isolate"))),
            root_required=frozenset(draw(sometimes(TRAITS))),
            root_forbidden=frozenset(draw(sometimes(TRAITS))),
            same_subtree=subtree,
        )
    except InvalidRequest:
        assume(False)
        raise


def insert(db: Database, cloud: Cloud) -> None:
    empty_database(db)
    refs = {}
    with db.begin() as conn:
        for t in TRAITS:
            trait_id(conn, t)
        for p in cloud.p.values():
            inv = {
                rc: {
                    "total": i.total,
                    "reserved": i.reserved,
                    "max_unit": i.max_unit,
                    "step_size": i.step_size,
                    "allocation_ratio": i.allocation_ratio,
                }
                for rc, i in p.inventory.items()
            }
            parent = refs[p.parent] if p.parent else None
            ref = provider(
                conn,
                p.name,
                uuid=p.uuid,
                parent=parent,
                inventory=inv,
                traits=sorted(p.traits),
                aggregates=sorted(p.aggs),
            )
            refs[p.name] = ref
            for rc, used in p.used.items():
                if used:
                    allocate(conn, f"c-{p.name}-{rc}", ref, rc, used)


def keys_of(result: AllocationCandidates, cloud: Cloud) -> set:
    name = {p.uuid: p.name for p in cloud.p.values()}
    return iter_keys(
        (
            {name[u]: dict(r) for u, r in ar.allocations.items()},
            {s: tuple(name[u] for u in us) for s, us in ar.mappings.items()},
        )
        for ar in result.allocation_requests
    )


def _backends() -> list[str]:
    return ["sqlite", "postgresql", "mysql"] if IN_CI else ["sqlite"]


def _compare(db: Database, cloud: Cloud, req: CandidatesRequest, limit: int) -> set:
    """rpquery's answer (and its ``limit`` form) against the reference; the expected set."""
    insert(db, cloud)
    expected = reference_candidates(cloud, req)
    answer = allocation_candidates(db, req)
    assert keys_of(answer, cloud) == expected
    # summaries: the trees the candidates allocate from, no more (Placement's rule)
    assert {s.name for s in answer.provider_summaries.values()} == summarised(cloud, expected)
    limited = dataclasses.replace(req, limit=limit)
    limited_answer = allocation_candidates(db, limited)
    some = keys_of(limited_answer, cloud)
    assert some <= expected and len(some) == min(limit, len(expected))
    assert {s.name for s in limited_answer.provider_summaries.values()} == summarised(cloud, some)
    return expected


@pytest.mark.slow
@pytest.mark.parametrize("backend", _backends())
def test_candidates_equal_brute_force(backend: str, request: pytest.FixtureRequest) -> None:
    db = request.getfixturevalue("_migrated")(backend)
    seen = {"examples": 0, "non_empty": 0}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        derandomize=True,
    )
    @given(cloud=clouds(child_sharing=True), req=requests(), limit=st.integers(1, 3))
    def check(cloud: Cloud, req: CandidatesRequest, limit: int) -> None:
        expected = _compare(db, cloud, req, limit)
        seen["examples"] += 1
        seen["non_empty"] += bool(expected)

    check()
    # the generator must produce clouds where candidates exist, or the test proves little;
    # derandomized, so this holds of the same examples every run: random draws missed
    # the tenth now and then (4 of 60 with candidates), failing a run whose every answer
    # matched (random clouds and requests are the differential test's, make soak's)
    assert seen["non_empty"] >= seen["examples"] // 10 > 0, seen


@st.composite
def forbidden_root_clouds(draw: st.DrawFn) -> Cloud:
    """A random cloud plus a root in the first aggregate whose sharing child (every
    class) is in the second only, and a root in the second only (random clouds rarely
    have such a child: one in 2,000)."""
    cloud = draw(clouds(child_sharing=True))
    root = Prov("fr", uuid=provider_uuid(20), inventory=draw(inventories()), aggs={AGGS[0]})
    child = Prov(
        "fr_ss",
        uuid=provider_uuid(21),
        parent="fr",
        inventory={rc: Inv(total=4, max_unit=4) for rc in RCS},
        traits={SHARING} | set(draw(st.sets(st.sampled_from(TRAITS), max_size=2))),
        aggs={AGGS[1]},
    )
    other = Prov("fo", uuid=provider_uuid(22), inventory=draw(inventories()), aggs={AGGS[1]})
    return Cloud([*cloud.p.values(), root, child, other])


@st.composite
def forbidding_the_root(draw: st.DrawFn) -> CandidatesRequest:
    """A random request whose unsuffixed group forbids the first aggregate."""
    req = draw(requests())
    assume(any(not g.suffix for g in req.groups))
    try:
        groups = tuple(
            g if g.suffix else dataclasses.replace(g, forbidden_aggs=frozenset(AGGS[:1]))
            for g in req.groups
        )
        return dataclasses.replace(req, groups=groups)
    except InvalidRequest:
        assume(False)
        raise


@pytest.mark.slow
@pytest.mark.parametrize("backend", _backends())
def test_sharing_child_of_a_forbidden_root_equals_brute_force(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """The unsuffixed group's ``member_of=!A`` with a sharing child (not in A) of a root
    in A: it serves other trees outside A, never its own (as Placement)."""
    db = request.getfixturevalue("_migrated")(backend)
    seen = {"examples": 0, "served_elsewhere": 0}

    @settings(
        max_examples=EXAMPLES // 2,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(cloud=forbidden_root_clouds(), req=forbidding_the_root(), limit=st.integers(1, 3))
    def check(cloud: Cloud, req: CandidatesRequest, limit: int) -> None:
        expected = _compare(db, cloud, req, limit)
        seen["examples"] += 1
        seen["served_elsewhere"] += any(
            "fr_ss" in names for _, maps in expected for s, names in maps if not s
        )

    # the closing assertion (some example had the sharing child serve another tree) depends
    # on the draw: fresh draws, a few times at most, until one has (every draw is checked)
    for _ in range(5):
        check()
        if seen["served_elsewhere"]:
            break
    assert seen["served_elsewhere"] > 0, seen
