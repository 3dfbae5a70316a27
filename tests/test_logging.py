"""rpquery's logging (docs/architecture.md#logging): one DEBUG line per read and per
transaction on the logger of its layer, a WARNING per retry and give-up, no password in
any line, nothing printed unless the application (or ``rpquery --log-level``) asks.

Everything runs on real databases; the retries come from real conflicts (a SQLite write
lock held by another connection, a provider generation bumped by another transaction).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from rpquery import (
    ConsumerAllocations,
    Database,
    Inventory,
    allocation_candidates,
    create_provider,
    headroom,
    list_providers,
    project_usages,
    replace_allocations,
    set_inventories,
)
from rpquery.cli import main
from rpquery.db import BatchEvent
from rpquery.errors import Conflict
from rpquery.retry import RetryEvent
from rpquery.server_groups import groups as sg
from rpquery.store.tables import resource_providers
from tests.factories import new_uuid, provider
from tests.serving import free_port, serve_command
from tests.test_retry import interfering

#: ``what: kind[ outcome], N statement(s) in X ms (Y ms in the database)``
BATCH_LINE = re.compile(
    r"^(?P<what>\w+): (?P<kind>read|transaction)(?: (?P<outcome>[^,]+))?, "
    r"(?P<n>\d+) statements? in (?P<ms>\d+\.\d\d) ms \((?P<db_ms>\d+\.\d\d) ms in the database\)$"
)


def batches(caplog: pytest.LogCaptureFixture, logger: str) -> list[BatchEvent]:
    return [r.rpquery_batch for r in caplog.records if r.name == logger]  # type: ignore[attr-defined]


def _cloud(db: Database, hosts: int = 3) -> list[str]:
    with db.begin() as conn:
        return [provider(conn, f"cn{i}", inventory={"VCPU": 8}).uuid for i in range(hosts)]


# ---------------------------------------------------------------- one line per batch


def test_a_read_logs_one_debug_line_with_its_statements_and_timings(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _cloud(db)
    caplog.set_level(logging.DEBUG, logger="rpquery.read")
    with db.count_statements() as counter:
        answer = allocation_candidates(db, "resources=VCPU:2&limit=2")
    assert len(answer.allocation_requests) == 2
    records = [r for r in caplog.records if r.name == "rpquery.read"]
    assert len(records) == 1  # the executor's statements are one batch, not one line each
    record = records[0]
    assert record.levelno == logging.DEBUG
    line = BATCH_LINE.match(record.getMessage())
    assert line is not None, record.getMessage()
    assert (line["what"], line["kind"], line["outcome"]) == ("allocation_candidates", "read", None)
    event: BatchEvent = record.rpquery_batch  # type: ignore[attr-defined]
    # names, the group, the summaries (a small cloud: one batch, no roots statement)
    assert event.statements == int(line["n"]) == counter.count >= 3
    assert 0 < event.database_seconds <= event.seconds
    assert float(line["ms"]) == pytest.approx(event.seconds * 1000, abs=0.01)


def test_a_transaction_logs_its_statements_and_whether_it_committed(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rpquery.write")
    with db.count_statements() as counter:
        rp = create_provider(db, "cn1")
    with pytest.raises(Conflict) as taken:
        create_provider(db, "cn1")
    committed, rolled_back = batches(caplog, "rpquery.write")
    assert (committed.what, committed.kind, committed.outcome) == (
        "create_provider",
        "transaction",
        "committed",
    )
    assert committed.statements == counter.count > 0
    assert rolled_back.outcome == f"rolled back ({taken.value.code})"
    assert "create_provider: transaction rolled back (rpquery.provider.duplicate), " in (
        caplog.records[-1].getMessage()
    )
    assert rp.name == "cn1"


def _generation(db: Database, uuid: str) -> int:
    with db.connect() as conn:
        stmt = sa.select(resource_providers.c.generation).where(resource_providers.c.uuid == uuid)
        return int(conn.execute(stmt).scalar_one())


ENTRY_POINTS: list[tuple[str, str, Callable[[Database, list[str]], object]]] = [
    ("rpquery.read", "list_providers", lambda db, _: list_providers(db, "resources=VCPU:1")),
    ("rpquery.usage", "project_usages", lambda db, _: project_usages(db, "p")),
    ("rpquery.insight", "headroom", lambda db, _: headroom(db, "resources=VCPU:1")),
    (
        "rpquery.write",
        "set_inventories",
        lambda db, hosts: set_inventories(
            db, hosts[0], {"VCPU": Inventory(16)}, generation=_generation(db, hosts[0])
        ),
    ),
    (
        "rpquery.write",
        "replace_allocations",
        lambda db, hosts: replace_allocations(
            db,
            ConsumerAllocations(new_uuid(), "p", "u", "INSTANCE", None, {hosts[0]: {"VCPU": 1}}),
        ),
    ),
    (
        "rpquery.server_groups",
        "create_group",
        lambda db, _: sg.create_group(db, "g", "anti-affinity", "p", "u"),
    ),
]


@pytest.mark.parametrize(
    ("logger", "entry", "call"), ENTRY_POINTS, ids=[e for _, e, _ in ENTRY_POINTS]
)
def test_each_layer_logs_on_its_own_logger_named_by_its_entry_point(
    db: Database,
    caplog: pytest.LogCaptureFixture,
    logger: str,
    entry: str,
    call: Callable[[Database, list[str]], object],
) -> None:
    hosts = _cloud(db, hosts=1)
    caplog.set_level(logging.DEBUG, logger="rpquery")
    call(db, hosts)
    mine = batches(caplog, logger)
    assert mine and {b.what for b in mine} == {entry}, [r.getMessage() for r in caplog.records]
    assert all(b.statements > 0 and b.seconds > 0 for b in mine)


def test_nothing_is_logged_below_debug(
    sqlite_db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _cloud(sqlite_db)
    caplog.set_level(logging.INFO, logger="rpquery")
    allocation_candidates(sqlite_db, "resources=VCPU:1")
    create_provider(sqlite_db, "cn9")
    assert caplog.records == []


# ---------------------------------------------------------------- retries


def test_a_retried_write_warns_with_the_code_and_the_attempt(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """A real conflict: on SQLite another connection holds the write lock past the
    writer's busy timeout; on a server another transaction bumps the provider's
    generation just before the writer's conditional ``UPDATE``."""
    (host,) = _cloud(db, hosts=1)
    request = ConsumerAllocations(new_uuid(), "p", "u", "INSTANCE", None, {host: {"VCPU": 1}})
    caplog.set_level(logging.WARNING, logger="rpquery")
    if db.dialect_name == "sqlite":
        holder = Database(db.url)
        writer = Database(db.url, pool_size=1, max_overflow=0)
        try:
            with writer.connect() as conn:
                conn.exec_driver_sql("PRAGMA busy_timeout=50")
            locked, release = threading.Event(), threading.Event()

            def hold() -> None:
                with holder.begin():
                    locked.set()
                    release.wait(10)

            thread = threading.Thread(target=hold)
            thread.start()
            locked.wait(10)
            threading.Timer(0.3, release.set).start()
            replace_allocations(writer, request)
            thread.join(10)
        finally:
            holder.dispose()
            writer.dispose()
        expected = "rpquery.concurrent_update"
    else:

        def bump(conn: sa.Connection) -> None:
            conn.execute(
                resource_providers.update()
                .where(resource_providers.c.uuid == host)
                .values(generation=resource_providers.c.generation + 1)
            )

        with interfering(db, "UPDATE RESOURCE_PROVIDERS", bump) as done:
            replace_allocations(db, request)
        assert done == [1]
        expected = "rpquery.provider.generation_conflict"
    warnings = [r for r in caplog.records if r.name == "rpquery.write"]
    assert warnings and all(r.levelno == logging.WARNING for r in warnings)
    events: list[RetryEvent] = [r.rpquery_retry for r in warnings]  # type: ignore[attr-defined]
    assert [(e.attempt, e.code, e.gave_up) for e in events] == [
        (n, expected, False) for n in range(1, len(events) + 1)
    ]
    message = warnings[0].getMessage()
    assert message.startswith(f"allocation write: attempt 1 of 10 failed ({expected}: ")
    assert re.search(r"\); retrying in \d+ ms$", message), message
    assert f"({expected})" not in message  # the code once, not again at the end


# ---------------------------------------------------------------- silent by default

SCRIPT = """
import sys
from rpquery import Database, allocation_candidates
from rpquery.errors import ConcurrentUpdate
from rpquery.retry import RetryPolicy, retrying
{configure}
db = Database(sys.argv[1])
print(len(allocation_candidates(db, "resources=VCPU:1").allocation_requests))
def conflict():
    raise ConcurrentUpdate("rpquery.concurrent_update", "deadlock")
try:
    retrying(conflict, RetryPolicy(2, 0.001, 0.001), retry_if=lambda e: True,
             logger="rpquery.write", what="a write")
except ConcurrentUpdate:
    print("gave up")
"""


@pytest.mark.parametrize("configured", [False, True], ids=["library", "basicConfig"])
def test_the_library_prints_nothing_unless_the_application_configures_logging(
    sqlite_db: Database, configured: bool
) -> None:
    _cloud(sqlite_db, hosts=2)
    configure = "import logging; logging.basicConfig(level=logging.DEBUG)" if configured else ""
    ran = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(configure=configure), str(sqlite_db.url)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert ran.stdout.split() == ["2", "gave", "up"]
    if not configured:
        assert ran.stderr == ""
    else:  # the same run, configured: what the silence hid
        assert "DEBUG:rpquery.read:allocation_candidates: read, " in ran.stderr
        assert "WARNING:rpquery.write:a write: attempt 1 of 2 failed (rpquery" in ran.stderr
        assert "WARNING:rpquery.write:a write: giving up after 2 attempts (rpquery" in ran.stderr


# ---------------------------------------------------------------- the command line


def test_cli_log_level_debug_prints_batches_on_stderr_and_default_prints_none(
    db: Database,
) -> None:
    _cloud(db, hosts=2)
    url = db.url.render_as_string(hide_password=False)
    rpquery_logger = logging.getLogger("rpquery")
    before = (rpquery_logger.level, list(rpquery_logger.handlers))
    quiet = CliRunner().invoke(main, ["--db", url, "candidates", "resources=VCPU:1", "--json"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    loud = CliRunner(env={"RPQUERY_LOG_LEVEL": "debug"}).invoke(
        main, ["--db", url, "candidates", "resources=VCPU:1", "--json"]
    )
    assert loud.exit_code == 0 and '"allocation_requests"' in loud.stdout
    lines = loud.stderr.splitlines()
    gunicorn_like = r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}\] \[\d+\] \[DEBUG\] "
    read = [line for line in lines if " rpquery.read: " in line]
    assert len(read) == 1 and re.match(gunicorn_like, read[0]), lines
    assert read[0].split(" rpquery.read: ")[1].startswith("allocation_candidates: read, ")
    # undone when the command ends (the process may go on: here, the test's)
    assert (rpquery_logger.level, rpquery_logger.handlers) == before


def test_cli_masks_the_database_password_in_its_log(server_db: Database) -> None:
    """PostgreSQL trusts local connections (the password is ignored); MariaDB's root has
    none, so the run fails to connect: either way the password never shows."""
    url = server_db.url.set(password="s3cret-pw").render_as_string(hide_password=False)
    ran = CliRunner().invoke(main, ["--db", url, "--log-level", "debug", "db", "status"])
    shown = ran.stdout + ran.stderr
    assert "s3cret-pw" not in shown
    assert re.search(r"\[DEBUG\] rpquery\.cli: database \S+://\w+:\*\*\*@", ran.stderr), shown


def test_serve_logs_rpquery_records_to_stderr_as_gunicorn_does(sqlite_db: Database) -> None:
    _cloud(sqlite_db, hosts=1)
    port = free_port()
    cmd = serve_command(str(sqlite_db.url), port, access_log="off", workers=1)
    env = {**os.environ, "RPQUERY_LOG_LEVEL": "debug"}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{port}/resource_providers",
                    headers={"x-auth-token": "admin"},
                )
                with urllib.request.urlopen(req, timeout=5) as resp:
                    assert resp.status == 200
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    lines = err.decode().splitlines()
    booting = [line for line in lines if "[INFO] Booting worker with pid: " in line]
    read = [line for line in lines if "[DEBUG] rpquery.read: list_providers: read, " in line]
    assert len(booting) == 1 and len(read) == 1, lines
    worker = booting[0].rsplit(" ", 1)[1]
    stamp = r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}\] "
    assert re.match(stamp + rf"\[{worker}\] \[DEBUG\] rpquery\.read: ", read[0]), read
    assert re.match(stamp + r"\[\d+\] \[INFO\] Booting worker", booting[0])
