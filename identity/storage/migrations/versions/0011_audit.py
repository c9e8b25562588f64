"""The audit log: its entries, chained by their hashes, and the row of the chain's head and start.

Revision ID: 0011
Revises: 0008
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)
SEQ = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade():
    op.create_table(
        "audit_entries",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=False),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.Column("actor_user_id", sa.String(36), nullable=True),
        sa.Column("actor_wallet", sa.String(42), nullable=True),
        sa.Column("actor_role", sa.String(16), nullable=True),
        sa.Column("actor_key_id", sa.String(36), nullable=True),
        sa.Column("actor_key_hint", sa.String(16), nullable=True),
        sa.Column("via", sa.String(16), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target_kind", sa.String(32), nullable=False),
        sa.Column("target_id", sa.String(128), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("client_address", sa.String(64), nullable=True),
        sa.Column("user_agent", sa.Text(), nullable=True),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    op.create_index("ix_audit_entries_actor_wallet_seq", "audit_entries", ["actor_wallet", "seq"])
    op.create_index("ix_audit_entries_action_seq", "audit_entries", ["action", "seq"])
    op.create_index("ix_audit_entries_target_id_seq", "audit_entries", ["target_id", "seq"])
    op.create_index("ix_audit_entries_at", "audit_entries", ["at"])
    # No row yet: the first append makes it (identity.core.audit), so that a migrated database holds no data.
    op.create_table(
        "audit_chain",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("head_seq", sa.BigInteger(), nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.Column("start_seq", sa.BigInteger(), nullable=False),
        sa.Column("start_hash", sa.String(64), nullable=False),
    )


def downgrade():
    op.drop_table("audit_chain")
    for name in ("ix_audit_entries_at", "ix_audit_entries_target_id_seq", "ix_audit_entries_action_seq",
                 "ix_audit_entries_actor_wallet_seq"):
        op.drop_index(name, table_name="audit_entries")
    op.drop_table("audit_entries")
