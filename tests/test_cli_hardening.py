"""Issue 15, items 12 and 13 and "CLI details seen on the way": a read on a database
without the schema, user mistakes that were ``rpquery.internal``, ``--db`` after the
subcommand, the tags commands' exit statuses, the tour's hint, ``load``'s progress,
one code per mistake, server-group help and "no valid host" messages. CLI tests use
click's runner; those that touch a database run on the three backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from rpquery import generator
from rpquery.cli import load_all_commands, main
from rpquery.db import Database
from rpquery.errors import Conflict, InvalidRequest, SchemaError
from rpquery.read.providers import list_providers
from rpquery.server_groups import groups as sg
from rpquery.server_groups import scheduling
from rpquery.usage.reads import project_usages
from rpquery.write.providers import create_provider
from tests.conftest import ALL_BACKENDS, _ran
from tests.factories import new_uuid, provider

VM = "6f1c0a52-9f54-4d39-9d1c-1f0f5d3b2a11"


def cli(*args: str, url: str | None = None) -> Result:
    argv = ["--db", url, *args] if url is not None else list(args)
    return CliRunner().invoke(main, argv, catch_exceptions=False)


def url_of(db: Database) -> str:
    return db.url.render_as_string(hide_password=False)


def error_code(result: Result) -> str:
    return json.loads(result.stderr)["errors"][0]["code"]


# ---------------------------------------------------------------- item 12: no schema


@pytest.fixture(params=ALL_BACKENDS)
def empty_url(request: pytest.FixtureRequest, database_url: Any) -> str:
    """A database nobody created a schema in (on SQLite: a file that does not exist)."""
    url = str(database_url(request.param))
    _ran[request.param] += 1
    return url


def test_library_read_without_schema_says_how_to_create_it(empty_url: str) -> None:
    db = Database(empty_url)
    try:
        with pytest.raises(SchemaError) as caught:
            list_providers(db, {})
        assert caught.value.code == "rpquery.schema.missing"
        assert "rpquery db upgrade" in caught.value.detail
        with pytest.raises(SchemaError) as caught:
            project_usages(db, "proj")
        assert caught.value.code == "rpquery.schema.missing"
        if db.sqlite_path is not None:
            assert not db.sqlite_path.exists()  # a read creates no database file
    finally:
        db.dispose()


@pytest.mark.parametrize(
    "args",
    [("providers",), ("candidates", "resources=VCPU:1"), ("usages", "project_id=p")],
)
def test_cli_read_without_schema_has_its_own_code(empty_url: str, args: tuple[str, ...]) -> None:
    result = cli(*args, "--json", url=empty_url)
    assert result.exit_code == 1
    assert error_code(result) == "rpquery.schema.missing"
    assert "rpquery db upgrade" in result.stderr
    if empty_url.startswith("sqlite:///"):
        assert not Path(empty_url.removeprefix("sqlite:///")).exists()


def test_db_status_of_a_missing_sqlite_file_creates_none(tmp_path: Path) -> None:
    path = tmp_path / "never.db"
    result = cli("db", "status", "--json", url=f"sqlite:///{path}")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["revision"] is None
    assert not path.exists()


# ---------------------------------------------------------------- item 13: user errors


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("foo://x", "rpquery.db.unknown_dialect"),
        ("", "rpquery.db.bad_url"),
        ("not a url", "rpquery.db.bad_url"),
        ("oracle://scott@db/orcl", "rpquery.db.unsupported_dialect"),
        ("postgresql+nosuchdriver://x/y", "rpquery.db.driver_missing"),
        ("postgresql+psycopg2://x/y", "rpquery.db.driver_missing"),
    ],
)
def test_bad_database_urls_are_user_errors(url: str, code: str) -> None:
    for argv in (["--db", url, "providers", "--json"], ["providers", "--json", "--db", url]):
        result = cli(*argv)
        assert result.exit_code == 2, result.output
        assert error_code(result) == code
    with pytest.raises(InvalidRequest) as caught:
        Database(url)
    assert caught.value.code == code


def test_a_bad_url_message_does_not_show_the_password() -> None:
    result = cli("--db", "postgresql://u:s3cret@host:notaport/db", "providers")
    assert result.exit_code == 2
    assert "rpquery.db.bad_url" in result.stderr
    assert "s3cret" not in result.stderr and "u:***@" in result.stderr


def test_reshape_of_a_non_utf8_file_is_a_user_error(tmp_path: Path) -> None:
    body = tmp_path / "latin1.json"
    body.write_bytes('{"inventories": {"caf\u00e9": {}}, "allocations": {}}'.encode("latin-1"))
    result = cli("reshape", str(body), "--json", url=f"sqlite:///{tmp_path / 'x.db'}")
    assert result.exit_code == 2, result.output
    assert error_code(result) == "rpquery.reshape.not_utf8"
    assert "rpquery.internal" not in result.stderr


# ---------------------------------------------------------------- --db after the subcommand


def _leaf_commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _leaf_commands(command, f"{prefix}{name} ")
        else:
            found.append((prefix + name, command))
    return found


def test_every_command_takes_db_after_the_subcommand() -> None:
    load_all_commands()  # the feature modules load on first use
    leaves = _leaf_commands(main)
    assert len(leaves) > 20
    missing = [name for name, cmd in leaves if not any("--db" in p.opts for p in cmd.params)]
    assert missing == []


def test_db_after_the_subcommand_is_the_database_used(db: Database) -> None:
    create_provider(db, "only-here")
    result = cli("providers", "--json", "--db", url_of(db))
    assert result.exit_code == 0, result.output
    names = [p["name"] for p in json.loads(result.stdout)["resource_providers"]]
    assert names == ["only-here"]
    # the later --db wins over the global one
    result = cli("--db", "foo://x", "db", "status", "--json", "--db", url_of(db))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["up_to_date"] is True


# ---------------------------------------------------------------- tags commands


def test_tags_add_whose_job_fails_is_not_reported_added(db: Database) -> None:
    result = cli("tags", "add", VM, "doomed", "--fail", url=url_of(db))
    assert result.exit_code == 1
    assert "added: doomed" not in result.stdout
    assert "rpquery.tags.job_failed" in result.stderr
    data = cli("tags", "add", VM, "doomed2", "--fail", "--json", url=url_of(db))
    assert data.exit_code == 1
    assert json.loads(data.stdout)["failed"] == ["doomed2"]
    assert error_code(data) == "rpquery.tags.job_failed"
    ok = cli("tags", "add", VM, "fine", "--json", url=url_of(db))
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["failed"] == []


def test_tags_check_exits_non_zero_for_an_unset_tag(db: Database) -> None:
    assert cli("tags", "add", VM, "web", url=url_of(db)).exit_code == 0
    assert cli("tags", "check", VM, "web", url=url_of(db)).exit_code == 0
    missing = cli("tags", "check", VM, "nope", url=url_of(db))
    assert missing.exit_code == 1
    assert "nope: not set" in missing.stdout


def test_tags_reconcile_says_when_there_is_nothing_to_do(db: Database) -> None:
    result = cli("tags", "reconcile", url=url_of(db))
    assert result.exit_code == 0, result.output
    assert "nothing to reconcile" in result.stdout


def test_tags_delete_all_usage_offers_no_tags() -> None:
    usage = cli("tags", "delete-all", "--help").stdout
    assert "Usage: main tags delete-all [OPTIONS] INSTANCE\n" in usage
    assert "[TAGS]" not in usage
    assert "INSTANCE [TAGS]..." in cli("tags", "add", "--help").stdout


# ---------------------------------------------------------------- tour, load, codes


def test_tour_hint_to_start_over_fits_the_backend(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    from rpquery.cli.tour import _load_args

    create_provider(db, "cn1")
    assert _load_args(db) is None
    said = " ".join(capsys.readouterr().out.split())
    assert "rm rpquery.db" not in said
    if db.dialect_name == "sqlite":
        assert f"rm {db.sqlite_path}" in said
    else:
        assert "rm " not in said and str(db.url.database) in said


def test_load_progress_reaches_every_total(db: Database) -> None:
    last: dict[str, tuple[int, int]] = {}

    def progress(stage: str, done: int, total: int) -> None:
        last[stage] = (done, total)

    generator.load_cloud(db, generator.CloudSpec(hosts=12, seed=3), progress=progress)
    assert {"consumers", "allocations", "resource_providers"} <= last.keys()
    assert {stage: done for stage, (done, _) in last.items()} == {
        stage: total for stage, (_, total) in last.items()
    }


def test_one_code_for_a_bad_consumer_type_in_claim_and_usages(db: Database) -> None:
    with db.begin() as conn:
        host = provider(conn, "cn1", inventory={"VCPU": 4}).uuid
    claim = cli(
        "claim", f"{host}=VCPU:1", "--project", "p", "--user", "u",
        "--consumer-type", "lower", "--json", url=url_of(db),
    )  # fmt: skip
    usages = cli("usages", "project_id=p&consumer_type=lower", "--json", url=url_of(db))
    assert claim.exit_code == usages.exit_code == 2
    assert error_code(claim) == error_code(usages) == "rpquery.consumer.bad_type"


def test_server_group_create_help_marks_policy_required() -> None:
    text = " ".join(cli("server-group", "create", "--help").stdout.split())
    assert "--policy TEXT Exactly one of" in text
    policy_help = text.split("--policy TEXT", 1)[1].split("--max-server-per-host", 1)[0]
    assert "[required]" in policy_help
    missing = cli("server-group", "create", "--name", "g", "--project", "p", "--user", "u")
    assert missing.exit_code == 2
    assert "rpquery.server_group.no_policy" in missing.stderr


def test_no_valid_host_blames_the_policy_only_when_it_excluded_the_hosts(db: Database) -> None:
    with db.begin() as conn:
        provider(conn, "cn0", inventory={"VCPU": 4})
    group = sg.create_group(db, "g", ["anti-affinity"], "proj", "user").uuid
    owner = {"project_id": "proj", "user_id": "user", "consumer_type": "INSTANCE"}
    with pytest.raises(Conflict) as too_big:
        scheduling.schedule(db, "resources=VCPU:8", group, **owner)  # type: ignore[arg-type]
    assert too_big.value.code == scheduling.NO_VALID_HOST
    assert "anti-affinity" not in too_big.value.detail
    assert "no host can hold the request" in too_big.value.detail
    scheduling.schedule(db, "resources=VCPU:1", group, **owner)  # type: ignore[arg-type]
    with pytest.raises(Conflict) as excluded:
        scheduling.schedule(db, "resources=VCPU:1", group, **owner)  # type: ignore[arg-type]
    assert "anti-affinity policy" in excluded.value.detail
    assert new_uuid() != group
