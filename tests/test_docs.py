"""Docs stay complete: every error code the package raises is documented (and has a row
with an input that produces it in docs/errors.md), every document the README links
to exists, and code and docs cite design decisions in docs/design.md, not in documents
outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE_LITERAL = re.compile(r"""["'](rpquery\.[a-z0-9_]+(?:\.[a-z0-9_]+)+)["']""")
# request.py builds its codes as _fail("request.<what>", ...) → rpquery.request.<what>
FAIL_LITERAL = re.compile(r"""_fail\(\s*["']([a-z0-9_]+(?:\.[a-z0-9_]+)+)["']""")


def raised_codes() -> set[str]:
    codes: set[str] = set()
    for path in [*(ROOT / "rpquery").rglob("*.py"), *(ROOT / "schema").rglob("*.py")]:
        text = path.read_text()
        codes.update(CODE_LITERAL.findall(text))
        codes.update(f"rpquery.{c}" for c in FAIL_LITERAL.findall(text))
    return codes


def docs_text() -> str:
    return "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))


def test_every_error_code_is_documented() -> None:
    text = docs_text()
    codes = raised_codes()
    assert len(codes) > 50
    missing = sorted(c for c in codes if f"`{c}`" not in text and c not in text)
    assert missing == []


def error_rows() -> dict[str, list[str]]:
    """``docs/errors.md`` table rows by the codes in their first cell."""
    rows: dict[str, list[str]] = {}
    for line in (ROOT / "docs" / "errors.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `rpquery") and len(cells) >= 3:
            for code in re.findall(r"`(rpquery\.[a-z0-9_.]+)`", cells[0]):
                rows[code] = cells
    return rows


def test_errors_md_lists_every_code_with_an_input() -> None:
    rows = error_rows()
    assert sorted(raised_codes() - rows.keys()) == []
    assert [code for code, cells in rows.items() if not cells[2]] == []


def test_readme_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)\)", readme)
    assert links
    assert [link for link in links if not (ROOT / link).exists()] == []


# ---------------------------------------------------------------- design citations

#: Where code, tests and docs live (text files only).
CITING = ("rpquery", "schema", "tests", "benchmarks", "scripts", "docs")
CITING_FILES = ("README.md", "Makefile", "pyproject.toml")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".ini", ".mako", ".txt", ".cfg", ".yaml"}
#: Citations of the design brief and feature documents that are not in the repository:
#: "DESIGN §3", "seed 000", ".../shared/seeds/...". docs/design.md holds the decisions
#: (and maps these old citations to its sections).
OUTSIDE_CITATION = re.compile(
    r"DESIGN\s*§\s*\d|\bseeds?\s+0\d\d\b|shared/(?:DESIGN|seeds)", re.IGNORECASE
)
DESIGN_LINK = re.compile(r"\bdesign\.md#([a-z0-9-]+)")


def citing_files() -> list[Path]:
    found = [ROOT / name for name in CITING_FILES]
    for folder in CITING:
        found += [
            p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES
        ]
    exempt = {ROOT / "docs" / "design.md", Path(__file__).resolve()}  # they quote them
    return sorted(p for p in found if p.is_file() and p not in exempt)


def test_no_citation_of_documents_outside_the_repository() -> None:
    files = citing_files()
    assert len(files) > 100
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE_CITATION.search(line)
    ]
    assert found == []


def test_the_citation_check_finds_old_citations() -> None:
    hits = ["as DESIGN §3 asks", "(seed 000)", "Seeds 002", "../shared/seeds/000.txt"]
    misses = ["random seed 42", "seed000_examples", "docs/design.md#capacity"]
    assert all(OUTSIDE_CITATION.search(text) for text in hits)
    assert not any(OUTSIDE_CITATION.search(text) for text in misses)


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of a markdown text."""
    anchors = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return anchors


def test_links_into_design_md_name_its_sections() -> None:
    anchors = heading_anchors((ROOT / "docs" / "design.md").read_text())
    assert {"layers", "placement-semantics", "capacity", "origins"} <= anchors
    links = {
        (str(path.relative_to(ROOT)), anchor)
        for path in [*citing_files(), ROOT / "docs" / "design.md"]
        for anchor in DESIGN_LINK.findall(path.read_text(errors="replace"))
    }
    assert len(links) > 20
    assert sorted(link for link in links if link[1] not in anchors) == []


#: a link to a section of a markdown file of the repository: ``[...](docs/x.md#anchor)``
SECTION_LINK = re.compile(r"\]\(([^)\s#:]*\.md)#([^)\s]+)\)")


def test_links_to_sections_name_a_heading() -> None:
    """A link from the README or a document to ``file.md#anchor`` lands on a heading."""
    broken, checked = [], 0
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target, anchor in SECTION_LINK.findall(path.read_text()):
            linked = (path.parent / target).resolve()
            checked += 1
            if not linked.exists() or anchor not in heading_anchors(linked.read_text()):
                broken.append((str(path.relative_to(ROOT)), f"{target}#{anchor}"))
    assert checked > 50
    assert broken == []


#: a work period and its number, which must not date the project's history: name a date,
#: a commit or a release instead (written in two parts: this file does not match itself)
WORK_PERIOD = re.compile(r"\bsess" + r"ion[ _-]?\d", re.IGNORECASE)


def work_period_mentions() -> list[str]:
    """Lines and result file names of the project that date something by a work period."""
    found = []
    paths = [ROOT / "README.md", ROOT / "Makefile"]
    for folder in ("rpquery", "schema", "tests", "docs", "benchmarks", "scripts"):
        paths += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".txt")]
    for path in paths:
        if WORK_PERIOD.search(path.name):
            found.append(str(path.relative_to(ROOT)))
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if WORK_PERIOD.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}")
    return found


def test_no_work_period_names_a_time() -> None:
    assert work_period_mentions() == []
    assert WORK_PERIOD.search("the figures of Sess" + "ion 7")
