"""in-study confirmation (budget.confirm_top): a trial that re-trains a search trial's config at
the target budget with another training seed, and where its adapter was kept

Revision ID: 0006_confirm
Revises: 0005_checkpointing
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_confirm"
down_revision = "0005_checkpointing"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_trials") as batch:
        batch.add_column(sa.Column("confirm_of", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("train_seed", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("adapter_dir", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_trials") as batch:
        batch.drop_column("adapter_dir")
        batch.drop_column("train_seed")
        batch.drop_column("confirm_of")
