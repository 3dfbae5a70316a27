"""Migrations: walk every revision up and down on every backend; the migrated schema
equals ``rpquery.store.tables``; a Placement database is recognised and kept; migrations
import no live code."""

from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

import os_resource_classes as orc
import os_traits
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

import rpquery
from rpquery.db import Database
from rpquery.errors import InvalidRequest, SchemaError
from rpquery.store import migrations
from rpquery.store.tables import PLACEMENT_HEAD, RPQUERY_TABLES, metadata, resource_providers
from tests.conftest import ALL_BACKENDS, _ran


@pytest.fixture(params=ALL_BACKENDS)
def fresh_db(request, database_url):  # type: ignore[no-untyped-def]
    db = Database(database_url(request.param))
    _ran[request.param] += 1
    yield db
    db.dispose()


def _diff(db: Database) -> list:
    with db.connect() as conn:
        ctx = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "include_object": migrations.include_object,
                "target_metadata": metadata,
            },
        )
        return compare_metadata(ctx, metadata)


def _tables(db: Database) -> set[str]:
    with db.connect() as conn:
        return set(sa.inspect(conn).get_table_names())


def test_upgrade_matches_tables_module(fresh_db: Database) -> None:
    migrations.upgrade(fresh_db)
    assert _diff(fresh_db) == []
    st = migrations.status(fresh_db)
    assert st.up_to_date and st.revision == migrations.head_revision()
    assert st.is_placement_database  # Placement's version table is stamped for Placement


def test_walk_every_revision_up_and_down(fresh_db: Database) -> None:
    script = ScriptDirectory.from_config(migrations._config())
    revisions = [r.revision for r in reversed(list(script.walk_revisions()))]
    assert revisions[0] == "rpq0001"
    for rev in revisions:
        migrations.upgrade(fresh_db, rev, sync=False)
        assert migrations.status(fresh_db).revision == rev
    for previous in reversed(["base", *revisions[:-1]]):
        migrations.downgrade(fresh_db, previous)
        assert migrations.status(fresh_db).revision == (None if previous == "base" else previous)
    own = {t.name for t in RPQUERY_TABLES}
    assert not own & _tables(fresh_db)
    assert "resource_providers" in _tables(fresh_db)  # Placement's tables are never dropped
    migrations.upgrade(fresh_db)
    assert _diff(fresh_db) == []


def test_standard_classes_and_traits_synced(fresh_db: Database) -> None:
    migrations.upgrade(fresh_db)
    migrations.upgrade(fresh_db)  # idempotent
    with fresh_db.connect() as conn:
        rcs = dict(conn.execute(sa.text("SELECT name, id FROM resource_classes")).all())
        trait_names = set(conn.execute(sa.text("SELECT name FROM traits")).scalars())
    assert rcs == {name: i for i, name in enumerate(orc.STANDARDS)}
    assert trait_names == set(os_traits.get_traits())


def test_placement_database_is_recognised_and_kept(fresh_db: Database) -> None:
    # A database holding only Placement's schema (what placement-manage db sync
    # leaves): Placement's tables and version table, no rpquery version table.
    migrations.upgrade(fresh_db, "rpq0001", sync=False)
    with fresh_db.begin() as conn:
        conn.exec_driver_sql("DROP TABLE rpquery_alembic_version")
        conn.execute(
            resource_providers.insert().values(id=1, uuid="u" * 36, name="cn1", generation=7)
        )
    before = migrations.status(fresh_db)
    assert before.revision is None and before.is_placement_database

    migrations.upgrade(fresh_db)

    assert _diff(fresh_db) == []
    with fresh_db.connect() as conn:
        row = conn.execute(sa.select(resource_providers.c.name, resource_providers.c.generation))
        assert row.all() == [("cn1", 7)]
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    assert version == PLACEMENT_HEAD


def test_partial_placement_schema_is_refused(fresh_db: Database) -> None:
    with fresh_db.begin() as conn:
        resource_providers.create(conn)
    with pytest.raises(SchemaError) as info:
        migrations.upgrade(fresh_db)
    assert info.value.code == "rpquery.schema.partial_placement"
    assert "consumers" in info.value.detail


def test_outdated_placement_schema_is_refused(fresh_db: Database) -> None:
    migrations.upgrade(fresh_db, "rpq0001", sync=False)
    with fresh_db.begin() as conn:
        conn.exec_driver_sql("DROP TABLE rpquery_alembic_version")
        # consumers as it was before Placement's 422ece571366 (no consumer type)
        conn.exec_driver_sql("DROP TABLE consumers")
        conn.exec_driver_sql(
            "CREATE TABLE consumers (id INTEGER PRIMARY KEY, uuid VARCHAR(36) NOT NULL,"
            " project_id INTEGER NOT NULL, user_id INTEGER NOT NULL)"
        )
    with pytest.raises(SchemaError) as info:
        migrations.upgrade(fresh_db)
    assert info.value.code == "rpquery.schema.placement_outdated"


def test_require_current(fresh_db: Database) -> None:
    with pytest.raises(SchemaError) as info:
        migrations.require_current(fresh_db)
    assert info.value.code == "rpquery.schema.outdated"
    migrations.upgrade(fresh_db)
    migrations.require_current(fresh_db)


# ---------------------------------------------------------------- frozen migrations

#: What a migration (``schema/versions/*.py``) and ``schema/frozen.py`` may import from
#: rpquery: the public package's ``__all__`` (``SchemaError``) and the frozen helpers.
#: Anything else is live code, whose later edits would change what a released revision
#: does (docs/design.md#schema).
FROZEN_MAY_IMPORT = {"rpquery", "rpquery.schema.frozen"}


def _live_imports(source: str) -> list[str]:
    """The imports of rpquery code outside :data:`FROZEN_MAY_IMPORT` (or, from
    ``rpquery`` itself, of names outside its ``__all__``)."""
    bad: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [(a.name, ["*"]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [(node.module, [a.name for a in node.names])]
        else:
            continue
        for module, names in modules:
            if module.split(".")[0] != "rpquery":
                continue
            if module not in FROZEN_MAY_IMPORT:
                bad.append(module)
            elif module == "rpquery":
                bad += [f"rpquery.{n}" for n in names if n not in rpquery.__all__]
    return bad


def test_the_import_check_finds_live_imports() -> None:
    assert _live_imports("from rpquery.dialects import ExactText") == ["rpquery.dialects"]
    assert _live_imports("import rpquery.tables") == ["rpquery.tables"]
    assert _live_imports("from rpquery import dialects, SchemaError") == ["rpquery.dialects"]
    assert _live_imports("from rpquery import SchemaError\nimport sqlalchemy") == []


def test_migrations_import_no_live_code() -> None:
    schema = migrations.schema_dir()
    files = [*sorted((schema / "versions").glob("rpq*.py")), schema / "frozen.py"]
    assert len(files) > 7
    found = {f.name: _live_imports(f.read_text()) for f in files}
    assert {name: bad for name, bad in found.items() if bad} == {}


def test_frozen_helpers_doctests() -> None:
    frozen = importlib.import_module("rpquery.schema.frozen")
    assert Path(frozen.__file__ or "").name == "frozen.py"
    result = doctest.testmod(frozen)
    assert result.attempted > 0 and result.failed == 0


class _OtherDialect(SQLiteDialect_pysqlite):
    """SQLite's driver under a name rpquery does not know: a real dialect that connects,
    standing in for a backend with no module in ``rpquery.store.dialects``."""

    name = "otherdb"
    supports_statement_cache = True


sa.dialects.registry.register("otherdb", __name__, "_OtherDialect")


@pytest.mark.parametrize("handed_over", [True, False], ids=["connection", "alembic-command"])
def test_env_refuses_an_unknown_dialect_before_any_migration(
    tmp_path: Path, handed_over: bool
) -> None:
    """``schema/env.py`` refuses a dialect outside the registry before the first revision
    runs (a migration's ``else`` would otherwise give it SQLite's trigger DDL), whether
    the connection is handed over (``migrations.upgrade``) or opened from
    ``sqlalchemy.url`` (the ``alembic`` command)."""
    path = tmp_path / "other.db"
    engine = sa.create_engine(f"otherdb:///{path}")
    assert engine.dialect.name == "otherdb"
    with pytest.raises(InvalidRequest) as refused, engine.begin() as conn:
        config = migrations._config(conn if handed_over else None)
        if not handed_over:
            config.set_main_option("sqlalchemy.url", f"otherdb:///{path}")
        command.upgrade(config, "head")
    engine.dispose()
    assert refused.value.code == "rpquery.db.unsupported_dialect"
    assert refused.value.token == "otherdb"
    plain = sa.create_engine(f"sqlite:///{path}")
    assert sa.inspect(plain).get_table_names() == []
    plain.dispose()
