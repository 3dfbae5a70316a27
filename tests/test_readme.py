"""The README's Python examples run, in order, in one namespace (so they cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(python_blocks()) >= 2


def test_readme_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in python_blocks():
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102
    assert (tmp_path / "readme-example.db").exists()
