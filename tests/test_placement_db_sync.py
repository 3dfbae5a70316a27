"""rpquery and OpenStack Placement share databases both ways, checked against the real
Placement (``openstack-placement`` from PyPI in ``.venv-placement``).

- ``rpquery db upgrade`` on a database made by ``placement-manage db sync`` adds only
  rpquery's tables, and the generator can then load a cloud into it;
- Placement answers from a database rpquery created and the generator filled.

Skipped unless ``.venv-placement`` exists (``make bench-placement`` creates it).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from benchmarks import side_by_side
from rpquery.db import Database
from rpquery.generator import CloudSpec, load_cloud
from rpquery.store import migrations
from rpquery.store.tables import PLACEMENT_HEAD, RPQUERY_TABLES
from tests.conftest import ALL_BACKENDS

READY, WHY = side_by_side.available()
pytestmark = pytest.mark.skipif(
    not READY, reason=f"no usable Placement: {WHY}; run `make bench-placement` to install it"
)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_rpquery_upgrades_a_database_placement_created(backend: str, database_url) -> None:  # type: ignore[no-untyped-def]
    url = database_url(backend)
    synced = side_by_side.db_sync(url)
    assert synced.returncode == 0, synced.stderr[-2000:]
    db = Database(url)
    try:
        before = migrations.status(db)
        assert before.is_placement_database and before.revision is None
        migrations.upgrade(db)
        after = migrations.status(db)
        assert after.up_to_date and after.placement_revision == PLACEMENT_HEAD
        names = set(sa.inspect(db.engine).get_table_names())
        assert {t.name for t in RPQUERY_TABLES} <= names
        summary = load_cloud(db, CloudSpec(hosts=5, sharing=1))
        assert summary.allocations > 0
    finally:
        db.dispose()


def test_placement_answers_from_a_database_rpquery_created(sqlite_db: Database) -> None:
    summary = load_cloud(sqlite_db, CloudSpec(hosts=6, sharing=1, seed=3))
    url = sqlite_db.url.render_as_string(hide_password=False)
    answer = side_by_side.run_driver(
        url, [{"name": "rps", "path": "/resource_providers", "rounds": 0}]
    )["rps"]
    assert answer["status"] == 200
    assert len(answer["body"]["resource_providers"]) == summary.providers
