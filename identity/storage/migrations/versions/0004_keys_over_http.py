"""Keys over HTTP: a key's scope, label, expiry, last use and issuer.

Existing keys keep working unchanged: scope `write`, no expiry, no label; they were issued on the
command line, so their issuer is `cli`. A rotation's grace is a `revoked_at` in the future.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade():
    # batch_alter_table: SQLite cannot add a NOT NULL column in place; Alembic copies the table there,
    # and alters it in place on PostgreSQL.
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("scope", sa.String(8), nullable=False, server_default="write"))
        batch.add_column(sa.Column("label", sa.String(128), nullable=True))
        batch.add_column(sa.Column("expires_at", TIMESTAMP, nullable=True))
        batch.add_column(sa.Column("last_used_at", TIMESTAMP, nullable=True))
        batch.add_column(sa.Column("created_by", sa.String(42), nullable=False, server_default="cli"))
    # The Admin listing of keys pages newest first with the id as tie-breaker, as the identity listing does.
    op.create_index("ix_api_keys_created_at_id", "api_keys", ["created_at", "id"])


def downgrade():
    op.drop_index("ix_api_keys_created_at_id", table_name="api_keys")
    with op.batch_alter_table("api_keys") as batch:
        for column in ("created_by", "last_used_at", "expires_at", "label", "scope"):
            batch.drop_column(column)
