"""The append-only log of creates and changes, with a `created` entry for every existing identity.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"  # after browse and search (issue 14); written as 0001 before that was merged
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "identity_changes",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("identity_id", sa.String(128), nullable=False),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.Column("wallet", sa.String(42), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("fields", sa.JSON, nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_identity_changes_identity_id_seq", "identity_changes", ["identity_id", "seq"])
    # Existing identities get their `created` entry, oldest first, acted by their creator.
    op.execute(
        "INSERT INTO identity_changes (identity_id, at, wallet, kind) "
        "SELECT identities.identity_id, identities.created_at, users.wallet, 'created' "
        "FROM identities JOIN users ON users.id = identities.creator_id "
        "ORDER BY identities.created_at, identities.id"
    )


def downgrade():
    op.drop_index("ix_identity_changes_identity_id_seq", table_name="identity_changes")
    op.drop_table("identity_changes")
