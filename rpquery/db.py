"""The :class:`Database` handle: an engine, transactions that wrap driver errors, a
tracer that sees every statement, and one debug log line per statement batch.

>>> db = Database("sqlite://")
>>> db.dialect_name
'sqlite'
>>> with db.count_statements() as counter:
...     with db.connect() as conn:
...         _ = conn.exec_driver_sql("select 1").scalar()
>>> counter.count
1
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import create_engine, event, exc
from sqlalchemy.engine import URL, Connection, Engine, make_url

from rpquery.errors import (
    ConcurrentUpdate,
    Conflict,
    DatabaseError,
    InvalidRequest,
    RpqueryError,
    SchemaError,
)
from rpquery.store import dialects
from rpquery.store.dialects import MYSQL_SQL_MODE
from rpquery.store.urls import DEFAULT_URL, REPLICA_URLS_ENV, split_urls

__all__ = [
    "DEFAULT_URL",
    "BatchEvent",
    "MYSQL_SQL_MODE",
    "REPLICA_URLS_ENV",
    "SCHEMA_MISSING",
    "SUPPORTED_BACKENDS",
    "Database",
    "StatementCounter",
    "Tracer",
    "layer_logger",
    "normalize_url",
    "read_retrying",
    "reading",
    "split_urls",
]

T = TypeVar("T")

SCHEMA_MISSING = "rpquery.schema.missing"
_URL_FORMS = "sqlite://, postgresql:// and mysql:// (or mariadb://)"

Tracer = Callable[[str, Any], None]


#: The backends rpquery runs on (SQLAlchemy's dialect names, with their aliases): the
#: registry's (:data:`rpquery.store.dialects.BACKEND_NAMES`).
SUPPORTED_BACKENDS = dialects.BACKEND_NAMES


def normalize_url(url: str | URL) -> URL:
    """Pick rpquery's drivers when the URL names none: ``postgresql://`` becomes
    ``postgresql+psycopg://`` and ``mysql://``/``mariadb://`` become ``+pymysql``
    with ``charset=utf8mb4``.

    A URL that is not one is ``InvalidRequest`` before anything is opened:
    ``rpquery.db.bad_url`` (``''``, ``not a url``), ``rpquery.db.unknown_dialect``
    (``foo://x``: no such SQLAlchemy dialect), ``rpquery.db.unsupported_dialect``
    (``oracle://...``: a dialect rpquery does not run on).

    >>> try:
    ...     normalize_url("foo://x")
    ... except InvalidRequest as error:
    ...     (error.code, error.token)
    ('rpquery.db.unknown_dialect', 'foo')
    """
    shown = url if isinstance(url, str) else url.render_as_string(hide_password=True)
    shown = re.sub(r"(://[^/@:]*:)[^/@]*@", r"\1***@", shown)  # no password in messages
    try:
        u = make_url(url)
    except (exc.ArgumentError, ValueError) as error:  # ValueError: a port that is no number
        raise InvalidRequest(
            "rpquery.db.bad_url",
            f"{shown!r} is not a database URL ({_URL_FORMS})",
            token=str(shown),
        ) from error
    shown = u.render_as_string(hide_password=True)
    backend = u.get_backend_name()
    if backend not in SUPPORTED_BACKENDS:
        try:
            u.get_dialect()
        except exc.NoSuchModuleError as error:
            raise InvalidRequest(
                "rpquery.db.unknown_dialect",
                f"unknown database dialect {backend!r} in {shown!r}: rpquery runs on {_URL_FORMS}",
                token=backend,
            ) from error
        raise InvalidRequest(
            "rpquery.db.unsupported_dialect",
            f"rpquery does not run on {backend} ({shown!r}): it runs on {_URL_FORMS}",
            token=backend,
        )
    return dialects.backend(backend).normalize_url(u)


@dataclass
class StatementCounter:
    """Counts statements (round trips) sent through one :class:`Database`."""

    count: int = 0
    statements: list[str] = field(default_factory=list)

    def __call__(self, sql: str, params: Any) -> None:
        self.count += 1
        self.statements.append(sql)


class Database:
    """A connection to one rpquery (or Placement) database.

    ``begin()`` runs one transaction and turns driver errors into rpquery errors;
    ``connect()`` is the same for reads. Tracers registered with ``add_tracer`` (or
    ``count_statements()``) see every statement sent to the server.
    ``max_search_steps`` is the allocation-candidate search budget of every request
    on this database (``None``: the environment's or the default, see
    ``rpquery.read.candidates.search_budget``).

    ``replicas``: read-only copies of the database (PostgreSQL hot standbys, MariaDB
    replicas). ``connect()`` (every read: candidates, provider lists, usages) then uses
    one of them in turn, ``begin()`` (every write, and the reads under lock that decide
    it) always the primary. A replica that does not answer, or lags by more than
    ``max_replica_lag`` seconds, is skipped in favour of the primary; its health is
    checked at most every ``replica_check_interval`` seconds (docs/deployment.md).
    """

    def __init__(
        self,
        url: str | URL | Engine = DEFAULT_URL,
        *,
        max_search_steps: int | None = None,
        replicas: Sequence[str | URL | Engine] = (),
        max_replica_lag: float = 5.0,
        replica_check_interval: float = 1.0,
        **engine_kw: Any,
    ) -> None:
        self.max_search_steps = max_search_steps
        if isinstance(url, Engine):
            self.engine = url
        else:
            normalized = normalize_url(url)
            try:
                self.engine = _make_engine(normalized, **engine_kw)
            except (ImportError, exc.NoSuchModuleError) as error:
                raise InvalidRequest(
                    "rpquery.db.driver_missing",
                    f"the driver of {normalized.drivername}:// is not installed ({error}); "
                    "leave the driver out (postgresql://, mysql://) to use rpquery's",
                    token=normalized.drivername,
                ) from error
        self._tracers: list[Tracer] = []
        self._lock = threading.Lock()
        url = self.engine.url  # fixed for the engine's life: looked up once, not per read
        self._sqlite_file = dialects.backend(url.get_backend_name()).database_file(url)
        self._sqlite_name = None if self._sqlite_file is None else str(self._sqlite_file)
        _listen(self.engine, self._on_execute)
        self.replicas = [
            _Replica(r if isinstance(r, Engine) else _make_engine(normalize_url(r), **engine_kw))
            for r in replicas
        ]
        self.max_replica_lag = max_replica_lag
        self.replica_check_interval = replica_check_interval
        self._next_replica = 0
        for replica in self.replicas:
            _listen(replica.engine, self._on_execute)

    # ------------------------------------------------------------ properties

    @property
    def dialect_name(self) -> str:
        """``sqlite``, ``postgresql`` or ``mysql`` (MariaDB reports ``mysql``)."""
        return self.engine.dialect.name

    @property
    def url(self) -> URL:
        return self.engine.url

    def __repr__(self) -> str:
        return f"Database({self.engine.url.render_as_string(hide_password=True)!r})"

    # ------------------------------------------------------------ transactions

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """One transaction: commits on success, rolls back on any exception.

        Driver errors are re-raised as :class:`ConcurrentUpdate` (deadlock,
        serialization failure, a Galera node outside the primary component: the
        writers that retry try again on another connection), :class:`Conflict`
        (integrity error) or :class:`DatabaseError`, chained to the original.
        """
        with _wrap_driver_errors, self.engine.connect() as conn:
            conn = conn.execution_options(rpquery_write=True)
            with _batch(conn, "transaction"), conn.begin():
                yield conn

    @contextmanager
    def connect(self, *, primary: bool = False) -> Iterator[Connection]:
        """A connection for reads; its implicit transaction is rolled back on exit.

        With replicas, a healthy one in turn (``primary=True``: always the primary, for
        reads that must see the latest writes, such as the schema revision).

        A read never creates a database: on a SQLite file that does not exist it raises
        ``SchemaError`` (``rpquery.schema.missing``) instead of leaving an empty file (in
        a directory that does not exist either: the driver's error, nothing to create).
        """
        name = self._sqlite_name
        if name is not None and not os.path.exists(name):
            path = Path(name)
            if path.parent.is_dir():
                raise _schema_missing(f"no file {path}")
        replica = None if primary or not self.replicas else self._pick_replica()
        with _wrap_driver_errors:
            if replica is not None:
                try:
                    conn = replica.engine.connect()
                except exc.DBAPIError:  # went down since its last check
                    replica.mark_down()
                    conn = self.engine.connect()
            else:
                conn = self.engine.connect()
            with conn, _batch(conn, "read"):
                yield conn

    def read_engine(self) -> Engine:
        """The engine reads go to: the next healthy replica, else the primary's."""
        replica = self._pick_replica()
        return self.engine if replica is None else replica.engine

    def _pick_replica(self) -> _Replica | None:
        count = len(self.replicas)
        for _ in range(count):
            with self._lock:
                replica = self.replicas[self._next_replica % count]
                self._next_replica += 1
            if replica.usable(self.max_replica_lag, self.replica_check_interval):
                return replica
        return None

    def replica_status(self) -> list[dict[str, Any]]:
        """Each replica's URL (no password), whether it answered, its lag in seconds
        (``None`` when unknown) and whether reads use it (checked now)."""
        rows = []
        for replica in self.replicas:
            replica.checked_at = -1e9
            usable = replica.usable(self.max_replica_lag, self.replica_check_interval)
            rows.append(
                {
                    "url": replica.engine.url.render_as_string(hide_password=True),
                    "up": replica.up,
                    "lag": replica.lag,
                    "used": usable,
                }
            )
        return rows

    @property
    def sqlite_path(self) -> Path | None:
        """The file of a SQLite database (``None`` in memory or on a server)."""
        return self._sqlite_file

    # ------------------------------------------------------------ tracing

    def capture_selects(self, run: Callable[[], T]) -> tuple[T, list[tuple[str, Any]]]:
        """Run ``run()`` once; return its result and the ``(sql, params)`` of every
        query it sent (``SELECT``/``WITH``, also under MariaDB's ``SET STATEMENT ...
        FOR``), as the driver received them: the exact statements, on this backend,
        with their values (``rpquery explain``, ``make bench``'s EXPLAIN check)."""
        seen: list[tuple[str, Any]] = []

        def tracer(sql: str, params: Any) -> None:
            if sql.lstrip().upper().startswith(("SELECT", "WITH", "SET STATEMENT")):
                seen.append((sql, params))

        self.add_tracer(tracer)
        try:
            result = run()
        finally:
            self.remove_tracer(tracer)
        return result, seen

    def add_tracer(self, tracer: Tracer) -> None:
        with self._lock:
            self._tracers.append(tracer)

    def remove_tracer(self, tracer: Tracer) -> None:
        with self._lock:
            self._tracers.remove(tracer)

    @contextmanager
    def count_statements(self) -> Iterator[StatementCounter]:
        """Count the statements sent while the block runs (every thread)."""
        counter = StatementCounter()
        self.add_tracer(counter)
        try:
            yield counter
        finally:
            self.remove_tracer(counter)

    def _on_execute(
        self, conn: Any, cursor: Any, sql: str, params: Any, ctx: Any, many: bool
    ) -> None:
        for tracer in tuple(self._tracers):
            tracer(sql, params)

    # ------------------------------------------------------------ lifecycle

    def upgrade(self, revision: str = "head") -> None:
        """Create or upgrade the schema and sync standard classes and traits."""
        from rpquery.store import migrations

        migrations.upgrade(self, revision)

    def dispose(self) -> None:
        self.engine.dispose()
        for replica in self.replicas:
            replica.engine.dispose()


@dataclass
class _Replica:
    """One read replica and its last health check."""

    engine: Engine
    up: bool = False
    lag: float | None = None
    checked_at: float = -1e9
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def usable(self, max_lag: float, interval: float) -> bool:
        with self._lock:
            now = time.monotonic()
            if now - self.checked_at >= interval:
                self.up, self.lag = _replica_health(self.engine)
                self.checked_at = now
            return self.up and (self.lag is None or self.lag <= max_lag)

    def mark_down(self) -> None:
        with self._lock:
            self.up, self.checked_at = False, time.monotonic()


def _replica_health(engine: Engine) -> tuple[bool, float | None]:
    """``(answers, lag in seconds)``. PostgreSQL: 0 when the standby has replayed all the
    WAL it received, else the age of the last transaction it replayed (so a standby
    whose replay is paused or behind ages, an idle one does not); a server that is not
    in recovery (a promoted standby) has no lag. MariaDB/MySQL: ``Seconds_Behind_Master``
    when the server is a replica, else ``None``."""
    token = _PING.set(True)  # a health check is no read to retry: pinged
    try:
        with engine.connect() as conn:
            return True, dialects.backend(engine.dialect.name).replica_lag(conn)
    except exc.DBAPIError:
        return False, None
    finally:
        _PING.reset(token)


@contextmanager
def reading(
    db_or_conn: Database | Connection, *, autocommit: bool = False
) -> Iterator[Connection]:
    """The caller's connection as it is, or a read connection of the database (for
    functions that take either).

    ``autocommit``: the read's statements need not share a snapshot, so on a backend
    where that saves round trips (PostgreSQL: no ``BEGIN`` and ``ROLLBACK``,
    the backend's ``reads_autocommit``) a connection of the database runs
    in autocommit mode; the caller's connection is never changed."""
    if isinstance(db_or_conn, Connection):
        yield db_or_conn
    else:
        with db_or_conn.connect() as conn:
            if autocommit and dialects.backend(conn.dialect.name).reads_autocommit:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            yield conn


# ---------------------------------------------------------------- statement batches
#
# Every read (``connect()``, ``reading(db)``) and every transaction (``begin()``) is one
# batch of statements on one connection. With DEBUG on for its layer's logger, the batch
# ends with one line: who ran it, how many statements, the time the block took and the
# part of it spent waiting for the database (from ``before_cursor_execute`` to
# ``after_cursor_execute``). With DEBUG off a batch costs a walk to the opening module's
# frame, a dict look-up of its layer's logger and one ``isEnabledFor``, and a statement
# one test of ``_timing`` per timer: the caller's name, the batch record and the clock are
# only taken for a batch that logs (a read's fixed cost is the small reads' share:
# GET /usages, 2026-11-29).

_log = logging.getLogger("rpquery.store")
_BATCH = "rpquery_batch"  # key of the running batch in the connection's ``info``
#: Modules a batch's caller is looked for outside of (the plumbing that opens it).
_PLUMBING = frozenset({__name__, "contextlib", "rpquery.retry"})
_NAME_DEPTH = 8  # frames looked at for a public function's name
#: module name -> its layer's logger (``logging.getLogger`` takes a lock on every call)
_LAYER_LOGGERS: dict[str, logging.Logger] = {}
#: batches being logged now, every thread (the statement timers do nothing while 0)
_timing = 0
_timing_lock = threading.Lock()
_NO_BATCH: AbstractContextManager[None] = nullcontext()


@dataclass
class BatchEvent:
    """What a batch's debug line says, attached to the record as ``record.rpquery_batch``:
    ``what`` (the function that opened it), ``kind`` (``read`` or ``transaction``),
    ``statements`` sent, ``seconds`` the block took, ``database_seconds`` of it spent in
    the driver, and ``outcome`` (a transaction: ``committed`` or ``rolled back (CODE)``; a
    read: ``''``, or ``failed (CODE)``; CODE is the error's code or type)."""

    what: str
    kind: str
    statements: int = 0
    seconds: float = 0.0
    database_seconds: float = 0.0
    outcome: str = ""
    sent: float = field(default=0.0, repr=False)


def layer_logger(module: str) -> logging.Logger:
    """The logger of the layer ``module`` belongs to: ``rpquery.read.candidates._execute``
    logs on ``rpquery.read``, ``rpquery.server_groups.scheduling`` on
    ``rpquery.server_groups``; ``rpquery.db`` and code outside rpquery on ``rpquery.store``.

    >>> from rpquery.write import allocations
    >>> layer_logger(allocations.__name__).name
    'rpquery.write'
    >>> layer_logger("myapp.jobs").name
    'rpquery.store'
    """
    log = _LAYER_LOGGERS.get(module)
    if log is None:
        parts = module.split(".")
        if parts[0] != "rpquery" or len(parts) < 2 or module == __name__:
            log = _log
        else:
            log = logging.getLogger(".".join(parts[:2]))
        _LAYER_LOGGERS[module] = log
    return log


def _batch(conn: Connection, kind: str) -> AbstractContextManager[None]:
    """The batch of statements ``conn`` runs for the code that opened it: logged when its
    layer's logger is on for DEBUG, else nothing at all."""
    frame: Any = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__") in _PLUMBING:
        frame = frame.f_back
    module = str(frame.f_globals.get("__name__", ""))
    log = layer_logger(module)
    if not log.isEnabledFor(logging.DEBUG):
        return _NO_BATCH
    return _logged_batch(conn, BatchEvent(_opener_name(frame, module), kind), log)


def _opener_name(frame: Any, module: str) -> str:
    """The outermost public function of ``module``'s layer up the stack from ``frame``
    (the entry point: ``replace_allocations`` rather than its retried closure or its
    helpers), else ``frame``'s own: the layer is the first module outside this one,
    contextlib and rpquery.retry (the plumbing in between)."""
    layer = ".".join(module.split(".")[:2]) + "."
    name = frame.f_code.co_name
    up = frame
    for _ in range(_NAME_DEPTH):
        up = up.f_back
        if up is None:
            break
        where = str(up.f_globals.get("__name__"))
        if where in _PLUMBING:
            continue
        if not where.startswith(layer):
            break
        if _public(up.f_code):
            name = up.f_code.co_name
    return name


def _public(code: Any) -> bool:
    qualname = getattr(code, "co_qualname", code.co_name)
    return not qualname.startswith("_") and "<" not in qualname and "._" not in qualname


def _count_timing(delta: int) -> None:
    global _timing
    with _timing_lock:
        _timing += delta


@contextmanager
def _logged_batch(conn: Connection, batch: BatchEvent, log: logging.Logger) -> Iterator[None]:
    info = conn.info
    outer = info.get(_BATCH)  # a nested begin()/connect() on a pooled connection: none
    info[_BATCH] = batch
    _count_timing(1)
    started = time.perf_counter()
    try:
        yield
        if batch.kind == "transaction":
            batch.outcome = "committed"
    except BaseException as error:
        code = getattr(error, "code", None) or type(error).__name__
        failed = "rolled back" if batch.kind == "transaction" else "failed"
        batch.outcome = f"{failed} ({code})"
        raise
    finally:
        batch.seconds = time.perf_counter() - started
        _count_timing(-1)
        if outer is None:
            info.pop(_BATCH, None)
        else:
            info[_BATCH] = outer
        log.debug(
            "%s: %s%s, %d statement%s in %.2f ms (%.2f ms in the database)",
            batch.what,
            batch.kind,
            f" {batch.outcome}" if batch.outcome else "",
            batch.statements,
            "" if batch.statements == 1 else "s",
            batch.seconds * 1000,
            batch.database_seconds * 1000,
            extra={"rpquery_batch": batch},
        )


def _before_execute(conn: Any, cursor: Any, sql: str, params: Any, ctx: Any, many: bool) -> None:
    if _timing:
        batch = conn.info.get(_BATCH)
        if batch is not None:
            batch.statements += 1
            batch.sent = time.perf_counter()


def _after_execute(conn: Any, cursor: Any, sql: str, params: Any, ctx: Any, many: bool) -> None:
    if _timing:
        batch = conn.info.get(_BATCH)
        if batch is not None:
            batch.database_seconds += time.perf_counter() - batch.sent


def _listen(engine: Engine, on_execute: Callable[..., None]) -> None:
    """The Database's tracers, and the batch timers once per engine (several Database
    handles may share one engine)."""
    event.listen(engine, "before_cursor_execute", on_execute)
    for name, timer in (
        ("before_cursor_execute", _before_execute),
        ("after_cursor_execute", _after_execute),
    ):
        if not event.contains(engine, name, timer):
            event.listen(engine, name, timer)


def _make_engine(url: URL, **engine_kw: Any) -> Engine:
    """The engine, set up for its backend (pool options, connect and begin hooks:
    SQLite's pragmas and ``BEGIN IMMEDIATE``, MySQL/MariaDB's ``sql_mode``).

    ``pool_pre_ping`` (the servers' default) is rpquery's own: a connection is pinged
    when it is checked out, as SQLAlchemy's would, unless the read checking it out
    handles a closed connection itself (:func:`read_retrying`), which saves the ping's
    round trip."""
    backend = dialects.backend(url.get_backend_name())
    backend.engine_options(engine_kw)
    ping = engine_kw.pop("pool_pre_ping", False)
    engine = create_engine(url, **engine_kw)
    backend.engine_created(engine)
    if ping:
        event.listen(engine, "connect", _fresh)
        event.listen(engine, "checkout", _pinger(engine.dialect))
    return engine


#: False while a read that retries on a closed connection checks one out
_PING: ContextVar[bool] = ContextVar("rpquery_ping", default=True)
_FRESH = "rpquery_fresh"


def _fresh(dbapi_connection: Any, record: Any) -> None:
    record.info[_FRESH] = True  # just connected: no need to ping it


def _pinger(dialect: Any) -> Callable[[Any, Any, Any], None]:
    def ping_on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        """SQLAlchemy's pre-ping as a checkout hook: a connection the server closed is
        replaced (``DisconnectionError``: the pool discards it and checks out another)."""
        if record.info.pop(_FRESH, False) or not _PING.get():
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:
            if dialect.is_disconnect(error, dbapi_connection, None):
                raise exc.DisconnectionError(str(error)) from error
            raise

    return ping_on_checkout


def read_retrying(
    db_or_conn: Database | Connection,
    work: Callable[[Connection], T],
    *,
    autocommit: bool = False,
) -> T:
    """``work(conn)``, a read, on the caller's connection or on a read connection of the
    database (:func:`reading`). A connection of the database is checked out without the
    ping (one round trip of a small read's five or six on a server): should the server
    have closed it, the first statement fails as a disconnect, SQLAlchemy discards the
    connection, and ``work`` runs once more on another one (a read is safe to repeat).
    ``work`` must only read."""
    if isinstance(db_or_conn, Connection):
        return work(db_or_conn)
    token = _PING.set(False)
    pinging = False
    try:
        with reading(db_or_conn, autocommit=autocommit) as conn:
            _PING.reset(token)  # checked out: whatever work() connects to is pinged
            pinging = True
            return work(conn)
    except RpqueryError as error:
        if not getattr(error.__cause__, "connection_invalidated", False):
            raise
    finally:
        if not pinging:
            _PING.reset(token)
    with reading(db_or_conn, autocommit=autocommit) as conn:  # pinged, as usual
        return work(conn)


class _DriverErrors:
    """Driver errors raised in the block as rpquery errors (:meth:`Database.begin`): a
    class, not a ``@contextmanager`` generator, as every read and transaction enters it
    (stateless: one instance serves every thread)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        if isinstance(error, exc.SQLAlchemyError) and not isinstance(error, RpqueryError):
            raise _driver_error(error) from error


_wrap_driver_errors = _DriverErrors()


def _driver_error(error: exc.SQLAlchemyError) -> RpqueryError:
    if not isinstance(error, exc.DBAPIError):
        return DatabaseError("rpquery.db.error", f"database error: {error}")
    if dialects.node_not_ready(error):
        return ConcurrentUpdate(
            "rpquery.concurrent_update",
            "the database node refused the statement (a Galera node outside the primary "
            f"component: nothing was written; try again): {error.orig}",
        )
    if dialects.is_retryable(error):
        return ConcurrentUpdate("rpquery.concurrent_update", f"concurrent update: {error.orig}")
    if dialects.is_charset_error(error):
        return DatabaseError(
            "rpquery.db.charset",
            f"the database cannot hold or compare this text ({error.orig}): a column's "
            "character set is not utf8mb4; 'rpquery db check' lists them with the fix",
        )
    table = dialects.missing_table(error)
    if table is not None:
        return _schema_missing(f"table {table} does not exist")
    if isinstance(error, exc.IntegrityError):
        return Conflict("rpquery.db.integrity", f"integrity error: {error.orig}")
    return DatabaseError("rpquery.db.error", f"database error: {error.orig}")


def _schema_missing(why: str) -> SchemaError:
    return SchemaError(
        SCHEMA_MISSING,
        f"the database has no rpquery schema ({why}): 'rpquery db upgrade' creates it "
        "(Database.upgrade() from Python)",
    )
