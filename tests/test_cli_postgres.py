"""The ``rpquery`` command line as a real process (``python -m rpquery``) against
PostgreSQL: each command's happy path and a bad-input path (exit status, message)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from rpquery.db import Database
from rpquery.tables import inventories, resource_classes, resource_providers
from tests.conftest import _ran

Run = Callable[..., subprocess.CompletedProcess[str]]
CONSUMER = "0c9a8b7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d"
PROJECT = "project-42-0000"


def _runner(url: str) -> Run:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rpquery", "--db", url, *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run


@pytest.fixture(scope="module")
def pg_url(database_url) -> str:  # type: ignore[no-untyped-def]
    """A fresh PostgreSQL database, upgraded and loaded through the command line."""
    url = database_url("postgresql")
    run = _runner(url)
    upgraded = run("db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    loaded = run("load", "--hosts", "30", "--seed", "42", "--no-progress")
    assert loaded.returncode == 0, loaded.stderr
    assert "loaded 30 hosts" in loaded.stdout
    return url


@pytest.fixture
def run(pg_url: str) -> Run:
    _ran["postgresql"] += 1
    return _runner(pg_url)


def _a_flat_host(url: str) -> str:
    rp, inv, rc = resource_providers, inventories, resource_classes
    stmt = (
        sa.select(rp.c.uuid)
        .join(inv, inv.c.resource_provider_id == rp.c.id)
        .join(rc, rc.c.id == inv.c.resource_class_id)
        .where(rc.c.name == "VCPU", rp.c.parent_provider_id.is_(None))
        .order_by(rp.c.id)
        .limit(1)
    )
    db = Database(url)
    try:
        with db.connect() as conn:
            return str(conn.execute(stmt).scalar_one())
    finally:
        db.dispose()


def assert_bad_request(done: subprocess.CompletedProcess[str], code: str, token: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and code in lines[0] and token in lines[0], done.stderr


def test_db_status(run: Run) -> None:
    done = run("db", "status", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["up_to_date"] is True


def test_load_bad_spec_is_refused(run: Run) -> None:
    done = run("load", "--hosts", "-3")
    assert done.returncode == 2 and "--hosts" in done.stderr


def test_usages_grouped_by_type_on_postgresql(run: Run) -> None:
    """Placement answers this with HTTP 500 on PostgreSQL (GroupingError)."""
    done = run("usages", f"project_id={PROJECT}", "--json")
    assert done.returncode == 0, done.stderr
    usages = json.loads(done.stdout)["usages"]
    assert "INSTANCE" in usages and usages["INSTANCE"]["consumer_count"] > 0
    total = json.loads(run("usages", f"project_id={PROJECT}&consumer_type=all", "--json").stdout)
    assert total["usages"]["all"]["consumer_count"] == sum(
        g["consumer_count"] for g in usages.values()
    )


def test_usages_bad_input(run: Run) -> None:
    assert_bad_request(
        run("usages", "project_id=p&consumer_type=Lower"),
        "rpquery.consumer_type.bad_name",
        "Lower",
    )
    done = run("usages", "user_id=u", "--json")
    assert done.returncode == 2 and done.stdout == ""
    assert json.loads(done.stderr)["errors"][0]["code"] == "rpquery.usages.missing_project"


def test_claim_and_release(run: Run, pg_url: str) -> None:
    host = _a_flat_host(pg_url)
    claimed = run(
        "claim",
        f"{host}=VCPU:1,MEMORY_MB:512",
        "--consumer",
        CONSUMER,
        "--project",
        "pg-demo",
        "--user",
        "u",
        "--consumer-type",
        "INSTANCE",
        "--json",
    )
    assert claimed.returncode == 0, claimed.stderr
    assert json.loads(claimed.stdout)["allocations"][host]["resources"]["VCPU"] == 1
    usages = json.loads(run("usages", "--project", "pg-demo", "--json").stdout)["usages"]
    assert usages == {"INSTANCE": {"consumer_count": 1, "VCPU": 1, "MEMORY_MB": 512}}
    released = run("release", CONSUMER)
    assert released.returncode == 0, released.stderr
    assert json.loads(run("usages", "--project", "pg-demo", "--json").stdout)["usages"] == {}


def test_claim_bad_input(run: Run, pg_url: str) -> None:
    host = _a_flat_host(pg_url)
    assert_bad_request(
        run(
            "claim",
            f"{host}=VCPU:0",
            "--project",
            "p",
            "--user",
            "u",
            "--consumer-type",
            "INSTANCE",
        ),
        "rpquery.allocation.bad_amount",
        "0",
    )
    missing = run("release", CONSUMER)
    assert missing.returncode == 1 and "rpquery.consumer.not_found" in missing.stderr


def test_candidates_on_postgresql(run: Run) -> None:
    done = run(
        "candidates", "resources=VCPU:2,MEMORY_MB:2048&required=!CUSTOM_GPU&limit=3", "--json"
    )
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert 0 < len(body["allocation_requests"]) <= 3
    assert all("CUSTOM_GPU" not in s["traits"] for s in body["provider_summaries"].values())


def test_candidates_bad_input(run: Run) -> None:
    assert_bad_request(
        run("candidates", "resources=VCPU:1&required=CUSTOM_GPU,!CUSTOM_GPU"),
        "rpquery.trait.conflict",
        "CUSTOM_GPU",
    )


def test_explain_shows_postgresql_plan(run: Run) -> None:
    done = run("explain", "resources=VCPU:1&required=!CUSTOM_GPU&limit=10", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["backend"] == "postgresql"
    plans = [s["plan"] for s in body["statements"]]
    assert plans and all(p and "QUERY PLAN" in p[0] for p in plans)
    assert any("NOT (EXISTS" in s["sql"] for s in body["statements"])
