"""The Admin console's sessions: a sign-in with an Admin key, referred to by the SHA-256 of its cookie's
token, and ending with its key or after 12 hours.

Revision ID: 0008
Revises: 0005
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "console_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("key_id", sa.String(36), sa.ForeignKey("api_keys.id"), nullable=False),
        sa.Column("csrf_token", sa.String(64), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
    )
    op.create_index("ix_console_sessions_key_id", "console_sessions", ["key_id"])
    op.create_index("ix_console_sessions_expires_at", "console_sessions", ["expires_at"])


def downgrade():
    op.drop_index("ix_console_sessions_expires_at", table_name="console_sessions")
    op.drop_index("ix_console_sessions_key_id", table_name="console_sessions")
    op.drop_table("console_sessions")
