"""rpquery: server groups and their members (docs/server-groups.md).

Revision ID: rpq0003
Revises: rpq0002
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "rpq0003"
down_revision = "rpq0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rpq_server_groups",
        sa.Column("created_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("policy", sa.String(32), nullable=False),
        sa.Column("max_server_per_host", sa.Integer(), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.PrimaryKeyConstraint("id", name="rpq_server_groups_pkey"),
        sa.UniqueConstraint("uuid", name="uniq_rpq_server_groups0uuid"),
    )
    op.create_table(
        "rpq_server_group_members",
        sa.Column("created_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "instance_uuid", name="rpq_server_group_members_pkey"),
        sa.ForeignKeyConstraint(
            ["group_id"],
            ["rpq_server_groups.id"],
            name="rpq_server_group_members_group_id_fkey",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint("instance_uuid", name="uniq_rpq_server_group_members0instance_uuid"),
    )


def downgrade() -> None:
    op.drop_table("rpq_server_group_members")
    op.drop_table("rpq_server_groups")
