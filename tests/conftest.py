"""One parametrized ``db`` fixture runs every database test on SQLite, PostgreSQL and
MariaDB/MySQL.

Where each server comes from (docs/design.md#backends-and-tests), in order:

1. ``RPQUERY_TEST_POSTGRESQL_URL`` / ``RPQUERY_TEST_MYSQL_URL``;
2. a server already listening on localhost (127.0.0.1:5432 as ``postgres``,
   127.0.0.1:3306 as ``root``);
3. a testcontainers container, when a Docker engine answers;
4. otherwise the backend is skipped with a loud reason — except under ``CI=true``,
   where a missing backend is an error.

Each pytest run creates its own throw-away database on every server (so several runs
can share one server), migrates it once, and empties it before every test (standard
resource classes and traits stay). ``RPQUERY_TEST_BACKENDS=sqlite,postgresql`` limits
the backends.

``galera`` is a fourth backend, only when named (``RPQUERY_TEST_BACKENDS=galera``, ``make
test-galera``): MariaDB on a 3-node Galera cluster the session starts on free ports
(tests/galera_cluster.py), reached through a round-robin proxy with no connection pool,
so every connection a test, a thread or a forked worker opens lands on the next node.
The nodes run with ``wsrep_sync_wait=7`` (a statement waits for the write sets
committed anywhere before it: tests read their own writes through another node). A test
that relies on what one server gives and Galera does not across nodes is marked
``@pytest.mark.single_server("why")``: on ``galera`` it runs as an expected failure.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from benchmarks.config import answers
from rpquery.db import Database
from rpquery.read.candidates import _trait_cache as trait_cache
from rpquery.store import catalog, migrations
from rpquery.store.tables import (
    CUSTOM_RC_MIN_ID,
    metadata,
    resource_classes,
    resource_providers,
    traits,
)
from tests.gabbi import counts as gabbi_counts

ALL_BACKENDS = ("sqlite", "postgresql", "mysql")
OPT_IN_BACKENDS = ("galera",)
SERVER_BACKENDS = ("postgresql", "mysql")
LOCAL_DEFAULTS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
    "mysql": "mysql+pymysql://root@127.0.0.1:3306/mysql?charset=utf8mb4",
}
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

_ran: Counter[str] = Counter()


def selected_backends() -> tuple[str, ...]:
    wanted = os.environ.get("RPQUERY_TEST_BACKENDS")
    if not wanted:
        return ALL_BACKENDS
    names = {w.strip() for w in wanted.split(",")}
    return tuple(b for b in ALL_BACKENDS + OPT_IN_BACKENDS if b in names)


#: The opt-in backends selected for this run (parameters of ``db`` and ``server_db``).
OPTED_IN = tuple(b for b in OPT_IN_BACKENDS if b in selected_backends())
#: tests/test_galera_backend.py checks the galera backend itself: collected only with it.
collect_ignore = [] if "galera" in OPTED_IN else ["test_galera_backend.py"]


# ----------------------------------------------------------------- server discovery


@dataclass
class Server:
    backend: str
    admin_url: sa.URL | None
    reason: str = ""
    container: object | None = None


def _from_container(backend: str) -> Server | None:
    try:
        import docker

        docker.from_env(timeout=3).ping()
    except Exception:
        return None
    if backend == "postgresql":
        from testcontainers.postgres import PostgresContainer

        pg = PostgresContainer("postgres:16", driver="psycopg").start()
        return Server(backend, make_url(pg.get_connection_url()), container=pg)
    from testcontainers.mysql import MySqlContainer

    my = MySqlContainer("mariadb:11").start()
    url = make_url(my.get_connection_url()).set(drivername="mysql+pymysql")
    return Server(backend, url, container=my)


def _galera() -> Server:
    from tests.galera_cluster import GaleraCluster

    cluster = GaleraCluster("backend", sync_wait=7, proxy=True)
    try:
        cluster.up()
    except Exception as error:  # noqa: BLE001 - reported as the backend's reason
        return Server("galera", None, f"galera: the cluster did not start: {error}")
    return Server("galera", make_url(cluster.proxy_url), container=cluster)


def _discover(backend: str) -> Server:
    if backend == "galera":
        return _galera()
    env = os.environ.get(f"RPQUERY_TEST_{backend.upper()}_URL")
    if env:
        if answers(env):
            return Server(backend, make_url(env))
        return Server(backend, None, f"{backend}: {env} from the environment does not answer")
    if answers(LOCAL_DEFAULTS[backend]):
        return Server(backend, make_url(LOCAL_DEFAULTS[backend]))
    found = _from_container(backend)
    if found:
        return found
    return Server(
        backend,
        None,
        f"{backend}: no RPQUERY_TEST_{backend.upper()}_URL, nothing listening on "
        "localhost and no Docker engine for testcontainers",
    )


@pytest.fixture(scope="session")
def servers() -> Iterator[dict[str, Server]]:
    found = {b: _discover(b) for b in SERVER_BACKENDS + OPTED_IN if b in selected_backends()}
    yield found
    for server in found.values():
        if server.container is not None:
            server.container.stop()  # type: ignore[attr-defined]


# ----------------------------------------------------------------- per-run databases


def _create_database(server: Server) -> tuple[sa.URL, str]:
    assert server.admin_url is not None
    name = f"rpq_t_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(server.admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    engine.dispose()
    return server.admin_url.set(database=name), name


def _drop_database(server: Server, name: str) -> None:
    assert server.admin_url is not None
    engine = sa.create_engine(server.admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        if server.backend == "postgresql":
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        else:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
    engine.dispose()


@pytest.fixture(scope="session")
def database_url(servers, tmp_path_factory):  # type: ignore[no-untyped-def]
    """A factory: ``database_url(backend)`` gives a fresh, empty database's URL, or
    skips (fails under CI) when the backend is unavailable."""
    made: list[tuple[Server, str]] = []

    def make(backend: str) -> str:
        if backend not in selected_backends():
            pytest.skip(f"{backend} not in RPQUERY_TEST_BACKENDS")
        if backend == "sqlite":
            path = tmp_path_factory.mktemp("sqlite") / f"rpq_{uuid.uuid4().hex[:8]}.db"
            return f"sqlite:///{path}"
        server = servers[backend]
        if server.admin_url is None:
            message = f"BACKEND MISSING — {server.reason}"
            if IN_CI:
                pytest.fail(message + " (CI=true: every backend is required)", pytrace=False)
            pytest.skip(message)
        url, name = _create_database(server)
        made.append((server, name))
        return url.render_as_string(hide_password=False)

    yield make
    for server, name in made:
        _drop_database(server, name)


@pytest.fixture(scope="session")
def _migrated(database_url):  # type: ignore[no-untyped-def]
    cache: dict[str, Database] = {}

    def get(backend: str) -> Database:
        if backend not in cache:
            # galera: no pool, so that each checkout is a new connection to the next node
            pool = {"poolclass": sa.pool.NullPool} if backend == "galera" else {}
            db = Database(database_url(backend), **pool)
            migrations.upgrade(db)
            cache[backend] = db
        return cache[backend]

    yield get
    for db in cache.values():
        db.dispose()


_STANDARD_TRAITS = sorted(catalog.STANDARD_TRAITS)


def empty_database(db: Database) -> None:
    """Delete every row except the standard resource classes and traits; the
    database's cached trait sets go too (each test starts cold)."""
    trait_cache.forget(db.engine)
    with db.begin() as conn:
        conn.execute(
            resource_providers.update().values(parent_provider_id=None, root_provider_id=None)
        )
        for table in reversed(metadata.sorted_tables):
            if table is resource_classes:
                conn.execute(table.delete().where(table.c.id >= CUSTOM_RC_MIN_ID))
            elif table is traits:  # custom ones, and any other a test made up
                conn.execute(table.delete().where(table.c.name.not_in(_STANDARD_TRAITS)))
            else:
                conn.execute(table.delete())


def _db_for(request: pytest.FixtureRequest, backend: str) -> Database:
    marker = request.node.get_closest_marker("single_server")
    if backend == "galera" and marker is not None:
        request.applymarker(pytest.mark.xfail(reason=f"single server only: {marker.args[0]}"))
    db: Database = request.getfixturevalue("_migrated")(backend)
    empty_database(db)
    _ran[backend] += 1
    return db


@pytest.fixture(params=ALL_BACKENDS + OPTED_IN)
def db(request: pytest.FixtureRequest) -> Database:
    """A migrated, empty database on each backend in turn."""
    return _db_for(request, request.param)


@pytest.fixture(params=SERVER_BACKENDS + OPTED_IN)
def server_db(request: pytest.FixtureRequest) -> Database:
    """Like ``db`` but only PostgreSQL and MariaDB (concurrency tests)."""
    return _db_for(request, request.param)


@pytest.fixture
def sqlite_db(request: pytest.FixtureRequest) -> Database:
    """A migrated, empty SQLite database (for tests that need just one backend)."""
    return _db_for(request, "sqlite")


# ----------------------------------------------------------------- the run's counts
#
# Under pytest-xdist (``make test``: ``-n 2``) the tests run in worker processes: each
# worker hands its ``_ran`` to the controller in ``workeroutput`` at its end, and the
# controller, which prints the summary, adds them up. The gabbi counts come from the test
# reports, which the controller gets from every worker.

_WORKER_KEY = "rpquery_ran"


def pytest_runtest_logreport(report):  # type: ignore[no-untyped-def]
    gabbi_counts.count(report)


def pytest_sessionfinish(session, exitstatus):  # type: ignore[no-untyped-def]
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker
        workeroutput[_WORKER_KEY] = dict(_ran)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # type: ignore[no-untyped-def]
    _ran.update(getattr(node, "workeroutput", {}).get(_WORKER_KEY, {}))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):  # type: ignore[no-untyped-def]
    """``--dist loadgroup`` (``make test``) with the groups of tests/xdist_scopes.py."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.xdist_scopes import Scheduling

    return Scheduling(config, log)


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    if hasattr(config, "workeroutput"):
        return  # a worker's summary is not shown: the controller prints the whole run's
    for line in gabbi_counts.summary_lines():
        terminalreporter.write_line(line)
    parts = [f"{b}={_ran.get(b, 0)}" for b in ALL_BACKENDS + OPTED_IN]
    terminalreporter.write_sep("=", "rpquery database tests per backend: " + " ".join(parts))
