"""rpquery: instance tags with namespaces and backend states (docs/tags.md).

Besides the tags themselves: per-(instance, namespace) lock rows, backend jobs in
flight, the mutually exclusive tag pairs, and the state of the database-backed fake
backend used by CLI demos.

Revision ID: rpq0004
Revises: rpq0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from rpquery.schema.frozen import exact_text

revision = "rpq0004"
down_revision = "rpq0003"
branch_labels = None
depends_on = None


def _timestamps() -> list[sa.Column]:
    return [
        sa.Column("created_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        "rpq_instance_tags",
        *_timestamps(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("namespace", sa.String(32), nullable=False),
        sa.Column("tag", exact_text(60), nullable=False),
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
    op.create_table(
        "rpq_instance_tag_locks",
        *_timestamps(),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("namespace", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("instance_uuid", "namespace", name="rpq_instance_tag_locks_pkey"),
    )
    op.create_table(
        "rpq_instance_tag_jobs",
        *_timestamps(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("namespace", sa.String(32), nullable=False),
        sa.Column("tag", exact_text(60), nullable=False),
        sa.Column("op", sa.String(8), nullable=False),
        sa.PrimaryKeyConstraint("id", name="rpq_instance_tag_jobs_pkey"),
        sa.UniqueConstraint(
            "job_id", "namespace", "tag", name="uniq_rpq_instance_tag_jobs0job_id_namespace_tag"
        ),
    )
    op.create_index(
        "rpq_instance_tag_jobs_instance_uuid_namespace_tag_idx",
        "rpq_instance_tag_jobs",
        ["instance_uuid", "namespace", "tag"],
    )
    op.create_table(
        "rpq_instance_tag_conflicts",
        *_timestamps(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("namespace", sa.String(32), nullable=False),
        sa.Column("tag_a", exact_text(60), nullable=False),
        sa.Column("tag_b", exact_text(60), nullable=False),
        sa.PrimaryKeyConstraint("id", name="rpq_instance_tag_conflicts_pkey"),
        sa.UniqueConstraint(
            "namespace",
            "tag_a",
            "tag_b",
            name="uniq_rpq_instance_tag_conflicts0namespace_tag_a_tag_b",
        ),
    )
    op.create_table(
        "rpq_fake_backend_tags",
        *_timestamps(),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("tag", exact_text(128), nullable=False),
        sa.PrimaryKeyConstraint("instance_uuid", "tag", name="rpq_fake_backend_tags_pkey"),
    )
    op.create_table(
        "rpq_fake_backend_jobs",
        *_timestamps(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("op", sa.String(8), nullable=False),
        sa.Column("tag", exact_text(128), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("id", name="rpq_fake_backend_jobs_pkey"),
    )


def downgrade() -> None:
    op.drop_table("rpq_fake_backend_jobs")
    op.drop_table("rpq_fake_backend_tags")
    op.drop_table("rpq_instance_tag_conflicts")
    op.drop_index(
        "rpq_instance_tag_jobs_instance_uuid_namespace_tag_idx", table_name="rpq_instance_tag_jobs"
    )
    op.drop_table("rpq_instance_tag_jobs")
    op.drop_table("rpq_instance_tag_locks")
    op.drop_index("rpq_instance_tags_namespace_tag_idx", table_name="rpq_instance_tags")
    op.drop_table("rpq_instance_tags")
