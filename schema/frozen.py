"""Helpers that migrations in ``versions/`` share, frozen in time.

A migration must do tomorrow exactly what it did the day it was released, whatever
later code does to rpquery's live tables, types and dialect helpers. So migrations take
their DDL from themselves or from here, never from the live package (a test in
``tests/test_migrations.py`` enforces it). Once a released migration uses a function of
this module, that function is not edited: a later migration that needs something else
gets a new function.

>>> from sqlalchemy.dialects import mysql
>>> maria = mysql.dialect(); maria.is_mariadb = True
>>> exact_text(60).compile(dialect=maria)
'VARCHAR(60) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin'
>>> exact_text(60).compile(dialect=mysql.dialect())
'VARCHAR(60) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from rpquery import SchemaError

#: "Not allowed" as MySQL/MariaDB error numbers and as PostgreSQL's SQLSTATE.
_MYSQL_PRIVILEGE_ERRORS = frozenset({1142, 1227, 1419})
_PG_PRIVILEGE_ERROR = "42501"


class _ExactText(sa.types.TypeDecorator[str]):
    """Unicode text compared byte for byte (rpq0002, rpq0004): a binary NO PAD
    collation on MySQL/MariaDB, whose name differs between the two; plain ``Unicode``
    elsewhere (PostgreSQL and SQLite compare exactly already)."""

    impl = sa.Unicode
    cache_ok = True

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length

    def load_dialect_impl(self, dialect: Any) -> sa.types.TypeEngine[Any]:
        if dialect.name in ("mysql", "mariadb"):
            collation = "utf8mb4_nopad_bin" if dialect.is_mariadb else "utf8mb4_0900_bin"
            return dialect.type_descriptor(
                mysql.VARCHAR(self.length, charset="utf8mb4", collation=collation)
            )
        return dialect.type_descriptor(sa.Unicode(self.length))


def exact_text(length: int) -> sa.types.TypeEngine[str]:
    """A text column of ``length`` characters compared byte for byte on every backend."""
    return _ExactText(length)


def create_triggers(bind: sa.Connection, statements: Sequence[str], what: str) -> None:
    """Run trigger DDL (rpq0006, rpq0007); a refusal for lack of privilege becomes
    ``SchemaError("rpquery.schema.trigger_privilege")`` saying what to grant."""
    for sql in statements:
        try:
            bind.exec_driver_sql(sql)
        except sa.exc.DBAPIError as error:
            orig = error.orig
            args: tuple[Any, ...] = tuple(getattr(orig, "args", ()))
            refused = getattr(orig, "sqlstate", None) == _PG_PRIVILEGE_ERROR or (
                bool(args) and args[0] in _MYSQL_PRIVILEGE_ERRORS
            )
            if not refused:
                raise
            if bind.dialect.name == "postgresql":
                hint = (
                    "Run the upgrade as the owner of Placement's tables (or grant "
                    "TRIGGER on them and CREATE on the schema)."
                )
            else:
                hint = (
                    "Grant TRIGGER on the database (GRANT TRIGGER ON <db>.* TO <user>) "
                    "and, when binary logging is on, set log_bin_trust_function_creators=1 "
                    "(or run the upgrade as a user with SUPER)."
                )
            raise SchemaError(
                "rpquery.schema.trigger_privilege",
                f"rpquery needs to create triggers {what} and was refused: {orig}. {hint}",
            ) from error
