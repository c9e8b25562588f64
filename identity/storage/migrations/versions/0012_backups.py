"""Backups to a target (identity.data.backups): one row per scheduled time or manual backup, with its
outcome, its last failure and when it is tried again.

Revision ID: 0012
Revises: 0008
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "backup_runs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("scheduled_for", TIMESTAMP, nullable=True, unique=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("holder", sa.String(128), nullable=True),
        sa.Column("name", sa.String(200), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_error_at", TIMESTAMP, nullable=True),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.Column("next_attempt_at", TIMESTAMP, nullable=True),
    )
    op.create_index("ix_backup_runs_finished_at", "backup_runs", ["finished_at"])


def downgrade():
    op.drop_index("ix_backup_runs_finished_at", table_name="backup_runs")
    op.drop_table("backup_runs")
