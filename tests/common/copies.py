"""`flask db copy` and what it copies: every row of every model table."""

from sqlalchemy import create_engine, select

from identity.storage.database import db


def rows(database_url):
    """Every row of every model table, as the models read them."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            return {
                table.name: connection.execute(select(table).order_by(*table.primary_key.columns)).all()
                for table in db.metadata.sorted_tables
            }
    finally:
        engine.dispose()


def copy(app, target_url):
    return app.test_cli_runner().invoke(args=["db", "copy", "--to", target_url])
