"""Reads on a real PostgreSQL hot standby, writes on its primary (scripts/pg-replica.sh).

The primary and standby are started once for the module on free loopback ports, under
their own temporary directory, and stopped at the end. They run when ``CI=true`` (where
a pair that cannot start is a failure) or ``RPQUERY_TEST_REPLICA=1``.

What is checked: ``connect()`` reads on the standby and ``begin()`` writes on the
primary; with replay paused the standby's candidates are stale, yet a claim for a host
that is now full is refused on the primary, and the retry on fresh data succeeds; a
standby lagging beyond ``max_replica_lag`` and a stopped standby are skipped for the
primary; the CLI's ``--replica`` reads from the standby.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.errors import RpqueryError
from rpquery.read.candidates import allocation_candidates
from rpquery.store import migrations
from rpquery.write import allocations as alloc_api
from rpquery.write.allocations import ConsumerAllocations
from tests.factories import new_uuid, provider

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "pg-replica.sh"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
WANTED = IN_CI or os.environ.get("RPQUERY_TEST_REPLICA", "") == "1"

pytestmark = pytest.mark.replica


def _free_port_pair() -> int:
    rng = random.Random(os.getpid() + 1)
    for _ in range(50):
        port = rng.randrange(40000, 49000, 2)
        try:
            for p in (port, port + 1):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    return 5442


ENV = {
    **os.environ,
    "PG_REPLICA_DIR": f"/tmp/rpquery-pg-{os.getpid()}",
    "PG_REPLICA_PORT": str(_free_port_pair()),
}


def pg_replica(*args: str) -> str:
    done = subprocess.run(
        ["bash", str(SCRIPT), *args], env=ENV, capture_output=True, text=True, timeout=180
    )
    if done.returncode:
        raise RuntimeError(f"pg-replica.sh {' '.join(args)}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[str, str]]:
    """Admin URLs (database ``postgres``) of the primary and its hot standby."""
    if not WANTED:
        pytest.skip("replica tests run under CI=true or RPQUERY_TEST_REPLICA=1")
    try:
        pg_replica("up")
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        subprocess.run(["bash", str(SCRIPT), "down"], env=ENV, capture_output=True, timeout=120)
        if IN_CI:
            pytest.fail(f"POSTGRESQL PRIMARY + STANDBY DID NOT START — {error}", pytrace=False)
        pytest.skip(f"primary + standby did not start: {error}")
    primary, standby = pg_replica("urls").split()
    try:
        yield primary, standby
    finally:
        subprocess.run(["bash", str(SCRIPT), "down"], env=ENV, capture_output=True, timeout=120)


def wait_until(check: object, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"not true after {seconds} s: {check}")


def caught_up(standby_admin: str) -> bool:
    engine = sa.create_engine(standby_admin)
    try:
        with engine.connect() as conn:
            return bool(
                conn.exec_driver_sql(
                    "SELECT pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()"
                ).scalar()
            )
    except sa.exc.OperationalError:
        return False
    finally:
        engine.dispose()


@pytest.fixture
def urls(pair: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """A fresh migrated database: its URL on the primary and on the standby."""
    primary_admin, standby_admin = pair
    name = f"rpq_r_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = sa.create_engine(primary_admin, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    primary = str(sa.make_url(primary_admin).set(database=name))
    standby = str(sa.make_url(standby_admin).set(database=name))
    db = Database(primary)
    migrations.upgrade(db)
    db.dispose()
    wait_until(lambda: caught_up(standby_admin))
    yield primary, standby
    resume(standby_admin)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.dispose()


def resume(standby: str) -> None:
    engine = sa.create_engine(standby, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT pg_wal_replay_resume()")
    except sa.exc.OperationalError:
        pass
    engine.dispose()


def pause(standby: str) -> None:
    engine = sa.create_engine(standby, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT pg_wal_replay_pause()")
        wait_until(
            lambda: (
                conn.exec_driver_sql("SELECT pg_get_wal_replay_pause_state()").scalar() == "paused"
            )
        )
    engine.dispose()


def on_standby(db: Database) -> bool:
    with db.connect() as conn:
        return bool(conn.exec_driver_sql("SELECT pg_is_in_recovery()").scalar())


def claim(db: Database, rp_uuid: str, vcpu: int) -> None:
    alloc_api.replace_allocations(
        db, ConsumerAllocations(new_uuid(), "p", "u", "INSTANCE", None, {rp_uuid: {"VCPU": vcpu}})
    )


def test_reads_go_to_the_standby_and_writes_to_the_primary(urls: tuple[str, str]) -> None:
    primary, standby = urls
    db = Database(primary, replicas=[standby])
    assert on_standby(db)
    with db.begin() as conn:
        assert conn.exec_driver_sql("SELECT pg_is_in_recovery()").scalar() is False
        rp = provider(conn, "written", inventory={"VCPU": 4})
    assert not on_standby(Database(primary))
    wait_until(lambda: rp.uuid in allocation_candidates(db, "resources=VCPU:1").provider_summaries)
    db.dispose()


def test_stale_candidates_from_a_paused_standby_cannot_overcommit(urls: tuple[str, str]) -> None:
    """Replay paused: the standby still offers a host that is full on the primary; the
    claim on it is refused by the primary's capacity check, and a retry on fresh
    candidates (replay resumed) lands on the host with room."""
    primary, standby = urls
    db = Database(primary, replicas=[standby], max_replica_lag=3600)
    with db.begin() as conn:
        full = provider(conn, "soon_full", inventory={"VCPU": 4}).uuid
        roomy = provider(conn, "roomy", inventory={"VCPU": 2}).uuid
    standby_admin = str(sa.make_url(standby).set(database="postgres"))
    wait_until(lambda: caught_up(standby_admin))
    pause(standby_admin)
    claim(db, full, 4)  # on the primary: the host is now full
    stale = allocation_candidates(db, "resources=VCPU:3")
    assert on_standby(db)
    assert full in stale.provider_summaries  # the standby has not seen the claim
    with pytest.raises(RpqueryError) as refused:
        claim(db, full, 3)
    assert refused.value.code == "rpquery.allocation.capacity_exceeded"
    resume(standby_admin)
    wait_until(lambda: caught_up(standby_admin))
    fresh = allocation_candidates(db, "resources=VCPU:2")
    assert full not in fresh.provider_summaries and roomy in fresh.provider_summaries
    claim(db, roomy, 2)
    with Database(primary).connect() as conn:
        used = conn.exec_driver_sql("SELECT sum(used) FROM allocations").scalar()
    assert used == 6
    db.dispose()


def test_a_standby_lagging_beyond_the_bound_is_skipped(urls: tuple[str, str]) -> None:
    primary, standby = urls
    db = Database(primary, replicas=[standby], max_replica_lag=0.5, replica_check_interval=0)
    assert on_standby(db)
    standby_admin = str(sa.make_url(standby).set(database="postgres"))
    pause(standby_admin)
    with db.begin() as conn:
        provider(conn, "unreplayed", inventory={"VCPU": 1})
    time.sleep(1.0)
    assert not on_standby(db)  # lag > 0.5 s: the primary answers
    [status] = db.replica_status()
    assert status["up"] and status["lag"] > 0.5 and not status["used"]
    resume(standby_admin)
    wait_until(lambda: on_standby(db))
    db.dispose()


def test_a_stopped_standby_is_skipped_for_the_primary(urls: tuple[str, str]) -> None:
    primary, standby = urls
    db = Database(primary, replicas=[standby], replica_check_interval=0)
    assert on_standby(db)
    pg_replica("stop-standby")
    try:
        assert not on_standby(db)
        assert allocation_candidates(db, "resources=VCPU:1").allocation_requests == ()
        assert db.replica_status()[0]["up"] is False
    finally:
        pg_replica("start-standby")
    wait_until(lambda: on_standby(db))
    db.dispose()


def test_the_cli_reads_from_the_replica(urls: tuple[str, str]) -> None:
    primary, standby = urls
    db = Database(primary)
    with db.begin() as conn:
        provider(conn, "cli_host", inventory={"VCPU": 2})
    db.dispose()
    standby_admin = str(sa.make_url(standby).set(database="postgres"))
    wait_until(lambda: caught_up(standby_admin))
    pause(standby_admin)
    db = Database(primary)
    with db.begin() as conn:
        provider(conn, "cli_unreplayed", inventory={"VCPU": 2})
    db.dispose()
    env = {**os.environ, "RPQUERY_DB_URL": primary, "RPQUERY_DB_MAX_REPLICA_LAG": "3600"}

    def providers(*extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "rpquery", *extra, "providers", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "cli_unreplayed" in providers()
    assert "cli_unreplayed" not in providers("--replica", standby)
    assert "cli_host" in providers("--replica", standby)
    env["RPQUERY_DB_REPLICA_URLS"] = standby
    assert "cli_unreplayed" not in providers()
