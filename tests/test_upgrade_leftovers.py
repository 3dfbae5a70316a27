"""``rpquery db upgrade`` is idempotent over its own leftovers (issue 15, item 11).

An operator drops every table (PostgreSQL keeps rpquery's trigger functions: they
belong to the schema, not to a table), re-syncs with Placement's ``placement-manage db
sync``, and upgrades again: the upgrade must not stop on ``function ... already exists``,
and the triggers it recreates must keep the usage tables exact.

Skipped unless ``.venv-placement`` exists (``make placement-venv``).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from benchmarks import side_by_side
from rpquery.db import Database
from rpquery.generator import CloudSpec, load_cloud
from rpquery.store import migrations
from rpquery.usage.provider_totals import verify_provider_usages
from rpquery.usage.summary import verify_usage_summary
from tests.conftest import ALL_BACKENDS, _ran

READY, WHY = side_by_side.available()
pytestmark = pytest.mark.skipif(
    not READY, reason=f"no usable Placement: {WHY}; run `make placement-venv` to install it"
)


def _drop_every_table(db: Database) -> None:
    names = sa.inspect(db.engine).get_table_names()
    with db.begin() as conn:
        if db.dialect_name == "postgresql":
            conn.exec_driver_sql(f"DROP TABLE {', '.join(names)} CASCADE")
        elif db.dialect_name == "mysql":
            conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS = 0")
            conn.exec_driver_sql(f"DROP TABLE {', '.join(names)}")
            conn.exec_driver_sql("SET FOREIGN_KEY_CHECKS = 1")
        else:
            conn.exec_driver_sql("PRAGMA foreign_keys = OFF")
            for name in names:
                conn.exec_driver_sql(f"DROP TABLE {name}")
    assert sa.inspect(db.engine).get_table_names() == []


def _leftover_functions(db: Database) -> int:
    if db.dialect_name != "postgresql":
        return 0
    with db.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM pg_proc WHERE starts_with(proname, 'rpq_')"
            ).scalar()
        )


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_upgrade_after_tables_dropped_and_placement_resynced(backend: str, database_url) -> None:  # type: ignore[no-untyped-def]
    url = database_url(backend)
    _ran[backend] += 1
    db = Database(url)
    try:
        migrations.upgrade(db)
        functions = _leftover_functions(db)
        _drop_every_table(db)
        assert _leftover_functions(db) == functions  # PostgreSQL keeps them
        if backend == "postgresql":
            assert functions >= 8
        synced = side_by_side.db_sync(url)
        assert synced.returncode == 0, synced.stderr[-2000:]
        migrations.upgrade(db)
        assert migrations.status(db).up_to_date
        migrations.upgrade(db)  # and once more: nothing to do, nothing fails
        summary = load_cloud(db, CloudSpec(hosts=4, sharing=1, seed=7))
        assert summary.allocations > 0
        assert verify_usage_summary(db) == []
        assert verify_provider_usages(db) == []
    finally:
        db.dispose()
