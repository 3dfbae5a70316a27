"""rpquery: usage per (provider, class), kept exact by triggers on ``allocations``.

``rpq_provider_usages`` holds ``SUM(allocations.used)`` per (resource provider,
resource class): what Placement recomputes with a ``GROUP BY`` over ``allocations``
on every candidate request. The read path (candidates, provider lists, summaries)
reads one row per inventory instead: a whole-cloud answer no longer aggregates the
whole ``allocations`` table, and a ``limit`` probe is a primary-key lookup.

Triggers on ``allocations`` (insert, delete, update) keep it exact whoever writes:
rpquery, the bulk generator, or OpenStack Placement on the same database. An addition
upserts, a subtraction updates the stored row (a missing row is never stored negative);
on PostgreSQL a statement's changes are applied in (provider, class) order, so two
writers lock the rows they share in the same order:

- PostgreSQL: statement triggers with transition tables (one ``INSERT ... SELECT ...
  GROUP BY ... ORDER BY ... ON CONFLICT`` per statement, however many rows; a bulk
  ``COPY`` costs one grouped pass), plus ``TRUNCATE allocations`` → empty;
- SQLite, MySQL/MariaDB: row triggers (``ON CONFLICT`` / ``ON DUPLICATE KEY``).

Rows that fall to 0 stay (a 0 reads the same as no row). The write path's own checks
do not read this table: they sum ``allocations`` under their locks, as before.
``rpquery.usage.provider_totals.verify_provider_usages`` compares it with ``allocations``
and ``rebuild_provider_usages`` repairs it (e.g. after a ``TRUNCATE`` on MySQL, which
fires no trigger). Creating triggers may need privileges: without them the upgrade
fails with ``rpquery.schema.trigger_privilege``.

Revision ID: rpq0007
Revises: rpq0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from rpquery.schema.frozen import create_triggers

revision = "rpq0007"
down_revision = "rpq0006"
branch_labels = None
depends_on = None

TABLE = "rpq_provider_usages"
KEY = "resource_provider_id, resource_class_id"
COLS = f"{KEY}, used"
TRIGGERS = ("rpq_provider_usage_insert", "rpq_provider_usage_delete", "rpq_provider_usage_update")

BACKFILL = f"INSERT INTO {TABLE} ({COLS}) SELECT {KEY}, SUM(used) FROM allocations GROUP BY {KEY}"


# ---------------------------------------------------------------- PostgreSQL


def _pg_upsert(deltas: str) -> str:
    """Add the signed ``deltas`` (rows: provider, class, d) in key order. A negative
    total for a (provider, class) with no stored row is dropped, never stored: nothing
    can be subtracted from a row that was never added (e.g. after a manual cleanup)."""
    return f"""
  INSERT INTO {TABLE} AS t ({COLS})
  SELECT {KEY}, SUM(d) FROM ({deltas}) x
  GROUP BY {KEY}
  HAVING SUM(d) > 0 OR (SUM(d) < 0 AND EXISTS (
    SELECT 1 FROM {TABLE} s WHERE s.resource_provider_id = x.resource_provider_id
    AND s.resource_class_id = x.resource_class_id))
  ORDER BY {KEY}
  ON CONFLICT ({KEY}) DO UPDATE SET used = t.used + EXCLUDED.used;"""


def _pg_statements() -> list[str]:
    def function(name: str, body: str) -> str:
        return (
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $rpq$\n"
            f"BEGIN{body}\n  RETURN NULL;\nEND\n$rpq$"
        )

    def trigger(name: str, event: str, refs: str) -> str:
        return (
            f"CREATE TRIGGER {name} AFTER {event} ON allocations REFERENCING {refs} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {name}()"
        )

    new = f"SELECT {KEY}, used AS d FROM new_rows"
    old = f"SELECT {KEY}, -used AS d FROM old_rows"
    insert, delete, update = TRIGGERS
    return [
        function(insert, _pg_upsert(new)),
        trigger(insert, "INSERT", "NEW TABLE AS new_rows"),
        function(delete, _pg_upsert(old)),
        trigger(delete, "DELETE", "OLD TABLE AS old_rows"),
        function(update, _pg_upsert(f"{new} UNION ALL {old}")),
        trigger(update, "UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
        function("rpq_provider_usage_clear", f"\n  DELETE FROM {TABLE};"),
        "CREATE TRIGGER rpq_provider_usage_truncate AFTER TRUNCATE ON allocations "
        "FOR EACH STATEMENT EXECUTE FUNCTION rpq_provider_usage_clear()",
    ]


# ---------------------------------------------------------------- SQLite, MySQL/MariaDB


def _row_upsert(dialect: str, row: str, sign: str) -> str:
    """Add (``sign`` "") or subtract (``sign`` "-") the row's ``used``; a subtraction
    only updates a stored row (never stores a negative one)."""
    if sign == "-":
        return (
            f"UPDATE {TABLE} SET used = used - {row}.used WHERE resource_provider_id = "
            f"{row}.resource_provider_id AND resource_class_id = {row}.resource_class_id;"
        )
    values = f"({row}.resource_provider_id, {row}.resource_class_id, {row}.used)"
    if dialect == "sqlite":
        return (
            f"INSERT INTO {TABLE} ({COLS}) VALUES {values} "
            f"ON CONFLICT ({KEY}) DO UPDATE SET used = used + excluded.used;"
        )
    return (
        f"INSERT INTO {TABLE} ({COLS}) VALUES {values} "
        f"ON DUPLICATE KEY UPDATE used = used + {row}.used;"
    )


def _row_statements(dialect: str) -> list[str]:
    insert, delete, update = TRIGGERS
    each = "" if dialect == "sqlite" else " FOR EACH ROW"
    changed = (
        "OLD.resource_provider_id IS NOT NEW.resource_provider_id OR OLD.resource_class_id "
        "IS NOT NEW.resource_class_id OR OLD.used IS NOT NEW.used"
    )
    # SQLite tests the change in WHEN; MySQL has no WHEN, so an IF in the body
    update_when = f" WHEN {changed}" if dialect == "sqlite" else ""
    moved = f"{_row_upsert(dialect, 'OLD', '-')}\n  {_row_upsert(dialect, 'NEW', '')}"
    if dialect != "sqlite":
        moved = (
            f"IF NOT (OLD.resource_provider_id <=> NEW.resource_provider_id AND "
            f"OLD.resource_class_id <=> NEW.resource_class_id AND OLD.used <=> NEW.used) "
            f"THEN\n  {moved}\n  END IF;"
        )
    return [
        f"CREATE TRIGGER {insert} AFTER INSERT ON allocations{each}\nBEGIN\n  "
        f"{_row_upsert(dialect, 'NEW', '')}\nEND",
        f"CREATE TRIGGER {delete} AFTER DELETE ON allocations{each}\nBEGIN\n  "
        f"{_row_upsert(dialect, 'OLD', '-')}\nEND",
        f"CREATE TRIGGER {update} AFTER UPDATE ON allocations{each}{update_when}\nBEGIN\n  "
        f"{moved}\nEND",
    ]


def trigger_statements(dialect: str) -> list[str]:
    """The DDL of the triggers (and PostgreSQL's trigger functions) for ``dialect``."""
    if dialect == "postgresql":
        return _pg_statements()
    return _row_statements("sqlite" if dialect == "sqlite" else "mysql")


def upgrade() -> None:
    _drop_everything(op.get_bind())  # our own leftovers first (see rpq0006)
    op.create_table(
        TABLE,
        sa.Column("resource_provider_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("resource_class_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("used", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("resource_provider_id", "resource_class_id", name=f"{TABLE}_pkey"),
    )
    bind = op.get_bind()
    try:
        create_triggers(
            bind,
            trigger_statements(bind.dialect.name),
            "on allocations (provider usages, rpq0007)",
        )
    except Exception:
        if bind.dialect.name in ("mysql", "mariadb"):  # DDL is not transactional there
            _drop_everything(bind)
        raise
    bind.exec_driver_sql(BACKFILL)


def downgrade() -> None:
    _drop_everything(op.get_bind())


def _drop_everything(bind: sa.engine.Connection) -> None:
    dialect = bind.dialect.name
    on = " ON allocations" if dialect == "postgresql" else ""
    for name in TRIGGERS:
        bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}{on}")
    if dialect == "postgresql":
        bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS rpq_provider_usage_truncate{on}")
        for name in (*TRIGGERS, "rpq_provider_usage_clear"):
            bind.exec_driver_sql(f"DROP FUNCTION IF EXISTS {name}()")
    bind.exec_driver_sql(f"DROP TABLE IF EXISTS {TABLE}")
