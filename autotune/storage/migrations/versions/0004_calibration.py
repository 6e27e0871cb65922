"""the study's calibration probe, stored so that resume and every worker reuse it

Revision ID: 0004_calibration
Revises: 0003_plan
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_calibration"
down_revision = "0003_plan"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_studies") as batch:
        batch.add_column(sa.Column("calibration", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_studies") as batch:
        batch.drop_column("calibration")
