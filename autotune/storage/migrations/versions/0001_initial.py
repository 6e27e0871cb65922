"""autotune tables: studies, trials, curves

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "autotune_studies",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("study_name", sa.String(length=512), nullable=False),
        sa.Column("spec_yaml", sa.Text(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=True),
        sa.Column("autotune_version", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_autotune_studies"),
        sa.UniqueConstraint("study_name", name="uq_autotune_studies_study_name"),
    )
    op.create_table(
        "autotune_trials",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("study_name", sa.String(length=512), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("batch_size", sa.Integer(), nullable=True),
        sa.Column("learning_rate", sa.Float(), nullable=True),
        sa.Column("val_loss", sa.Float(), nullable=True),
        sa.Column("train_loss", sa.Float(), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("accuracy", sa.Float(), nullable=True),
        sa.Column("wall_time_s", sa.Float(), nullable=True),
        sa.Column("setup_time_s", sa.Float(), nullable=True),
        sa.Column("train_time_s", sa.Float(), nullable=True),
        sa.Column("eval_time_s", sa.Float(), nullable=True),
        sa.Column("samples_per_s", sa.Float(), nullable=True),
        sa.Column("tokens_per_s", sa.Float(), nullable=True),
        sa.Column("peak_memory_mb", sa.Float(), nullable=True),
        sa.Column("memory_kind", sa.String(length=32), nullable=True),
        sa.Column("device", sa.String(length=128), nullable=True),
        sa.Column("precision", sa.String(length=8), nullable=True),
        sa.Column("optimizer_steps", sa.Integer(), nullable=True),
        sa.Column("examples_seen", sa.Integer(), nullable=True),
        sa.Column("versions", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("retry_of", sa.Integer(), nullable=True),
        sa.Column("requeued", sa.Boolean(), nullable=False),
        sa.Column("worker", sa.String(length=256), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_autotune_trials"),
        sa.UniqueConstraint("study_name", "trial_number", name="uq_autotune_trials_study_name_trial_number"),
    )
    op.create_index("ix_autotune_trials_study_name", "autotune_trials", ["study_name"])
    op.create_table(
        "autotune_curves",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("study_name", sa.String(length=512), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=False),
        sa.Column("eval_index", sa.Integer(), nullable=False),
        sa.Column("optimizer_steps", sa.Integer(), nullable=False),
        sa.Column("examples_seen", sa.Integer(), nullable=False),
        sa.Column("val_loss", sa.Float(), nullable=True),
        sa.Column("train_loss", sa.Float(), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("accuracy", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_autotune_curves"),
        sa.UniqueConstraint(
            "study_name", "trial_number", "eval_index", name="uq_autotune_curves_study_name_trial_number_eval_index"
        ),
    )


def downgrade() -> None:
    op.drop_table("autotune_curves")
    op.drop_index("ix_autotune_trials_study_name", table_name="autotune_trials")
    op.drop_table("autotune_trials")
    op.drop_table("autotune_studies")
