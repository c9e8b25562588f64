"""Contract wallets' signatures of authorship: the chain a creator_signature holds on, and room for the signature.

creator_signature_chain_id is null for every identity created before it, and for any signed by an ordinary wallet
or not signed. A contract wallet's signature (EIP-1271, EIP-6492) is longer than an ordinary wallet's 65 bytes:
PostgreSQL's column becomes text (no rewrite of the table); SQLite never enforces a VARCHAR's length, and its
column stays as it is.

Revision ID: 0010
Revises: 0008
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade():
    # A nullable column is added in place on SQLite too (no copy of the table, whose triggers stay).
    op.add_column("identities", sa.Column("creator_signature_chain_id", sa.BigInteger(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("identities", "creator_signature", type_=sa.Text(), existing_type=sa.String(132),
                        existing_nullable=True)


def downgrade():
    # Before 0010 only an ordinary wallet's signature (65 bytes) has a place: a contract wallet's goes, and with it
    # the claim of its identity's authorship.
    identities = sa.table("identities", sa.column("creator_signature"), sa.column("creator_signature_chain_id"))
    op.execute(identities.update().where(identities.c.creator_signature_chain_id.is_not(None))
               .values(creator_signature=None))
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("identities", "creator_signature", type_=sa.String(132), existing_type=sa.Text(),
                        existing_nullable=True)
    op.drop_column("identities", "creator_signature_chain_id")
