"""A batch's own sharing pairs (read with its roots, a ``limit``'s walk on SQLite) are
the cloud's pairs restricted to the batch's trees, as the names statement's pairs were."""

from __future__ import annotations

import json

import pytest

from rpquery.db import Database
from rpquery.generator import CloudSpec, load_cloud
from rpquery.read.candidates import _batches as bt
from rpquery.read.candidates import _sharing as sh
from rpquery.read.candidates import allocation_candidates
from rpquery.read.request import parse_candidates

QUERY = "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10"
SHARING = "MISC_SHARES_VIA_AGGREGATE"
#: text of the batch's pairs statement alone (``_sql.batch_sharing_of``)
BATCH_PAIRS_SQL = "aggregate_id + 0"


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
        names, every = sh.fetch_names_sharing(conn, req)
        lazy_names, lazy = sh.fetch_names_sharing(conn, req, per_batch=True)
        assert lazy_names == names
        assert every.pairs and not lazy.pairs and not lazy.shared_with
        assert lazy.rc_ids == every.rc_ids == {names.rc_ids["DISK_GB"]}
        sizes = []
        for start in range(0, len(roots), 7):
            batch = roots[start : start + 7]
            got = sh.batch_pairs(conn, req, names, batch, lazy)
            assert got == sh.batch_pairs(conn, req, names, batch, every)
            assert got == {r: every.shared_with[r] for r in batch if r in every.shared_with}
            sizes.append(len(got))
        assert not lazy.every  # no batch was too large: every pair was never read
        # more roots than a batch reads its own pairs for, and every root: every pair
        many = list(range(1, sh.PAIRS_BATCH_MOST + 2))
        got = sh.batch_pairs(conn, req, names, many, lazy)
        assert got == sh.batch_pairs(conn, req, names, many, every)
        assert lazy.every == [every.shared_with]
        assert sh.batch_pairs(conn, req, names, None, lazy) == every.shared_with
    assert 0 < sum(sizes) < len(roots) and 0 in sizes, sizes


def test_pairs_are_read_per_batch_on_sqlite_only(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only where a round trip costs little (SQLite), only for a first batch of at most
    ``PAIRS_BATCH_MOST`` roots, and only once the roots are counted."""
    small, large = bt.Batch(12, walk=True), bt.Batch(sh.PAIRS_BATCH_MOST + 1, walk=True)
    bt._ROOT_COUNT.put(db.engine.url, 0)  # counted (this empty database's roots)
    with db.connect() as conn:
        assert sh.pairs_per_batch(conn, small) is (db.engine.dialect.name == "sqlite")
        assert not sh.pairs_per_batch(conn, large)
        assert not sh.pairs_per_batch(conn, bt.Batch())  # every root
        # a count older than ROOT_COUNT_AGE: the names statement counts the roots again
        monkeypatch.setattr(sh, "ROOT_COUNT_AGE", -1.0)
        assert not sh.pairs_per_batch(conn, small)


@pytest.mark.parametrize("limit", [1, 3, 10, 25])
def test_limited_answers_with_sharing_are_unchanged(
    sqlite_db: Database, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite a ``limit`` walked in batches reads each batch's pairs: its
    candidates are among the whole answer's (which reads every pair at once), as many
    as asked for."""
    monkeypatch.setattr(bt.Batches, "ONE_BATCH", 0)  # walked, as a large cloud is
    load_cloud(sqlite_db, CloudSpec(hosts=40, sharing=2, seed=7, hosts_per_aggregate=8))
    whole = allocation_candidates(sqlite_db, QUERY).to_placement()  # (counts the roots)
    with sqlite_db.count_statements() as counter:
        some = allocation_candidates(sqlite_db, f"{QUERY}&limit={limit}").to_placement()
    assert any(BATCH_PAIRS_SQL in s for s in counter.statements), counter.statements
    shared = {u for u, s in whole["provider_summaries"].items() if SHARING in s.get("traits", ())}
    assert shared  # sharing providers serve some of the candidates
    assert len(some["allocation_requests"]) == limit
    every = [json.dumps(r, sort_keys=True) for r in whole["allocation_requests"]]
    assert {json.dumps(r, sort_keys=True) for r in some["allocation_requests"]} <= set(every)
