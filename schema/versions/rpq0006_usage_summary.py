"""rpquery: a usage summary per (project, user, consumer type), kept exact by triggers.

Two tables, keyed by Placement's ids (``type_key`` = ``COALESCE(consumer_type_id, 0)``,
0 meaning "no type"):

- ``rpq_usage_totals``: ``SUM(used)`` and the number of allocation rows per
  (project, user, type, resource class);
- ``rpq_consumer_counts``: consumers holding at least one allocation row per
  (project, user, type).

An allocation row counts when a consumer row with its uuid exists, under that
consumer's key; a consumer counts when it has at least one allocation row. Triggers on
``allocations`` (insert, delete, update) and ``consumers`` (insert, delete, update of
the key columns or the uuid) keep both tables equal to that definition whoever writes:
rpquery, the bulk generator, or OpenStack Placement on the same database. Subtractions
only ever UPDATE existing rows (a missing row is never created negative); additions
upsert. Rows that fall to zero stay (readers skip them; a rebuild drops them).

"Is this the consumer's first / last allocation row" is decided so that multi-row
statements are right on every backend:

- SQLite, MySQL/MariaDB: row triggers run as each row is written, so the row trigger
  looks for *other* rows of the consumer (``id <> NEW.id``) or for any row left;
- PostgreSQL: statement triggers with transition tables see the whole statement at
  once: a consumer gained its first rows when all its rows now are the statement's,
  and lost its last when none is left.

The backfill sums what is stored (run the upgrade with writers stopped, as any
migration; ``rpquery.usage.summary.verify_usage_summary`` checks and
``rebuild_usage_summary`` repairs). Creating triggers may need privileges: without
them the upgrade fails with ``rpquery.schema.trigger_privilege``.

Revision ID: rpq0006
Revises: rpq0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from rpquery import SchemaError
from rpquery.schema.frozen import create_triggers

revision = "rpq0006"
down_revision = "rpq0005"
branch_labels = None
depends_on = None

TOTALS = "rpq_usage_totals"
COUNTS = "rpq_consumer_counts"
T_COLS = "project_id, user_id, type_key, resource_class_id, used, allocation_count"
C_COLS = "project_id, user_id, type_key, consumer_count"
T_KEY = "project_id, user_id, type_key, resource_class_id"
C_KEY = "project_id, user_id, type_key"


def _key(row: str) -> str:
    """The summary key of a consumer row (``c``, ``NEW``, ``OLD``...)."""
    return f"{row}.project_id, {row}.user_id, COALESCE({row}.consumer_type_id, 0)"


def _key_match(table: str, row: str) -> str:
    return (
        f"{table}.project_id = {row}.project_id AND {table}.user_id = {row}.user_id "
        f"AND {table}.type_key = COALESCE({row}.consumer_type_id, 0)"
    )


def _key_changed(old: str = "OLD", new: str = "NEW", *, null_safe: str) -> str:
    cols = ("project_id", "user_id", "consumer_type_id", "uuid")
    return " OR ".join(f"{old}.{c} {null_safe} {new}.{c}" for c in cols)


# ---------------------------------------------------------------- SQLite


def _sqlite_add_allocation(row: str) -> str:
    return f"""
  INSERT INTO {TOTALS} ({T_COLS})
  SELECT {_key("c")}, {row}.resource_class_id, {row}.used, 1
  FROM consumers c WHERE c.uuid = {row}.consumer_id
  ON CONFLICT ({T_KEY}) DO UPDATE
  SET used = used + excluded.used, allocation_count = allocation_count + 1;
  INSERT INTO {COUNTS} ({C_COLS})
  SELECT {_key("c")}, 1 FROM consumers c
  WHERE c.uuid = {row}.consumer_id AND NOT EXISTS (
    SELECT 1 FROM allocations a WHERE a.consumer_id = {row}.consumer_id AND a.id <> NEW.id)
  ON CONFLICT ({C_KEY}) DO UPDATE SET consumer_count = consumer_count + 1;"""


def _sqlite_remove_allocation(row: str, others: str) -> str:
    owner = f"(SELECT {_key('c')} FROM consumers c WHERE c.uuid = {row}.consumer_id)"
    return f"""
  UPDATE {TOTALS} SET used = used - {row}.used, allocation_count = allocation_count - 1
  WHERE ({C_KEY}) = {owner} AND resource_class_id = {row}.resource_class_id;
  UPDATE {COUNTS} SET consumer_count = consumer_count - 1
  WHERE ({C_KEY}) = {owner} AND NOT EXISTS (
    SELECT 1 FROM allocations a WHERE a.consumer_id = {row}.consumer_id{others});"""


def _sqlite_add_consumer(row: str) -> str:
    return f"""
  INSERT INTO {TOTALS} ({T_COLS})
  SELECT {_key(row)}, a.resource_class_id, SUM(a.used), COUNT(*)
  FROM allocations a WHERE a.consumer_id = {row}.uuid GROUP BY a.resource_class_id
  ON CONFLICT ({T_KEY}) DO UPDATE SET used = used + excluded.used,
    allocation_count = allocation_count + excluded.allocation_count;
  INSERT INTO {COUNTS} ({C_COLS})
  SELECT {_key(row)}, 1
  WHERE EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = {row}.uuid)
  ON CONFLICT ({C_KEY}) DO UPDATE SET consumer_count = consumer_count + 1;"""


def _sqlite_remove_consumer(row: str) -> str:
    mine = f"allocations a WHERE a.consumer_id = {row}.uuid"
    same_class = f"{mine} AND a.resource_class_id = {TOTALS}.resource_class_id"
    return f"""
  UPDATE {TOTALS} SET used = used - (SELECT SUM(a.used) FROM {same_class}),
    allocation_count = allocation_count - (SELECT COUNT(*) FROM {same_class})
  WHERE {_key_match(TOTALS, row)}
    AND resource_class_id IN (SELECT a.resource_class_id FROM {mine});
  UPDATE {COUNTS} SET consumer_count = consumer_count - 1
  WHERE {_key_match(COUNTS, row)} AND EXISTS (SELECT 1 FROM {mine});"""


def _sqlite_triggers() -> list[str]:
    alloc_changed = (
        "OLD.consumer_id IS NOT NEW.consumer_id OR OLD.resource_class_id IS NOT "
        "NEW.resource_class_id OR OLD.used IS NOT NEW.used"
    )
    return [
        "CREATE TRIGGER rpq_usage_alloc_insert AFTER INSERT ON allocations BEGIN"
        f"{_sqlite_add_allocation('NEW')}\nEND",
        "CREATE TRIGGER rpq_usage_alloc_delete AFTER DELETE ON allocations BEGIN"
        f"{_sqlite_remove_allocation('OLD', '')}\nEND",
        "CREATE TRIGGER rpq_usage_alloc_update AFTER UPDATE OF consumer_id, "
        f"resource_class_id, used ON allocations WHEN {alloc_changed} BEGIN"
        f"{_sqlite_remove_allocation('OLD', ' AND a.id <> NEW.id')}"
        f"{_sqlite_add_allocation('NEW')}\nEND",
        "CREATE TRIGGER rpq_usage_consumer_insert AFTER INSERT ON consumers BEGIN"
        f"{_sqlite_add_consumer('NEW')}\nEND",
        "CREATE TRIGGER rpq_usage_consumer_delete AFTER DELETE ON consumers BEGIN"
        f"{_sqlite_remove_consumer('OLD')}\nEND",
        "CREATE TRIGGER rpq_usage_consumer_update AFTER UPDATE OF project_id, user_id, "
        f"consumer_type_id, uuid ON consumers WHEN {_key_changed(null_safe='IS NOT')} BEGIN"
        f"{_sqlite_remove_consumer('OLD')}{_sqlite_add_consumer('NEW')}\nEND",
    ]


# ---------------------------------------------------------------- PostgreSQL


def _pg_function(name: str, body: str, *, unless_empty: str = "") -> str:
    """A trigger function; ``unless_empty`` is a query that finds nothing when the
    statement changed nothing the summary holds (checked first: most statements of the
    write path, e.g. deleting the allocations of a new consumer, stop there)."""
    guard = (
        f"\n  IF NOT EXISTS ({unless_empty}) THEN\n    RETURN NULL;\n  END IF;"
        if unless_empty
        else ""
    )
    return (
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $rpq$\n"
        f"BEGIN{guard}{body}\n  RETURN NULL;\nEND\n$rpq$"
    )


def _pg_add_rows(rows: str) -> str:
    """Add the allocation rows of transition table ``rows`` to their consumers' keys;
    count the consumers whose rows now are all from this statement."""
    return f"""
  INSERT INTO {TOTALS} AS t ({T_COLS})
  SELECT {_key("c")}, n.resource_class_id, SUM(n.used), COUNT(*)
  FROM {rows} n JOIN consumers c ON c.uuid = n.consumer_id
  GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT ({T_KEY}) DO UPDATE SET used = t.used + EXCLUDED.used,
    allocation_count = t.allocation_count + EXCLUDED.allocation_count;
  INSERT INTO {COUNTS} AS t ({C_COLS})
  SELECT {_key("c")}, COUNT(*)
  FROM (SELECT consumer_id, COUNT(*) AS added FROM {rows} GROUP BY consumer_id) n
  JOIN consumers c ON c.uuid = n.consumer_id
  WHERE n.added = (SELECT COUNT(*) FROM allocations a WHERE a.consumer_id = n.consumer_id)
  GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT ({C_KEY}) DO UPDATE
  SET consumer_count = t.consumer_count + EXCLUDED.consumer_count;"""


def _pg_remove_rows(rows: str) -> str:
    """Subtract the rows of ``rows``; uncount the consumers left with no row."""
    return f"""
  UPDATE {TOTALS} t SET used = t.used - s.used, allocation_count = t.allocation_count - s.n
  FROM (SELECT {_key("c")} AS type_key, o.resource_class_id, SUM(o.used) AS used,
               COUNT(*) AS n
        FROM {rows} o JOIN consumers c ON c.uuid = o.consumer_id
        GROUP BY 1, 2, 3, 4) s
  WHERE (t.project_id, t.user_id, t.type_key, t.resource_class_id)
      = (s.project_id, s.user_id, s.type_key, s.resource_class_id);
  UPDATE {COUNTS} t SET consumer_count = t.consumer_count - s.n
  FROM (SELECT {_key("c")} AS type_key, COUNT(*) AS n
        FROM (SELECT DISTINCT consumer_id FROM {rows}) o
        JOIN consumers c ON c.uuid = o.consumer_id
        WHERE NOT EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = o.consumer_id)
        GROUP BY 1, 2, 3) s
  WHERE (t.project_id, t.user_id, t.type_key) = (s.project_id, s.user_id, s.type_key);"""


def _pg_update_rows() -> str:
    """An UPDATE of allocations: old rows out, new rows in, consumer counts by how many
    rows each consumer had before the statement and has now."""
    return f"""
  UPDATE {TOTALS} t SET used = t.used - s.used, allocation_count = t.allocation_count - s.n
  FROM (SELECT {_key("c")} AS type_key, o.resource_class_id, SUM(o.used) AS used,
               COUNT(*) AS n
        FROM old_rows o JOIN consumers c ON c.uuid = o.consumer_id
        GROUP BY 1, 2, 3, 4) s
  WHERE (t.project_id, t.user_id, t.type_key, t.resource_class_id)
      = (s.project_id, s.user_id, s.type_key, s.resource_class_id);
  INSERT INTO {TOTALS} AS t ({T_COLS})
  SELECT {_key("c")}, n.resource_class_id, SUM(n.used), COUNT(*)
  FROM new_rows n JOIN consumers c ON c.uuid = n.consumer_id
  GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT ({T_KEY}) DO UPDATE SET used = t.used + EXCLUDED.used,
    allocation_count = t.allocation_count + EXCLUDED.allocation_count;
  FOR r IN
    SELECT {_key("c")} AS type_key, SUM(m.delta) AS delta
    FROM (SELECT x.consumer_id,
                 CASE WHEN cur.n > 0 THEN 1 ELSE 0 END
                 - CASE WHEN cur.n - SUM(x.d) > 0 THEN 1 ELSE 0 END AS delta
          FROM (SELECT consumer_id, 1 AS d FROM new_rows
                UNION ALL SELECT consumer_id, -1 FROM old_rows) x
          CROSS JOIN LATERAL (SELECT COUNT(*) AS n FROM allocations a
                              WHERE a.consumer_id = x.consumer_id) cur
          GROUP BY x.consumer_id, cur.n) m
    JOIN consumers c ON c.uuid = m.consumer_id
    GROUP BY 1, 2, 3 HAVING SUM(m.delta) <> 0 ORDER BY 1, 2, 3
  LOOP
    IF r.delta > 0 THEN
      INSERT INTO {COUNTS} AS t ({C_COLS})
      VALUES (r.project_id, r.user_id, r.type_key, r.delta)
      ON CONFLICT ({C_KEY}) DO UPDATE SET consumer_count = t.consumer_count + r.delta;
    ELSE
      UPDATE {COUNTS} t SET consumer_count = t.consumer_count + r.delta
      WHERE (t.project_id, t.user_id, t.type_key) = (r.project_id, r.user_id, r.type_key);
    END IF;
  END LOOP;"""


def _pg_add_consumers(rows: str) -> str:
    return f"""
  INSERT INTO {TOTALS} AS t ({T_COLS})
  SELECT {_key("n")}, a.resource_class_id, SUM(a.used), COUNT(*)
  FROM {rows} n JOIN allocations a ON a.consumer_id = n.uuid
  GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT ({T_KEY}) DO UPDATE SET used = t.used + EXCLUDED.used,
    allocation_count = t.allocation_count + EXCLUDED.allocation_count;
  INSERT INTO {COUNTS} AS t ({C_COLS})
  SELECT {_key("n")}, COUNT(*) FROM {rows} n
  WHERE EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = n.uuid)
  GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT ({C_KEY}) DO UPDATE
  SET consumer_count = t.consumer_count + EXCLUDED.consumer_count;"""


def _pg_remove_consumers(rows: str) -> str:
    return f"""
  UPDATE {TOTALS} t SET used = t.used - s.used, allocation_count = t.allocation_count - s.n
  FROM (SELECT {_key("o")} AS type_key, a.resource_class_id, SUM(a.used) AS used,
               COUNT(*) AS n
        FROM {rows} o JOIN allocations a ON a.consumer_id = o.uuid
        GROUP BY 1, 2, 3, 4) s
  WHERE (t.project_id, t.user_id, t.type_key, t.resource_class_id)
      = (s.project_id, s.user_id, s.type_key, s.resource_class_id);
  UPDATE {COUNTS} t SET consumer_count = t.consumer_count - s.n
  FROM (SELECT {_key("o")} AS type_key, COUNT(*) AS n FROM {rows} o
        WHERE EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = o.uuid)
        GROUP BY 1, 2, 3) s
  WHERE (t.project_id, t.user_id, t.type_key) = (s.project_id, s.user_id, s.type_key);"""


#: (function, guard, body, trigger) for PostgreSQL.
def _pg_objects() -> list[tuple[str, str, str, str]]:
    def stmt(name: str, event: str, table: str, refs: str) -> str:
        return (
            f"CREATE TRIGGER {name} AFTER {event} ON {table} REFERENCING {refs} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {name}()"
        )

    old_new = "OLD TABLE AS old_rows NEW TABLE AS new_rows"
    consumer_update = (
        "CREATE TRIGGER rpq_usage_consumer_update AFTER UPDATE OF project_id, user_id, "
        "consumer_type_id, uuid ON consumers FOR EACH ROW WHEN ("
        f"{_key_changed(null_safe='IS DISTINCT FROM')}) "
        "EXECUTE FUNCTION rpq_usage_consumer_update()"
    )
    # the row trigger reads its row as a one-row table
    one_old, one_new = "(SELECT OLD.*)", "(SELECT NEW.*)"
    return [
        (
            "rpq_usage_alloc_insert",
            "",
            _pg_add_rows("new_rows"),
            stmt("rpq_usage_alloc_insert", "INSERT", "allocations", "NEW TABLE AS new_rows"),
        ),
        (
            "rpq_usage_alloc_delete",
            "SELECT 1 FROM old_rows",  # e.g. the old allocations of a new consumer
            _pg_remove_rows("old_rows"),
            stmt("rpq_usage_alloc_delete", "DELETE", "allocations", "OLD TABLE AS old_rows"),
        ),
        (
            "rpq_usage_alloc_update",
            "SELECT 1 FROM old_rows",
            "\n  DECLARE r record;\n  BEGIN" + _pg_update_rows() + "\n  END;",
            stmt("rpq_usage_alloc_update", "UPDATE", "allocations", old_new),
        ),
        (
            "rpq_usage_consumer_insert",
            # a consumer written before its allocations (rpquery, Placement) stops here
            "SELECT 1 FROM new_rows n JOIN allocations a ON a.consumer_id = n.uuid",
            _pg_add_consumers("new_rows"),
            stmt("rpq_usage_consumer_insert", "INSERT", "consumers", "NEW TABLE AS new_rows"),
        ),
        (
            "rpq_usage_consumer_delete",
            "",
            _pg_remove_consumers("old_rows"),
            stmt("rpq_usage_consumer_delete", "DELETE", "consumers", "OLD TABLE AS old_rows"),
        ),
        (
            "rpq_usage_consumer_update",
            "",
            _pg_remove_consumers(one_old) + _pg_add_consumers(one_new),
            consumer_update,
        ),
    ]


# ---------------------------------------------------------------- MySQL / MariaDB

_MY_DECLARE = """
  DECLARE p, u, k INT DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET p = NULL;"""


def _my_owner(row: str) -> str:
    return f"""
  SET p = NULL;
  SELECT project_id, user_id, COALESCE(consumer_type_id, 0) INTO p, u, k
  FROM consumers WHERE uuid = {row}.consumer_id;"""


def _my_add_allocation(row: str) -> str:
    return f"""{_my_owner(row)}
  IF p IS NOT NULL THEN
    INSERT INTO {TOTALS} ({T_COLS}) VALUES (p, u, k, {row}.resource_class_id, {row}.used, 1)
    ON DUPLICATE KEY UPDATE used = used + {row}.used, allocation_count = allocation_count + 1;
    IF NOT EXISTS (SELECT 1 FROM allocations
                   WHERE consumer_id = {row}.consumer_id AND id <> NEW.id) THEN
      INSERT INTO {COUNTS} ({C_COLS}) VALUES (p, u, k, 1)
      ON DUPLICATE KEY UPDATE consumer_count = consumer_count + 1;
    END IF;
  END IF;"""


def _my_remove_allocation(row: str, others: str) -> str:
    return f"""{_my_owner(row)}
  IF p IS NOT NULL THEN
    UPDATE {TOTALS} SET used = used - {row}.used, allocation_count = allocation_count - 1
    WHERE project_id = p AND user_id = u AND type_key = k
      AND resource_class_id = {row}.resource_class_id;
    IF NOT EXISTS (SELECT 1 FROM allocations WHERE consumer_id = {row}.consumer_id{others}) THEN
      UPDATE {COUNTS} SET consumer_count = consumer_count - 1
      WHERE project_id = p AND user_id = u AND type_key = k;
    END IF;
  END IF;"""


def _my_add_consumer(row: str) -> str:
    return f"""
  IF EXISTS (SELECT 1 FROM allocations WHERE consumer_id = {row}.uuid) THEN
    INSERT INTO {TOTALS} ({T_COLS})
    SELECT * FROM (
      SELECT {_key(row)}, a.resource_class_id AS rc, SUM(a.used) AS s, COUNT(*) AS n
      FROM allocations a WHERE a.consumer_id = {row}.uuid GROUP BY a.resource_class_id) d
    ON DUPLICATE KEY UPDATE used = {TOTALS}.used + d.s,
      allocation_count = {TOTALS}.allocation_count + d.n;
    INSERT INTO {COUNTS} ({C_COLS}) VALUES ({_key(row)}, 1)
    ON DUPLICATE KEY UPDATE consumer_count = consumer_count + 1;
  END IF;"""


def _my_remove_consumer(row: str) -> str:
    return f"""
  IF EXISTS (SELECT 1 FROM allocations WHERE consumer_id = {row}.uuid) THEN
    UPDATE {TOTALS} t JOIN (
      SELECT resource_class_id, SUM(used) AS s, COUNT(*) AS n FROM allocations
      WHERE consumer_id = {row}.uuid GROUP BY resource_class_id) d
      ON t.resource_class_id = d.resource_class_id
    SET t.used = t.used - d.s, t.allocation_count = t.allocation_count - d.n
    WHERE {_key_match("t", row)};
    UPDATE {COUNTS} t SET t.consumer_count = t.consumer_count - 1 WHERE {_key_match("t", row)};
  END IF;"""


def _mysql_triggers() -> list[str]:
    def trigger(name: str, event: str, table: str, body: str) -> str:
        return f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW\nBEGIN{body}\nEND"

    alloc_changed = (
        "NOT (OLD.consumer_id <=> NEW.consumer_id AND OLD.resource_class_id <=> "
        "NEW.resource_class_id AND OLD.used <=> NEW.used)"
    )
    consumer_changed = "NOT (" + _key_changed(null_safe="<=>").replace(" OR ", " AND ") + ")"
    return [
        trigger(
            "rpq_usage_alloc_insert",
            "INSERT",
            "allocations",
            _MY_DECLARE + _my_add_allocation("NEW"),
        ),
        trigger(
            "rpq_usage_alloc_delete",
            "DELETE",
            "allocations",
            _MY_DECLARE + _my_remove_allocation("OLD", ""),
        ),
        trigger(
            "rpq_usage_alloc_update",
            "UPDATE",
            "allocations",
            f"{_MY_DECLARE}\n  IF {alloc_changed} THEN"
            f"{_my_remove_allocation('OLD', ' AND id <> NEW.id')}"
            f"{_my_add_allocation('NEW')}\n  END IF;",
        ),
        trigger("rpq_usage_consumer_insert", "INSERT", "consumers", _my_add_consumer("NEW")),
        trigger("rpq_usage_consumer_delete", "DELETE", "consumers", _my_remove_consumer("OLD")),
        trigger(
            "rpq_usage_consumer_update",
            "UPDATE",
            "consumers",
            f"\n  IF {consumer_changed} THEN"
            f"{_my_remove_consumer('OLD')}{_my_add_consumer('NEW')}\n  END IF;",
        ),
    ]


# ---------------------------------------------------------------- upgrade / downgrade

TRIGGERS = (
    ("rpq_usage_alloc_insert", "allocations"),
    ("rpq_usage_alloc_delete", "allocations"),
    ("rpq_usage_alloc_update", "allocations"),
    ("rpq_usage_consumer_insert", "consumers"),
    ("rpq_usage_consumer_delete", "consumers"),
    ("rpq_usage_consumer_update", "consumers"),
)

BACKFILL = (
    f"INSERT INTO {TOTALS} ({T_COLS}) "
    f"SELECT {_key('c')}, a.resource_class_id, SUM(a.used), COUNT(*) "
    "FROM allocations a JOIN consumers c ON c.uuid = a.consumer_id "
    "GROUP BY c.project_id, c.user_id, COALESCE(c.consumer_type_id, 0), a.resource_class_id",
    f"INSERT INTO {COUNTS} ({C_COLS}) "
    f"SELECT {_key('c')}, COUNT(*) FROM consumers c "
    "WHERE EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = c.uuid) "
    "GROUP BY c.project_id, c.user_id, COALESCE(c.consumer_type_id, 0)",
)


def _ddl_statements(dialect: str) -> list[str]:
    if dialect == "postgresql":
        out = []
        for name, guard, body, trigger in _pg_objects():
            out.append(_pg_function(name, body, unless_empty=guard))
            out.append(trigger)
        out.append(
            _pg_function("rpq_usage_clear", f"\n  DELETE FROM {TOTALS};\n  DELETE FROM {COUNTS};")
        )
        for table in ("allocations", "consumers"):
            out.append(
                f"CREATE TRIGGER rpq_usage_{table}_truncate AFTER TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION rpq_usage_clear()"
            )
        return out
    if dialect in ("mysql", "mariadb"):
        return _mysql_triggers()
    return _sqlite_triggers()


def upgrade() -> None:
    # Our own leftovers first (idempotent upgrade): after every table was dropped and
    # Placement re-synced, PostgreSQL still holds the trigger functions (issue 15).
    _drop_everything(op.get_bind())
    op.create_table(
        TOTALS,
        sa.Column("project_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("user_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("type_key", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("resource_class_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("used", sa.BigInteger(), nullable=False),
        sa.Column("allocation_count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "project_id", "user_id", "type_key", "resource_class_id", name=f"{TOTALS}_pkey"
        ),
    )
    op.create_table(
        COUNTS,
        sa.Column("project_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("user_id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("type_key", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("consumer_count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "user_id", "type_key", name=f"{COUNTS}_pkey"),
    )
    bind = op.get_bind()
    try:
        create_triggers(
            bind,
            _ddl_statements(bind.dialect.name),
            "on allocations and consumers (usage summary, rpq0006)",
        )
    except SchemaError:
        if bind.dialect.name in ("mysql", "mariadb"):  # DDL is not transactional there
            _drop_everything(bind)
        raise
    for sql in BACKFILL:
        bind.exec_driver_sql(sql)


def downgrade() -> None:
    _drop_everything(op.get_bind())


def _drop_everything(bind: sa.engine.Connection) -> None:
    dialect = bind.dialect.name
    for name, table in TRIGGERS:
        on = f" ON {table}" if dialect == "postgresql" else ""
        bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}{on}")
    if dialect == "postgresql":
        for table in ("allocations", "consumers"):
            bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS rpq_usage_{table}_truncate ON {table}")
        for name, _ in TRIGGERS:
            bind.exec_driver_sql(f"DROP FUNCTION IF EXISTS {name}()")
        bind.exec_driver_sql("DROP FUNCTION IF EXISTS rpq_usage_clear()")
    bind.exec_driver_sql(f"DROP TABLE IF EXISTS {COUNTS}")
    bind.exec_driver_sql(f"DROP TABLE IF EXISTS {TOTALS}")
