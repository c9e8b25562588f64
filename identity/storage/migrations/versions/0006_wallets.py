"""Wallets: the nonces that sign-in with Ethereum issues, and the creator's signature of an identity.

A nonce is a row until it is spent (deleted by the sign-in that names it) or purged after it expires;
its expiry is indexed for the purge. creator_signature is null for every identity created before it,
and for any created without a signature.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "signin_nonces",
        sa.Column("nonce", sa.String(32), primary_key=True),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
    )
    op.create_index("ix_signin_nonces_expires_at", "signin_nonces", ["expires_at"])
    # A nullable column is added in place on SQLite too (no copy of the table, whose triggers stay).
    op.add_column("identities", sa.Column("creator_signature", sa.String(132), nullable=True))


def downgrade():
    # In place on SQLite too (ALTER TABLE DROP COLUMN, SQLite 3.35 and later): a copy would lose the table's triggers.
    op.drop_column("identities", "creator_signature")
    op.drop_index("ix_signin_nonces_expires_at", table_name="signin_nonces")
    op.drop_table("signin_nonces")
