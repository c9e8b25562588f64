"""`flask db copy --to URL`: every row of the service's database into another, migrated and empty one.

Generic over the models' metadata: a table or column that a model declares comes along with no
change here, and so does a table that a migration made without a model (reflected from the source). What needs care, whatever the tables:

- Tables that database triggers keep (identity_counts, migration 0002) are filled again by the
  target's own triggers as identities arrive; so every table's target rows are replaced by the
  source's, table after table, and the trigger-kept ones once more at the end, so that they end
  equal to the source's.
- The full-text tables of SQLite (FTS5) are not models: the target's triggers (SQLite) or
  expression indexes (PostgreSQL) index the copied identities by themselves.
- Sequences: identity_changes.seq continues after the source's last number (setval on PostgreSQL,
  sqlite_sequence on SQLite), so the feed goes on where it was.
- alembic_version: both databases must be at the same revision already; it is not copied.

The copy is one transaction on the target, read from one snapshot of the source; counts and a
checksum of each table are compared before it commits. Interrupted or failing, it leaves the
target as it was.
"""

import hashlib
from datetime import datetime

import orjson
from sqlalchemy import Integer, MetaData, create_engine, func, inspect, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from ..core import contract_wallets
from ..core.verify import Unverified, check_creator_signature
from ..storage.database import db, missing_sqlite_file, tune_sqlite
from ..storage.models import Identity, User

BATCH = 5000
# Tables whose rows a migration writes (the cursor secret of 0002): present in an empty target.
SEEDED = {"service_secrets"}


class CopyRefused(Exception):
    """The copy cannot start, or did not verify; the message says what to do. The target is unchanged."""


def copy_database(source_engine, target_url, progress=None, endpoints=None):
    """Copy every model table from `source_engine` into the database at `target_url`; returns
    {table name: rows}. Raises CopyRefused (target left as it was) when it cannot or did not verify.

    Every contract wallet's signature of authorship is checked first on its chain, with `endpoints`
    (contract_wallets.Endpoints; None: no chain has one): one that is not its creator's, or cannot be
    checked, refuses the copy, counted and named, as import refuses such a line."""
    target_engine = _target_engine(source_engine, target_url)
    try:
        with source_engine.connect() as source, target_engine.connect() as target:
            if source.dialect.name == "postgresql":
                source = source.execution_options(isolation_level="REPEATABLE READ")
            with source.begin(), target.begin():
                tables = tables_of(source)
                _check(source, target, tables)
                _check_contract_signatures(source, endpoints or contract_wallets.Endpoints({}, 5.0))
                report = _copy(source, target, tables, progress)
        return report
    except SQLAlchemyError as error:
        raise CopyRefused(f"The copy failed and was rolled back, the target is unchanged: {error.__class__.__name__}: "
                          f"{str(error).splitlines()[0]}") from None
    finally:
        target_engine.dispose()


def _target_engine(source_engine, target_url):
    try:
        url = make_url(target_url)
        engine = create_engine(url)
    except (ArgumentError, NoSuchModuleError, ValueError) as error:
        raise CopyRefused(f"--to is not a database URL this service can use ({error}); e.g. "
                          "postgresql+psycopg://USER:PASSWORD@HOST:5432/DBNAME or sqlite:////srv/identity.db") from None
    if url.render_as_string(hide_password=False) == source_engine.url.render_as_string(hide_password=False):
        raise CopyRefused("--to names the configured database itself; give another database.")
    missing = missing_sqlite_file(url)
    if missing is not None:  # opening it would create it, empty
        raise CopyRefused(f"The target is not migrated: there is no SQLite database at {missing} (nothing was "
                          f"created). Migrate it first: DATABASE_URL='{target_url}' flask --app app db upgrade.")
    if url.get_backend_name() == "sqlite":
        tune_sqlite(engine, 30_000)  # foreign keys on, and a wait rather than "database is locked"
    return engine


def tables_of(source):
    """The tables to copy, parents before children: the models' tables, then any other table of the
    source (reflected), but the migration version and the tables SQLite's full-text indexes keep."""
    tables = list(db.metadata.sorted_tables)
    others = set(inspect(source).get_table_names()) - {table.name for table in tables} - {"alembic_version"}
    others -= _full_text_tables(source, others)
    if others:
        reflected = MetaData()
        reflected.reflect(source, only=sorted(others))
        tables += reflected.sorted_tables
    return tables


def _full_text_tables(connection, names):
    """SQLite's FTS5 tables and their shadow tables: the target's triggers fill its own."""
    if connection.dialect.name != "sqlite":
        return set()
    virtual = connection.execute(
        text("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'")
    ).scalars().all()
    return {name for name in names if any(name == table or name.startswith(table + "_") for table in virtual)}


def _order(table):
    """A total order of the table's rows: its primary key, else all its columns."""
    return list(table.primary_key.columns) or list(table.columns)


def _check(source, target, tables):
    try:
        target_tables = set(inspect(target).get_table_names())
    except SQLAlchemyError as error:
        raise CopyRefused(f"Cannot reach the target database ({str(error).splitlines()[0]}); check --to.") from None
    upgrade = f"migrate it first: DATABASE_URL='{target.engine.url.render_as_string(hide_password=True)}' flask --app app db upgrade"
    if "alembic_version" not in target_tables:
        raise CopyRefused(f"The target is not migrated; {upgrade}.")
    source_revision = source.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    target_revision = target.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    if sorted(source_revision) != sorted(target_revision):
        raise CopyRefused(f"The target is at revision {', '.join(target_revision) or 'none'} and this database at "
                          f"{', '.join(source_revision)}: bring both to the latest (flask --app app db upgrade, with "
                          "DATABASE_URL set to each), then copy again.")
    for table in tables:
        if table.name in SEEDED:
            continue
        if target.execute(select(func.count()).select_from(table)).scalar_one():
            raise CopyRefused(f"The target is not empty: its table {table.name} has rows. Copy into a freshly "
                              f"migrated database (create it, then {upgrade}).")


def _check_contract_signatures(source, endpoints):
    """CopyRefused unless every identity signed by a contract wallet is its creator's on the chain it names."""
    refused, first = 0, None
    for row in source.execute(_CONTRACT_SIGNED).yield_per(BATCH):
        try:
            check_creator_signature(row.content_id, row.wallet, row.creator_signature, row.creator_signature_chain_id,
                                    endpoints)
        except Unverified as unverified:
            refused += 1
            first = first or f"{row.identity_id}: {unverified}"
    if refused:
        raise CopyRefused(f"{refused} identities carry a contract wallet's signature of authorship that is not their "
                          f"creator's or cannot be checked here (the first, {first}); nothing was copied. Set "
                          f"{contract_wallets.RPC_SETTING} for their chains and copy again.")


_IDENTITIES = Identity.__table__
_CONTRACT_SIGNED = (
    select(_IDENTITIES.c.identity_id, _IDENTITIES.c.content_id, _IDENTITIES.c.creator_signature,
           _IDENTITIES.c.creator_signature_chain_id, User.wallet)
    .join_from(_IDENTITIES, User.__table__, _IDENTITIES.c.creator_id == User.id)
    .where(_IDENTITIES.c.creator_signature_chain_id.is_not(None))
    .order_by(_IDENTITIES.c.id)
)


def _copy(source, target, tables, progress):
    report = {}
    for table in tables:
        report[table.name] = _copy_table(source, target, table, progress)
    expected = {table.name: _checksum(source, table) for table in tables}
    # A table that triggers keep (identity_counts) gained rows as identities arrived: replace them once more.
    for table in tables:
        if _checksum(target, table) != expected[table.name]:
            _copy_table(source, target, table, None)
    _continue_sequences(source, target, tables)
    for table in tables:
        found = _checksum(target, table)
        if found != expected[table.name]:
            raise CopyRefused(f"Table {table.name} did not verify ({found[0]} rows copied of {expected[table.name][0]}, or a "
                              "checksum differs); the copy was rolled back. Report it with both database versions.")
    return report


def _copy_table(source, target, table, progress):
    target.execute(table.delete())
    rows = 0
    result = source.execute(select(table).order_by(*_order(table)).execution_options(yield_per=BATCH))
    for batch in result.mappings().partitions():
        target.execute(table.insert(), [dict(row) for row in batch])
        rows += len(batch)
        if progress:
            progress(len(batch))
    return rows


def _checksum(connection, table):
    """(rows, SHA-256 of every row's values in primary key order), values as the models read them."""
    digest = hashlib.sha256()
    rows = 0
    result = connection.execute(select(table).order_by(*_order(table)).execution_options(yield_per=BATCH))
    for batch in result.partitions():
        digest.update(orjson.dumps([[_plain(value) for value in row] for row in batch]))
        rows += len(batch)
    return rows, digest.hexdigest()


def _plain(value):
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # beyond 64 bits too
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _continue_sequences(source, target, tables):
    """Each integer primary key drawn from a sequence continues after the source's last number."""
    for table in tables:
        columns = list(table.primary_key.columns)
        if len(columns) != 1 or not isinstance(columns[0].type, Integer) or columns[0].autoincrement is False:
            continue
        column = columns[0]
        last = max(_last_number(source, table, column), source.execute(select(func.max(column))).scalar() or 0)
        if target.dialect.name == "postgresql":
            sequence = target.execute(text("SELECT pg_get_serial_sequence(:t, :c)"), {"t": table.name, "c": column.name}).scalar()
            if sequence and last:
                target.execute(text("SELECT setval(:s, :n)"), {"s": sequence, "n": last})
        elif target.dialect.name == "sqlite" and table.dialect_options["sqlite"].get("autoincrement") and last:
            target.execute(text("DELETE FROM sqlite_sequence WHERE name = :t"), {"t": table.name})
            target.execute(text("INSERT INTO sqlite_sequence (name, seq) VALUES (:t, :n)"), {"t": table.name, "n": last})


def _last_number(connection, table, column):
    """The last number the source's sequence handed out (it may exceed the largest row left)."""
    if connection.dialect.name == "postgresql":
        sequence = connection.execute(text("SELECT pg_get_serial_sequence(:t, :c)"), {"t": table.name, "c": column.name}).scalar()
        if sequence:
            # NULL until the sequence first handed a number out.
            last = connection.execute(text("SELECT pg_sequence_last_value(CAST(:s AS regclass))"), {"s": sequence}).scalar()
            return last or 0
        return 0
    if connection.dialect.name == "sqlite":
        exists = connection.execute(text("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'")).scalar()
        if exists:
            return connection.execute(text("SELECT seq FROM sqlite_sequence WHERE name = :t"), {"t": table.name}).scalar() or 0
    return 0
