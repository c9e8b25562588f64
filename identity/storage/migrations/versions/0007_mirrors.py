"""Mirrors: the upstream instances this one follows, with their positions and counts, and which mirror
each copied identity came from.

Revision ID: 0007
Revises: 0005
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "mirrors",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("api_key", sa.Text, nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("position_at", TIMESTAMP, nullable=True),
        sa.Column("upstream_head", sa.BigInteger, nullable=False),
        sa.Column("applied", sa.BigInteger, nullable=False),
        sa.Column("already_present", sa.BigInteger, nullable=False),
        sa.Column("rejected", sa.BigInteger, nullable=False),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("last_error_at", TIMESTAMP, nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
    )
    op.create_table(
        "mirrored_identities",
        sa.Column("id", sa.String(36), sa.ForeignKey("identities.id"), primary_key=True),
        sa.Column("mirror_id", sa.String(36), sa.ForeignKey("mirrors.id", ondelete="CASCADE"), nullable=False),
    )
    op.create_index("ix_mirrored_identities_mirror_id", "mirrored_identities", ["mirror_id"])


def downgrade():
    op.drop_index("ix_mirrored_identities_mirror_id", table_name="mirrored_identities")
    op.drop_table("mirrored_identities")
    op.drop_table("mirrors")
