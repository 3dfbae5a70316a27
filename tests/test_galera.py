"""rpquery on a real 3-node MariaDB Galera cluster on loopback (scripts/galera.sh).

The cluster is started once per session (``galera`` fixture) and stopped at the end.
It runs when ``CI=true`` (where a cluster that cannot start is a failure) or
``RPQUERY_TEST_GALERA=1``; otherwise the tests are skipped with that reason.

What is checked: every table has a primary key (Galera replicates row events keyed by
it); a certification conflict between two nodes is a retriable ``ConcurrentUpdate``;
16 writer processes spread over the three nodes never over-allocate, every acknowledged
claim is on every node and the trigger-kept summaries are exact on every node
(``rpquery db check``); a node killed mid-run and restarted loses nothing acknowledged
and converges; a node cut off from the others (1047 on every statement) is left for
another node by the writes and reads that retry.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate, RpqueryError
from rpquery.read.candidates import allocation_candidates
from rpquery.store import dialects, migrations
from rpquery.store.tables import allocations, consumers, metadata, resource_providers
from rpquery.usage.provider_totals import verify_provider_usages
from rpquery.usage.summary import verify_usage_summary
from rpquery.write import allocations as alloc_api
from rpquery.write.allocations import ConsumerAllocations
from tests.factories import new_uuid, provider
from tests.galera_cluster import GaleraCluster

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
WANTED = IN_CI or os.environ.get("RPQUERY_TEST_GALERA", "") == "1"
#: Reads after writes made through other nodes: wait until this node has applied them.
SYNC_READS = {"init_command": "SET SESSION wsrep_sync_wait=1"}

pytestmark = pytest.mark.galera


@pytest.fixture(scope="module")
def cluster() -> Iterator[GaleraCluster]:
    """A running cluster of this module's own (free ports, own data directory)."""
    if not WANTED:
        pytest.skip("Galera tests run under CI=true or RPQUERY_TEST_GALERA=1")
    running = GaleraCluster("tests", proxy=True)
    try:
        running.up()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        if IN_CI:
            pytest.fail(f"GALERA CLUSTER DID NOT START — {error}", pytrace=False)
        pytest.skip(f"Galera cluster did not start: {error}")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def nodes(cluster: GaleraCluster) -> Iterator[list[str]]:
    """A fresh migrated rpquery database on the cluster: its URL through each node."""
    name = f"rpq_g_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin_urls = cluster.urls()
    admin = sa.create_engine(admin_urls[0], isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    urls = [str(sa.make_url(u).set(database=name)) for u in admin_urls]
    db = Database(urls[0])
    migrations.upgrade(db)
    db.dispose()
    yield urls
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
    admin.dispose()


def synced(url: str) -> Database:
    return Database(url, connect_args=SYNC_READS)


# ------------------------------------------------------------------ schema rules


def test_every_rpquery_table_has_a_primary_key() -> None:
    missing = [t.name for t in metadata.sorted_tables if not t.primary_key.columns]
    assert missing == []


def test_every_migrated_table_on_the_cluster_has_a_primary_key(nodes: list[str]) -> None:
    db = synced(nodes[1])
    with db.connect() as conn:
        tables = set(sa.inspect(conn).get_table_names())
        without = sorted(
            t for t in tables if not sa.inspect(conn).get_pk_constraint(t)["constrained_columns"]
        )
        engines = set(
            conn.execute(
                sa.text(
                    "SELECT DISTINCT engine FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'"
                )
            ).scalars()
        )
    db.dispose()
    assert {t.name for t in metadata.sorted_tables} <= tables
    assert without == []
    assert engines == {"InnoDB"}  # Galera replicates InnoDB only


def test_no_table_locks_in_the_package() -> None:
    hits = []
    for path in (ROOT / "rpquery").rglob("*.py"):
        text = path.read_text()
        for needle in ("GET_LOCK", "LOCK TABLES", "lock_tables"):
            if needle in text:
                hits.append(f"{path.name}: {needle}")
    assert hits == []


# ------------------------------------------------------------------ certification


@pytest.mark.parametrize("code", [1213, 1205, 1180])
def test_galera_commit_failures_are_retryable(code: int) -> None:
    """Galera reports a lost certification as 1213 (deadlock) at COMMIT, sometimes as
    1205 or 1180 ("Got error ... during COMMIT"): all mean "retry on fresh data"."""
    import pymysql

    error = sa.exc.OperationalError("COMMIT", {}, pymysql.err.OperationalError(code, "wsrep"))
    assert dialects.is_retryable(error)


def test_a_certification_conflict_at_commit_is_a_retriable_concurrent_update(
    nodes: list[str],
) -> None:
    """Two nodes update the same provider row; the second to commit fails certification
    (1213 at COMMIT), which rpquery raises as a retriable ConcurrentUpdate."""
    one, two = Database(nodes[0]), Database(nodes[1])
    with one.begin() as conn:
        rp = provider(conn, "cert", inventory={"VCPU": 8})
    time.sleep(0.5)
    bump = resource_providers.update().where(resource_providers.c.id == rp.id)
    error: BaseException | None = None
    try:
        with two.begin() as conn2:
            conn2.execute(bump.values(generation=resource_providers.c.generation + 1))
            with one.begin() as conn1:
                conn1.execute(bump.values(generation=resource_providers.c.generation + 1))
            # conn1 committed on node 1: node 2's open transaction loses at commit.
    except ConcurrentUpdate as caught:
        error = caught
    one.dispose()
    two.dispose()
    assert isinstance(error, ConcurrentUpdate), error
    cause = error.__cause__
    assert isinstance(cause, sa.exc.DBAPIError) and dialects.is_retryable(cause)
    assert cause.orig.args[0] in (1213, 1180), cause.orig.args  # type: ignore[union-attr]


# ------------------------------------------------------------------ racing writers

PROVIDERS = 4
CAPACITY = 12
WRITERS = 16
CLAIMS = 5


def _writer(
    url: str,
    rp_uuids: list[str],
    claims: int,
    pause: float,
    seed: int,
    out: multiprocessing.Queue,  # type: ignore[type-arg]
) -> None:  # type: ignore[type-arg]
    """Claim 1 VCPU ``claims`` times on random providers through ``url``; report every
    consumer whose claim was acknowledged, and those whose outcome is unknown."""
    rng = random.Random(seed)
    db = Database(url, pool_size=1, max_overflow=0)
    acked, unknown, refused = [], [], 0
    for _ in range(claims):
        time.sleep(pause)
        consumer = str(uuid.uuid4())
        request = ConsumerAllocations(
            consumer, "proj", "user", "INSTANCE", None, {rng.choice(rp_uuids): {"VCPU": 1}}
        )
        try:
            alloc_api.replace_allocations(db, request)
            acked.append((consumer, time.time()))
        except RpqueryError as error:
            if error.code.startswith("rpquery.allocation.capacity") or isinstance(
                error, ConcurrentUpdate
            ):
                refused += 1
            else:  # connection lost (a killed node): the commit may or may not be in
                unknown.append((consumer, f"{error.code}: {error}"))
                db.dispose()
    db.dispose()
    out.put((acked, unknown, refused))


def _run_writers(
    urls: list[str], rp_uuids: list[str], claims: int = CLAIMS, pause: float = 0.0
) -> tuple[list[multiprocessing.Process], multiprocessing.Queue]:  # type: ignore[type-arg]
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(urls[i % len(urls)], rp_uuids, claims, pause, i, out))
        for i in range(WRITERS)
    ]
    for p in procs:
        p.start()
    return procs, out


def _collect(
    procs: list[multiprocessing.Process], out: multiprocessing.Queue
) -> tuple[dict[str, float], dict[str, str]]:  # type: ignore[type-arg]
    """Acknowledged consumers (with the wall-clock time of their acknowledgement) and
    consumers whose claim's outcome is unknown (connection lost), with the error."""
    acked: dict[str, float] = {}
    unknown: dict[str, str] = {}
    for _ in procs:
        a, u, _refused = out.get(timeout=240)
        acked.update(a)
        unknown.update(u)
    for p in procs:
        p.join(timeout=30)
    return acked, unknown


def _providers(url: str, capacity: int = CAPACITY) -> list[str]:
    db = Database(url)
    with db.begin() as conn:
        rps = [
            provider(conn, f"g{i}", inventory={"VCPU": capacity}).uuid for i in range(PROVIDERS)
        ]
    db.dispose()
    return rps


def _assert_exact_on(
    url: str, acked_at: dict[str, float], unknown: Collection[str], capacity: int = CAPACITY
) -> None:
    acked = set(acked_at)
    db = synced(url)
    with db.connect() as conn:
        per_provider = conn.execute(
            sa.select(
                allocations.c.resource_provider_id, sa.func.sum(allocations.c.used)
            ).group_by(allocations.c.resource_provider_id)
        ).all()
        present = set(
            conn.execute(
                sa.select(consumers.c.uuid).join(
                    allocations, allocations.c.consumer_id == consumers.c.uuid
                )
            ).scalars()
        )
    assert all(int(used) <= capacity for _, used in per_provider), (url, per_provider)
    assert acked <= present, (url, len(acked - present))
    assert sum(int(used) for _, used in per_provider) == len(present)  # 1 unit each
    assert present <= acked | set(unknown), (url, len(present - acked - set(unknown)))
    assert verify_usage_summary(db) == []
    assert verify_provider_usages(db) == []
    db.dispose()
    checked = subprocess.run(
        [sys.executable, "-m", "rpquery", "--db", url, "db", "check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_sixteen_writers_over_three_nodes_never_over_allocate(nodes: list[str]) -> None:
    rps = _providers(nodes[0])
    time.sleep(0.5)
    procs, out = _run_writers(nodes, rps)
    acked, unknown = _collect(procs, out)
    assert unknown == {}, sorted(set(unknown.values()))
    # 80 claims of 1 unit for 48 units: at most 48 acknowledged (a claim that lost
    # every retry to other writers is refused too), each one unit on every node.
    assert 0 < len(acked) <= PROVIDERS * CAPACITY
    for url in nodes:
        _assert_exact_on(url, acked, unknown)


def test_a_node_killed_mid_run_loses_nothing_acknowledged_and_rejoins(
    cluster: GaleraCluster, nodes: list[str]
) -> None:
    rps = _providers(nodes[0], capacity=1000)  # room for every claim: none refused
    time.sleep(0.5)
    procs, out = _run_writers(nodes, rps, claims=10, pause=0.3)
    time.sleep(1.0)
    cluster.run("kill", "2")
    killed_at = time.time()
    acked, unknown = _collect(procs, out)
    # The writers on nodes 1 and 3 went on while node 2 was down.
    assert any(at > killed_at for at in acked.values()), "no write acknowledged after the kill"
    cluster.run("start", "2")
    for url in nodes:  # node 2 included: it has caught up (IST or SST)
        _assert_exact_on(url, acked, unknown, capacity=1000)


# ------------------------------------------------------------------ a node cut off


def _pooled_on(url: str, node: str) -> Database:
    """A ``Database`` over the round-robin proxy whose one pooled connection is on
    ``node`` (connections the proxy sent elsewhere are thrown away until then)."""
    db = Database(url, pool_size=1, max_overflow=0)
    for _ in range(12):
        with db.connect() as conn:
            if conn.exec_driver_sql("SELECT @@wsrep_node_name").scalar() == node:
                return db
            conn.invalidate()
    raise AssertionError(f"the proxy never sent a connection to {node}")


def _on_node(admin_url: str, sql: str) -> list[tuple[Any, ...]]:
    """``sql`` on one node in autocommit, by PyMySQL itself (no ``ROLLBACK`` on return:
    a node outside the primary component refuses that too)."""
    import pymysql

    url = sa.make_url(admin_url)
    conn = pymysql.connect(
        host=url.host, port=url.port, user=url.username or "root", autocommit=True
    )
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def _isolate(admin_url: str, isolated: bool) -> None:
    """Cut the node off from the others (``gmcast.isolate``: it leaves the primary
    component, as a node stalled past ``evs.suspect_timeout`` does) or let it rejoin;
    wait until it refuses statements, or is Synced again."""
    _on_node(admin_url, f"SET GLOBAL wsrep_provider_options = 'gmcast.isolate={int(isolated)}'")
    wanted = {"wsrep_ready": "OFF"} if isolated else {"wsrep_ready": "ON"}
    if not isolated:
        wanted["wsrep_local_state_comment"] = "Synced"
    deadline = time.time() + 60
    while True:
        status = dict(
            _on_node(
                admin_url,
                "SHOW STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_local_state_comment')",
            )
        )
        if wanted.items() <= status.items():
            return
        assert time.time() < deadline, f"gmcast.isolate={int(isolated)}: still {status}"
        time.sleep(0.2)


def test_a_node_cut_off_from_the_cluster_is_left_for_another(
    cluster: GaleraCluster, nodes: list[str]
) -> None:
    """Node 3 leaves the primary component: it refuses every statement with 1047 ("WSREP
    has not yet prepared node for application use", SQLSTATE 08S01) but answers pings,
    so the pool's pre-ping keeps a connection to it. Through the round-robin proxy a
    claim whose pooled connection is on node 3 is retried on a new connection (the
    refused one is discarded) and acknowledged by another node; so is a candidates
    read (retried once on a closed connection). Through node 3 alone the claim is a
    retriable ``ConcurrentUpdate`` to the end, nothing written. Before, each was a
    ``DatabaseError`` (``rpquery.db.error``): a claim of unknown outcome, as the
    galera contention run saw once on a loaded machine (a node stalled that long)."""
    rps = _providers(nodes[0])
    time.sleep(0.5)
    proxied = str(sa.make_url(cluster.proxy_url).set(database=sa.make_url(nodes[0]).database))
    writer, reader = _pooled_on(proxied, "node3"), _pooled_on(proxied, "node3")
    alone = Database(nodes[2], pool_size=1, max_overflow=0)
    admin = cluster.urls()[2]
    claims = [
        ConsumerAllocations(new_uuid(), "proj", "user", "INSTANCE", None, {rps[0]: {"VCPU": 1}})
        for _ in range(2)
    ]
    refused: BaseException | None = None
    _isolate(admin, True)
    try:
        try:
            alloc_api.replace_allocations(alone, claims[0])
        except RpqueryError as error:
            refused = error
        alloc_api.replace_allocations(writer, claims[1])
        with writer.connect() as conn:
            assert conn.exec_driver_sql("SELECT @@wsrep_node_name").scalar() != "node3"
        found = allocation_candidates(reader, "resources=VCPU:1")
    finally:
        _isolate(admin, False)
        for db in (writer, reader, alone):
            db.dispose()
    assert isinstance(refused, ConcurrentUpdate), refused
    cause = refused.__cause__
    assert isinstance(cause, sa.exc.DBAPIError) and cause.connection_invalidated
    assert cause.orig.args[0] == dialects.NODE_NOT_READY, cause.orig.args  # type: ignore[union-attr]
    assert len(found.allocation_requests) == PROVIDERS
    for url in nodes:  # the acknowledged claim everywhere, the refused one nowhere
        _assert_exact_on(url, {claims[1].consumer_uuid: 0.0}, set())


def test_the_trigger_kept_summaries_replicate_row_based(nodes: list[str]) -> None:
    db = synced(nodes[2])
    with db.connect() as conn:
        fmt = conn.exec_driver_sql("SELECT @@binlog_format").scalar_one()
    db.dispose()
    assert fmt == "ROW"
    rps = _providers(nodes[0])
    writer = synced(nodes[1])  # sees node 0's providers and classes before it writes
    for rp in rps:
        alloc_api.replace_allocations(
            writer,
            ConsumerAllocations(new_uuid(), "p", "u", "INSTANCE", None, {rp: {"VCPU": 3}}),
        )
    writer.dispose()
    for url in nodes:
        reader = synced(url)
        assert verify_provider_usages(reader) == []
        assert verify_usage_summary(reader) == []
        reader.dispose()


# ------------------------------------------------------------------ diagnostics


def test_a_failure_message_says_what_each_node_holds(
    cluster: GaleraCluster, nodes: list[str]
) -> None:
    """What the stalled-node run appends to its failure message (docs/deployment.md):
    each node's state, the stored ``sql_mode`` of the triggers (rpquery's sessions'
    TRADITIONAL, the same on every node: TOI runs the DDL with the sender's mode) and
    what a write firing them does there."""
    from tests.reliability.test_contention import PROBE

    told = cluster.diagnose(sa.make_url(nodes[0]).database or "", "allocations", PROBE)
    assert told.count("Synced") == 3, told
    assert told.count(", probe ok") == 3, told
    lines = [line for line in told.splitlines() if "rpq_usage_alloc_insert" in line]
    assert len(lines) == 3 and all("TRADITIONAL" in line for line in lines), told


def test_galera_keep_leaves_the_data_directory(tmp_path: Path) -> None:
    """``GALERA_KEEP=1``: ``scripts/galera.sh down`` keeps ``GALERA_DIR`` (the nodes'
    logs of a failed run); without it the directory goes."""
    script = ROOT / "scripts" / "galera.sh"
    for keep, kept in (("1", True), ("", False)):
        data = tmp_path / f"keep{keep or 0}"
        data.mkdir()
        (data / "node2.err").write_text("a log\n")
        env = {**os.environ, "GALERA_DIR": str(data), "GALERA_KEEP": keep}
        done = subprocess.run(
            ["bash", str(script), "down"], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert (data / "node2.err").exists() is kept, done.stdout
