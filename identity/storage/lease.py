"""Leases in the database: a named right to do something that one process at a time may do.

A holder takes the lease for `ttl` seconds and renews it before they pass; when it stops renewing
(it crashed, or its node went away), another takes it once it has expired. A holder counts its own
term from before it asked, so it stops before anyone else may start. Clocks of the nodes are assumed
to agree to well under a second (NTP).
"""

from datetime import timedelta

from sqlalchemy import delete, insert, or_, update
from sqlalchemy.exc import IntegrityError

from .database import write_transaction
from .models import Lease, utcnow

_LEASES = Lease.__table__


def take(name, holder, ttl):
    """Take or renew the lease `name` for `ttl` seconds; True when `holder` now holds it.

    Never waits for SQLite's write lock (a busy database makes it fail at once with OperationalError;
    ask again later), so a serving process is never held up by it.
    """
    now = utcnow()
    values = {"holder": holder, "expires_at": now + timedelta(seconds=ttl)}
    try:
        with write_transaction(wait=False) as session:
            taken = session.execute(
                update(_LEASES)
                .where(_LEASES.c.name == name, or_(_LEASES.c.holder == holder, _LEASES.c.expires_at < now))
                .values(**values)
            ).rowcount
            if not taken and session.get(Lease, name) is None:
                session.execute(insert(_LEASES).values(name=name, **values))
                taken = 1
    except IntegrityError:
        return False  # another process inserted it first: it holds it
    return bool(taken)


def release(name, holder):
    """Give the lease up at once, if `holder` holds it, so that another need not wait for it to expire.

    It waits for the write lock as any writer does: when a server stops, its workers give their leases
    up at the same moment, and one that did not wait found the lock taken by its sibling's release.
    """
    with write_transaction() as session:
        session.execute(delete(_LEASES).where(_LEASES.c.name == name, _LEASES.c.holder == holder))
