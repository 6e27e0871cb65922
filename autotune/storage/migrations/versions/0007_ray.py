"""--backend ray: the GPU slot that ran a trial and how many trials shared that GPU with it

Revision ID: 0007_ray
Revises: 0006_confirm
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_ray"
down_revision = "0006_confirm"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_trials") as batch:
        batch.add_column(sa.Column("gpu_slot", sa.String(256), nullable=True))
        batch.add_column(sa.Column("cotenants", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_trials") as batch:
        batch.drop_column("cotenants")
        batch.drop_column("gpu_slot")
