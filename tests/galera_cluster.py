"""A 3-node MariaDB Galera cluster on loopback for one test session (scripts/galera.sh),
on ports nobody listens on and in a data directory of its own, optionally behind a
round-robin proxy (scripts/roundrobin_proxy.py).

Used by tests/test_galera.py (the cluster tests) and by the ``galera`` backend of
tests/conftest.py (``RPQUERY_TEST_BACKENDS=galera``: the write-path and concurrency
suites with every connection going to the next node in turn).
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "galera.sh"
PROXY = ROOT / "scripts" / "roundrobin_proxy.py"


def _bindable(ports: list[int]) -> bool:
    try:
        for port in ports:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


def free_ports() -> dict[str, str]:
    """SQL ports (3 nodes + the proxy) and group-communication ports nobody listens on,
    so that several clusters (several test runs, or two in one run) each get their own."""
    rng = random.Random(f"{os.getpid()}-{uuid.uuid4()}")
    for _ in range(100):
        sql, gcomm = rng.randrange(20000, 29000, 10), rng.randrange(30000, 39000, 30)
        if _bindable([sql + i for i in range(4)] + [gcomm + i for i in range(30)]):
            return {"GALERA_PORT": str(sql), "GALERA_GCOMM_PORT": str(gcomm)}
    return {}


class GaleraCluster:
    """``up()`` starts the three nodes (one retry from scratch on a loaded machine) and,
    with ``proxy=True``, the round-robin proxy; ``stop()`` stops both and deletes the
    data (kept with ``GALERA_KEEP=1`` in the environment: scripts/galera.sh).
    ``sync_wait`` is the nodes' default ``wsrep_sync_wait``."""

    def __init__(self, label: str, *, sync_wait: int = 0, proxy: bool = False) -> None:
        self.env = {
            **os.environ,
            "GALERA_DIR": f"/tmp/rpquery-galera-{label}-{os.getpid()}",
            "GALERA_SYNC_WAIT": str(sync_wait),
            **free_ports(),
        }
        self.want_proxy = proxy
        self._proxy: subprocess.Popen[str] | None = None

    def run(self, *args: str) -> str:
        done = subprocess.run(
            ["bash", str(SCRIPT), *args], env=self.env, capture_output=True, text=True,
            timeout=400, check=False,
        )  # fmt: skip
        if done.returncode:
            raise RuntimeError(f"galera.sh {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def up(self) -> None:
        try:
            try:
                self.run("up")
            except (RuntimeError, subprocess.TimeoutExpired):
                self.down()  # a loaded machine: one more try from scratch
                self.run("up")
            if self.want_proxy:
                self._start_proxy()
        except BaseException:
            self.stop()
            raise

    def urls(self) -> list[str]:
        """The three nodes' admin URLs (the ``mysql`` schema)."""
        return self.run("urls").split()

    @property
    def proxy_port(self) -> int:
        return int(self.env["GALERA_PORT"]) + 3

    @property
    def proxy_url(self) -> str:
        """The admin URL through the proxy: each new connection on the next node."""
        return f"mysql+pymysql://root@127.0.0.1:{self.proxy_port}/mysql?charset=utf8mb4"

    def _start_proxy(self) -> None:
        port = int(self.env["GALERA_PORT"])
        upstreams = ",".join(f"127.0.0.1:{port + i}" for i in range(3))
        self._proxy = subprocess.Popen(
            [sys.executable, str(PROXY), "--listen", f"127.0.0.1:{self.proxy_port}",
             "--to", upstreams],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self._proxy.stdout is not None
        line = self._proxy.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError(f"the round-robin proxy did not start: {line!r}")

    def diagnose(self, schema: str, table: str, probe: str = "") -> str:
        """What each node says about ``table``'s triggers in ``schema`` and itself, for a
        failure message: the global ``sql_mode``, each trigger's stored ``sql_mode`` and
        the MD5 of its body (information_schema.TRIGGERS), the node's state, what
        ``probe`` (a write firing the triggers) does there in a rolled-back transaction,
        and the error lines of its log (``node*.err``, deleted by ``down`` unless
        ``GALERA_KEEP=1``). Never raises: a node that does not answer says why."""
        out = [f"galera dir {self.env['GALERA_DIR']}"]
        for n, url in enumerate(self.urls(), 1):
            try:
                engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
                with engine.connect() as conn:
                    mode = conn.exec_driver_sql("SELECT @@GLOBAL.sql_mode").scalar()
                    state = conn.exec_driver_sql(
                        "SHOW STATUS LIKE 'wsrep_local_state_comment'"
                    ).one()[1]
                    rows = conn.exec_driver_sql(
                        "SELECT trigger_name, sql_mode, MD5(action_statement) "
                        "FROM information_schema.TRIGGERS "
                        "WHERE trigger_schema = %s AND event_object_table = %s ORDER BY 1",
                        (schema, table),
                    ).all()
                    tried = "no probe"
                    if probe:
                        conn.exec_driver_sql(f"USE {schema}")
                        try:
                            conn.exec_driver_sql(probe)
                            tried = "probe ok"
                        except sa.exc.DBAPIError as error:
                            tried = f"probe failed: {error.orig!r}"
                        conn.rollback()
                engine.dispose()
                out.append(f"node{n}: {state}, global sql_mode {mode!r}, {tried}")
                for trigger_mode in sorted({r[1] for r in rows}):
                    bodies = [f"{r[0]} {r[2][:8]}" for r in rows if r[1] == trigger_mode]
                    out.append(f"  triggers {', '.join(bodies)}: sql_mode {trigger_mode!r}")
            except Exception as error:  # noqa: BLE001 - a failure message's own reading
                out.append(f"node{n}: {type(error).__name__}: {error}")
            log = Path(self.env["GALERA_DIR"], f"node{n}.err")
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            out += [f"  log {line}" for line in lines if "[ERROR]" in line][-20:]
        return "\n".join(out)

    def down(self) -> None:
        subprocess.run(
            ["bash", str(SCRIPT), "down"], env=self.env, capture_output=True, timeout=300,
            check=False,
        )  # fmt: skip

    def stop(self) -> None:
        if self._proxy is not None:
            self._proxy.terminate()
            try:
                self._proxy.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proxy.kill()
            self._proxy = None
        self.down()
