"""Which packages the rpquery distribution holds: found by setuptools, not listed by hand.

The code is in ``rpquery/`` and the alembic migrations in ``schema/`` at the top of the
tree, installed as ``rpquery.schema``. Two links in git put them in one ``src`` layout:
``src/rpquery`` is a link to ``rpquery/`` and ``rpquery/schema`` a link to ``schema/``,
and pyproject.toml's ``package-dir`` names ``src/``. Package discovery follows the links,
so the wheel holds ``rpquery`` and ``rpquery.schema`` as real files, and the editable
install (``make install``) is one ``.pth`` line naming ``src/``: the only package there is
``rpquery``, so nothing else of the tree becomes importable, and setuptools needs no meta
path finder (whose notice, "be careful with folders ... with the same name as your
package", every ``make run`` on a fresh clone used to print).

A package list written by hand once missed ``rpquery.store.dialects`` and broke every
non-editable install; ``tests/test_wheel.py`` builds the wheel and checks that it holds
every module, ``tests/test_cli_packaging.py`` that the editable install prints nothing.
Everything else (metadata, package data) is in pyproject.toml.
"""

from setuptools import find_packages, setup


def packages() -> list[str]:
    """``rpquery`` and its subpackages, ``rpquery.schema`` among them (through the links)."""
    return find_packages("src")


setup(packages=packages())
