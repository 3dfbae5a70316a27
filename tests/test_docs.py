"""Docs stay complete: every error code the package raises is documented (and has a row
with an input that produces it in docs/errors.md), and every document the README links
to exists."""

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
