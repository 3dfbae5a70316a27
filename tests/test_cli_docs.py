"""The command lines of docs/cli.md and README.md run as written.

Once per session ``rpquery tour`` builds the tour's database (SQLite, a temporary
directory) and its output is kept. Then:

- every ``$ rpquery ...`` line of docs/cli.md's code blocks, and of README.md's
  ``console`` blocks, runs in one bash session per document (so ``GROUP=$(rpquery ...)``
  then ``"$GROUP"`` works, and ``set -o pipefail`` holds ``rpquery ... | head`` to
  rpquery's own status), in document order, against a copy of the tour's database:
  each must exit 0, and where a ``console`` block shows what a line prints, it prints
  exactly that (trailing spaces aside). A line's own database (``--db URL``) is
  replaced by that copy (the line is checked, not the server it names); other ``$``
  lines (``make run``, ``export ...``) are not run;
- the transcripts of the tour (docs/cli.md's whole run, README.md's excerpt) show the
  tour as it is: each step heading and ``$ rpquery`` line appears in the tour's output
  (uuids aside: the tour's server group and instances are new each run).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RPQUERY = Path(sys.executable).with_name("rpquery")
TRANSCRIPT_START = ".venv/bin/rpquery --db sqlite:///rpquery.db tour"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: ``$ rpquery ...`` or ``$ NAME=$(rpquery ...)``
COMMAND = re.compile(r"^\$ ((?:[A-Z_]+=\$\()?rpquery\s.*)$")


def code_blocks_with_lang(path: Path, only: str | None = None) -> list[tuple[str, list[str]]]:
    """The fenced code blocks of a Markdown file with their language (``only``: those of
    that language)."""
    blocks: list[tuple[str, list[str]]] = []
    lang, current = "", None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if current is None:
                lang, current = line[3:].strip(), []
            else:
                if current and (only is None or lang == only):
                    blocks.append((lang, current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def code_blocks(path: Path, only: str | None = None) -> list[list[str]]:
    return [block for _, block in code_blocks_with_lang(path, only)]


def command_lines(path: Path, only: str | None = None) -> list[tuple[str, list[str] | None]]:
    """The ``$ rpquery`` lines of the document's blocks (transcripts of the tour left out),
    each with the output the page shows under it in a ``console`` block (``None``
    elsewhere: there the lines are only run)."""
    found: list[tuple[str, list[str] | None]] = []
    for lang, block in code_blocks_with_lang(path, only):
        if block[0] == TRANSCRIPT_START:
            continue
        for line in block:
            if m := COMMAND.match(line):
                found.append((m.group(1), [] if lang == "console" else None))
            elif line.startswith("$ "):
                continue
            elif found and found[-1][1] is not None:
                found[-1][1].append(line.rstrip())  # type: ignore[union-attr]
    return found


def _normal(line: str) -> str:
    """A heading or command line without its rule, trailing spaces and uuids."""
    return UUID.sub("<uuid>", line.rstrip(" ─"))


def transcript_lines(block: list[str]) -> list[str]:
    return [_normal(line) for line in block if re.match(r"^(\d+\. |\$ rpquery )", line)]


@pytest.fixture(scope="session")
def tour(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The tour's database and what the tour printed."""
    path = tmp_path_factory.mktemp("tour") / "rpquery.db"
    proc = subprocess.run(
        [str(RPQUERY), "--db", f"sqlite:///{path}", "tour"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    return path, proc.stdout


def test_the_extraction_finds_the_pages_command_lines() -> None:
    found = dict(command_lines(ROOT / "docs" / "cli.md"))
    assert any(line.startswith("rpquery candidates ") for line in found)
    assert any(line.startswith("GROUP=$(rpquery server-group create") for line in found)
    assert not any("rpquery schedule" in line for line in found)  # the transcript's
    assert (
        found[
            "rpquery provider delete 4a8d51b6-5a8e-4bd2-9d5e-2f1b8f1b2a10 || echo "
            '"refused: it has a child"'
        ][-1]
        == "refused: it has a child"
    )
    assert command_lines(ROOT / "README.md", "console") == [
        ("rpquery --db postgresql://placement@db.example/placement db upgrade", []),
        ("rpquery db status", []),
    ]


@pytest.mark.parametrize(
    ("document", "only"), [("docs/cli.md", None), ("README.md", "console")], ids=str
)
def test_command_lines_run(
    tour: tuple[Path, str], tmp_path: Path, document: str, only: str | None
) -> None:
    """Each line exits 0; where a console block shows its output, it prints that."""
    lines = command_lines(ROOT / document, only)
    assert lines
    database = tmp_path / "docs.db"
    shutil.copyfile(tour[0], database)
    url = f"sqlite:///{database}"
    script = ["set -o pipefail", f'rpquery() {{ "{RPQUERY}" --db "{url}" "$@"; }}']
    for n, (line, _) in enumerate(lines):
        line = re.sub(r"^(\S*rpquery)\s+--db\s+\S+", r"\1", line)
        script += [
            f"{{ {line}\n}} > {tmp_path}/out{n} 2>&1",
            f"rc=$?; if [ $rc -ne 0 ]; then echo 'FAILED {n}' >&2; cat {tmp_path}/out{n} >&2; "
            "exit $rc; fi",
        ]
    proc = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    failed = re.search(r"FAILED (\d+)", proc.stderr)
    where = lines[int(failed.group(1))][0] if failed else "?"
    assert proc.returncode == 0, f"{document}: $ {where}\n{proc.stderr[-3000:]}"
    for n, (line, shown) in enumerate(lines):
        if shown:
            printed = [x.rstrip() for x in (tmp_path / f"out{n}").read_text().splitlines()]
            assert printed == shown, f"{document}: $ {line}"


def test_transcripts_show_the_tour_as_it_is(tour: tuple[Path, str]) -> None:
    printed = set(transcript_lines(tour[1].splitlines()))
    (whole,) = [b for b in code_blocks(ROOT / "docs" / "cli.md") if b[0] == TRANSCRIPT_START]
    excerpt = next(b for b in code_blocks(ROOT / "README.md") if b[0].startswith("3. Candidates"))
    for name, block in (("docs/cli.md", whole), ("README.md", excerpt)):
        shown = transcript_lines(block)
        assert shown, name
        assert [line for line in shown if line not in printed] == [], name
    assert len(transcript_lines(whole)) == len(printed)  # the whole run, every step
