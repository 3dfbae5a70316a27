"""Create, upgrade and inspect an rpquery schema.

rpquery's migrations live in ``schema/`` (installed as ``rpquery.schema``, so a wheel
can run them) and record their state in their own table, ``rpquery_alembic_version``;
Placement's ``alembic_version`` is left to Placement. On a database Placement created,
the first revision recognises Placement's tables and only rpquery's own tables are
added.

>>> from rpquery.db import Database
>>> db = Database("sqlite://")
>>> upgrade(db)
>>> status(db).revision == head_revision()
True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from rpquery.errors import SchemaError
from rpquery.store import catalog, dialects
from rpquery.store.tables import PLACEMENT_HEAD, PLACEMENT_TABLES

if TYPE_CHECKING:  # Database.upgrade imports this module: no import back at run time
    from rpquery.db import Database

__all__ = [
    "PLACEMENT_VERSION_TABLE",
    "VERSION_TABLE",
    "SchemaStatus",
    "charset_problems",
    "downgrade",
    "head_revision",
    "include_object",
    "require_current",
    "schema_dir",
    "status",
    "upgrade",
]

VERSION_TABLE = "rpquery_alembic_version"
PLACEMENT_VERSION_TABLE = "alembic_version"
_NOT_OURS = {VERSION_TABLE, PLACEMENT_VERSION_TABLE}


def schema_dir() -> Path:
    """Where the migration scripts are installed."""
    import rpquery.schema

    return Path(rpquery.schema.__file__).parent


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Alembic filter: the two version tables are nobody's model."""
    return not (type_ == "table" and name in _NOT_OURS)


def _config(connection: sa.Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(schema_dir()))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def upgrade(db: Database, revision: str = "head", *, sync: bool = True) -> None:
    """Upgrade the schema to ``revision`` and sync standard classes and traits.

    Raises :class:`SchemaError` when the database holds a partial or outdated
    Placement schema.
    """
    with db.begin() as conn:
        command.upgrade(_config(conn), revision)
    if sync:
        with db.begin() as conn:
            catalog.sync_standard(conn)


def downgrade(db: Database, revision: str) -> None:
    """Downgrade rpquery's own objects to ``revision`` (``base`` removes them all;
    Placement's tables always stay)."""
    with db.begin() as conn:
        command.downgrade(_config(conn), revision)


@dataclass(frozen=True)
class SchemaStatus:
    """What ``rpquery db status`` reports."""

    revision: str | None
    head: str
    placement_revision: str | None
    has_placement_tables: bool

    @property
    def up_to_date(self) -> bool:
        return self.revision == self.head

    @property
    def is_placement_database(self) -> bool:
        """Placement's tables are there and Placement's version table names its head."""
        return self.has_placement_tables and self.placement_revision == PLACEMENT_HEAD


def status(db: Database) -> SchemaStatus:
    """The schema revision, and whether the database carries Placement's schema (a
    SQLite file that does not exist is an empty database; it is not created)."""
    path = db.sqlite_path
    if path is not None and not path.exists() and path.parent.is_dir():
        return SchemaStatus(None, head_revision(), None, has_placement_tables=False)
    with db.connect(primary=True) as conn:
        revision = MigrationContext.configure(
            conn, opts={"version_table": VERSION_TABLE}
        ).get_current_revision()
        inspector = sa.inspect(conn)
        names = set(inspector.get_table_names())
        placement_revision = None
        if PLACEMENT_VERSION_TABLE in names:
            placement_revision = conn.execute(
                sa.text(f"SELECT version_num FROM {PLACEMENT_VERSION_TABLE}")
            ).scalar()
    return SchemaStatus(
        revision=revision,
        head=head_revision(),
        placement_revision=placement_revision,
        has_placement_tables={t.name for t in PLACEMENT_TABLES} <= names,
    )


def charset_problems(db: Database) -> list[tuple[str, str]]:
    """``(problem, fix)`` for every place a MySQL/MariaDB database cannot hold 4-byte
    characters (``utf8mb3`` and older character sets; the backend's ``charset_problems``).
    Reported by ``rpquery db upgrade`` and ``rpquery db check``."""
    with db.connect() as conn:
        return dialects.backend(conn.dialect.name).charset_problems(conn)


def require_current(db: Database) -> None:
    """Raise :class:`SchemaError` unless the schema is at rpquery's head."""
    current = status(db)
    if not current.up_to_date:
        raise SchemaError(
            "rpquery.schema.outdated",
            f"schema revision is {current.revision or 'empty'}, rpquery needs "
            f"{current.head}: run 'rpquery db upgrade'",
        )
