"""worker slots and sampler seeds; duplicates of an earlier trial

Revision ID: 0002_workers
Revises: 0001
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_workers"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "autotune_workers",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("study_name", sa.String(length=512), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("worker", sa.String(length=256), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_autotune_workers"),
        sa.UniqueConstraint("study_name", "slot", name="uq_autotune_workers_study_name_slot"),
    )
    op.add_column("autotune_trials", sa.Column("sampler_seed", sa.BigInteger(), nullable=True))
    op.add_column("autotune_trials", sa.Column("duplicate_of", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_trials") as batch:
        batch.drop_column("duplicate_of")
        batch.drop_column("sampler_seed")
    op.drop_table("autotune_workers")
