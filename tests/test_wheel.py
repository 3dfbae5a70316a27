"""The built wheel works on its own: a non-editable install in a fresh virtual environment.

The editable install every other test uses imports straight from the source tree, so it
cannot see a package the wheel leaves out (a package list written by hand once missed
``rpquery.store.dialects`` and every ``pip install rpquery`` failed on import). Here the
wheel is built from a copy of the tree (PEP 517, as ``pip install .`` does), installed
into a new venv with ``--no-index``, and then:

- the wheel holds exactly the modules of ``rpquery/`` and ``schema/`` (as ``rpquery.schema``)
  plus the migration template;
- every module imports in the fresh venv, from the venv and not from the source tree;
- ``rpquery tour`` runs there on a new SQLite database (migrations, sample cloud, queries).

The dependencies are the ones already installed in the running interpreter, shown to the
fresh venv through a directory of links (never rpquery itself), so pip still checks the
wheel's requirements but downloads nothing. Building needs setuptools from PyPI (pip's
build isolation, cached after the first run): without PyPI the test is skipped, except
under ``CI=true``. About 20 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import IN_CI

ROOT = Path(__file__).resolve().parent.parent
#: What a wheel is built from (the rest of the tree is not part of the distribution).
SOURCES = ("src", "rpquery", "schema", "pyproject.toml", "README.md", "setup.py")
#: Signs that a build failed for want of PyPI, not because of the project.
OFFLINE = ("No matching distribution found for setuptools", "NewConnectionError",
           "Temporary failure in name resolution", "Network is unreachable")


def expected_modules() -> set[str]:
    """Module names of the source tree: ``rpquery/x/y.py`` → ``rpquery.x.y``,
    ``schema/versions/z.py`` → ``rpquery.schema.versions.z``."""
    names = set()
    for top, prefix in (("rpquery", ["rpquery"]), ("schema", ["rpquery", "schema"])):
        for path in (ROOT / top).rglob("*.py"):
            parts = [*prefix, *path.relative_to(ROOT / top).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            names.add(".".join(parts))
    return names


def wheel_modules(wheel: Path) -> set[str]:
    """Module names of the ``.py`` files in ``wheel``."""
    with zipfile.ZipFile(wheel) as zf:
        files = [n for n in zf.namelist() if n.endswith(".py")]
    return {n[:-3].removesuffix("/__init__").replace("/", ".") for n in files}


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command, its output kept for the assertion message."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300, check=False)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the source tree (no stale ``build/`` reused)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        if not (ROOT / name).exists():
            continue
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    done = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, src)
    if done.returncode and not IN_CI and any(s in done.stderr for s in OFFLINE):
        pytest.skip(f"building the wheel needs setuptools from PyPI: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("rpquery-*.whl")
    return built


def dependency_links(target: Path) -> Path:
    """A directory of links to what this interpreter has installed, minus rpquery (its
    editable install points at the source tree, which the fresh venv must not see)."""
    site = Path(sysconfig.get_paths()["purelib"])
    target.mkdir()
    for entry in site.iterdir():
        if entry.suffix == ".pth" or "rpquery" in entry.name.lower():
            continue
        (target / entry.name).symlink_to(entry)
    return target


@pytest.fixture(scope="module")
def fresh(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with the wheel installed by pip, offline; returns its ``bin``."""
    home = tmp_path_factory.mktemp("venv")
    venv.create(home / "env", with_pip=False, symlinks=True)
    python = home / "env" / "bin" / "python"
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    deps = dependency_links(home / "deps")
    (Path(purelib.stdout.strip()) / "_rpquery_test_deps.pth").write_text(f"{deps}\n")
    done = run(sys.executable, "-m", "pip", "--python", python, "install", "-q",
               "--no-index", wheel)
    assert done.returncode == 0, done.stdout + done.stderr
    return home / "env" / "bin"


def test_the_wheel_holds_every_module(wheel: Path) -> None:
    assert wheel_modules(wheel) == expected_modules()
    with zipfile.ZipFile(wheel) as zf:
        assert "rpquery/schema/script.py.mako" in zf.namelist()


IMPORT_ALL = """
import importlib, pkgutil, sys
import rpquery
names = []
for info in pkgutil.walk_packages(rpquery.__path__, "rpquery."):
    if info.name == "rpquery.schema.env":  # alembic's env script: runs migrations on import
        continue
    module = importlib.import_module(info.name)
    assert sys.prefix in module.__file__, (info.name, module.__file__)
    names.append(info.name)
print(len(names))
"""


def test_every_module_imports_from_the_fresh_venv(fresh: Path) -> None:
    done = run(fresh / "python", "-c", IMPORT_ALL, cwd=fresh)
    assert done.returncode == 0, done.stdout + done.stderr
    # every module of the tree but rpquery itself (not walked) and the env script
    assert int(done.stdout) == len(expected_modules()) - 2


def test_rpquery_tour_runs_from_the_fresh_venv(fresh: Path, tmp_path: Path) -> None:
    done = run(fresh / "rpquery", "tour", "--db", f"sqlite:///{tmp_path / 'tour.db'}",
               cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Candidates that must not have a GPU" in done.stdout
    assert (tmp_path / "tour.db").stat().st_size > 0
