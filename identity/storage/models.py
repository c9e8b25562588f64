"""The database tables: users, their API keys, identities, their change log, webhooks, and spent sign-in nonces."""

import uuid
from datetime import UTC, datetime

from sqlalchemy import ForeignKey, Index, Numeric, String, Text, types
from sqlalchemy.orm import Mapped, mapped_column, relationship

from .database import db

MAX_UINT256 = 2**256 - 1


class UInt256(types.TypeDecorator):
    """An exact unsigned integer up to 2**256 - 1: NUMERIC(78, 0) where the database has it,
    a decimal string on SQLite (whose NUMERIC falls back to a lossy float past 64 bits)."""

    impl = Numeric(78, 0)
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(78))
        return dialect.type_descriptor(Numeric(78, 0, asdecimal=True))

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        value = int(value)
        if not 0 <= value <= MAX_UINT256:
            raise ValueError("value is outside 0 .. 2**256 - 1")
        return str(value) if dialect.name == "sqlite" else value

    def process_result_value(self, value, dialect):
        # A decimal string on SQLite, a Decimal on PostgreSQL.
        return None if value is None else int(value)


class UTCDateTime(types.TypeDecorator):
    """A timestamp stored in UTC and always read back timezone-aware."""

    impl = types.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(UTC)
            if dialect.name == "sqlite":
                value = value.replace(tzinfo=None)
        return value

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        # SQLite keeps naive UTC text, which its dialect reads as a naive datetime.
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow():
    return datetime.now(UTC)


def new_id():
    return str(uuid.uuid4())


# What an identity created off-chain starts with (the contract's "off-chain values of a new identity").
OFF_CHAIN = {
    "vault_id": 0,
    "corpora_id": None,
    "semantic": None,
    "num_positions": 0,
    "assets_sum": 0,
    "conviction_sum": 0,
    "conviction_price": 0,
    "status": "complete",
    "is_user": False,
    "user_conviction": 0,
    "user_conviction_value": 0,
}


class User(db.Model):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    wallet: Mapped[str] = mapped_column(String(42), unique=True)
    role: Mapped[str] = mapped_column(String(16), default="User")
    # What a sign-in with Ethereum may issue the wallet at most (identity.core.signin): `write`, or `read` for a
    # wallet that came into being with a read key or that an Admin narrowed; a write key issued to it widens it.
    grant: Mapped[str] = mapped_column(String(8), default="write", server_default="write")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_login: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    keys: Mapped[list["ApiKey"]] = relationship(back_populates="user")


class ApiKey(db.Model):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    # Only the SHA-256 of the key is kept; the lookup by hash is what makes comparison timing-safe.
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # The first characters, enough to tell keys apart in `keys list` without revealing them.
    hint: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # In the future while a rotated-out key's grace lasts: it works until then.
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # `write` does what its user may; `read` may only read (and revoke itself).
    scope: Mapped[str] = mapped_column(String(8), default="write", server_default="write")
    label: Mapped[str | None] = mapped_column(String(128), nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Written off the requests' path, at most once an IDENTITY_KEY_USE_INTERVAL (identity.core.key_use).
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # The wallet of the key that issued it, or "cli".
    created_by: Mapped[str] = mapped_column(String(42), default="cli", server_default="cli")

    user: Mapped[User] = relationship(back_populates="keys", lazy="joined")

    __table_args__ = (Index("ix_api_keys_created_at_id", "created_at", "id"),)


class Identity(db.Model):
    __tablename__ = "identities"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    identity_id: Mapped[str] = mapped_column(String(128), unique=True)
    # The same content is one identity, whatever DID namespace it was created under.
    content_id: Mapped[str] = mapped_column(String(64), unique=True)
    identity_hash: Mapped[str] = mapped_column(String(66))
    vault_id: Mapped[int] = mapped_column(UInt256, default=OFF_CHAIN["vault_id"])
    display_name: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    image: Mapped[str | None] = mapped_column(Text, nullable=True)
    external_reference: Mapped[str | None] = mapped_column(Text, nullable=True)
    corpora_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    semantic: Mapped[str | None] = mapped_column(Text, nullable=True)
    creator_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    num_positions: Mapped[int] = mapped_column(types.BigInteger, default=OFF_CHAIN["num_positions"])
    assets_sum: Mapped[int] = mapped_column(UInt256, default=OFF_CHAIN["assets_sum"])
    conviction_sum: Mapped[int] = mapped_column(UInt256, default=OFF_CHAIN["conviction_sum"])
    conviction_price: Mapped[int] = mapped_column(UInt256, default=OFF_CHAIN["conviction_price"])
    status: Mapped[str] = mapped_column(String(32), default=OFF_CHAIN["status"])
    is_user: Mapped[bool] = mapped_column(default=OFF_CHAIN["is_user"])
    user_conviction: Mapped[int] = mapped_column(UInt256, default=OFF_CHAIN["user_conviction"])
    user_conviction_value: Mapped[int] = mapped_column(UInt256, default=OFF_CHAIN["user_conviction_value"])
    # The creator's EIP-712 signature of the content_id (identity.core.authorship), or null: an ordinary wallet's
    # is 0x and 130 hex digits; a contract wallet's (EIP-1271, EIP-6492) is as long as its contract needs. PostgreSQL
    # holds it as text (migration 0010); SQLite never enforces a VARCHAR's length, so its column keeps the type
    # 0006 gave it (changing a column's type on SQLite copies the table, which would lose its triggers).
    creator_signature: Mapped[str | None] = mapped_column(String(132).with_variant(Text, "postgresql"), nullable=True)
    # The chain on which a contract wallet's creator_signature holds (its EIP-155 id); null for an ordinary wallet's
    # signature, which holds everywhere, and for an unsigned identity.
    creator_signature_chain_id: Mapped[int | None] = mapped_column(types.BigInteger, nullable=True)

    creator: Mapped[User] = relationship(lazy="joined")

    # The listing's orders (identity.core.browse): each sort key with the id as unique tie-breaker, alone,
    # under a creator, and under a status, so that a page is read from an index in order.
    __table_args__ = tuple(
        Index(f"ix_identities_{scope}_{key}".replace("__", "_"), *columns, key, "id")
        for key in ("created_at", "updated_at", "display_name", "num_positions")
        for scope, columns in (("", ()), ("creator", ("creator_id",)), ("status", ("status",)))
    )


class IdentityCount(db.Model):
    """How many identities there are per creator and status, kept by database triggers (migration 0002).

    `scope` is a creator's user id, or "" for every creator; `slot` is the first character of the
    identity's id, so that concurrent creates on PostgreSQL spread over sixteen rows instead of one.
    A total is the sum of a few of these rows, whatever the number of identities.
    """

    __tablename__ = "identity_counts"

    scope: Mapped[str] = mapped_column(String(36), primary_key=True)
    status: Mapped[str] = mapped_column(String(32), primary_key=True)
    slot: Mapped[str] = mapped_column(String(1), primary_key=True)
    n: Mapped[int] = mapped_column(types.BigInteger)


class ServiceSecret(db.Model):
    """Secrets every worker and node must share, such as the key that signs listing cursors."""

    __tablename__ = "service_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(128))



class Change(db.Model):
    """One entry of the append-only log of creates and changes (see identity.core.history)."""

    __tablename__ = "identity_changes"
    # One identity's history is read by this index, in order. AUTOINCREMENT on SQLite: a sequence
    # number is never reused, even after the last row is gone.
    __table_args__ = (
        Index("ix_identity_changes_identity_id_seq", "identity_id", "seq"),
        {"sqlite_autoincrement": True},
    )

    # INTEGER PRIMARY KEY on SQLite (its rowid), a BIGINT drawn from a sequence elsewhere.
    seq: Mapped[int] = mapped_column(types.BigInteger().with_variant(types.Integer, "sqlite"), primary_key=True)
    identity_id: Mapped[str] = mapped_column(String(128))
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    # The acting wallet: the caller's, or a word naming who acted without a key ("cli").
    wallet: Mapped[str] = mapped_column(String(42))
    kind: Mapped[str] = mapped_column(String(16))
    # For a change: {field: {"before": value, "after": value}}, values as the Identity object writes them.
    fields: Mapped[dict | None] = mapped_column(types.JSON(none_as_null=True), nullable=True)


# INTEGER PRIMARY KEY on SQLite (its rowid), a BIGINT drawn from a sequence elsewhere.
_SERIAL = types.BigInteger().with_variant(types.Integer, "sqlite")


class Webhook(db.Model):
    """A URL that every entry of the change log is POSTed to, in order (see identity.feed.delivery)."""

    __tablename__ = "webhooks"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    url: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Kept as it is, since it signs every delivery; shown once, in the answer to the registration.
    secret: Mapped[str] = mapped_column(String(64))
    active: Mapped[bool] = mapped_column(default=True)
    # The seq of the last entry delivered: the next delivery is the first entry after it.
    position: Mapped[int] = mapped_column(types.BigInteger, default=0)
    # Retry state of the entry after `position`: failed attempts so far, since when, and when the next is due.
    attempts: Mapped[int] = mapped_column(default=0)
    failing_since: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookDelivery(db.Model):
    """One attempt at delivering an entry to a webhook; only the latest few per webhook are kept."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_webhook_id_id", "webhook_id", "id"),)

    id: Mapped[int] = mapped_column(_SERIAL, primary_key=True)
    webhook_id: Mapped[str] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(types.BigInteger)
    attempt: Mapped[int] = mapped_column()
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    duration_ms: Mapped[int] = mapped_column()
    # The receiver's status code, or None when there was no answer (then `error` says why).
    status: Mapped[int | None] = mapped_column(nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class Lease(db.Model):
    """A named lease: who holds it, until when. One deliverer at a time holds "webhooks"."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ConsoleSession(db.Model):
    """A sign-in to the Admin console (identity.core.sessions): its cookie carries a random token, of which
    only the SHA-256 is kept here, and the session works while its key does, for 12 hours at most."""

    __tablename__ = "console_sessions"

    # The SHA-256 of the cookie's token, in hex: a copy of this table opens no session.
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"), index=True)
    # What every form of the session carries and every change is checked against (synchronizer token).
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class SpentNonce(db.Model):
    """A sign-in nonce that a sign-in has spent, kept until it expires (identity.core.nonces): issuing one stores
    nothing, so this is the one record of a nonce, and its primary key is what makes it single use."""

    __tablename__ = "signin_spent_nonces"

    nonce: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class Mirror(db.Model):
    """An upstream instance that this one follows, keeping a verified copy of its identities (see
    identity.data.follower)."""

    __tablename__ = "mirrors"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    # Unique: it labels the mirror's metrics.
    name: Mapped[str] = mapped_column(String(128), unique=True)
    # The upstream's base URL, without a trailing slash: its feed is url + /changes.
    url: Mapped[str] = mapped_column(Text)
    # The key this instance sends to the upstream, kept as it was given (a credential for the upstream, not
    # for this service), since every request needs it; never shown, never logged.
    api_key: Mapped[str] = mapped_column(Text)
    active: Mapped[bool] = mapped_column(default=True)
    # The upstream seq of the last entry handled, committed with what it wrote; and the upstream's `at` of it.
    position: Mapped[int] = mapped_column(types.BigInteger, default=0)
    position_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # The upstream's last seq as last seen.
    upstream_head: Mapped[int] = mapped_column(types.BigInteger, default=0)
    # Entries that changed something here; created entries whose content was here already; entries refused.
    applied: Mapped[int] = mapped_column(types.BigInteger, default=0)
    already_present: Mapped[int] = mapped_column(types.BigInteger, default=0)
    rejected: Mapped[int] = mapped_column(types.BigInteger, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_error_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class MirroredIdentity(db.Model):
    """Which mirror an identity came from: a `changed` entry of an upstream applies only to the identities
    that came from it, so that two instances that mirror each other never send a change back and forth."""

    __tablename__ = "mirrored_identities"
    __table_args__ = (Index("ix_mirrored_identities_mirror_id", "mirror_id"),)

    # The identity's id (identities.id).
    id: Mapped[str] = mapped_column(ForeignKey("identities.id"), primary_key=True)
    mirror_id: Mapped[str] = mapped_column(ForeignKey("mirrors.id", ondelete="CASCADE"))


class BackupRun(db.Model):
    """One backup taken to the target (identity.data.backups): a scheduled time's, at most one row per time, or a
    manual one's. Its last failure and the back-off before the next attempt are kept here, where every
    process and node reads them (the Status page, /metrics)."""

    __tablename__ = "backup_runs"

    id: Mapped[int] = mapped_column(types.BigInteger().with_variant(types.Integer, "sqlite"), primary_key=True,
                                    autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))  # scheduled or manual
    # The scheduled time this run is for; unique, so that one time is taken once across every node.
    scheduled_for: Mapped[datetime | None] = mapped_column(UTCDateTime, unique=True, nullable=True)
    status: Mapped[str] = mapped_column(String(16))  # running, ok or failed
    holder: Mapped[str | None] = mapped_column(String(128), nullable=True)
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    size: Mapped[int | None] = mapped_column(types.BigInteger, nullable=True)
    failures: Mapped[int] = mapped_column(default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_error_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, index=True)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
