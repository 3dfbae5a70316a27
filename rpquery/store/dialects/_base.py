"""The protocol each backend module implements, and the registry that picks one.

One object per backend (:mod:`._sqlite`, :mod:`._postgresql`, :mod:`._mysql`); the
public functions of :mod:`rpquery.store.dialects` and :mod:`rpquery.db` look the
backend up by SQLAlchemy's dialect name (``mariadb`` is an alias of ``mysql``) and
call it, so no other module branches on ``dialect.name``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy import Select, Table, Unicode
from sqlalchemy.engine import URL, Connection, Dialect, Engine
from sqlalchemy.sql import FromClause
from sqlalchemy.types import TypeEngine


class Backend(Protocol):
    """What differs between backends, one method per difference."""

    #: SQLAlchemy's dialect name (``sqlite``, ``postgresql``, ``mysql``).
    name: str
    #: Whether a write transaction can lock single rows (``SELECT ... FOR UPDATE``)
    #: and leave other writers running: PostgreSQL and MariaDB/MySQL. SQLite's write
    #: transaction locks the whole database, so a long read inside one stalls every
    #: writer (past its 30 s busy timeout, under a scheduler's picks).
    locks_rows: bool
    #: Whether the database lives on a server (emptied by dropping and recreating it)
    #: rather than in a file or in this process's memory.
    on_server: bool
    #: Whether provider summaries have the database write each provider's resources as
    #: JSON text (:func:`rpquery.store.dialects.renders_summaries`).
    renders_summaries: bool
    #: Whether the sharing pairs' providers are read in a fenced subquery (``OFFSET 0``)
    #: that the planner plans apart (:func:`rpquery.read.candidates._sql.names_sharing_of`).
    fences_sharing: bool
    #: Whether a group's offers come one row per provider with a mask of its classes
    #: (:func:`rpquery.store.dialects.groups_offers`).
    groups_offers: bool
    #: Whether a list of ids comes as one text (``GROUP_CONCAT``), not one row each
    #: (:func:`rpquery.store.dialects.ids_as_text`).
    ids_as_text: bool
    #: Whether a statement's rows of mixed values can come as one JSON text
    #: (:func:`rpquery.store.dialects.rows_as_json`).
    rows_as_json: bool
    #: Whether a read that needs no snapshot across its statements is cheaper in
    #: autocommit mode (no ``BEGIN``/``ROLLBACK`` round trips): PostgreSQL with psycopg,
    #: which switches modes without a round trip (at ``READ COMMITTED`` each statement
    #: of a transaction takes its own snapshot anyway). Not MySQL/MariaDB (PyMySQL's
    #: switch is a round trip each way) nor SQLite (in the process).
    reads_autocommit: bool

    # -- engine setup (rpquery.db)
    def normalize_url(self, url: URL) -> URL: ...
    def database_file(self, url: URL) -> Path | None: ...
    def engine_options(self, engine_kw: dict[str, Any]) -> None: ...
    def engine_created(self, engine: Engine) -> None: ...
    def replica_lag(self, conn: Connection) -> float | None: ...

    # -- sessions and locks
    def read_session_setup(self, conn: Connection) -> None: ...
    def read_settings(self) -> str | None: ...
    def unprepared(
        self, conn: Connection, *, repeats: bool = False
    ) -> AbstractContextManager[None]: ...
    def execute_prepared(
        self, conn: Connection, cursor: Any, sql: str, params: dict[str, Any]
    ) -> None: ...
    def ordered_joins(self, conn: Connection) -> tuple[Any, str] | None: ...
    def one_snapshot(self, conn: Connection) -> None: ...
    def block_writers(self, conn: Connection, tables: Sequence[str]) -> None: ...

    # -- writes
    def insert_ignore(
        self, conn: Connection, table: Table, rows: list[dict[str, Any]]
    ) -> None: ...
    def insert_ignore_explicit_ids(
        self, conn: Connection, table: Table, rows: list[dict[str, Any]]
    ) -> None: ...
    def insert_select_adding(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[str],
        query: Select[Any],
        *,
        key: Sequence[str],
        add: Sequence[str],
    ) -> None: ...

    # -- bulk loading
    def bulk_insert(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> None: ...
    def sync_id_sequence(self, conn: Connection, table: Table) -> None: ...
    def refresh_statistics(self, conn: Connection, tables: Sequence[Table]) -> None: ...
    def refresh_after_bulk_load(self, engine: Engine, tables: Sequence[Table]) -> None: ...
    def triggers_suspended(
        self, conn: Connection, triggers: Mapping[str, Sequence[str]]
    ) -> AbstractContextManager[bool]:
        """Inside this write transaction, the named triggers (``{table: names}``) do not
        fire and no other session writes those tables; yields whether that holds.

        For a bulk load that does the triggers' work itself in one grouped pass. Nobody
        else can see the triggers off: the change is part of the transaction, other
        writers of the tables wait until it ends, and a rollback (any exception: the
        transaction must not commit after one) puts everything back.

        - PostgreSQL: ``LOCK TABLE ... IN SHARE ROW EXCLUSIVE MODE`` (writers wait, readers
          do not) and ``ALTER TABLE ... DISABLE TRIGGER``, re-enabled before the block
          ends. Altering a table needs its owner: without the privilege (or the lock),
          yields ``False`` and the triggers stay on.
        - SQLite: the write transaction holds the database's only write lock already; the
          triggers are dropped and re-created from their stored SQL (DDL is
          transactional there).
        - MySQL/MariaDB: yields ``False``. Trigger DDL commits the transaction there, so
          the triggers cannot be turned off atomically, and stay on.
        """
        ...

    def indexes_deferred(
        self, conn: Connection, tables: Sequence[str]
    ) -> AbstractContextManager[list[str]]:
        """PostgreSQL, when every one of ``tables`` is empty: drop their plain indexes (not
        unique, not backing a constraint) for this transaction and build them again when
        the block ends: one sort per index instead of a B-tree insert per row, which at
        millions of rows keyed on random uuids thrashes the buffer cache. Then ``ANALYZE``
        the tables, so the rest of the transaction is planned for their new size. Yields
        the names of the deferred indexes (none elsewhere, or when a table has rows).

        Dropping an index locks its table (``ACCESS EXCLUSIVE``): readers of ``tables``
        wait until the transaction ends (they would have found them empty). A rollback
        (any exception) restores the indexes."""
        ...

    # -- EXPLAIN, text and numbers
    def explain_prefix(self, *, analyze: bool = False) -> str:
        """The statement prefix that asks the backend for its plan."""
        ...

    def column_collation(self, conn: Connection, table: str, column: str) -> str | None:
        """The collation of ``table.column`` on MySQL/MariaDB (``None`` elsewhere: their
        comparisons are exact)."""
        ...

    def charset_problems(self, conn: Connection) -> list[tuple[str, str]]:
        """Where a MySQL/MariaDB database cannot hold every character rpquery may be
        given (a 4-byte one such as an emoji in a project id or provider name), as
        ``(problem, fix)`` pairs: the connection's character set, the database's default
        (new tables inherit it) and every text column not in ``utf8mb4`` (``utf8mb3``,
        ``latin1``, ...: common in older Placement deployments). Empty elsewhere:
        PostgreSQL and SQLite store any text."""
        ...

    def ratio_as_written(self, value: float) -> float:
        """An ``allocation_ratio`` read from the database, as it was written: on
        MySQL/MariaDB the shortest decimal that round-trips the stored 32-bit value, the
        value itself elsewhere. Equal to ``ratio_as_written_expr`` in SQL: PyMySQL reads
        the server's text form of the ``FLOAT`` (``"0.7"``), which this leaves as it is,
        and a driver handing over the raw 32-bit value (0.699999988) gets it corrected.
        Callers pass a ``float`` (a driver may hand over ``Decimal`` or text).

        >>> from rpquery.store.dialects import backend
        >>> maria = backend("mysql")
        >>> maria.ratio_as_written(0.699999988079071), maria.ratio_as_written(0.7)
        (0.7, 0.7)
        >>> backend("postgresql").ratio_as_written(0.699999988079071)
        0.699999988079071
        """
        ...

    def exact_text(self, length: int, dialect: Dialect) -> TypeEngine[str]: ...

    # -- whole-cloud reports (rpquery.insight)
    def tally(
        self, rows: FromClause, by: str, item: str, largest: str, *, examples: int, every: Any
    ) -> Select[Any]:
        """Per value of ``rows.c[by]``: its row count, the largest ``rows.c[largest]`` and
        the first ``examples`` values of ``rows.c[item]``; every row whose ``by`` is
        ``every`` listed. Rows ``(by, item, count, largest)``: one per example (window
        functions), or on MySQL/MariaDB one per value with the examples as text
        (``"3,8,12"``; each row of ``every`` its own), run there with hash joins."""
        ...


class NoKeptPlans:
    """A backend whose driver sends every statement as text (SQLite's, PyMySQL): no
    server-side prepared statement to turn off or ask for."""

    def unprepared(
        self, conn: Connection, *, repeats: bool = False
    ) -> AbstractContextManager[None]:
        return nullcontext()

    def execute_prepared(
        self, conn: Connection, cursor: Any, sql: str, params: dict[str, Any]
    ) -> None:
        cursor.execute(sql, params)  # (no plan to keep)


class OnConflictWrites:
    """The writes of a backend with ``INSERT ... ON CONFLICT`` (PostgreSQL, SQLite),
    written once on the dialect's own insert construct (:meth:`insert`)."""

    name: str

    def insert(self, table: Table) -> Any:
        """The dialect's ``INSERT`` with ``ON CONFLICT``: ``sqlalchemy.dialects.<name>``'s,
        its module imported when used (start-up time)."""
        return importlib.import_module(f"sqlalchemy.dialects.{self.name}").insert(table)

    def insert_ignore(self, conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
        conn.execute(self.insert(table).on_conflict_do_nothing(), rows)

    def insert_ignore_explicit_ids(
        self, conn: Connection, table: Table, rows: list[dict[str, Any]]
    ) -> None:
        self.insert_ignore(conn, table, rows)  # an explicit id, 0 included, is kept

    def insert_select_adding(
        self,
        conn: Connection,
        table: Table,
        columns: Sequence[str],
        query: Select[Any],
        *,
        key: Sequence[str],
        add: Sequence[str],
    ) -> None:
        # INSERT ... SELECT ... ON CONFLICT (key) DO UPDATE SET c = c + excluded.c
        upsert = self.insert(table).from_select(list(columns), query)
        conn.execute(
            upsert.on_conflict_do_update(
                index_elements=list(key),
                set_={c: table.c[c] + upsert.excluded[c] for c in add},
            )
        )


class StandardSQL:
    """What PostgreSQL and SQLite do alike: every value comes back as it was written
    (double-precision ratios, text compared byte for byte, no charset to check), and
    reports count with window functions."""

    def charset_problems(self, conn: Connection) -> list[tuple[str, str]]:
        return []

    def ratio_as_written(self, value: float) -> float:
        return value

    def exact_text(self, length: int, dialect: Dialect) -> TypeEngine[str]:
        return Unicode(length)  # compares byte for byte already

    def tally(
        self, rows: FromClause, by: str, item: str, largest: str, *, examples: int, every: Any
    ) -> Select[Any]:
        return windowed_tally(rows, by, item, largest, examples=examples, every=every)


def executemany_insert(
    conn: Connection, table: Table, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """One Core insert, executemany'd (the drivers batch it): bulk loading on SQLite and
    MySQL/MariaDB."""
    conn.execute(table.insert(), [dict(zip(columns, row, strict=True)) for row in rows])


@contextmanager
def nothing_suspended() -> Iterator[bool]:
    """:meth:`Backend.triggers_suspended` of a backend that cannot suspend triggers."""
    yield False


@contextmanager
def nothing_deferred() -> Iterator[list[str]]:
    """:meth:`Backend.indexes_deferred` of a backend that defers no index."""
    yield []


def windowed_tally(
    rows: FromClause, by: str, item: str, largest: str, *, examples: int, every: Any
) -> Select[Any]:
    """:meth:`Backend.tally` with window functions (SQLite, PostgreSQL): one row per
    example, ``(by, item, count, largest)``, the count and largest repeated::

        SELECT by, item, cnt, mx FROM (SELECT by, item, COUNT(*) OVER w AS cnt,
            MAX(largest) OVER w AS mx, ROW_NUMBER() OVER (w ORDER BY item) AS rn
            FROM rows) WHERE rn <= :examples OR by = :every   -- w: PARTITION BY by
    """
    b, i = rows.c[by], rows.c[item]
    f = sa.select(
        b,
        i,
        sa.func.count().over(partition_by=b).label("cnt"),
        sa.func.max(rows.c[largest]).over(partition_by=b).label("mx"),
        sa.func.row_number().over(partition_by=b, order_by=i).label("rn"),
    ).subquery("f")
    return sa.select(f.c[by], f.c[item], f.c.cnt, f.c.mx).where(
        sa.or_(f.c.rn <= examples, f.c[by] == every)
    )
