"""rpquery: instance tags with namespaces and backend states (seed 003).

Revision ID: rpq0004
Revises: rpq0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "rpq0004"
down_revision = "rpq0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rpq_instance_tags",
        sa.Column("created_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("namespace", sa.String(32), nullable=False),
        sa.Column("tag", sa.Unicode(60), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("id", name="rpq_instance_tags_pkey"),
        sa.UniqueConstraint(
            "instance_uuid",
            "namespace",
            "tag",
            name="uniq_rpq_instance_tags0instance_uuid_namespace_tag",
        ),
    )
    op.create_index(
        "rpq_instance_tags_namespace_tag_idx", "rpq_instance_tags", ["namespace", "tag"]
    )


def downgrade() -> None:
    op.drop_index("rpq_instance_tags_namespace_tag_idx", table_name="rpq_instance_tags")
    op.drop_table("rpq_instance_tags")
