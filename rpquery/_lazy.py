"""Lazy re-exports: a package names its public API in ``__init__`` without importing it.

``import rpquery`` stays cheap (no SQLAlchemy, no Alembic) until a name is used::

    __getattr__, __dir__ = lazy_exports(__name__, {"Database": ".db"})

The package also imports the same names under ``TYPE_CHECKING`` (for mypy and editors)
and lists them in ``__all__``; ``tests/test_public_api.py`` checks the three agree.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module ``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps each public
    name to the module defining it, relative to ``package`` (``".db"``), imported on first
    access and then cached."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
