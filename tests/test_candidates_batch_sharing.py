"""A batch's own sharing pairs (read with its roots, a ``limit``'s walk on SQLite) are
the cloud's pairs restricted to the batch's trees, as the names statement's pairs were."""

from __future__ import annotations

import json

import pytest

from rpquery.db import Database
from rpquery.generator import CloudSpec, load_cloud
from rpquery.read.candidates import _execute as ex
from rpquery.read.candidates import allocation_candidates
from rpquery.read.candidates._batches import ROOT_IDS, Roots
from rpquery.read.request import parse_candidates

QUERY = "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10"
SHARING = "MISC_SHARES_VIA_AGGREGATE"


def _roots(db: Database) -> list[int]:
    with db.connect() as c:
        rows = c.exec_driver_sql(
            "SELECT id FROM resource_providers WHERE parent_provider_id IS NULL ORDER BY id"
        )
        return [int(r[0]) for r in rows]


def test_batch_pairs_are_the_clouds_restricted(db: Database) -> None:
    # small aggregates: some batches share with a sharing provider, some do not
    load_cloud(db, CloudSpec(hosts=40, sharing=2, seed=7, hosts_per_aggregate=8))
    req = parse_candidates(QUERY)
    roots = _roots(db)
    with db.connect() as conn:
        names, every = ex.fetch_names_sharing(conn, req)
        lazy_names, lazy = ex.fetch_names_sharing(conn, req, per_batch=True)
        assert lazy_names == names
        assert every.pairs and not lazy.pairs and not lazy.shared_with
        assert lazy.rc_ids == every.rc_ids == {names.rc_ids["DISK_GB"]}
        sizes = []
        for start in range(0, len(roots), 7):
            batch = Roots(roots[start : start + 7], ROOT_IDS, {}, False)
            key = ex.BatchRoots.IDS
            got = ex._batch_shared_with(conn, req, names, batch, key, lazy)
            assert got == ex._shared_with(batch, key, every)
            sizes.append(len(got))
        # more roots than a batch reads its own pairs for, and every root: every pair
        many = Roots(list(range(1, ex.PAIRS_BATCH_MOST + 2)), ROOT_IDS, {}, False)
        got = ex._batch_shared_with(conn, req, names, many, ex.BatchRoots.IDS, lazy)
        assert got == ex._shared_with(many, ex.BatchRoots.IDS, every)
        whole = Roots(None, None, {}, True)
        assert ex._batch_shared_with(conn, req, names, whole, None, lazy) == every.shared_with
    assert 0 < sum(sizes) < len(roots) and 0 in sizes, sizes


@pytest.mark.parametrize("limit", [1, 3, 10, 25])
def test_limited_answers_with_sharing_are_unchanged(sqlite_db: Database, limit: int) -> None:
    """On SQLite a ``limit`` reads each batch's pairs: its candidates are among the
    whole answer's (which reads every pair at once), as many as asked for."""
    load_cloud(sqlite_db, CloudSpec(hosts=40, sharing=2, seed=7, hosts_per_aggregate=8))
    whole = allocation_candidates(sqlite_db, QUERY).to_placement()
    some = allocation_candidates(sqlite_db, f"{QUERY}&limit={limit}").to_placement()
    shared = {u for u, s in whole["provider_summaries"].items() if SHARING in s.get("traits", ())}
    assert shared  # sharing providers serve some of the candidates
    assert len(some["allocation_requests"]) == limit
    every = [json.dumps(r, sort_keys=True) for r in whole["allocation_requests"]]
    assert {json.dumps(r, sort_keys=True) for r in some["allocation_requests"]} <= set(every)
