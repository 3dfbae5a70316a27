"""A clean first run: building rpquery's metadata prints no warning of the project's own.

``make run`` on a fresh clone installs the package first; setuptools used to print ~56
lines of deprecation warnings about ``pyproject.toml`` (``license = { text = ... }``)
before the tour's first answer. This test asks pip to prepare the metadata exactly as
``make install`` does (build isolation, the newest setuptools the index offers that
``[build-system] requires`` allows) and fails on any warning the build backend prints.

pip's own notices about the machine's configuration (an index location it ignores) are
not the project's and are left out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _backend_warnings(output: str) -> list[str]:
    """Lines of a pip run that carry a Python warning (``...Warning: ...``) or
    setuptools' ``!!`` banner; pip's ``WARNING: Location ... is ignored`` lines about
    the machine's index configuration are not the project's."""
    found = []
    for line in output.splitlines():
        if line.startswith("WARNING: Location "):
            continue
        if "Warning" in line or line.strip() == "!!":
            found.append(line)
    return found


def test_backend_warnings_finds_a_setuptools_deprecation() -> None:
    sample = (
        "WARNING: Location 'file:///opt/x/simple/pip/' is ignored: it is neither a file\n"
        "  /tmp/x/_apply_pyprojecttoml.py:82: BuildBackendWarning: `project.license` as a "
        "TOML table is deprecated\n  !!\n"
    )
    assert len(_backend_warnings(sample)) == 2


def test_metadata_builds_without_warnings(tmp_path: Path) -> None:
    """pip prepares the editable install's metadata (no install: ``--dry-run``) with
    no warning from setuptools."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--no-deps",
            "--disable-pip-version-check",
            "--report",
            str(tmp_path / "report.json"),
            "-e",
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "report.json").exists()
    assert _backend_warnings(proc.stdout + proc.stderr) == []
