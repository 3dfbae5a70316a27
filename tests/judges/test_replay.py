"""Nova's and osc-placement's recorded traffic to Placement 16.0, replayed against rpquery.

``tests/judges/traffic/*.jsonl.gz`` holds every request the functional tests of nova 34.0.0
(tests/judges/lists/nova-ci.txt) and osc-placement 4.9.1 (all 160) sent Placement through its
test fixture, and Placement's answers (``make record-traffic`` re-records them). One test here
per recorded case (one fixture, so one empty database) and backend: the case's requests are
sent in order to rpquery's app in-process and every answer must equal Placement's
(tests/judges/replay.py says what "equal" forgives, and why). No nova needed at test time.

Cases still expected to differ are listed, with the reason, in replay-manifest.yaml: each is a
strict xfail, so a case that starts to pass fails the run until its entry is removed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rpquery.api.app import make_app
from rpquery.db import Database
from tests.gabbi import manifest
from tests.judges import replay, traffic

MANIFEST = Path(__file__).with_name("replay-manifest.yaml")
_apps: dict[int, Any] = {}


def _cases() -> list[Any]:
    params = []
    for path in sorted(traffic.TRAFFIC.glob("*.jsonl.gz")):
        suite = path.name.removesuffix(".jsonl.gz")
        for case, exchanges in traffic.load(path).items():
            name = f"{suite}:{case}"
            params.append(pytest.param(name, exchanges, id=name))
    return params


CASES = _cases()
EXPECTED = manifest.load(MANIFEST)


def test_traffic_is_recorded() -> None:
    """The recordings are there (a missing file must not pass as zero cases)."""
    assert {p.name for p in traffic.TRAFFIC.glob("*.jsonl.gz")} >= {
        "nova.jsonl.gz",
        "osc.jsonl.gz",
    }
    assert len(CASES) > 200


def test_manifest_names_recorded_cases() -> None:
    """Every expected failure names a case that exists (a stale entry would hide nothing)."""
    names = {param.values[0] for param in CASES}
    assert sorted(set(EXPECTED) - names) == []


def _app(db: Database) -> Any:
    if id(db) not in _apps:
        _apps[id(db)] = make_app(db, auth="noauth2")
    return _apps[id(db)]


@pytest.mark.parametrize(("case", "exchanges"), CASES)
def test_replay(
    request: pytest.FixtureRequest, db: Database, case: str, exchanges: list[Any]
) -> None:
    backend = request.node.callspec.params["db"]
    reason = manifest.reason_for(EXPECTED, case, backend)
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    differences = replay.replay_case(_app(db), exchanges)
    if differences:
        pytest.fail(replay.report(differences), pytrace=False)
