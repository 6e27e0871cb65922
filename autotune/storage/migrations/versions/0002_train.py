"""resolved target modules per trial; autotune_fits for `autotune train`

Revision ID: 0002_train
Revises: 0002_workers
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_train"
down_revision = "0002_workers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # batch mode: SQLite cannot ALTER TABLE ... DROP COLUMN on older versions (downgrade).
    with op.batch_alter_table("autotune_trials") as batch:
        batch.add_column(sa.Column("target_modules", sa.JSON(), nullable=True))
    op.create_table(
        "autotune_fits",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("study_name", sa.String(length=512), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=False),
        sa.Column("train_examples", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("val_loss", sa.Float(), nullable=True),
        sa.Column("train_loss", sa.Float(), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("accuracy", sa.Float(), nullable=True),
        sa.Column("train_time_s", sa.Float(), nullable=True),
        sa.Column("eval_time_s", sa.Float(), nullable=True),
        sa.Column("wall_time_s", sa.Float(), nullable=True),
        sa.Column("peak_memory_mb", sa.Float(), nullable=True),
        sa.Column("memory_kind", sa.String(length=32), nullable=True),
        sa.Column("device", sa.String(length=128), nullable=True),
        sa.Column("output_path", sa.Text(), nullable=True),
        sa.Column("versions", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_autotune_fits"),
    )
    op.create_index("ix_autotune_fits_study_name", "autotune_fits", ["study_name"])


def downgrade() -> None:
    op.drop_index("ix_autotune_fits_study_name", table_name="autotune_fits")
    op.drop_table("autotune_fits")
    with op.batch_alter_table("autotune_trials") as batch:
        batch.drop_column("target_modules")
