"""A clean first run: the editable install prints no warning or notice of the project's own.

``make run`` on a fresh clone installs the package first (``pip install -e``); setuptools
used to print ~56 lines of deprecation warnings about ``pyproject.toml`` (``license = {
text = ... }``), then a 10-line "Editable installation ... be careful with folders ... with
the same name as your package" notice: with the migrations mapped from ``schema/`` to
``rpquery.schema``, setuptools installed a meta path finder and said so. Now ``src/``
holds a link to ``rpquery/`` (and ``rpquery/schema`` a link to ``schema/``), so the
editable install is one ``.pth`` line naming ``src/`` and setuptools has nothing to warn
about. These tests install the package as ``make install`` does (build isolation, the
newest setuptools the index offers that ``[build-system] requires`` allows) into a new
virtual environment and fail on any warning the build backend prints.

pip's own notices about the machine's configuration (an index location it ignores) are
not the project's and are left out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
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


def test_editable_install_prints_nothing_and_imports_the_migrations(tmp_path: Path) -> None:
    """The editable install itself (the wheel of one ``.pth`` file) into a new venv: no
    warning or notice from setuptools; the ``.pth`` names ``src/`` only (not the top of
    the tree, where ``tests`` or ``schema`` would become importable); ``rpquery.schema``
    imports from it outside the source tree. A few seconds."""
    venv.create(tmp_path / "env", with_pip=False, symlinks=True)
    python = tmp_path / "env" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--disable-pip-version-check", "-e", str(ROOT)],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert _backend_warnings(proc.stdout + proc.stderr) == []
    assert "Editable installation" not in proc.stdout + proc.stderr
    (pth,) = (tmp_path / "env").rglob("__editable__.rpquery-*.pth")
    assert pth.read_text().split() == [str(ROOT / "src")]
    where = subprocess.run(
        [str(python), "-c", "import rpquery.schema.versions as v; print(v.__file__)"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path, env=env,
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip() == str(ROOT / "src/rpquery/schema/versions/__init__.py")
