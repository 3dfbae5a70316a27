"""rpquery, SQLite only: the candidates' group statement reads indexes alone.

The group statement (``rpquery.read.candidates``) reads, per inventory of each provider
it visits, the capacity columns of ``inventories`` and the ``used`` of
``rpq_provider_usages``. On SQLite each of those was an index seek and then a table
lookup by rowid. Now:

- ``rpq_inventories_capacity_idx`` on ``inventories`` (provider, class, and every column
  the capacity check reads) answers the inventory side from the index alone;
- ``rpq_provider_usages`` is rebuilt ``WITHOUT ROWID``: its table *is* its primary key's
  B-tree, ``used`` included (what InnoDB's clustered key gives MySQL/MariaDB already),
  so a claim's trigger upsert now writes one B-tree instead of two.

A database whose planner has statistics (``sqlite_stat1``, which ``rpquery load`` and a
plain ``ANALYZE`` write) gets them for the new index and table as well: without them
SQLite prefers the old unique index it has numbers for. A database without statistics
is left without (its planner picks the new index by itself).

Measured at 5,000 hosts (docs/read-path.md): the group statement 10-11 % less CPU.
PostgreSQL and MariaDB are unchanged.

Revision ID: rpq0009
Revises: rpq0008
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "rpq0009"
down_revision = "rpq0008"
branch_labels = None
depends_on = None

INDEX = "rpq_inventories_capacity_idx"
INDEX_COLUMNS = [
    "resource_provider_id",
    "resource_class_id",
    "total",
    "reserved",
    "allocation_ratio",
    "min_unit",
    "max_unit",
    "step_size",
]
TABLE = "rpq_provider_usages"
COLS = "resource_provider_id, resource_class_id, used"
COPY = "rpq_provider_usages_copy"


def _rebuild_usages(bind: sa.Connection, *, rowid: bool) -> None:
    """Make ``rpq_provider_usages`` again, with or without a rowid, rows kept. Renaming
    a copy into place is refused (the triggers on ``allocations`` name the table), so
    the rows wait in a temporary table while the table is made again under its name."""
    suffix = "" if rowid else " WITHOUT ROWID"
    bind.exec_driver_sql(f"CREATE TEMP TABLE {COPY} AS SELECT {COLS} FROM {TABLE}")
    bind.exec_driver_sql(f"DROP TABLE {TABLE}")
    bind.exec_driver_sql(
        f"CREATE TABLE {TABLE} (\n"
        "\tresource_provider_id INTEGER NOT NULL, \n"
        "\tresource_class_id INTEGER NOT NULL, \n"
        "\tused BIGINT NOT NULL, \n"
        f"\tCONSTRAINT {TABLE}_pkey PRIMARY KEY (resource_provider_id, resource_class_id)\n"
        f"){suffix}"
    )
    bind.exec_driver_sql(f"INSERT INTO {TABLE} ({COLS}) SELECT {COLS} FROM {COPY}")
    bind.exec_driver_sql(f"DROP TABLE {COPY}")


def _analyze(bind: sa.Connection, *names: str) -> None:
    """Statistics for ``names``, only where the planner has statistics already."""
    has_stats = bind.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat1'"
    ).first()
    if has_stats:
        for name in names:
            bind.exec_driver_sql(f"ANALYZE {name}")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    op.create_index(INDEX, "inventories", INDEX_COLUMNS)
    _rebuild_usages(bind, rowid=False)
    _analyze(bind, INDEX, TABLE)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    op.drop_index(INDEX, table_name="inventories")
    _rebuild_usages(bind, rowid=True)
    _analyze(bind, TABLE)
