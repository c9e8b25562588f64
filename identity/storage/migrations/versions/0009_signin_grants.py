"""Sign-in grants and stateless nonces.

users.grant is what a sign-in with Ethereum may issue a wallet at most: `write`, or `read`. Existing users are
given what their keys say: a user with at least one key issued by an Admin or the command line (created_by other
than `siwe`) and every such key read-only is granted `read` (a mirror's `--role Admin --scope read` wallet, a
status page's); every other user keeps `write`, what a sign-in gave it so far. Keys a sign-in issued do not
count: a sign-in never widens a grant, and a read-only wallet may have signed itself into a write key already.

Nonces store nothing until spent (identity.core.nonces): signin_nonces, the nonces waiting, goes, and
signin_spent_nonces holds the spent ones until they expire. Nonces issued before the upgrade are refused after
it, as not issued here (they last IDENTITY_SIWE_NONCE_SECONDS: a user asks for a fresh one).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade():
    # A NOT NULL column with a default is added in place on SQLite too (no copy of the table).
    op.add_column("users", sa.Column("grant", sa.String(8), nullable=False, server_default="write"))
    users = sa.table("users", sa.column("id"), sa.column("grant"))
    keys = sa.table("api_keys", sa.column("user_id"), sa.column("scope"), sa.column("created_by"))
    issued = sa.and_(keys.c.user_id == users.c.id, keys.c.created_by != "siwe")
    op.execute(users.update().where(
        sa.exists().where(issued), ~sa.exists().where(issued, keys.c.scope != "read"),
    ).values(grant="read"))

    op.drop_index("ix_signin_nonces_expires_at", table_name="signin_nonces")
    op.drop_table("signin_nonces")
    op.create_table(
        "signin_spent_nonces",
        sa.Column("nonce", sa.String(64), primary_key=True),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
    )
    op.create_index("ix_signin_spent_nonces_expires_at", "signin_spent_nonces", ["expires_at"])


def downgrade():
    op.drop_index("ix_signin_spent_nonces_expires_at", table_name="signin_spent_nonces")
    op.drop_table("signin_spent_nonces")
    op.create_table(
        "signin_nonces",
        sa.Column("nonce", sa.String(32), primary_key=True),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
    )
    op.create_index("ix_signin_nonces_expires_at", "signin_nonces", ["expires_at"])
    # In place on SQLite too (ALTER TABLE DROP COLUMN, SQLite 3.35 and later).
    op.drop_column("users", "grant")
