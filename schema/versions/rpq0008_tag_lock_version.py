"""rpquery: a version counter on ``rpq_instance_tag_locks``, bumped by every tag write.

A tag change used to lock its (instance, namespace) row with ``SELECT ... FOR UPDATE``
and never write it. One server queues the writers on that lock, but a Galera cluster
certifies only the rows a transaction writes: two writers on two nodes both took
"the" lock, both passed the 50-tag limit check and both committed (51 tags seen).
The lock is now ``UPDATE ... SET version = version + 1``: the same row lock on one
server, and a written row that Galera certifies, so one of two concurrent writers on
different nodes fails at commit (1213) and is retried on fresh data.

Revision ID: rpq0008
Revises: rpq0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "rpq0008"
down_revision = "rpq0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "rpq_instance_tag_locks",
        sa.Column("version", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )


def downgrade() -> None:
    with op.batch_alter_table("rpq_instance_tag_locks") as batch:
        batch.drop_column("version")
