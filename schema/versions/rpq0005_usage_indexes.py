"""rpquery: covering indexes for usages by consumer type.

``project_usages`` finds a project's (and user's) consumers with their type, then sums
their allocations per class. These two indexes let both steps run from the index
alone (no heap/table lookups). They sit on Placement's tables but carry the ``rpq_``
prefix; Placement never notices them.

Revision ID: rpq0005
Revises: rpq0004
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "rpq0005"
down_revision = "rpq0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "rpq_consumers_project_user_type_idx",
        "consumers",
        ["project_id", "user_id", "consumer_type_id", "uuid", "id"],
    )
    op.create_index(
        "rpq_allocations_consumer_class_used_idx",
        "allocations",
        ["consumer_id", "resource_class_id", "used"],
    )


def downgrade() -> None:
    op.drop_index("rpq_allocations_consumer_class_used_idx", table_name="allocations")
    op.drop_index("rpq_consumers_project_user_type_idx", table_name="consumers")
