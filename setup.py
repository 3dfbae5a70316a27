"""Which packages the rpquery distribution holds: found by setuptools, not listed by hand.

Everything under ``rpquery/`` is found by package discovery. The alembic migrations live in
``schema/`` at the top of the tree and are installed as ``rpquery.schema`` (the
``package-dir`` of pyproject.toml), so their packages are found there and renamed. A package
list written by hand once missed ``rpquery.store.dialects`` and broke every non-editable
install; pyproject.toml cannot express the renamed tree with discovery, hence this file.
Everything else (metadata, package data) is in pyproject.toml; ``tests/test_wheel.py``
builds the wheel and checks that it holds every module.
"""

from setuptools import find_packages, setup


def packages() -> list[str]:
    """``rpquery`` and its subpackages, then ``schema`` and its own as ``rpquery.schema``."""
    own = find_packages(include=["rpquery", "rpquery.*"])
    schema = [f"rpquery.schema.{name}" for name in find_packages("schema")]
    return [*own, "rpquery.schema", *schema]


setup(packages=packages())
