"""rpquery: aggregate metadata for the flavor filter (docs/aggregate-metadata.md).

Revision ID: rpq0002
Revises: rpq0001
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from rpquery.schema.frozen import exact_text

revision = "rpq0002"
down_revision = "rpq0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rpq_aggregate_metadata",
        sa.Column("created_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("aggregate_uuid", sa.String(36), nullable=False),
        sa.Column("key", exact_text(255), nullable=False),
        sa.Column("value", exact_text(255), nullable=False),
        sa.PrimaryKeyConstraint("id", name="rpq_aggregate_metadata_pkey"),
        sa.UniqueConstraint(
            "aggregate_uuid", "key", name="uniq_rpq_aggregate_metadata0aggregate_uuid_key"
        ),
    )
    op.create_index("rpq_aggregate_metadata_key_idx", "rpq_aggregate_metadata", ["key"])


def downgrade() -> None:
    op.drop_index("rpq_aggregate_metadata_key_idx", table_name="rpq_aggregate_metadata")
    op.drop_table("rpq_aggregate_metadata")
