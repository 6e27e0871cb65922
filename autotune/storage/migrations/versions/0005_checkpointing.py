"""whether a trial ran with gradient checkpointing (memory.gradient_checkpointing), and the rank it
trained (lora.align_rank rounds the sampled one up)

Revision ID: 0005_checkpointing
Revises: 0004_calibration
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_checkpointing"
down_revision = "0004_calibration"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_trials") as batch:
        batch.add_column(sa.Column("gradient_checkpointing", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("rank_used", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_trials") as batch:
        batch.drop_column("rank_used")
        batch.drop_column("gradient_checkpointing")
