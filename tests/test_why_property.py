"""Property test of the rejection reasons: on the random clouds and requests of
``test_candidates_property`` (nested trees, sharing providers (children too), granular, isolate,
same_subtree), the hosts ``explain_no_candidates`` says fit are exactly the roots the
brute-force reference finds a candidate for, and the counts add up to the hosts.

SQLite by default; with ``CI=true`` every backend (fewer examples each).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpquery.insight import _why as why
from rpquery.insight._why import explain_no_candidates
from rpquery.read.request import CandidatesRequest
from tests.conftest import IN_CI
from tests.reference import Cloud, reference_candidates
from tests.test_candidates_property import clouds, insert, requests
from tests.test_headroom_property import one_group

EXAMPLES = int(os.environ.get("RPQUERY_PROPERTY_EXAMPLES", "20" if IN_CI else "40"))


def _backends() -> list[str]:
    return ["sqlite", "postgresql", "mysql"] if IN_CI else ["sqlite"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", _backends())
def test_fit_hosts_equal_brute_force(backend: str, request: pytest.FixtureRequest) -> None:
    db = request.getfixturevalue("_migrated")(backend)
    seen = {"examples": 0, "fit": 0, "rejected": 0}

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
        roots = [n for n, p in cloud.p.items() if p.parent is None]
        expected = {r for r in roots if reference_candidates(cloud, req, only_root=r)}
        answer = explain_no_candidates(db, req, examples=len(cloud.p))
        assert answer.hosts == len(roots)
        assert answer.fit + sum(r.count for r in answer.reasons) == answer.hosts
        assert {h.name for h in answer.fit_examples} == expected
        if len(req.groups) == 1:  # counted in SQL or per host in Python: the same
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(why, "counted_in_sql", lambda *_: False)
                assert explain_no_candidates(db, req, examples=len(cloud.p)) == answer
        rejected = [h.name for r in answer.reasons for h in r.examples]
        assert len(rejected) == len(set(rejected)) == len(roots) - len(expected)
        seen["examples"] += 1
        seen["fit"] += bool(expected)
        seen["rejected"] += bool(rejected)

    check()
    assert seen["fit"] >= seen["examples"] // 10 > 0
    assert seen["rejected"] >= seen["examples"] // 10
