"""Mirrors: the upstream instances this one follows, keeping a verified copy of their identities (the
follower is identity.data.follower). This module holds the registrations, their checks, and what a
mirror's state says: its position, its lag and its counts.

An upstream may be on a loopback or private address (replicas usually are); only an Admin registers
one. Its key is a credential for the upstream, not for this service: it is kept as given, since every
request to the upstream sends it, and it leaves in no answer and no log line.
"""

import logging
from urllib.parse import urlsplit

from sqlalchemy import delete, or_, select
from sqlalchemy.exc import IntegrityError

from ..core import audit
from ..core.errors import MirrorConflict, MirrorNotFound
from ..storage.database import db, write_transaction
from ..storage.models import Mirror, utcnow

log = logging.getLogger(__name__)


def default_name(url):
    """A mirror's name when none is given: its upstream's host and port, and path if any."""
    parts = urlsplit(url)
    return (parts.netloc + parts.path)[:128]


def register(url, key, name=None):
    """Register the upstream at `url`, read with `key`, from the start of its feed; returns the Mirror.
    Raises MirrorConflict when that name or that upstream is registered already."""
    url = url.rstrip("/")  # checked by the schema (schemas.MirrorCreateSchema): the upstream's base URL
    name = name or default_name(url)
    mirror = Mirror(name=name, url=url, api_key=key, active=True, position=0, upstream_head=0, applied=0,
                    already_present=0, rejected=0)
    try:
        with write_transaction() as session:
            taken = session.execute(
                select(Mirror.name, Mirror.url).where(or_(Mirror.name == name, Mirror.url == url))
            ).first()
            if taken is not None:
                what = f"the name {name}" if taken.name == name else f"the upstream {url}"
                raise MirrorConflict(f"A mirror with {what} is registered already (GET /mirrors lists them); "
                                     "give another name, or remove that mirror first.")
            session.add(mirror)
            session.flush()  # its id, for the entry
            audit.record("mirror.register", "mirror", mirror.id, after=audited(mirror))
    except IntegrityError:  # registered by another request between the check and the insert
        raise MirrorConflict(f"A mirror named {name} is registered already; give another name.") from None
    log.info("mirror registered", extra={"mirror_id": mirror.id, "mirror": mirror.name, "url": mirror.url})
    return mirror


def all_mirrors():
    mirrors = db.session.execute(select(Mirror).order_by(Mirror.created_at, Mirror.id)).scalars().all()
    db.session.commit()
    return mirrors


def get(mirror_id):
    mirror = db.session.get(Mirror, str(mirror_id))
    db.session.commit()
    if mirror is None:
        raise MirrorNotFound()
    return mirror


def update(mirror_id, changes):
    """Pause (`active` false) or resume (`active` true) a mirror, or give it a new upstream `key`."""
    with write_transaction() as session:
        mirror = session.get(Mirror, str(mirror_id), with_for_update=True)
        if mirror is None:
            raise MirrorNotFound()
        before = audited(mirror)
        if "active" in changes:
            mirror.active = changes["active"]
        if "key" in changes:
            mirror.api_key = changes["key"]
        mirror.updated_at = utcnow()
        audit.record(_change_action(changes), "mirror", mirror.id, before=before,
                     after={**audited(mirror), "key": "(replaced)"} if "key" in changes else audited(mirror))
    # The names of what changed, never the key.
    log.info("mirror changed", extra={"mirror_id": mirror.id, "mirror": mirror.name, "changed": sorted(changes),
                                      "active": mirror.active})
    return mirror


def remove(mirror_id):
    """Forget a mirror. The identities it copied stay, as this instance's own: their upstream's later
    changes no longer reach them."""
    with write_transaction() as session:
        mirror = session.get(Mirror, str(mirror_id))
        removed = session.execute(delete(Mirror).where(Mirror.id == str(mirror_id))).rowcount
        if removed:
            audit.record("mirror.remove", "mirror", str(mirror_id), before=audited(mirror))
    if not removed:
        raise MirrorNotFound()
    log.info("mirror removed", extra={"mirror_id": str(mirror_id)})


def audited(mirror):
    """What the audit log keeps of a mirror: never its upstream's key."""
    return {"name": mirror.name, "url": mirror.url, "active": mirror.active}


def _change_action(changes):
    """mirror.pause or mirror.resume when only `active` is asked for, else mirror.change (a new key)."""
    if set(changes) == {"active"}:
        return "mirror.resume" if changes["active"] else "mirror.pause"
    return "mirror.change"


def lag(mirror, now=None):
    """(lag_entries, lag_seconds) of `mirror`: how many of the upstream's entries, as far as it last saw
    them, it has not handled yet, and how long ago the upstream wrote the last one it handled, while
    some remain (0 when none remains; None before it has handled any)."""
    entries = max(0, mirror.upstream_head - mirror.position)
    if entries == 0:
        return 0, 0.0
    if mirror.position_at is None:
        return entries, None
    return entries, round(max(0.0, ((now or utcnow()) - mirror.position_at).total_seconds()), 3)


def failing(mirror):
    """Whether the mirror's last_error is its present state: nothing has changed its row since (updated_at is
    not later). A batch applied, an answer of the upstream after the error (identity.data.follower), or an
    operator's change (a new key, a pause or a resume, after which the follower tries again at once) makes
    it past; a new failure makes it present again."""
    return mirror.last_error is not None and mirror.last_error_at is not None and mirror.last_error_at >= mirror.updated_at


# What a mirror shows of its row: everything but the upstream's key.
SHOWN = ("id", "name", "url", "active", "position", "upstream_head", "applied", "already_present", "rejected",
         "last_error", "last_error_at", "created_at", "updated_at")


def state(mirror):
    """The mirror as GET /mirrors/<id> shows it (schemas.MirrorSchema): its row but the key, and its lag."""
    lag_entries, lag_seconds = lag(mirror)
    return {**{name: getattr(mirror, name) for name in SHOWN}, "lag_entries": lag_entries, "lag_seconds": lag_seconds,
            "failing": failing(mirror)}
