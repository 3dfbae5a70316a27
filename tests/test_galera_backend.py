"""The ``galera`` test backend itself (``RPQUERY_TEST_BACKENDS=galera``, ``make
test-galera``; tests/conftest.py): the connections of one ``Database`` really go to the
three nodes in turn, each node runs with ``wsrep_sync_wait=7``, and a write committed
through one node is read through the next. Collected only when the backend is selected
(``collect_ignore`` in tests/conftest.py)."""

from __future__ import annotations

import pytest

from rpquery.db import Database
from rpquery.write import providers


@pytest.fixture
def galera_db(request: pytest.FixtureRequest) -> Database:
    db: Database = request.getfixturevalue("_migrated")("galera")
    return db


def _node_and_settings(db: Database) -> tuple[str, int, int]:
    with db.connect() as conn:
        row = conn.exec_driver_sql(
            "SELECT @@wsrep_node_name, @@wsrep_sync_wait, "
            "(SELECT variable_value FROM information_schema.global_status "
            "WHERE variable_name = 'WSREP_CLUSTER_SIZE')"
        ).one()
    return str(row[0]), int(row[1]), int(row[2])


def test_each_connection_goes_to_the_next_node(galera_db: Database) -> None:
    seen = [_node_and_settings(galera_db) for _ in range(6)]
    names = [name for name, _, _ in seen]
    assert set(names) == {"node1", "node2", "node3"}
    assert all(a != b for a, b in zip(names, names[1:], strict=False)), names
    assert {(wait, size) for _, wait, size in seen} == {(7, 3)}


def test_a_write_through_one_node_is_read_through_the_next(galera_db: Database) -> None:
    made = providers.create_provider(galera_db, "spread-rp")
    for _ in range(3):  # three connections: three nodes
        assert providers.get_provider(galera_db, made.uuid).name == "spread-rp"
