"""Property test of capacity headroom: on the random clouds and requests of
``test_candidates_property`` (nested trees, sharing providers (children too), granular groups,
isolate, same_subtree), each host's headroom equals the brute-force reference of
``tests/reference_headroom.py``; the total is their sum when no host takes from a
sharing provider outside its tree, and never more than that sum otherwise.

Single-group requests are drawn half of the time, so the SQL path is checked as much
as the search. SQLite by default; with ``CI=true`` every backend (fewer examples).
"""

from __future__ import annotations

import dataclasses
import os

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rpquery.errors import InvalidRequest
from rpquery.insight._headroom import headroom, single_group_sql
from rpquery.read.request import CandidatesRequest
from tests.conftest import IN_CI
from tests.reference import Cloud
from tests.reference_headroom import reference_headroom, uses_sharing
from tests.test_candidates_property import clouds, groups, insert, requests

EXAMPLES = int(os.environ.get("RPQUERY_PROPERTY_EXAMPLES", "20" if IN_CI else "40"))


@st.composite
def one_group(draw: st.DrawFn) -> CandidatesRequest:
    g = draw(groups(draw(st.sampled_from(("", "_G")))))
    if not g.suffix:
        g = dataclasses.replace(g, required=())
    try:  # a suffixed group may forbid every trait of its required set: rule 1's 400
        return CandidatesRequest(groups=(g,))
    except InvalidRequest:
        assume(False)
        raise


def _backends() -> list[str]:
    return ["sqlite", "postgresql", "mysql"] if IN_CI else ["sqlite"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", _backends())
def test_headroom_equals_brute_force(backend: str, request: pytest.FixtureRequest) -> None:
    db = request.getfixturevalue("_migrated")(backend)
    seen = {"examples": 0, "sql": 0, "search": 0, "room": 0}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        derandomize=True,  # the guards below hold of the same examples every run
    )
    @given(cloud=clouds(child_sharing=True), req=st.one_of(one_group(), requests()))
    def check(cloud: Cloud, req: CandidatesRequest) -> None:
        insert(db, cloud)
        expected = reference_headroom(cloud, req)
        got = headroom(db, req)
        assert got.method == ("sql" if single_group_sql(req) else "search")
        assert {h.name: h.count for h in got.hosts} == expected
        assert got.total == sum(h.in_total for h in got.hosts)
        if uses_sharing(cloud, req):
            assert max(expected.values(), default=0) <= got.total <= sum(expected.values())
        else:
            assert got.total == sum(expected.values())
        seen["examples"] += 1
        seen[got.method] += 1
        seen["room"] += bool(expected)

    check()
    assert seen["sql"] > 0 and seen["search"] > 0
    assert seen["room"] >= seen["examples"] // 10 > 0
