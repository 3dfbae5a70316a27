"""The ``rpquery`` command line as a real process (``python -m rpquery``) against
PostgreSQL: each command's happy path and a bad-input path (exit status, message)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from rpquery.db import Database
from rpquery.usage.reads import project_usages
from tests.conftest import _ran
from tests.factories import first_flat_host

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
    loaded = run("load", "--hosts", "30", "--seed", "42", "--no-progress")
    assert loaded.returncode == 0, loaded.stderr
    assert "loaded 30 hosts" in loaded.stdout
    return url


@pytest.fixture
def run(pg_url: str) -> Run:
    _ran["postgresql"] += 1
    return _runner(pg_url)


def assert_bad_request(done: subprocess.CompletedProcess[str], code: str, token: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and code in lines[0] and token in lines[0], done.stderr


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_read_commands(run: Run) -> None:
    """db status, usages (grouped by type: Placement answers HTTP 500 here on
    PostgreSQL), candidates, providers and explain, one process each."""
    assert _json(run("db", "status", "--json"))["up_to_date"] is True
    usages = _json(run("usages", f"project_id={PROJECT}", "--json"))["usages"]
    assert "INSTANCE" in usages and usages["INSTANCE"]["consumer_count"] > 0
    body = _json(
        run("candidates", "resources=VCPU:2,MEMORY_MB:2048&required=!CUSTOM_GPU&limit=3", "--json")
    )
    assert 0 < len(body["allocation_requests"]) <= 3
    assert all("CUSTOM_GPU" not in s["traits"] for s in body["provider_summaries"].values())
    found = _json(run("providers", "required=CUSTOM_GPU", "--json"))["resource_providers"]
    assert found and all(p["root_provider_uuid"] == p["uuid"] for p in found)
    explained = _json(run("explain", "resources=VCPU:1&required=!CUSTOM_GPU&limit=10", "--json"))
    assert explained["backend"] == "postgresql"
    plans = [s["plan"] for s in explained["statements"]]
    assert plans and all(p and "QUERY PLAN" in p[0] for p in plans)
    assert any("NOT (EXISTS" in s["sql"] for s in explained["statements"])


@pytest.mark.parametrize(
    ("args", "code", "token"),
    [
        (
            ["usages", "project_id=p&consumer_type=Lower"],
            "rpquery.consumer.bad_type",
            "Lower",
        ),
        (
            ["candidates", "resources=VCPU:1&required=CUSTOM_GPU,!CUSTOM_GPU"],
            "rpquery.trait.conflict",
            "CUSTOM_GPU",
        ),
        (["providers", "resources_X=VCPU:1"], "rpquery.request.unknown_parameter", "_X"),
        (["explain", "resources=VCPU:1&required=lower"], "rpquery.trait.bad_name", "lower"),
    ],
)
def test_bad_input_exits_2_naming_token_and_code(
    run: Run, args: list[str], code: str, token: str
) -> None:
    assert_bad_request(run(*args), code, token)


def test_bad_input_with_json_goes_to_stderr(run: Run) -> None:
    done = run("usages", "user_id=u", "--json")
    assert done.returncode == 2 and done.stdout == ""
    assert json.loads(done.stderr)["errors"][0]["code"] == "rpquery.usages.missing_project"


def test_claim_and_release(run: Run, pg_url: str) -> None:
    host = first_flat_host(pg_url)
    claimed = _json(
        run(
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
    )
    assert claimed["allocations"][host]["resources"] == {"VCPU": 1, "MEMORY_MB": 512}
    db = Database(pg_url)
    try:
        report = project_usages(db, "pg-demo")
        assert [(g.consumer_type, g.consumer_count) for g in report.groups] == [("INSTANCE", 1)]
        released = run("release", CONSUMER)
        assert released.returncode == 0, released.stderr
        assert project_usages(db, "pg-demo").groups == ()
    finally:
        db.dispose()


def test_claim_and_release_bad_input(run: Run, pg_url: str) -> None:
    host = first_flat_host(pg_url)
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
    assert_bad_request(run("release", "not-a-uuid"), "rpquery.consumer.bad_uuid", "not-a-uuid")
