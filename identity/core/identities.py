"""Identities: create one from its content (signed by its creator or not), preview a create, and read one
by its identity_id."""

from flask import current_app
from sqlalchemy import bindparam, insert, select
from sqlalchemy.exc import IntegrityError

from ..storage.database import db, one_statement, write_transaction
from ..storage.models import OFF_CHAIN, Identity, new_id, utcnow
from . import authorship, content, contract_wallets, history
from .errors import Forbidden, IdentityExists, InvalidFields, WalletChainUnavailable
from .users import USERS, find_user, user_of_wallet

IDENTITIES = Identity.__table__
# The creator's columns ride along with the identity's, after them, under this prefix (see identity_record).
_CREATOR = "creator__"
# An identity and its creator in one statement: add a where clause, an order, a limit.
IDENTITIES_WITH_CREATOR = select(IDENTITIES, *(column.label(_CREATOR + column.key) for column in USERS.c)).join_from(
    IDENTITIES, USERS, IDENTITIES.c.creator_id == USERS.c.id
)
_IDENTITY_BY_ID = IDENTITIES_WITH_CREATOR.where(IDENTITIES.c.identity_id == bindparam("identity_id"))
_IDENTITIES_BY_ID = IDENTITIES_WITH_CREATOR.where(IDENTITIES.c.identity_id.in_(bindparam("identity_ids", expanding=True)))
_IDENTITY_OF_CONTENT = select(IDENTITIES.c.identity_id).where(IDENTITIES.c.content_id == bindparam("content_id"))
_IDENTITY_KEYS = tuple(IDENTITIES.c.keys())
_CREATOR_KEYS = tuple(USERS.c.keys())


def identity_record(row):
    """A row of IDENTITIES_WITH_CREATOR as the mapping the Identity schema dumps: the identity's columns,
    and its creator's under "creator"."""
    split = len(_IDENTITY_KEYS)
    record = dict(zip(_IDENTITY_KEYS, row[:split], strict=True))
    record["creator"] = dict(zip(_CREATOR_KEYS, row[split:], strict=True))
    return record


def get_identity_row(identity_id):
    """The row of IDENTITIES_WITH_CREATOR with this identity_id, or None: one statement, its only round trip."""
    if not content.has_identity_id_form(identity_id):
        # No stored identity has a malformed id; and PostgreSQL refuses some strings (NUL) outright.
        return None
    with one_statement() as connection:
        return connection.execute(_IDENTITY_BY_ID, {"identity_id": identity_id}).one_or_none()


def get_identity(identity_id):
    """The Identity with this identity_id (see identity_record), or None."""
    row = get_identity_row(identity_id)
    return None if row is None else identity_record(row)


def identities_by_id(identity_ids):
    """The Identities (see identity_record) of those of `identity_ids` that exist, by identity_id: one
    statement for them all (a page of the change feed with its docs)."""
    wanted = sorted({identity_id for identity_id in identity_ids if content.has_identity_id_form(identity_id)})
    if not wanted:
        return {}
    with one_statement() as session:
        rows = session.execute(_IDENTITIES_BY_ID, {"identity_ids": wanted}).all()
    return {record["identity_id"]: record for record in map(identity_record, rows)}


def canonical_content(identity):
    """The canonical bytes of an identity's content: exactly the bytes its content_id hashes."""
    # Stored values are already normalized; content_of leaves them as they are and drops the nulls.
    return content.canonical_bytes(content.content_of(identity))


def create_identity(fields, caller):
    """Create an off-chain Identity from validated `fields` on behalf of `caller` (keys.Caller); returns it
    (see identity_record).

    Raises Forbidden when a User key names another creator, InvalidFields for a signature that is not
    the creator's, IdentityExists for known content.
    """
    creator, address, signature, chain_id = _checked(fields, caller)
    now = utcnow()
    values = {
        "id": new_id(),
        "identity_id": address.identity_id,
        "content_id": address.content_id,
        "identity_hash": address.identity_hash,
        **{name: address.content.get(name) for name in content.CONTENT_FIELDS},
        **OFF_CHAIN,
        "created_at": now,
        "updated_at": now,
        "creator_signature": signature,
        "creator_signature_chain_id": chain_id,
    }
    # The creator is known before the write lock is taken, so that the lock is held for the writes alone
    # (every other create waits for it): the caller's own user came with its key's lookup; another
    # wallet's is read first, and made under the lock if the service has not seen it.
    user = caller.user if creator == caller.wallet and caller.user is not None else _known_user(creator)
    try:
        with write_transaction() as session:
            if user is None:
                user = user_of_wallet(session, creator, now=now)
            values["creator_id"] = user["id"]
            session.execute(_INSERT, values)
            history.record_created(session, address.identity_id, caller.wallet, now)
    except IntegrityError:
        # Known content: the unique content_id refused the insert, and the transaction, the creator's new
        # user included, is undone. Asking first would cost every create a round trip under the write
        # lock, for what is rare; and the constraint decides anyway (another writer may store the same
        # content between a check and the insert).
        _refuse_known_content(address.content_id)
        raise
    return {**values, "creator": user}


_INSERT = insert(IDENTITIES)


def preview_identity(fields, caller):
    """What create_identity would make of `fields` for `caller`, writing nothing: the normalized content, its
    addresses, whether it exists here (then identity_id is the existing one's), and the typed data that
    its creator signs (identity.core.authorship). Refuses what a create refuses, but known content."""
    _creator, address, _signature, _chain_id = _checked(fields, caller)
    with one_statement() as session:
        existing = session.execute(_IDENTITY_OF_CONTENT, {"content_id": address.content_id}).scalar_one_or_none()
    return {
        "content": address.content, "content_id": address.content_id, "identity_id": existing or address.identity_id,
        "identity_hash": address.identity_hash, "exists": existing is not None,
        "typed_data": authorship.typed_data(address.content_id),
    }


def _checked(fields, caller):
    """The creator, content address, signature (as stored, or None) and its chain (None but for a contract wallet's)
    of a create of `fields` by `caller`.

    A User key may name only itself as creator. A signature must recover to the creator: with it, an
    Admin key creates for the wallet that signed; without one, it may name any wallet, as ever.
    """
    creator = fields.get("creator") or caller.wallet
    if caller.role != "Admin" and creator != caller.wallet:
        raise Forbidden("A User key may create identities only with its own wallet as creator.")
    address = content.address(fields, current_app.config["IDENTITY_DID_NAMESPACE"])
    signature, chain_id = _signature(fields, creator, address.content_id)
    return creator, address, signature, chain_id


def _signature(fields, creator, content_id):
    """The create's signature as stored, and its chain (None: none, or an ordinary wallet's); InvalidFields when it
    is not the creator's, WalletChainUnavailable when the creator's chain could not be asked."""
    signature, chain_id = fields.get("signature"), fields.get("signature_chain_id")
    if signature is None:
        if chain_id is not None:
            raise InvalidFields({"signature_chain_id": [
                "It names the chain of a contract wallet's signature: send it with that signature, or leave it out."]})
        return None, None
    endpoints = contract_wallets.Endpoints.of(current_app.config)
    try:
        return authorship.check_author(content_id, creator, signature, chain_id, endpoints)
    except contract_wallets.NotSigned as error:
        raise InvalidFields({"signature": [_not_signed(error, creator, chain_id)]}) from None
    except contract_wallets.NoEndpoint as error:
        why = (error.problem or f"it recovers to {error.signer}").rstrip(".")
        raise InvalidFields({"signature": [
            f"It does not recover to {creator} ({why}), so only a contract wallet at {creator} on chain {chain_id} "
            f"(EIP-1271, EIP-6492) could accept it, and this service has no endpoint for chain {chain_id}: its "
            f"operator names one in {contract_wallets.RPC_SETTING}."
        ]}) from None
    except contract_wallets.ChainUnavailable as error:
        raise WalletChainUnavailable(
            f"The signature does not recover to {creator}, so the contract at {creator} was asked on chain "
            f"{chain_id}, and chain {chain_id}'s endpoint ({contract_wallets.RPC_SETTING}) gave no answer: "
            f"{error.reason}. Nothing was created; send the create again after the seconds in Retry-After.",
            chain_id) from None


def _not_signed(error, creator, chain_id):
    """The 422 message of a signature that is not `creator`'s (contract_wallets.NotSigned)."""
    typed = ("The creator's wallet signs the typed_data that POST /identity/preview answers for this body "
             "(eth_signTypedData_v4)")
    if error.contract:
        return (f"Not the creator's: it does not recover to {creator}, and the contract at {creator} on chain "
                f"{chain_id} does not accept it (EIP-1271's isValidSignature, or EIP-6492's validator for a wallet "
                f"not yet deployed). {typed}; a Safe, with as many of its owners as its threshold.")
    contract = " A contract wallet's signature names its chain with signature_chain_id."
    if error.problem is not None:
        return error.problem + contract
    return (f"Not the creator's: it recovers to {error.signer}, not to {creator}, so another wallet made it or it "
            f"signs other content. {typed}.{contract}")


def _known_user(wallet):
    with one_statement() as connection:
        return find_user(connection, wallet)


def _refuse_known_content(content_id):
    """Raise IdentityExists if an identity holds this content."""
    existing = db.session.execute(_IDENTITY_OF_CONTENT, {"content_id": content_id}).scalar_one_or_none()
    db.session.commit()
    if existing is not None:
        raise IdentityExists(existing)
