"""The usage summary (migration rpq0006) stays equal to a recomputation from
``allocations`` whoever writes: rpquery's write path, the reshaper, raw SQL (multi-row
statements, consumers arriving after their allocations, retyped or moved consumers),
the bulk generator, and OpenStack Placement's own API on the same database.

Every check compares two things computed independently: the summary against a full
recomputation (:func:`verify_usage_summary`), and :func:`project_usages` (summary)
against :func:`project_usages_scan` (the pre-summary scan of the project's
allocations).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects import mysql, postgresql, sqlite

from benchmarks import side_by_side
from rpquery.db import Database
from rpquery.errors import NotFound, RpqueryError, SchemaError
from rpquery.generator import CloudSpec, load_cloud
from rpquery.models import ConsumerAllocations, Inventory
from rpquery.read.candidates import allocation_candidates
from rpquery.store import migrations
from rpquery.store.tables import allocations, consumer_counts, consumers, usage_totals
from rpquery.usage import reads as usages
from rpquery.usage.provider_totals import verify_provider_usages
from rpquery.usage.summary import rebuild_usage_summary, verify_usage_summary
from rpquery.write.allocations import delete_allocations, replace_allocations, replace_many
from rpquery.write.consumers import get_consumer
from rpquery.write.reshaper import ProviderInventories, reshape
from tests.conftest import empty_database
from tests.differential.placement import Placement
from tests.factories import Ref, consumer, new_uuid, provider

VCPU, MEM, DISK = 0, 1, 2  # standard resource class ids (os-resource-classes order)
FILTERS = (None, "all", "unknown", "INSTANCE", "MIGRATION")


def assert_exact(db: Database, projects: tuple[str, ...] = ("proj-a", "proj-b")) -> None:
    """Summary equals the recomputation, and every answer equals the scan's; the usage
    per provider (rpq0007, kept by its own triggers) equals its recomputation too."""
    assert verify_usage_summary(db) == []
    assert verify_provider_usages(db) == []
    for project in projects:
        for ctype in FILTERS:
            assert usages.project_usages(db, project, consumer_type=ctype) == (
                usages.project_usages_scan(db, project, consumer_type=ctype)
            )
        for user in ("user-1", "user-2"):
            assert usages.project_usages(db, project, user_id=user) == (
                usages.project_usages_scan(db, project, user_id=user)
            )
            assert usages.project_usages_total(db, project, user_id=user) == (
                usages.project_usages_total_scan(db, project, user_id=user)
            )
        assert usages.project_usages_total(db, project) == usages.project_usages_total_scan(
            db, project
        )


def nodes(db: Database, n: int = 2) -> list[Ref]:
    inventory = {"VCPU": 1000, "MEMORY_MB": 1_000_000, "DISK_GB": 10_000}
    with db.begin() as conn:
        return [provider(conn, f"cn{i}", inventory=inventory) for i in range(n)]


def _row(rp: Ref, consumer_uuid: str, rc: int, used: int) -> dict[str, Any]:
    return {
        "resource_provider_id": rp.id,
        "consumer_id": consumer_uuid,
        "resource_class_id": rc,
        "used": used,
    }


# ---------------------------------------------------------------- raw SQL


def test_raw_multi_row_writes_keep_the_summary_exact(db: Database) -> None:
    cn1, cn2 = nodes(db)
    a, b, c, late = new_uuid(), new_uuid(), new_uuid(), new_uuid()
    with db.begin() as conn:
        consumer(conn, a, project="proj-a", user="user-1", consumer_type="INSTANCE")
        consumer(conn, b, project="proj-a", user="user-2", consumer_type=None)
        consumer(conn, c, project="proj-b", user="user-1", consumer_type="MIGRATION")
        # one multi-VALUES INSERT: several rows of one consumer, and of three consumers
        conn.execute(
            allocations.insert().values(
                [
                    _row(cn1, a, VCPU, 2),
                    _row(cn1, a, MEM, 512),
                    _row(cn2, a, VCPU, 1),
                    _row(cn1, b, VCPU, 4),
                    _row(cn2, c, DISK, 10),
                ]
            )
        )
    assert_exact(db)
    report = usages.project_usages(db, "proj-a")
    assert usages.render_project_usages(report) == {
        "usages": {
            "INSTANCE": {"consumer_count": 1, "VCPU": 3, "MEMORY_MB": 512},
            "unknown": {"consumer_count": 1, "VCPU": 4},
        }
    }
    with db.begin() as conn:  # executemany, and allocations of a consumer not there yet
        conn.execute(
            allocations.insert(),
            [_row(cn2, b, MEM, 256), _row(cn1, late, VCPU, 8), _row(cn2, late, MEM, 64)],
        )
    assert_exact(db)
    assert usages.project_usages(db, "proj-a", consumer_type="all").groups[0].consumer_count == 2
    with db.begin() as conn:  # the consumer arrives: its allocations are picked up
        consumer(conn, late, project="proj-a", user="user-1", consumer_type="INSTANCE")
    assert_exact(db)
    assert usages.project_usages(db, "proj-a").group("INSTANCE") == usages.UsageGroup(
        "INSTANCE", 2, {"MEMORY_MB": 576, "VCPU": 11}
    )


def test_raw_deletes_and_updates_keep_the_summary_exact(db: Database) -> None:
    cn1, cn2 = nodes(db)
    a, b = new_uuid(), new_uuid()
    with db.begin() as conn:
        consumer(conn, a, project="proj-a", user="user-1", consumer_type="INSTANCE")
        consumer(conn, b, project="proj-a", user="user-1", consumer_type="INSTANCE")
        conn.execute(
            allocations.insert().values(
                [_row(cn1, a, VCPU, 2), _row(cn1, a, MEM, 512), _row(cn2, a, VCPU, 1)]
                + [_row(cn1, b, VCPU, 1), _row(cn2, b, DISK, 5)]
            )
        )
    steps = [
        # several rows of one consumer in one statement, the consumer keeps one
        allocations.delete().where(
            allocations.c.consumer_id == a, allocations.c.resource_class_id == VCPU
        ),
        # retyped to no type: its usage moves to "unknown"
        consumers.update().where(consumers.c.uuid == b).values(consumer_type_id=None),
        # rows moved from one consumer to another, amounts changed
        allocations.update()
        .where(allocations.c.consumer_id == b, allocations.c.resource_class_id == VCPU)
        .values(consumer_id=a, used=allocations.c.used + 2),
        allocations.update().values(used=allocations.c.used + 1),
        # a consumer deleted before its allocations: they no longer count
        consumers.delete().where(consumers.c.uuid == b),
        # every remaining row of every consumer in one statement
        allocations.delete(),
    ]
    for stmt in steps:
        with db.begin() as conn:
            conn.execute(stmt)
        assert_exact(db)
    assert usages.project_usages(db, "proj-a").groups == ()  # no empty groups
    assert usages.project_usages_total(db, "proj-a") == {}


def test_truncate_empties_the_summary_on_postgresql(request: pytest.FixtureRequest) -> None:
    """PostgreSQL fires statement triggers on TRUNCATE (MySQL fires none: rebuild)."""
    db: Database = request.getfixturevalue("_migrated")("postgresql")
    empty_database(db)
    (cn1,) = nodes(db, 1)
    for table in ("allocations", "consumers"):
        uuid = new_uuid()
        with db.begin() as conn:
            consumer(conn, uuid, project="proj-a", user="user-1")
            conn.execute(allocations.insert().values([_row(cn1, uuid, VCPU, 2)]))
        assert usages.project_usages(db, "proj-a").groups
        with db.begin() as conn:
            conn.exec_driver_sql(f"TRUNCATE {table}")
        assert_exact(db)
        assert usages.project_usages(db, "proj-a").groups == ()


def test_consumer_moved_to_another_project_and_user(db: Database) -> None:
    (cn1,) = nodes(db, 1)
    a = new_uuid()
    with db.begin() as conn:
        consumer(conn, a, project="proj-a", user="user-1", consumer_type="INSTANCE")
        consumer(conn, new_uuid(), project="proj-b", user="user-2")  # creates them
        conn.execute(allocations.insert().values([_row(cn1, a, VCPU, 3), _row(cn1, a, MEM, 9)]))
        owner = conn.execute(
            sa.select(consumers.c.project_id, consumers.c.user_id).where(consumers.c.uuid != a)
        ).one()
        conn.execute(
            consumers.update()
            .where(consumers.c.uuid == a)
            .values(project_id=owner.project_id, user_id=owner.user_id)
        )
    assert_exact(db)
    assert usages.project_usages_total(db, "proj-b", user_id="user-2") == {
        "MEMORY_MB": 9,
        "VCPU": 3,
    }
    assert usages.project_usages(db, "proj-a").groups == ()
    orphan = new_uuid()  # rows of a uuid no consumer has (yet)
    with db.begin() as conn:
        conn.execute(allocations.insert().values([_row(cn1, orphan, DISK, 40)]))
        conn.execute(consumers.update().where(consumers.c.uuid == a).values(uuid=orphan))
    assert_exact(db)  # the consumer now owns the orphan's rows; its old rows own nobody
    assert usages.project_usages_total(db, "proj-b", user_id="user-2") == {"DISK_GB": 40}


def test_bulk_generator_keeps_the_summary_exact(db: Database) -> None:
    summary = load_cloud(db, CloudSpec(hosts=8, sharing=1, seed=5, projects=3))
    assert summary.allocations > 50
    assert verify_usage_summary(db) == []
    for project in summary.project_ids:
        for ctype in (None, "all"):
            got = usages.project_usages(db, project, consumer_type=ctype)
            assert got == usages.project_usages_scan(db, project, consumer_type=ctype)
            assert got.groups


# ---------------------------------------------------------------- write path (property)

TYPES = ("INSTANCE", "MIGRATION", "OTHER")
PROJECTS = ("proj-a", "proj-b")
USERS = ("user-1", "user-2")
CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")

allocs = st.dictionaries(
    st.integers(0, 2),  # provider index
    st.dictionaries(st.sampled_from(CLASSES), st.integers(1, 9), max_size=3),
    max_size=2,
)
put = st.tuples(
    st.just("put"),
    st.integers(0, 3),  # consumer index
    st.sampled_from(PROJECTS),
    st.sampled_from(USERS),
    st.sampled_from(TYPES),
    allocs,
)
operations = st.lists(
    st.one_of(
        put,
        st.tuples(st.just("many"), st.lists(put, min_size=2, max_size=3)),
        st.tuples(st.just("delete"), st.integers(0, 3)),
        st.tuples(st.just("reshape"), st.integers(0, 3), st.integers(0, 2)),
        st.tuples(st.just("untype"), st.integers(0, 3)),
    ),
    min_size=1,
    max_size=6,
)

EXAMPLES = int(os.environ.get("RPQUERY_SUMMARY_EXAMPLES", "25"))


def _generation(db: Database, consumer_uuid: str) -> int | None:
    try:
        return get_consumer(db, consumer_uuid).generation
    except NotFound:
        return None


class _World:
    """The database under test, its providers and consumers; applies one operation."""

    def __init__(self, db: Database) -> None:
        empty_database(db)
        self.db = db
        self.rps = nodes(db, 3)
        self.consumers = [new_uuid() for _ in range(4)]

    def request(self, op: tuple[Any, ...]) -> ConsumerAllocations:
        _, idx, project, user, ctype, wanted = op
        uuid = self.consumers[idx]
        mapping = {self.rps[i].uuid: dict(rcs) for i, rcs in wanted.items()}
        return ConsumerAllocations(uuid, project, user, ctype, _generation(self.db, uuid), mapping)

    def apply(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        if kind == "put":
            replace_allocations(self.db, self.request(op))
        elif kind == "many":
            by_consumer = {p[1]: p for p in op[1]}  # one request per consumer
            replace_many(self.db, [self.request(p) for p in by_consumer.values()])
        elif kind == "delete":
            uuid = self.consumers[op[1]]
            generation = _generation(self.db, uuid)
            if generation is not None:
                delete_allocations(self.db, uuid, consumer_generation=generation)
        elif kind == "reshape":
            self._reshape(self.consumers[op[1]], self.rps[op[2]])
        elif kind == "untype":  # a legacy consumer (NULL type), written behind our back
            with self.db.begin() as conn:
                conn.execute(
                    consumers.update()
                    .where(consumers.c.uuid == self.consumers[op[1]])
                    .values(consumer_type_id=None)
                )

    def _reshape(self, uuid: str, target: Ref) -> None:
        """Move every allocation of ``uuid`` onto ``target`` (inventories unchanged)."""
        try:
            current = get_consumer(self.db, uuid)
        except NotFound:
            return
        view = usages.consumer_allocations(self.db, uuid)
        moved: dict[str, int] = {}
        for pa in view.allocations.values():
            for rc, used in pa.resources.items():
                moved[rc] = moved.get(rc, 0) + used
        generation = self.db_generation(target)
        inventory = {
            "VCPU": Inventory(1000),
            "MEMORY_MB": Inventory(1_000_000),
            "DISK_GB": Inventory(10_000),
        }
        request = ConsumerAllocations(
            uuid,
            current.project_id,
            current.user_id,
            current.consumer_type or "INSTANCE",
            current.generation,
            {target.uuid: moved},
        )
        reshape(self.db, {target.uuid: ProviderInventories(generation, inventory)}, [request])

    def db_generation(self, rp: Ref) -> int:
        with self.db.connect() as conn:
            return int(
                conn.exec_driver_sql(
                    f"SELECT generation FROM resource_providers WHERE id = {rp.id}"
                ).scalar_one()
            )


def test_write_path_keeps_the_summary_exact(db: Database) -> None:
    examples = EXAMPLES if db.dialect_name == "sqlite" else max(3, EXAMPLES // 5)
    applied = {"ops": 0}

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(ops=operations)
    def check(ops: list[tuple[Any, ...]]) -> None:
        world = _World(db)
        for op in ops:
            try:
                world.apply(op)
                applied["ops"] += 1
            except RpqueryError:
                pass  # refused writes change nothing; the summary must still match
            assert_exact(db)

    check()
    assert applied["ops"] >= examples  # most writes went through


def test_retyping_through_the_write_path_moves_usage(db: Database) -> None:
    (cn1,) = nodes(db, 1)
    uuid = new_uuid()
    first = ConsumerAllocations(
        uuid, "proj-a", "user-1", "INSTANCE", None, {cn1.uuid: {"VCPU": 2, "MEMORY_MB": 64}}
    )
    replace_allocations(db, first)
    again = ConsumerAllocations(
        uuid, "proj-a", "user-2", "MIGRATION", 1, {cn1.uuid: {"VCPU": 2, "MEMORY_MB": 64}}
    )
    replace_allocations(db, again)
    assert_exact(db)
    assert usages.render_project_usages(usages.project_usages(db, "proj-a")) == {
        "usages": {"MIGRATION": {"consumer_count": 1, "VCPU": 2, "MEMORY_MB": 64}}
    }


# ---------------------------------------------------------------- backfill, verify, rebuild


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mysql"])
def test_backfill_summarises_data_written_before_the_upgrade(
    backend: str, database_url: Any
) -> None:
    db = Database(database_url(backend))
    try:
        migrations.upgrade(db, "rpq0005")
        cn1, cn2 = nodes(db)
        with db.begin() as conn:
            for i, (project, ctype) in enumerate(
                [("proj-a", "INSTANCE"), ("proj-a", None), ("proj-b", "MIGRATION")]
            ):
                uuid = new_uuid()
                consumer(conn, uuid, project=project, user=USERS[i % 2], consumer_type=ctype)
                conn.execute(
                    allocations.insert().values(
                        [_row(cn1, uuid, VCPU, i + 1), _row(cn2, uuid, MEM, 100)]
                    )
                )
            conn.execute(allocations.insert().values([_row(cn1, new_uuid(), VCPU, 50)]))
        expected = usages.project_usages_scan(db, "proj-a")
        migrations.upgrade(db)
        with db.connect() as conn:
            stored = conn.execute(sa.select(sa.func.count()).select_from(usage_totals)).scalar()
        assert stored == 6  # 3 consumers x 2 classes; the orphan allocation counts nowhere
        assert verify_usage_summary(db) == []
        # rpq0007's backfill too: usage per provider, the orphan allocation included
        assert verify_provider_usages(db) == []
        assert vcpu_used(db, cn1.uuid) == 1 + 2 + 3 + 50
        assert usages.project_usages(db, "proj-a") == expected
        assert usages.render_project_usages(expected) == {
            "usages": {
                "INSTANCE": {"consumer_count": 1, "VCPU": 1, "MEMORY_MB": 100},
                "unknown": {"consumer_count": 1, "VCPU": 2, "MEMORY_MB": 100},
            }
        }
    finally:
        db.dispose()


def test_verify_finds_and_rebuild_repairs_a_stale_summary(db: Database) -> None:
    cn1, _ = nodes(db)
    a, b = new_uuid(), new_uuid()
    with db.begin() as conn:
        consumer(conn, a, project="proj-a", user="user-1", consumer_type="INSTANCE")
        consumer(conn, b, project="proj-a", user="user-1", consumer_type="INSTANCE")
        conn.execute(allocations.insert().values([_row(cn1, a, VCPU, 2), _row(cn1, b, VCPU, 3)]))
        conn.execute(allocations.delete().where(allocations.c.consumer_id == b))
    with db.begin() as conn:  # stale: as if rows had been written with triggers off
        conn.execute(usage_totals.update().values(used=usage_totals.c.used + 7))
        conn.execute(consumer_counts.delete())
    found = verify_usage_summary(db)
    assert {(d.table, d.stored, d.expected) for d in found} == {
        ("totals", (9, 1), (2, 1)),
        ("counts", None, (1,)),
    }
    rebuild_usage_summary(db)
    assert verify_usage_summary(db) == []
    with db.connect() as conn:  # the empty (project, user, type) rows are dropped too
        assert conn.execute(sa.select(usage_totals.c.allocation_count)).scalars().all() == [1]
    assert_exact(db)


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect(), mysql.dialect()])
def test_summary_statement_groups_only_selected_columns(dialect: sa.Dialect) -> None:
    """No database: every non-aggregate column of each SELECT is grouped, and the
    statement reads the summary, never ``allocations``."""
    stmt = usages.summary_usages_statement("p", user_id="u", consumer_type="INSTANCE")
    sql = str(stmt.compile(dialect=dialect))
    assert "allocations" not in sql.replace("allocation_count", "")
    assert "GROUP BY rpq_usage_totals.type_key, rpq_usage_totals.resource_class_id" in sql
    assert "GROUP BY rpq_consumer_counts.type_key" in sql
    total = str(usages.summary_usages_statement("p", consumer_type="all").compile(dialect=dialect))
    assert "GROUP BY rpq_usage_totals.resource_class_id" in total
    assert "type_key" not in total.split("UNION ALL")[0].split("WHERE")[0]


# ---------------------------------------------------------------- privileges


@pytest.mark.parametrize(
    ("start", "new_tables"),
    [
        ("rpq0005", {"rpq_usage_totals", "rpq_consumer_counts"}),  # rpq0006's triggers
        ("rpq0006", {"rpq_provider_usages"}),  # rpq0007's triggers
    ],
)
@pytest.mark.parametrize("backend", ["postgresql", "mysql"])
def test_missing_trigger_privilege_is_a_clear_schema_error(
    backend: str, database_url: Any, start: str, new_tables: set[str]
) -> None:
    url = sa.make_url(database_url(backend))
    admin = Database(url)
    user = f"rpq_h4_{new_uuid()[:8]}"
    try:
        migrations.upgrade(admin, start, sync=False)
        with admin.begin() as conn:
            if backend == "postgresql":
                conn.exec_driver_sql(f"CREATE ROLE {user} LOGIN")
                conn.exec_driver_sql(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {user}")
                conn.exec_driver_sql(f"GRANT CREATE ON SCHEMA public TO {user}")
                conn.exec_driver_sql(f"REVOKE TRIGGER ON allocations, consumers FROM {user}")
            else:
                conn.exec_driver_sql(f"CREATE USER '{user}'@'%%'")
                privileges = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER"
                conn.exec_driver_sql(f"GRANT {privileges} ON {url.database}.* TO '{user}'@'%%'")
        limited = Database(url.set(username=user, password=None))
        try:
            with pytest.raises(SchemaError) as info:
                migrations.upgrade(limited, sync=False)
        finally:
            limited.dispose()
        assert info.value.code == "rpquery.schema.trigger_privilege"
        assert "TRIGGER" in info.value.detail
        assert migrations.status(admin).revision == start
        assert not new_tables & set(
            sa.inspect(admin.engine).get_table_names()
        )  # nothing half-made, even where DDL is not transactional
        migrations.upgrade(admin, sync=False)  # whoever may create triggers finishes it
        assert verify_usage_summary(admin) == []
        assert verify_provider_usages(admin) == []
    finally:
        with admin.begin() as conn:
            if backend == "postgresql":
                conn.exec_driver_sql(f"DROP OWNED BY {user}")
                conn.exec_driver_sql(f"DROP ROLE IF EXISTS {user}")
            else:
                conn.exec_driver_sql(f"DROP USER IF EXISTS '{user}'@'%%'")
        admin.dispose()


# ---------------------------------------------------------------- Placement writes

PLACEMENT_READY, PLACEMENT_WHY = side_by_side.available()


def placement(db: Database, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run ``requests`` through OpenStack Placement's own WSGI app on ``db``
    (:class:`tests.differential.placement.Placement`)."""
    with Placement(db.url.render_as_string(hide_password=False)) as running:
        return running.ask(requests)


def vcpu_used(db: Database, rp_uuid: str) -> int:
    """VCPU usage of a provider as allocation candidates report it."""
    summaries = allocation_candidates(db, "resources=VCPU:1").provider_summaries
    return summaries[rp_uuid].resources["VCPU"].used


def _put(uuid: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"method": "PUT", "path": f"/allocations/{uuid}", "body": body}


@pytest.mark.skipif(not PLACEMENT_READY, reason=f"no usable Placement: {PLACEMENT_WHY}")
@pytest.mark.parametrize("backend", ["sqlite", "mysql"])
def test_placement_writes_keep_the_summary_exact(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Placement's PUT (with consumer_type), replace and DELETE of allocations, on an
    rpquery database: the triggers follow, and Placement's own GET /usages agrees.

    Not on PostgreSQL: the pinned Placement cannot write there through psycopg 3 (its
    project insert reads ``cursor.lastrowid``, which psycopg 3 does not have), before
    any trigger runs. The PostgreSQL triggers get the same statements from rpquery's
    write path and raw SQL above."""
    db: Database = request.getfixturevalue("_migrated")(backend)
    empty_database(db)
    cn1, cn2 = nodes(db)
    a, b = new_uuid(), new_uuid()
    owner = {"project_id": "proj-a", "user_id": "user-1"}
    usages_path = {"method": "GET", "path": "/usages?project_id=proj-a"}
    first = placement(
        db,
        [
            _put(a, {
                "allocations": {
                    cn1.uuid: {"resources": {"VCPU": 2, "MEMORY_MB": 256}},
                    cn2.uuid: {"resources": {"DISK_GB": 5}},
                },
                **owner, "consumer_generation": None, "consumer_type": "INSTANCE",
            }),
            _put(b, {
                "allocations": {cn2.uuid: {"resources": {"VCPU": 1}}},
                "project_id": "proj-a", "user_id": "user-2",
                "consumer_generation": None, "consumer_type": "MIGRATION",
            }),
            _put(a, {  # replace: other amounts, no disk, and a new type
                "allocations": {cn2.uuid: {"resources": {"VCPU": 3, "MEMORY_MB": 128}}},
                **owner, "consumer_generation": 1, "consumer_type": "MIGRATION",
            }),
            usages_path,
        ],
    )  # fmt: skip
    assert [r["status"] for r in first[:3]] == [204, 204, 204], first
    assert_exact(db)
    # rpq0007's usage per provider follows Placement's writes too (the read path's)
    assert verify_provider_usages(db) == []
    assert vcpu_used(db, cn2.uuid) == 4
    ours = usages.render_project_usages(usages.project_usages(db, "proj-a"))
    assert ours == {"usages": {"MIGRATION": {"consumer_count": 2, "VCPU": 4, "MEMORY_MB": 128}}}
    if first[3]["status"] == 200:
        assert first[3]["body"] == ours
    second = placement(db, [{"method": "DELETE", "path": f"/allocations/{b}"}, usages_path])
    assert second[0]["status"] == 204, second
    assert_exact(db)
    assert verify_provider_usages(db) == [] and vcpu_used(db, cn2.uuid) == 3
    ours = usages.render_project_usages(usages.project_usages(db, "proj-a"))
    assert ours == {"usages": {"MIGRATION": {"consumer_count": 1, "VCPU": 3, "MEMORY_MB": 128}}}
    if second[1]["status"] == 200:
        assert second[1]["body"] == ours
