"""The audit log's tables (identity.core.audit writes and reads them): its entries, a chain of hashes, and
the one row that holds the chain's head and start.

Every append locks the `audit_chain` row before it writes an entry (an UPDATE of it, or SELECT ... FOR UPDATE,
on PostgreSQL; SQLite's write lock, taken at BEGIN IMMEDIATE, is the transaction's already), so that two
writers on any number of processes and nodes append one after the other and the chain never forks.
"""

from datetime import datetime

from sqlalchemy import Index, String, Text, types
from sqlalchemy.orm import Mapped, mapped_column

from .database import db
from .models import UTCDateTime

# INTEGER PRIMARY KEY on SQLite (its rowid), a BIGINT elsewhere. The seq is given by the append (the head's
# plus one), not drawn from a sequence: the chain's numbers have no gaps, so a removed entry shows.
_SEQ = types.BigInteger().with_variant(types.Integer, "sqlite")


class AuditEntry(db.Model):
    """One entry of the audit log: who did what to which thing, with what outcome, from where."""

    __tablename__ = "audit_entries"
    # The listing's filters, each read newest first from its index.
    __table_args__ = (
        Index("ix_audit_entries_actor_wallet_seq", "actor_wallet", "seq"),
        Index("ix_audit_entries_action_seq", "action", "seq"),
        Index("ix_audit_entries_target_id_seq", "target_id", "seq"),
        Index("ix_audit_entries_at", "at"),
    )

    seq: Mapped[int] = mapped_column(_SEQ, primary_key=True, autoincrement=False)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    actor_user_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    actor_wallet: Mapped[str | None] = mapped_column(String(42), nullable=True)
    actor_role: Mapped[str | None] = mapped_column(String(16), nullable=True)
    actor_key_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    actor_key_hint: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # api, console, cli or service.
    via: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(64))
    target_kind: Mapped[str] = mapped_column(String(32))
    target_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    # ok, or refused (failed for a data command).
    outcome: Mapped[str] = mapped_column(String(16))
    # Why it was refused, or a word on what was done; never a secret.
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    request_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    client_address: Mapped[str | None] = mapped_column(String(64), nullable=True)
    user_agent: Mapped[str | None] = mapped_column(Text, nullable=True)
    before: Mapped[dict | None] = mapped_column(types.JSON(none_as_null=True), nullable=True)
    after: Mapped[dict | None] = mapped_column(types.JSON(none_as_null=True), nullable=True)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))


class AuditChain(db.Model):
    """The chain's one row (id 1): its head (the last entry's seq and hash) and its start (the seq and hash of
    the last entry pruned; 0 and the genesis hash while none was), which `audit verify` checks the entries
    against."""

    __tablename__ = "audit_chain"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    head_seq: Mapped[int] = mapped_column(types.BigInteger)
    head_hash: Mapped[str] = mapped_column(String(64))
    start_seq: Mapped[int] = mapped_column(types.BigInteger)
    start_hash: Mapped[str] = mapped_column(String(64))
