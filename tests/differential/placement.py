"""Talk to one Placement process (``driver.py`` in ``.venv-placement``) per cloud.

>>> placement_url("postgresql+psycopg://postgres@127.0.0.1/db")
'postgresql+psycopg2://postgres@127.0.0.1/db'
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import side_by_side

DRIVER = Path(__file__).with_name("driver.py")


def placement_url(url: str) -> str:
    """The URL Placement gets: psycopg 2 on PostgreSQL (Placement 16.0 reads
    ``cursor.lastrowid`` on inserts, which psycopg 3 does not have)."""
    for prefix in ("postgresql+psycopg://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg2://" + url[len(prefix) :]
    return url


class Placement:
    """A running Placement app on ``url``; :meth:`ask` sends one batch of requests.
    ``options``: ``placement.conf`` options over Placement's defaults, by section
    (``{"placement": {"randomize_allocation_candidates": True}}``)."""

    def __init__(self, url: str, options: dict[str, dict[str, Any]] | None = None) -> None:
        # stderr to a file: a pipe nobody reads could fill up and block Placement
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in close())
        extra = [json.dumps(options)] if options else []
        self.proc = subprocess.Popen(
            [str(side_by_side.PYTHON), str(DRIVER), placement_url(url), *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        first = self._line()
        if first.strip() != "ready":
            raise RuntimeError(f"Placement did not start: {first[:500]}")

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            self.log.seek(0)
            err = self.log.read()
            raise RuntimeError(f"Placement driver exited: {err[-2000:]}")
        return line

    def ask(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not batch:
            return []
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(batch) + "\n")
        self.proc.stdin.flush()
        return list(json.loads(self._line()))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()

    def __enter__(self) -> Placement:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
