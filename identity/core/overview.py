"""The figures an operator reads first (the console's Status page): identities by status, users, keys,
the change log's head, and which database answers. Each is one statement; the identities' come from
the counts that the database's triggers keep (migration 0002), so they cost the same at any size."""

from sqlalchemy import func, select

from ..storage.database import db
from ..storage.models import ApiKey, IdentityCount, User, utcnow
from .history import head
from .keys import live


def figures():
    """{"identities": {status: n}, "users": n, "api_keys": n, "live_api_keys": n, "changes": the log's head}."""
    by_status = db.session.execute(
        select(IdentityCount.status, func.coalesce(func.sum(IdentityCount.n), 0))
        .where(IdentityCount.scope == "")
        .group_by(IdentityCount.status)
    ).all()
    users = db.session.execute(select(func.count()).select_from(User)).scalar()
    keys = db.session.execute(select(func.count()).select_from(ApiKey)).scalar()
    live_keys = db.session.execute(select(func.count()).select_from(ApiKey).where(live(utcnow()))).scalar()
    db.session.commit()
    return {
        "identities": {status: int(n) for status, n in by_status},
        "users": users,
        "api_keys": keys,
        "live_api_keys": live_keys,
        "changes": head(),
    }


def database_kind():
    """The database's kind and version as its server reports them, e.g. "sqlite 3.46.1"."""
    dialect = db.engine.dialect
    if dialect.server_version_info is None:  # known once a connection was made
        db.session.connection()
        db.session.commit()
    version = ".".join(str(part) for part in dialect.server_version_info or ())
    return f"{dialect.name} {version}".strip()
