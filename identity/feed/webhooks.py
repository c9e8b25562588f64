"""Webhooks: an Admin registers URLs to which every entry of the change log is POSTed, in order,
signed (the deliverer is identity.feed.delivery). This module holds the registrations and the checks of
the addresses they may name.

A receiver must not be a way into the service's own network: a URL whose host is, or resolves to, a
loopback, private, link-local, multicast, reserved or unspecified address is refused when it is
registered and again before each delivery (a name's addresses can change), unless
IDENTITY_WEBHOOKS_ALLOW_PRIVATE says such receivers are wanted.
"""

import base64
import ipaddress
import logging
import secrets
import socket
from urllib.parse import urlsplit

from flask import current_app
from sqlalchemy import delete, func, select

from ..core import audit, history
from ..core.errors import InvalidFields, WebhookNotFound
from ..storage.database import db, write_transaction
from ..storage.models import Change, Webhook, WebhookDelivery, utcnow

log = logging.getLogger(__name__)

SCHEMES = ("https", "http")
SECRET_PREFIX = "whsec_"


class AddressRefused(ValueError):
    """The URL may not be delivered to; the message says why and what to do."""


def new_secret():
    """A Standard Webhooks secret: whsec_ and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _refused_reason(address):
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone (fe80::1%eth0) is link-local anyway
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    for kind in ("loopback", "private", "link_local", "multicast", "reserved", "unspecified"):
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")
    if not ip.is_global:
        return "not global"
    return None


def check_address(url, resolve=True):
    """Raise AddressRefused unless `url` is http(s) on a public host; return the host's addresses
    (the deliverer connects to one of them, so the address checked is the address used), or None
    when IDENTITY_WEBHOOKS_ALLOW_PRIVATE lets any host pass unchecked.

    `resolve=False` checks an address written in the URL and lets a name that does not resolve pass (a
    registration: the name may not be published yet); before a delivery a name must resolve, and every
    address it resolves to must be public.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise AddressRefused("The URL's scheme must be https or http.")
    if current_app.config["IDENTITY_WEBHOOKS_ALLOW_PRIVATE"]:
        return None
    host = (parts.hostname or "").rstrip(".")
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        if host.lower() == "localhost" or host.lower().endswith(".localhost"):
            addresses = ["127.0.0.1"]  # RFC 6761: always loopback, whatever a resolver says
        else:
            addresses = _resolve(host, parts, quiet=not resolve)
    for address in addresses:
        reason = _refused_reason(address)
        if reason:
            raise AddressRefused(
                f"The host {host} is or resolves to a {reason} address ({address}); webhooks are delivered to "
                "public addresses only (IDENTITY_WEBHOOKS_ALLOW_PRIVATE=1 allows others)."
            )
    return addresses


def _resolve(host, parts, quiet):
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        return sorted({info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)})
    except (OSError, UnicodeError, ValueError) as error:
        if quiet:
            return []  # checked again, resolved, before each delivery
        raise AddressRefused(f"not resolvable: the host {host} does not resolve ({error}); check the URL's host name.") from None


def _checked_url(url):
    if urlsplit(url).username is not None:
        raise InvalidFields({"url": ["The URL must not carry a user name or password; the signature authenticates deliveries."]})
    try:
        check_address(url, resolve=False)
    except AddressRefused as refused:
        raise InvalidFields({"url": [str(refused)]}) from None
    return url


def head():
    """The seq of the change log's last entry (0 when it is empty)."""
    return db.session.execute(select(func.coalesce(func.max(Change.seq), 0))).scalar()


def stalled(position, feed_end):
    """Why a webhook at `position` cannot go on, or None: a position above every seq the feed ever issued
    (the database restored from an older backup without the step that raises its sequence) waits for
    numbers that the feed will give to other entries than those its receiver saw."""
    if position <= feed_end:
        return None
    return (
        f"Its position, {position}, is beyond the feed's end, {feed_end}: the database was restored from an older "
        "backup without raising its sequence (docs/backup.md). Raise the sequence above it, or register the "
        "webhook again (a new id, so new webhook-ids) and delete this one."
    )


def with_state(*webhooks):
    """`webhooks`, each with its `stalled` (see stalled) for WebhookSchema; returns the first."""
    feed_end = history.issued_end()
    for webhook in webhooks:
        webhook.stalled = stalled(webhook.position, feed_end)
    return webhooks[0] if webhooks else None


def register(url, description=None, after=None):
    """Register a webhook delivering the entries after `after` (default: the log's head); returns the
    Webhook, whose secret the caller shows once."""
    url = _checked_url(url)
    if after is not None and after > (feed_end := history.issued_end()):
        raise InvalidFields({"after": [f"Beyond the feed's end, {feed_end}: nothing would come after it. Give "
                                       f"{feed_end} or less, or leave it out to start at the feed's head."]})
    webhook = Webhook(
        url=url, description=description, secret=new_secret(), active=True, attempts=0,
        position=head() if after is None else after,
    )
    with write_transaction() as session:
        session.add(webhook)
        session.flush()  # its id, for the entry
        audit.record("webhook.register", "webhook", webhook.id, after=shown(webhook))
    log.info("webhook registered", extra={"webhook_id": webhook.id, "url": webhook.url, "after": webhook.position})
    return with_state(webhook)


def all_webhooks():
    webhooks = db.session.execute(select(Webhook).order_by(Webhook.created_at, Webhook.id)).scalars().all()
    db.session.commit()
    with_state(*webhooks)
    return webhooks


def get(webhook_id):
    webhook = db.session.get(Webhook, str(webhook_id))
    db.session.commit()
    if webhook is None:
        raise WebhookNotFound()
    return with_state(webhook)


def update(webhook_id, changes):
    """Change a webhook's url, description or active. `active: true` resumes it where it stopped,
    with its retry state cleared; `active: false` pauses it."""
    if "url" in changes:
        _checked_url(changes["url"])
    with write_transaction() as session:
        webhook = session.get(Webhook, str(webhook_id), with_for_update=True)
        if webhook is None:
            raise WebhookNotFound()
        before = {name: getattr(webhook, name) for name in changes}
        for name, value in changes.items():
            setattr(webhook, name, value)
        if changes.get("active"):
            webhook.attempts, webhook.failing_since, webhook.next_attempt_at = 0, None, None
        webhook.updated_at = utcnow()
        audit.record(_change_action(changes), "webhook", webhook.id, before=before, after=dict(changes))
    log.info("webhook changed", extra={"webhook_id": webhook.id, "changed": sorted(changes), "url": webhook.url,
                                       "active": webhook.active})
    return with_state(webhook)


def remove(webhook_id):
    with write_transaction() as session:
        webhook = session.get(Webhook, str(webhook_id))
        session.execute(delete(WebhookDelivery).where(WebhookDelivery.webhook_id == str(webhook_id)))
        removed = session.execute(delete(Webhook).where(Webhook.id == str(webhook_id))).rowcount
        if removed:
            audit.record("webhook.remove", "webhook", str(webhook_id), before=shown(webhook))
    if not removed:
        raise WebhookNotFound()
    log.info("webhook removed", extra={"webhook_id": str(webhook_id)})


# What the audit log keeps of a webhook: never its secret.
AUDITED = ("url", "description", "active", "position")


def shown(webhook):
    return {name: getattr(webhook, name) for name in AUDITED}


def _change_action(changes):
    """webhook.pause or webhook.resume when only `active` is asked for, else webhook.change."""
    if set(changes) == {"active"}:
        return "webhook.resume" if changes["active"] else "webhook.pause"
    return "webhook.change"


def deliveries(webhook_id):
    """The latest attempts at delivering to the webhook, newest first."""
    get(webhook_id)
    rows = db.session.execute(
        select(WebhookDelivery).where(WebhookDelivery.webhook_id == str(webhook_id)).order_by(WebhookDelivery.id.desc())
    ).scalars().all()
    db.session.commit()
    return rows


# How many entries behind a webhook are counted exactly; past that, "more than" this many.
BACKLOG_COUNTED = 100_000


def backlog(webhook):
    """How far `webhook` is behind the feed: (the entries after its position, counted up to
    BACKLOG_COUNTED + 1; when the oldest of them was appended, or None when it is up to date)."""
    waiting = select(Change.seq, Change.at).where(Change.seq > webhook.position).order_by(Change.seq)
    oldest = db.session.execute(waiting.limit(1)).first()
    if oldest is None:
        db.session.commit()
        return 0, None
    entries = db.session.execute(
        select(func.count()).select_from(waiting.limit(BACKLOG_COUNTED + 1).subquery())
    ).scalar()
    db.session.commit()
    return entries, oldest.at
