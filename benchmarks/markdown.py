"""The Markdown of the benchmark reports' tables.

>>> print("\\n".join(table(["backend", "ms"], [["sqlite", 1.5], ["mysql", None]])))
| backend | ms |
| --- | --- |
| sqlite | 1.5 |
| mysql | – |
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table's lines: the headers, their rule, then a line per row of cells
    (``–`` for ``None``)."""
    return [
        "| " + " | ".join(headers) + " |",
        "|" + " --- |" * len(headers),
        *("| " + " | ".join("–" if c is None else str(c) for c in cells) + " |" for cells in rows),
    ]
