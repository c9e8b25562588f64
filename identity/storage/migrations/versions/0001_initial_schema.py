"""Users, their API keys, and identities.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Exact unsigned 256-bit integers: NUMERIC(78, 0) where it exists, a decimal string on SQLite.
UINT256 = sa.Numeric(78, 0).with_variant(sa.String(78), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "users",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("wallet", sa.String(42), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.Column("last_login", TIMESTAMP, nullable=True),
        sa.UniqueConstraint("wallet", name="uq_users_wallet"),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", name="fk_api_keys_user_id"), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("hint", sa.String(16), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("revoked_at", TIMESTAMP, nullable=True),
        sa.UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
    )
    op.create_index("ix_api_keys_user_id", "api_keys", ["user_id"])
    op.create_table(
        "identities",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("identity_id", sa.String(128), nullable=False),
        sa.Column("content_id", sa.String(64), nullable=False),
        sa.Column("identity_hash", sa.String(66), nullable=False),
        sa.Column("vault_id", UINT256, nullable=False),
        sa.Column("display_name", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=True),
        sa.Column("image", sa.Text, nullable=True),
        sa.Column("external_reference", sa.Text, nullable=True),
        sa.Column("corpora_id", sa.Text, nullable=True),
        sa.Column("semantic", sa.Text, nullable=True),
        sa.Column("creator_id", sa.String(36), sa.ForeignKey("users.id", name="fk_identities_creator_id"), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.Column("num_positions", sa.BigInteger, nullable=False),
        sa.Column("assets_sum", UINT256, nullable=False),
        sa.Column("conviction_sum", UINT256, nullable=False),
        sa.Column("conviction_price", UINT256, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("is_user", sa.Boolean, nullable=False),
        sa.Column("user_conviction", UINT256, nullable=False),
        sa.Column("user_conviction_value", UINT256, nullable=False),
        sa.UniqueConstraint("identity_id", name="uq_identities_identity_id"),
        sa.UniqueConstraint("content_id", name="uq_identities_content_id"),
    )
    op.create_index("ix_identities_creator_id", "identities", ["creator_id"])


def downgrade():
    op.drop_index("ix_identities_creator_id", table_name="identities")
    op.drop_table("identities")
    op.drop_index("ix_api_keys_user_id", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("users")
