"""Alembic environment for rpquery.

Runs on a connection handed over by :func:`rpquery.store.migrations.upgrade` (or opens one
from ``sqlalchemy.url`` when run by the ``alembic`` command). rpquery keeps its own
version table, ``rpquery_alembic_version``, so it coexists with Placement's
``alembic_version``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool
from sqlalchemy.engine import Connection

from rpquery.store import dialects
from rpquery.store.migrations import VERSION_TABLE, include_object
from rpquery.store.tables import metadata

config = context.config


def _run(connection: Connection) -> None:
    # an unknown dialect is refused (InvalidRequest rpquery.db.unsupported_dialect), not
    # given another backend's DDL by a migration's ``else``
    dialects.backend(connection.dialect.name)
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_object=include_object,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = engine_from_config(
        config.get_section(config.config_ini_section, {}),
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with engine.connect() as conn:
        _run(conn)
