"""plan before spending: the study's data fingerprint; predicted memory and time per trial

Revision ID: 0003_plan
Revises: 0002_train
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_plan"
down_revision = "0002_train"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_studies") as batch:
        batch.add_column(sa.Column("data_fingerprint", sa.JSON(), nullable=True))
    with op.batch_alter_table("autotune_trials") as batch:
        batch.add_column(sa.Column("predicted_memory_mb", sa.Float(), nullable=True))
        batch.add_column(sa.Column("predicted_time_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("not_run", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_trials") as batch:
        batch.drop_column("not_run")
        batch.drop_column("predicted_time_s")
        batch.drop_column("predicted_memory_mb")
    with op.batch_alter_table("autotune_studies") as batch:
        batch.drop_column("data_fingerprint")
