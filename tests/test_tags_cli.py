"""``rpquery tags ...`` and ``rpquery instances`` against the database-backed fake:
successive commands see one backend."""

from __future__ import annotations

import json
import uuid
from typing import Any

from click.testing import CliRunner

from rpquery.cli import main
from rpquery.db import Database

VM = str(uuid.uuid4())


def run(db: Database, *args: str, code: int = 0) -> Any:
    url = db.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(main, ["--db", url, *args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout) if code == 0 else json.loads(result.stderr)


def run_failed_job(db: Database, *args: str) -> Any:
    """A write whose backend job failed: the answer on stdout, exit 1 with
    ``rpquery.tags.job_failed`` on stderr."""
    url = db.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(main, ["--db", url, *args, "--json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stderr)["errors"][0]["code"] == "rpquery.tags.job_failed"
    return json.loads(result.stdout)


def tags(db: Database, namespace: str = "user") -> dict[str, str]:
    data = run(db, "tags", "list", VM, "--namespace", namespace)
    return {x["tag"]: x["status"] for x in data["tags"]}


def test_cli_walkthrough(sqlite_db: Database) -> None:
    db = sqlite_db
    out = run(db, "tags", "create", VM, "web", "db server")
    assert [x["tag"] for x in out["outcomes"]["activated"]] == ["web", "db server"]
    assert tags(db) == {"web": "ACTIVE", "db server": "ACTIVE"}

    run(db, "tags", "add", VM, "cache", "--lag")
    assert tags(db)["cache"] == "PENDADD"
    assert run(db, "tags", "check", VM, "cache") == {
        "tag": "cache",
        "exists": True,
        "status": "PENDADD",
    }
    assert run(db, "tags", "process")["jobs_run"] == 1
    assert tags(db)["cache"] == "ACTIVE"

    out = run_failed_job(db, "tags", "add", VM, "doomed", "--fail")
    assert [x["tag"] for x in out["outcomes"]["dropped"]] == ["doomed"]
    assert out["failed"] == ["doomed"]
    out = run_failed_job(db, "tags", "delete", VM, "cache", "--fail")
    assert [x["tag"] for x in out["outcomes"]["reinstated"]] == ["cache"]
    assert out["failed"] == ["cache"]

    run(db, "tags", "replace", VM, "web", "--namespace", "system")
    run(db, "tags", "replace", VM, "web", "new")
    assert tags(db) == {"web": "ACTIVE", "new": "ACTIVE"}
    assert tags(db, "system") == {"web": "ACTIVE"}
    assert run(db, "instances", "--tags", "web,new", "--not-tags-any", "x")["instances"] == [VM]
    assert run(db, "instances", "--tags", "new", "--namespace", "system")["instances"] == []

    run(db, "tags", "delete-all", VM)
    assert tags(db) == {} and tags(db, "system") == {"web": "ACTIVE"}
    assert run(db, "tags", "reconcile")["changed"] is False


def test_cli_conflicts_and_errors(sqlite_db: Database) -> None:
    db = sqlite_db
    rules = run(db, "tags", "conflicts", "--set", "ha,hp", "--namespace", "system")
    assert rules["conflicts"] == [["ha", "hp"]]
    err = run(db, "tags", "create", VM, "ha", "hp", "--namespace", "system", code=2)
    assert err["errors"][0]["code"] == "rpquery.tags.conflicting_tags"
    run(db, "tags", "add", VM, "ha", "--namespace", "system")
    out = run(db, "tags", "add", VM, "hp", "--namespace", "system")
    assert out["writes"][0]["skipped"] == [{"tag": "hp", "kept": "ha"}]

    err = run(db, "tags", "add", VM, "a,b", code=2)
    assert err["errors"][0]["code"] == "rpquery.tags.bad_character"
    err = run(db, "tags", "list", VM, "--namespace", "root", code=2)
    assert err["errors"][0]["code"] == "rpquery.tags.unknown_namespace"
    err = run(db, "tags", "delete", VM, "ha", code=1)  # not a user tag
    assert err["errors"][0]["code"] == "rpquery.tags.not_found"
