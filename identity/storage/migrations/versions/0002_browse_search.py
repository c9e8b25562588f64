"""Browse and search: sort indexes, full-text and substring indexes, exact counts, the cursor secret.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

Everything here is kept in step with the identities table by the database itself (triggers, or
PostgreSQL's expression indexes), in the transaction of each write: an identity is listed and found
as soon as its create commits, and an Admin's later change of its status keeps the counts right.

- SQLite: `identity_search_words`, an FTS5 table over display_name and description (unicode61,
  remove_diacritics 2), and `identity_search_names`, an FTS5 trigram table over display_name; both
  are external-content tables on the identities' rowids, filled by triggers.
- PostgreSQL: a GIN index on identity_search_vector(display_name, description) (a tsvector of the
  unaccented text, 'simple' configuration) and a pg_trgm GIN index on display_name.
- Both: identity_counts, per (creator, status, slot), kept by triggers; service_secrets holds the key
  that signs listing cursors, made here once for every worker and node.
"""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SORT_KEYS = ("created_at", "updated_at", "display_name", "num_positions")
SCOPES = (("", ()), ("creator", ("creator_id",)), ("status", ("status",)))


def _sort_indexes():
    for key in SORT_KEYS:
        for scope, columns in SCOPES:
            yield f"ix_identities_{scope}_{key}".replace("__", "_"), [*columns, key, "id"]


# Each write moves two count rows: the one of every creator ('') and the creator's own. A decrement
# never inserts: a count row that is gone (a table emptied) stays gone, never negative.
SQLITE_UPGRADE = [
    """CREATE VIRTUAL TABLE identity_search_words USING fts5(
        display_name, description, content='identities', content_rowid='rowid',
        tokenize='unicode61 remove_diacritics 2')""",
    """CREATE VIRTUAL TABLE identity_search_names USING fts5(
        display_name, content='identities', content_rowid='rowid', tokenize='trigram')""",
    """CREATE TRIGGER identity_search_insert AFTER INSERT ON identities BEGIN
        INSERT INTO identity_search_words (rowid, display_name, description)
            VALUES (NEW.rowid, NEW.display_name, NEW.description);
        INSERT INTO identity_search_names (rowid, display_name) VALUES (NEW.rowid, NEW.display_name);
        INSERT INTO identity_counts (scope, status, slot, n) VALUES ('', NEW.status, substr(NEW.id, 1, 1), 1)
            ON CONFLICT (scope, status, slot) DO UPDATE SET n = n + 1;
        INSERT INTO identity_counts (scope, status, slot, n) VALUES (NEW.creator_id, NEW.status, substr(NEW.id, 1, 1), 1)
            ON CONFLICT (scope, status, slot) DO UPDATE SET n = n + 1;
    END""",
    """CREATE TRIGGER identity_search_delete AFTER DELETE ON identities BEGIN
        INSERT INTO identity_search_words (identity_search_words, rowid, display_name, description)
            VALUES ('delete', OLD.rowid, OLD.display_name, OLD.description);
        INSERT INTO identity_search_names (identity_search_names, rowid, display_name)
            VALUES ('delete', OLD.rowid, OLD.display_name);
        UPDATE identity_counts SET n = n - 1 WHERE scope = '' AND status = OLD.status AND slot = substr(OLD.id, 1, 1);
        UPDATE identity_counts SET n = n - 1
            WHERE scope = OLD.creator_id AND status = OLD.status AND slot = substr(OLD.id, 1, 1);
    END""",
    # Content never changes (it is the id), but the index must not depend on that.
    """CREATE TRIGGER identity_search_update_text AFTER UPDATE OF display_name, description ON identities BEGIN
        INSERT INTO identity_search_words (identity_search_words, rowid, display_name, description)
            VALUES ('delete', OLD.rowid, OLD.display_name, OLD.description);
        INSERT INTO identity_search_names (identity_search_names, rowid, display_name)
            VALUES ('delete', OLD.rowid, OLD.display_name);
        INSERT INTO identity_search_words (rowid, display_name, description)
            VALUES (NEW.rowid, NEW.display_name, NEW.description);
        INSERT INTO identity_search_names (rowid, display_name) VALUES (NEW.rowid, NEW.display_name);
    END""",
    # An Admin's PATCH of status (issue 15) moves the identity from one count to another.
    """CREATE TRIGGER identity_counts_update AFTER UPDATE OF status, creator_id, id ON identities
    WHEN OLD.status IS NOT NEW.status OR OLD.creator_id IS NOT NEW.creator_id OR OLD.id IS NOT NEW.id BEGIN
        UPDATE identity_counts SET n = n - 1 WHERE scope = '' AND status = OLD.status AND slot = substr(OLD.id, 1, 1);
        UPDATE identity_counts SET n = n - 1
            WHERE scope = OLD.creator_id AND status = OLD.status AND slot = substr(OLD.id, 1, 1);
        INSERT INTO identity_counts (scope, status, slot, n) VALUES ('', NEW.status, substr(NEW.id, 1, 1), 1)
            ON CONFLICT (scope, status, slot) DO UPDATE SET n = n + 1;
        INSERT INTO identity_counts (scope, status, slot, n) VALUES (NEW.creator_id, NEW.status, substr(NEW.id, 1, 1), 1)
            ON CONFLICT (scope, status, slot) DO UPDATE SET n = n + 1;
    END""",
    # Backfill: the indexes from the rows already there.
    "INSERT INTO identity_search_words (identity_search_words) VALUES ('rebuild')",
    "INSERT INTO identity_search_names (identity_search_names) VALUES ('rebuild')",
]

SQLITE_DOWNGRADE = [
    "DROP TRIGGER IF EXISTS identity_counts_update",
    "DROP TRIGGER IF EXISTS identity_search_update_text",
    "DROP TRIGGER IF EXISTS identity_search_delete",
    "DROP TRIGGER IF EXISTS identity_search_insert",
    "DROP TABLE IF EXISTS identity_search_names",
    "DROP TABLE IF EXISTS identity_search_words",
]

_PG_CHANGE = """
    INSERT INTO identity_counts AS c (scope, status, slot, n) VALUES ('', {row}.status, left({row}.id, 1), {delta}),
        ({row}.creator_id, {row}.status, left({row}.id, 1), {delta})
    ON CONFLICT (scope, status, slot) DO UPDATE SET n = c.n + {delta};"""
# Rows are locked in one order by every write: by status, then '' before the creator, so that two
# transactions that move counts (a create, PATCHes of status either way) never wait on each other in a cycle.
_PG_SUBTRACT = """
    UPDATE identity_counts SET n = n - 1 WHERE scope = '' AND status = OLD.status AND slot = left(OLD.id, 1);
    UPDATE identity_counts SET n = n - 1 WHERE scope = OLD.creator_id AND status = OLD.status AND slot = left(OLD.id, 1);"""


def _postgresql_upgrade(schema):
    """`schema`: where the unaccent extension lives, so the function names it whatever the search_path."""
    return [
        # The text search of q: unaccented, lower-cased words ('simple': no stemming, no stop words),
        # IMMUTABLE so that an index can be built on it. unaccent is qualified by its schema so that
        # the index also rebuilds under pg_restore's empty search_path.
        f"""CREATE FUNCTION identity_search_vector(display_name text, description text) RETURNS tsvector
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT to_tsvector('pg_catalog.simple'::regconfig,
                {schema}.unaccent('{schema}.unaccent'::regdictionary, coalesce(display_name, '') || ' ' || coalesce(description, '')))
        $$""",
        f"""CREATE FUNCTION identity_search_query(words text) RETURNS tsquery
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT to_tsquery('pg_catalog.simple'::regconfig, {schema}.unaccent('{schema}.unaccent'::regdictionary, words))
        $$""",
        "CREATE INDEX identity_search_words ON identities USING gin (identity_search_vector(display_name, description))",
        "CREATE INDEX identity_search_names ON identities USING gin (display_name gin_trgm_ops)",
        f"""CREATE FUNCTION identity_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN {_PG_CHANGE.format(row="NEW", delta=1)} RETURN NULL; END $$""",
        f"""CREATE FUNCTION identity_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN {_PG_SUBTRACT} RETURN NULL; END $$""",
        f"""CREATE FUNCTION identity_counts_update() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF OLD.status <= NEW.status THEN {_PG_SUBTRACT} {_PG_CHANGE.format(row="NEW", delta=1)}
            ELSE {_PG_CHANGE.format(row="NEW", delta=1)} {_PG_SUBTRACT}
            END IF;
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER identity_counts_insert AFTER INSERT ON identities
        FOR EACH ROW EXECUTE FUNCTION identity_counts_insert()""",
        """CREATE TRIGGER identity_counts_delete AFTER DELETE ON identities
        FOR EACH ROW EXECUTE FUNCTION identity_counts_delete()""",
        """CREATE TRIGGER identity_counts_update AFTER UPDATE OF status, creator_id, id ON identities
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.creator_id IS DISTINCT FROM NEW.creator_id
                           OR OLD.id IS DISTINCT FROM NEW.id)
        EXECUTE FUNCTION identity_counts_update()""",
    ]


POSTGRESQL_DOWNGRADE = [
    "DROP TRIGGER IF EXISTS identity_counts_update ON identities",
    "DROP TRIGGER IF EXISTS identity_counts_delete ON identities",
    "DROP TRIGGER IF EXISTS identity_counts_insert ON identities",
    "DROP FUNCTION IF EXISTS identity_counts_update()",
    "DROP FUNCTION IF EXISTS identity_counts_delete()",
    "DROP FUNCTION IF EXISTS identity_counts_insert()",
    "DROP INDEX IF EXISTS identity_search_names",
    "DROP INDEX IF EXISTS identity_search_words",
    "DROP FUNCTION IF EXISTS identity_search_query(text)",
    "DROP FUNCTION IF EXISTS identity_search_vector(text, text)",
]


def upgrade():
    for name, columns in _sort_indexes():
        op.create_index(name, "identities", columns)
    op.create_table(
        "identity_counts",
        sa.Column("scope", sa.String(36), primary_key=True),
        sa.Column("status", sa.String(32), primary_key=True),
        sa.Column("slot", sa.String(1), primary_key=True),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "service_secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(128), nullable=False),
    )
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        statements = SQLITE_UPGRADE
    else:
        op.execute("CREATE EXTENSION IF NOT EXISTS unaccent")
        op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        schema = bind.execute(
            sa.text("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'unaccent'")
        ).scalar_one()
        statements = _postgresql_upgrade(schema)
    for statement in statements:
        op.execute(statement)
    # Backfill the counts from the identities already there (the triggers keep them from now on).
    op.execute(
        "INSERT INTO identity_counts (scope, status, slot, n) "
        "SELECT '', status, substr(id, 1, 1), count(*) FROM identities GROUP BY status, substr(id, 1, 1) "
        "UNION ALL "
        "SELECT creator_id, status, substr(id, 1, 1), count(*) FROM identities GROUP BY creator_id, status, substr(id, 1, 1)"
    )
    secrets_table = sa.table("service_secrets", sa.column("name"), sa.column("value"))
    op.bulk_insert(secrets_table, [{"name": "cursor", "value": secrets.token_urlsafe(48)}])


def downgrade():
    bind = op.get_bind()
    for statement in SQLITE_DOWNGRADE if bind.dialect.name == "sqlite" else POSTGRESQL_DOWNGRADE:
        op.execute(statement)
    op.drop_table("service_secrets")
    op.drop_table("identity_counts")
    for name, _columns in _sort_indexes():
        op.drop_index(name, table_name="identities")
