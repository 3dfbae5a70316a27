"""``dialects.in_id_list``: an id list of any length bound as one parameter (a
PostgreSQL array literal, SQLite ``json_each``, MySQL inline), on every backend.

Whole-cloud answers bind the ids of thousands of trees; the statement is the same text
for every request, so psycopg prepares it after five runs and PostgreSQL may reuse a
plan: the answers must stay right whatever the list's length, run after run."""

from __future__ import annotations

import sqlalchemy as sa

from rpquery.db import Database
from rpquery.store import dialects
from rpquery.store.tables import resource_classes

STMT = (
    sa.select(resource_classes.c.id)
    .where(dialects.in_id_list(resource_classes.c.id, "ids"))
    .order_by(resource_classes.c.id)
)


def test_lists_of_any_length_select_exactly_their_ids(db: Database) -> None:
    with db.connect() as conn:
        dialects.read_session_setup(conn)
        known = [int(i) for i in conn.execute(sa.select(resource_classes.c.id)).scalars()]
        assert len(known) > 10  # the standard classes
        cases = [
            [],
            [known[3]],
            known[::2],
            list(range(-5, 6000)),  # thousands of ids, most of them absent
            [known[1], known[1], 10**6],  # duplicates and a missing id
        ]
        # more runs than psycopg's prepare threshold, short and long lists interleaved
        for ids in cases * 4:
            got = list(conn.execute(STMT, {"ids": ids}).scalars())
            assert got == sorted(set(known) & set(ids)), ids[:5]


def test_negated_list_keeps_sql_semantics(db: Database) -> None:
    stmt = sa.select(sa.func.count()).where(
        sa.not_(dialects.in_id_list(resource_classes.c.id, "ids"))
    )
    with db.connect() as conn:
        total = conn.execute(sa.select(sa.func.count()).select_from(resource_classes)).scalar()
        assert conn.execute(stmt, {"ids": [0, 1]}).scalar() == total - 2
