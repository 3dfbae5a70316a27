"""Placement's schema at its head a082b8bb98d0, unless Placement already made it.

On a database where Placement's migrations already ran, this revision checks that
Placement is at its head (the ``consumer_types`` table and ``consumers.consumer_type_id``
exist) and changes nothing. On an empty database it creates Placement's tables exactly
as Placement's own migrations would leave them, and stamps Placement's
``alembic_version`` with ``a082b8bb98d0`` so ``placement-manage db sync`` finds nothing
to do. A database with only some of Placement's tables is refused.

Downgrading past this revision leaves Placement's tables in place: they may be shared
with a running Placement, and rpquery never drops data it does not own.

Revision ID: rpq0001
Revises:
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from rpquery import SchemaError

revision = "rpq0001"
down_revision = None
branch_labels = None
depends_on = None

PLACEMENT_HEAD = "a082b8bb98d0"
PLACEMENT_TABLE_NAMES = {
    "resource_classes",
    "resource_providers",
    "inventories",
    "allocations",
    "consumer_types",
    "consumers",
    "projects",
    "users",
    "traits",
    "resource_provider_traits",
    "placement_aggregates",
    "resource_provider_aggregates",
}


def _ts() -> list[sa.Column]:
    return [
        sa.Column("created_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
    ]


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    present = PLACEMENT_TABLE_NAMES & set(inspector.get_table_names())
    if present == PLACEMENT_TABLE_NAMES:
        columns = {c["name"] for c in inspector.get_columns("consumers")}
        if "consumer_type_id" not in columns:
            raise SchemaError(
                "rpquery.schema.placement_outdated",
                "this Placement database is older than Placement's head "
                f"{PLACEMENT_HEAD}: run 'placement-manage db sync' first",
            )
        return
    if present:
        missing = ", ".join(sorted(PLACEMENT_TABLE_NAMES - present))
        raise SchemaError(
            "rpquery.schema.partial_placement",
            f"the database holds part of Placement's schema (missing: {missing}); "
            "refusing to guess how to complete it",
        )
    _create_placement_tables()
    _stamp_placement()


def _create_placement_tables() -> None:
    op.create_table(
        "resource_classes",
        *_ts(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("id", name="resource_classes_pkey"),
        sa.UniqueConstraint("name", name="uniq_resource_classes0name"),
    )
    op.create_table(
        "resource_providers",
        *_ts(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.Unicode(200), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=True),
        sa.Column("root_provider_id", sa.Integer(), nullable=True),
        sa.Column("parent_provider_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="resource_providers_pkey"),
        sa.ForeignKeyConstraint(
            ["parent_provider_id"],
            ["resource_providers.id"],
            name="resource_providers_parent_provider_id_fkey",
        ),
        sa.ForeignKeyConstraint(
            ["root_provider_id"],
            ["resource_providers.id"],
            name="resource_providers_root_provider_id_fkey",
        ),
        sa.UniqueConstraint("name", name="uniq_resource_providers0name"),
        sa.UniqueConstraint("uuid", name="uniq_resource_providers0uuid"),
    )
    op.create_index(
        "resource_providers_parent_provider_id_idx", "resource_providers", ["parent_provider_id"]
    )
    op.create_index(
        "resource_providers_root_provider_id_idx", "resource_providers", ["root_provider_id"]
    )
    op.create_table(
        "inventories",
        *_ts(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("resource_provider_id", sa.Integer(), nullable=False),
        sa.Column("resource_class_id", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("reserved", sa.Integer(), nullable=False),
        sa.Column("min_unit", sa.Integer(), nullable=False),
        sa.Column("max_unit", sa.Integer(), nullable=False),
        sa.Column("step_size", sa.Integer(), nullable=False),
        sa.Column("allocation_ratio", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="inventories_pkey"),
        sa.UniqueConstraint(
            "resource_provider_id",
            "resource_class_id",
            name="uniq_inventories0resource_provider_resource_class",
        ),
    )
    op.create_index("inventories_resource_class_id_idx", "inventories", ["resource_class_id"])
    op.create_table(
        "allocations",
        *_ts(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("resource_provider_id", sa.Integer(), nullable=False),
        sa.Column("consumer_id", sa.String(36), nullable=False),
        sa.Column("resource_class_id", sa.Integer(), nullable=False),
        sa.Column("used", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="allocations_pkey"),
    )
    op.create_index(
        "allocations_resource_provider_class_used_idx",
        "allocations",
        ["resource_provider_id", "resource_class_id", "used"],
    )
    op.create_index("allocations_resource_class_id_idx", "allocations", ["resource_class_id"])
    op.create_index("allocations_consumer_id_idx", "allocations", ["consumer_id"])
    op.create_table(
        "consumer_types",
        *_ts(),
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.Unicode(255), nullable=False),
        sa.PrimaryKeyConstraint("id", name="consumer_types_pkey"),
        sa.UniqueConstraint("name", name="uniq_consumer_types0name"),
    )
    op.create_table(
        "consumers",
        *_ts(),
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("consumer_type_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="consumers_pkey"),
        sa.ForeignKeyConstraint(
            ["consumer_type_id"], ["consumer_types.id"], name="consumers_consumer_type_id_fkey"
        ),
        sa.UniqueConstraint("uuid", name="uniq_consumers0uuid"),
    )
    op.create_index(
        "consumers_project_id_user_id_uuid_idx", "consumers", ["project_id", "user_id", "uuid"]
    )
    op.create_index("consumers_project_id_uuid_idx", "consumers", ["project_id", "uuid"])
    op.create_index("consumers_consumer_type_id_idx", "consumers", ["consumer_type_id"])
    for name in ("projects", "users"):
        op.create_table(
            name,
            *_ts(),
            sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
            sa.Column("external_id", sa.String(255), nullable=False),
            sa.PrimaryKeyConstraint("id", name=f"{name}_pkey"),
            sa.UniqueConstraint("external_id", name=f"uniq_{name}0external_id"),
        )
    op.create_table(
        "traits",
        *_ts(),
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.Unicode(255), nullable=False),
        sa.PrimaryKeyConstraint("id", name="traits_pkey"),
        sa.UniqueConstraint("name", name="uniq_traits0name"),
    )
    op.create_table(
        "resource_provider_traits",
        *_ts(),
        sa.Column("trait_id", sa.Integer(), nullable=False),
        sa.Column("resource_provider_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "trait_id", "resource_provider_id", name="resource_provider_traits_pkey"
        ),
        sa.ForeignKeyConstraint(
            ["resource_provider_id"],
            ["resource_providers.id"],
            name="resource_provider_traits_resource_provider_id_fkey",
        ),
        sa.ForeignKeyConstraint(
            ["trait_id"], ["traits.id"], name="resource_provider_traits_trait_id_fkey"
        ),
    )
    op.create_index(
        "resource_provider_traits_resource_provider_trait_idx",
        "resource_provider_traits",
        ["resource_provider_id", "trait_id"],
    )
    op.create_table(
        "placement_aggregates",
        *_ts(),
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(36), nullable=True),
        sa.PrimaryKeyConstraint("id", name="placement_aggregates_pkey"),
        sa.UniqueConstraint("uuid", name="uniq_placement_aggregates0uuid"),
    )
    op.create_table(
        "resource_provider_aggregates",
        *_ts(),
        sa.Column("resource_provider_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("aggregate_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint(
            "resource_provider_id", "aggregate_id", name="resource_provider_aggregates_pkey"
        ),
    )
    op.create_index(
        "resource_provider_aggregates_aggregate_id_idx",
        "resource_provider_aggregates",
        ["aggregate_id"],
    )


def _stamp_placement() -> None:
    """Record Placement's head in Placement's own version table (if it has none)."""
    bind = op.get_bind()
    if sa.inspect(bind).has_table("alembic_version"):
        return
    version = op.create_table(
        "alembic_version",
        sa.Column("version_num", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
    )
    op.bulk_insert(version, [{"version_num": PLACEMENT_HEAD}])


def downgrade() -> None:
    # Placement's tables are shared with Placement: never dropped by rpquery.
    pass
