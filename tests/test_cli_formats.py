"""Output formats of the listing commands (``-f table|json|yaml|csv|value``, ``-c``,
``--noindent``, ``--sort-column``): the same columns and rows in every format, on a small
SQLite cloud loaded through ``rpquery load``; ``--json`` still prints the whole document;
and ``rpquery ... | head -1`` exits 0 quietly (a real pipe, a real process)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from rpquery.cli import main
from rpquery.cli._format import Listing, select, to_yaml
from rpquery.db import Database
from rpquery.errors import InvalidRequest
from tests.conftest import _ran

Invoke = Callable[..., Result]
OWNER = ("--project", "p-formats", "--user", "u-formats")


def _invoker(url: str) -> Invoke:
    def invoke(*args: str) -> Result:
        return CliRunner().invoke(main, ["--db", url, *args], catch_exceptions=False)

    return invoke


@pytest.fixture(scope="module")
def cloud(database_url) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """A 30-host SQLite cloud with aggregate metadata, a server group of two placed
    members and a tag on one: something for every listing command to list."""
    url = database_url("sqlite")
    cli = _invoker(url)
    loaded = cli("load", "--hosts", "30", "--seed", "7", "--no-progress", "--json")
    assert loaded.exit_code == 0, loaded.output
    host_agg = json.loads(loaded.stdout)["host_aggregates"][0]
    assert cli("aggregate-metadata", "set", host_agg, "tier=gold").exit_code == 0
    made = cli("server-group", "create", "--name", "web", "--policy", "anti-affinity", *OWNER)
    group = made.stdout.strip()
    placed = cli(
        "schedule", "resources=VCPU:1", "--server-group", group, "--count", "2", *OWNER, "--json"
    )
    assert placed.exit_code == 0, placed.output
    instance = json.loads(placed.stdout)[0]["instance_uuid"]
    assert cli("tags", "add", instance, "web").exit_code == 0
    assert cli("tags", "conflicts", "--set", "web,db").exit_code == 0
    return {"url": url, "group": group, "instance": instance, "aggregate": host_agg}


@pytest.fixture
def cli(cloud: dict[str, str]) -> Invoke:
    _ran["sqlite"] += 1
    return _invoker(cloud["url"])


#: Every listing command, as argv (``{group}`` / ``{instance}`` filled from the cloud).
LISTINGS: list[tuple[str, ...]] = [
    ("providers", "resources=VCPU:1"),
    ("candidates", "resources=VCPU:1,MEMORY_MB:512&limit=5"),
    ("candidates", "resources_A=VCPU:1&resources_B=SRIOV_NET_VF:1&group_policy=isolate"),
    ("usages", "project_id=project-7-0000"),
    ("why", "resources=VCPU:64"),
    ("headroom", "resources=VCPU:2", "--top", "0"),
    ("headroom", "resources=VCPU:2", "--group-by", "aggregate"),
    ("headroom", "resources=VCPU:2", "--group-by", "trait"),
    ("aggregate-metadata", "show"),
    ("server-group", "show", "{group}"),
    ("server-group", "list"),
    ("tags", "list", "{instance}"),
    ("tags", "conflicts"),
    ("instances", "--tags", "web"),
]


def _argv(args: Sequence[str], cloud: dict[str, str]) -> list[str]:
    return [a.format(**cloud) for a in args]


def _ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("args", LISTINGS, ids=lambda a: " ".join(a[:3]))
def test_every_format_carries_the_same_columns_and_rows(
    cli: Invoke, cloud: dict[str, str], args: tuple[str, ...]
) -> None:
    argv = _argv(args, cloud)
    rows = json.loads(_ok(cli(*argv, "-f", "json")))
    assert isinstance(rows, list) and rows, "every listing here has rows"
    columns = list(rows[0])
    assert yaml.safe_load(_ok(cli(*argv, "-f", "yaml"))) == rows
    table = list(csv.reader(io.StringIO(_ok(cli(*argv, "-f", "csv")))))
    assert table[0] == columns
    assert len(table) == len(rows) + 1
    assert [row[0] for row in table[1:]] == [_csv_text(r[columns[0]]) for r in rows]
    one_line = _ok(cli(*argv, "-f", "json", "--noindent"))
    assert one_line.count("\n") == 1 and json.loads(one_line) == rows
    assert _table_header(_ok(cli(*argv))) == columns
    last = columns[-1]
    only = json.loads(_ok(cli(*argv, "-f", "json", "-c", last, "-c", columns[0])))
    assert only == [{last: r[last], columns[0]: r[columns[0]]} for r in rows]


def test_server_group_list_on_each_backend(db: Database) -> None:
    """``server-group list`` on SQLite, PostgreSQL and MariaDB: groups ordered by name,
    ``--project`` keeps one project's, the same rows in every format, ``--json`` the
    whole document; an empty database lists nothing (exit 0)."""
    url = db.url.render_as_string(hide_password=False)
    cli = _invoker(url)
    assert json.loads(_ok(cli("server-group", "list", "-f", "json"))) == []
    assert _ok(cli("server-group", "list", "-f", "csv")).splitlines() == [
        '"uuid","name","policy","rules","project_id","user_id"'
    ]
    made = {}
    for name, policy, project in (("web", "anti-affinity", "p1"), ("db", "affinity", "p2"),
                                  ("cache", "soft-affinity", "p1")):
        created = cli("server-group", "create", "--name", name, "--policy", policy,
                      "--project", project, "--user", "u")
        made[name] = _ok(created).strip()
    rows = json.loads(_ok(cli("server-group", "list", "-f", "json")))
    assert [(r["name"], r["uuid"]) for r in rows] == [(n, made[n]) for n in ("cache", "db", "web")]
    assert rows[2] == {"uuid": made["web"], "name": "web", "policy": "anti-affinity",
                       "rules": {"max_server_per_host": 1}, "project_id": "p1", "user_id": "u"}
    assert json.loads(_ok(cli("server-group", "list", "--json"))) == [
        dict(sorted(r.items())) for r in rows
    ]
    assert yaml.safe_load(_ok(cli("server-group", "list", "-f", "yaml"))) == rows
    table = list(csv.reader(io.StringIO(_ok(cli("server-group", "list", "-f", "csv")))))
    assert table[0] == list(rows[0]) and table[3][3] == "max_server_per_host=1"
    p1 = _ok(cli("server-group", "list", "--project", "p1", "-f", "value", "-c", "name"))
    assert p1.split() == ["cache", "web"]
    by_policy = _ok(cli("server-group", "list", "-f", "value", "-c", "policy",
                        "--sort-column", "policy", "--sort-descending"))
    assert by_policy.split() == ["soft-affinity", "anti-affinity", "affinity"]
    shown = _ok(cli("server-group", "list"))
    assert all(name in shown for name in ("cache", "db", "web", "project_id"))
    unknown = cli("server-group", "list", "-c", "members")
    assert unknown.exit_code == 2 and "rpquery.cli.unknown_column" in unknown.stderr


def _table_header(table: str) -> list[str]:
    """The column names of a rich table's header (``┃ a ┃ b ┃`` lines; a name wrapped
    over two lines joined with a space)."""
    lines = [line.strip().strip("┃") for line in table.splitlines() if line.startswith("┃")]
    cells = zip(*(line.split("┃") for line in lines), strict=True)
    return [" ".join(part.strip() for part in cell if part.strip()) for cell in cells]


def test_table_header_reads_the_names() -> None:
    table = (
        "  title\n┏━━━┳━━━━━━━━━━┓\n┃ a ┃ consumer ┃\n┃   ┃ type     ┃\n"
        "┡━━━╇━━━━━━━━━━┩\n│ 1 │ x        │\n"
    )
    assert _table_header(table) == ["a", "consumer type"]


def _csv_text(value: object) -> str:
    return "" if value is None else str(value)


def test_value_prints_the_values_alone(cli: Invoke) -> None:
    rows = json.loads(_ok(cli("providers", "resources=VCPU:1", "-f", "json")))
    lines = _ok(cli("providers", "resources=VCPU:1", "-f", "value", "-c", "name", "-c", "uuid"))
    assert lines.splitlines() == [f"{r['name']} {r['uuid']}" for r in rows]


def test_sort_column_sorts_in_every_format(cli: Invoke) -> None:
    args = ("headroom", "resources=VCPU:2", "--top", "0", "--sort-column", "host")
    up = json.loads(_ok(cli(*args, "-f", "json")))
    assert [r["host"] for r in up] == sorted(r["host"] for r in up)
    down = json.loads(_ok(cli(*args, "--sort-descending", "-f", "json")))
    assert down == up[::-1]
    values = _ok(cli(*args, "-f", "value", "-c", "host")).split()
    assert values == [r["host"] for r in up]
    # the table too: the first host by name comes first
    table = _ok(cli(*args, "--top", "0"))
    assert table.index(up[0]["host"]) < table.index(up[1]["host"])


def test_sort_by_two_columns_the_first_decides_first(cli: Invoke) -> None:
    args = ("headroom", "resources=VCPU:2", "--top", "0", "-f", "json")
    rows = json.loads(_ok(cli(*args, "--sort-column", "alone", "--sort-column", "host")))
    assert rows == sorted(rows, key=lambda r: (r["alone"], r["host"]))


def test_show_one_object(cli: Invoke) -> None:
    data = json.loads(_ok(cli("db", "status", "-f", "json")))
    assert data["up_to_date"] is True
    assert yaml.safe_load(_ok(cli("db", "status", "-f", "yaml"))) == data
    assert _ok(cli("db", "status", "-f", "value", "-c", "up_to_date")) == "True\n"
    assert "up_to_date: True" in _ok(cli("db", "status"))


def test_json_flag_still_prints_the_whole_document(cli: Invoke) -> None:
    body = json.loads(_ok(cli("candidates", "resources=VCPU:1&limit=2", "--json")))
    assert set(body) == {"allocation_requests", "provider_summaries"}
    rows = json.loads(_ok(cli("candidates", "resources=VCPU:1&limit=2", "-f", "json")))
    assert [r["#"] for r in rows] == [1, 2]
    one_line = _ok(cli("candidates", "resources=VCPU:1&limit=2", "--json", "--noindent"))
    assert json.loads(one_line) == body and one_line.count("\n") == 1


def test_candidates_allocations_are_data_in_json_text_in_csv(cli: Invoke) -> None:
    rows = json.loads(_ok(cli("candidates", "resources=VCPU:1&limit=1", "-f", "json")))
    (allocations,) = [r["allocations"] for r in rows]
    (amounts,) = allocations.values()
    assert amounts == {"VCPU": 1}
    text = _ok(cli("candidates", "resources=VCPU:1&limit=1", "-f", "csv"))
    table = list(csv.reader(io.StringIO(text)))
    assert table[1][2].endswith(": VCPU:1")


def test_unknown_column_names_the_token_and_the_columns(cli: Invoke) -> None:
    result = cli("providers", "-c", "nmae")
    assert result.exit_code == 2
    assert "'nmae'" in result.stderr and "[rpquery.cli.unknown_column]" in result.stderr
    assert "name, uuid, generation, parent, root" in result.stderr
    result = cli("providers", "--sort-column", "nmae", "-f", "json")
    assert result.exit_code == 2 and result.stdout == ""
    assert json.loads(result.stderr)["errors"][0]["code"] == "rpquery.cli.unknown_column"


def test_json_flag_refuses_columns_and_other_formats(cli: Invoke) -> None:
    for extra in (("-c", "name"), ("-f", "yaml"), ("--sort-column", "name")):
        result = cli("providers", "--json", *extra)
        assert result.exit_code == 2, extra
        assert "--json prints the whole answer" in result.output


def test_bad_format_is_a_usage_error(cli: Invoke) -> None:
    result = cli("providers", "-f", "xml")
    assert result.exit_code == 2 and "'xml' is not one of" in result.output


# ---------------------------------------------------------------- YAML without PyYAML

TRICKY = [
    "yes", "No", "ON", "null", "~", "", " lead", "trail ", "1e3", "0x1F", "0o17", "1_000",
    "2026-11-29", "12:30:00", "a: b", "a:b", "#x", "x #y", "-", "- x", "?", "!tag", "&a", "*a",
    "%x", "@x", "`x", "[x]", "{x}", "'q'", '"q"', "\\", "é", "line\nbreak", "tab\there",
    ".inf", "-.inf", ".nan", "=", "<<", "x\u2028y", "\x00", "\x85", "\ufeffbom",
]


def test_yaml_scalars_read_back_as_written() -> None:
    data = [
        {"s": s, "n": i, "f": 0.5, "t": True, "z": None, "l": [s], "m": {s: s}}
        for i, s in enumerate(TRICKY)
    ]
    assert yaml.safe_load(to_yaml(data)) == data


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=8,
    )
)
def test_yaml_round_trips_any_document(value: object) -> None:
    assert yaml.safe_load(to_yaml(value)) == value


def test_select_refuses_an_unknown_column_before_printing() -> None:
    with pytest.raises(InvalidRequest) as caught:
        select(Listing(["a"], [[1]]), ["b"], [], False)
    assert caught.value.token == "b"


# ---------------------------------------------------------------- a real pipe


def test_a_table_piped_into_head_exits_0_quietly(cloud: dict[str, str], tmp_path: Path) -> None:
    """``set -o pipefail``: rpquery's own status counts. The answer (every candidate of
    the cloud, several hundred KB) is far bigger than the pipe's buffer, so the writes
    after ``head`` left fail with EPIPE."""
    rpquery = Path(sys.executable).with_name("rpquery")
    for fmt in ("table", "json"):
        proc = subprocess.run(
            [
                "bash",
                "-c",
                'set -o pipefail; "$0" --db "$1" candidates "resources=VCPU:1" -f "$2" | head -1',
                str(rpquery),
                cloud["url"],
                fmt,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, (fmt, proc.stderr)
        assert proc.stderr == ""
        assert len(proc.stdout.splitlines()) == 1
