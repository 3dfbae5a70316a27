"""Owner identity is exact on every backend (issue 15, item 8).

MySQL/MariaDB's default collation (``utf8mb4_general_ci``, Placement's column
definitions) folds case and accents and ignores trailing spaces. rpquery's lookups
compare byte for byte anyway, so ``PROJ`` never reads ``proj``'s usage; where the
unique index makes two ids one, creating the second is a ``Conflict`` naming the
collation, not a retried ``ConcurrentUpdate``.
"""

from __future__ import annotations

import json

import pytest

from rpquery.db import Database
from rpquery.errors import ConcurrentUpdate, Conflict, DatabaseError
from rpquery.read.providers import list_providers
from rpquery.usage import reads as usages
from rpquery.write import allocations as alloc_api
from rpquery.write.allocations import ConsumerAllocations
from rpquery.write.providers import create_provider
from tests.factories import new_uuid, provider

TWINS = ["PROJ", "Proj", "proj ", "prój"]


def _claim(db: Database, rp_uuid: str, project: str, user: str = "bob") -> str:
    consumer = new_uuid()
    alloc_api.replace_allocations(
        db,
        ConsumerAllocations(
            consumer,
            consumer_generation=None,
            project_id=project,
            user_id=user,
            consumer_type="INSTANCE",
            allocations={rp_uuid: {"VCPU": 1}},
        ),
    )
    return consumer


@pytest.fixture
def host(db: Database) -> str:
    with db.begin() as conn:
        return provider(conn, "cn1", inventory={"VCPU": 64}).uuid


@pytest.mark.parametrize("twin", TWINS)
def test_project_twin_is_a_distinct_owner_or_a_named_conflict(
    db: Database, host: str, twin: str
) -> None:
    _claim(db, host, "proj")
    if db.dialect_name == "mysql":
        with pytest.raises(Conflict) as caught:
            _claim(db, host, twin)
        assert not isinstance(caught.value, ConcurrentUpdate)  # permanent: no retry
        assert caught.value.code == "rpquery.owner.collation_conflict"
        assert "utf8mb4_general_ci" in caught.value.detail
        assert caught.value.token == twin
    else:
        _claim(db, host, twin)
        assert usages.project_usages_total(db, twin) == {"VCPU": 1}
    assert usages.project_usages_total(db, "proj") == {"VCPU": 1}


@pytest.mark.parametrize("twin", TWINS)
def test_usages_of_a_twin_project_are_not_the_projects(db: Database, host: str, twin: str) -> None:
    _claim(db, host, "proj")
    assert usages.project_usages(db, twin).groups == ()
    assert usages.project_usages_scan(db, twin).groups == ()
    assert usages.project_usages_total(db, twin) == {}
    assert usages.project_usages_total_scan(db, twin) == {}
    assert usages.project_usages(db, "proj", user_id="Bob").groups == ()
    assert usages.project_usages_total(db, "proj", user_id="bob ") == {}
    assert usages.project_usages_total(db, "proj", user_id="bob") == {"VCPU": 1}


def test_user_twin_is_a_distinct_owner_or_a_named_conflict(db: Database, host: str) -> None:
    _claim(db, host, "proj", user="bob")
    if db.dialect_name == "mysql":
        with pytest.raises(Conflict) as caught:
            _claim(db, host, "proj", user="Bob")
        assert type(caught.value) is Conflict
        assert caught.value.code == "rpquery.owner.collation_conflict"
        assert "users.external_id" in caught.value.detail
    else:
        _claim(db, host, "proj", user="Bob")
        assert usages.project_usages_total(db, "proj", user_id="Bob") == {"VCPU": 1}


def test_provider_name_twin_is_a_second_provider_or_a_conflict_naming_the_collation(
    db: Database,
) -> None:
    from rpquery.write.providers import rename_provider

    create_provider(db, "Web")
    other = create_provider(db, "db")
    if db.dialect_name == "mysql":
        for attempt in (lambda: create_provider(db, "web"), lambda: rename_provider(
            db, other.uuid, "WEB ", generation=other.generation
        )):
            with pytest.raises(Conflict) as caught:
                attempt()
            assert caught.value.code == "rpquery.provider.duplicate"
            assert "utf8mb4_general_ci" in caught.value.detail
            assert "'Web'" in caught.value.detail
    else:
        create_provider(db, "web")
        rename_provider(db, other.uuid, "WEB ", generation=other.generation)
        assert sorted(p.name for p in list_providers(db, {})) == ["WEB ", "Web", "web"]
    with pytest.raises(Conflict) as same:  # the very name: the plain message everywhere
        create_provider(db, "Web")
    assert "already exists" in same.value.detail


def test_provider_name_filter_is_exact(db: Database) -> None:
    create_provider(db, "Web")
    assert [p.name for p in list_providers(db, {"name": "Web"})] == ["Web"]
    assert list_providers(db, {"name": "web"}) == []
    assert list_providers(db, {"name": "Wéb"}) == []


# ----------------------------------------------------------------- MySQL/MariaDB settings
# (issue 15, item 9)


def test_sessions_are_strict_whatever_the_server_default(db: Database) -> None:
    """Each backend refuses a float the column cannot hold; on MySQL/MariaDB that takes
    a strict ``sql_mode``, which rpquery sets on its sessions even when the server's (or
    here the connection's initial) mode is lax: 1e300 would be stored as 3.4e38."""
    import sqlalchemy as sa

    from rpquery.store.tables import inventories

    kw = {}
    if db.dialect_name == "mysql":
        kw["connect_args"] = {"init_command": "SET SESSION sql_mode = ''"}
    lax = Database(db.url, **kw)
    try:
        with db.begin() as conn:
            rp = provider(conn, "cn1", inventory={"VCPU": 4})
        if db.dialect_name == "mysql":
            with lax.connect() as conn:
                mode = conn.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar()
            assert "STRICT_ALL_TABLES" in mode.split(",")
            with pytest.raises(DatabaseError), lax.begin() as conn:
                conn.execute(
                    inventories.update()
                    .where(inventories.c.resource_provider_id == rp.id)
                    .values(allocation_ratio=1e300)
                )
        with lax.connect() as conn:
            ratio = conn.execute(sa.select(inventories.c.allocation_ratio)).scalar()
        assert ratio == 1.0
    finally:
        lax.dispose()


@pytest.fixture
def utf8mb3_url(servers):  # type: ignore[no-untyped-def]
    """A database created with ``utf8mb3``, as older Placement deployments were."""
    import os
    import uuid

    import sqlalchemy as sa

    from tests.conftest import IN_CI, _ran, selected_backends

    if "mysql" not in selected_backends():
        pytest.skip("mysql not in RPQUERY_TEST_BACKENDS")
    server = servers["mysql"]
    if server.admin_url is None:
        (pytest.fail if IN_CI else pytest.skip)(f"BACKEND MISSING — {server.reason}")
    name = f"rpq_t_{os.getpid()}_{uuid.uuid4().hex[:8]}_mb3"
    admin = sa.create_engine(server.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name} CHARACTER SET utf8mb3")
    _ran["mysql"] += 1
    try:
        yield server.admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        admin.dispose()


def test_upgrade_and_check_report_a_utf8mb3_database_with_the_fix(utf8mb3_url: str) -> None:
    from click.testing import CliRunner

    from rpquery.cli import main

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(main, ["--db", utf8mb3_url, *args], catch_exceptions=False)

    upgraded = invoke("db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    assert "cannot store 4-byte characters" in upgraded.stderr
    assert "default character set utf8mb3" in upgraded.stderr
    assert "column projects.external_id has character set utf8mb3" in upgraded.stderr
    db = Database(utf8mb3_url)
    with db.begin() as conn:
        host = provider(conn, "cn1", inventory={"VCPU": 4}).uuid
    with pytest.raises(DatabaseError) as caught:  # before the fix: a code that says why
        _claim(db, host, "proj-\N{GRINNING FACE}")
    assert caught.value.code == "rpquery.db.charset"
    assert "rpquery db check" in caught.value.detail
    checked = invoke("db", "check", "--json")
    assert checked.exit_code == 1
    fixes = [entry["fix"] for entry in json.loads(checked.stdout)["charset"]]
    assert any(f.startswith("ALTER DATABASE") for f in fixes)
    try:
        with db.begin() as conn:  # the operator applies the fix rpquery printed
            for fix in fixes:
                conn.exec_driver_sql(fix)
        clean = invoke("db", "check")
        assert clean.exit_code == 0, clean.output
        assert "charset: 0 problem(s)" in clean.output
        _claim(db, host, "proj-\N{GRINNING FACE}")
        assert usages.project_usages_total(db, "proj-\N{GRINNING FACE}") == {"VCPU": 1}
    finally:
        db.dispose()
