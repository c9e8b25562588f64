"""Sign-in with Ethereum (EIP-4361): the nonces this service issues, the message it writes for a wallet to sign
(the console's wallet button), and a signed message turned into a key.

Nonces store nothing until spent (identity.core.nonces): any worker or node accepts a nonce another issued, and
no crowd asking for nonces can fill anything. The first sign-in that names a nonce, once its message parses,
spends it, in one statement whose result decides: of two sign-ins with one nonce, only the one whose insert
wrote the spent nonce's row may go on, and its key is issued in that same transaction (the one write of a
sign-in, and so its cost on SQLite's write lock). The nonce is spent whatever the sign-in's outcome.

The checks run in the contract's order (checked_sign_in, which POST /auth/siwe and the console's wallet
sign-in share); each failure is a SigninRefused naming its check, whose detail says what to do. A message
that does not parse is an InvalidMessage naming its first wrong line. A sign-in never issues a wallet more
than its grant (users.grant): a read-granted wallet gets a read key, and one that asks for write is refused
(BeyondGrant), its nonce spent.
"""

import logging
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps
from types import SimpleNamespace
from urllib.parse import urlsplit

from eth_utils import is_address, to_checksum_address
from flask import current_app
from sqlalchemy import update

from ..storage.database import write_transaction
from ..storage.models import User, utcnow
from . import audit, contract_wallets, nonces, siwe
from .errors import (
    BeyondGrant,
    InvalidMessage,
    InvalidParameters,
    SigninOff,
    SigninRefused,
    WalletChainUnavailable,
)
from .keys import add_key, key_log, key_record
from .users import user_of_wallet

# Who issued a signed-in key (a Key's created_by), and its label when the body gives none.
SIWE = "siwe"
DEFAULT_LABEL = "sign-in"
# The contract's checks after the message's grammar (check 1), by number, named as a refusal names them.
CHECKS = {2: "domain", 3: "version and chain", 4: "nonce", 5: "times", 6: "signature"}
NOT_AN_ADDRESS = ("Not an Ethereum address: expected 0x and 40 hex digits, the account the wallet's "
                  "eth_requestAccounts answered (in any case).")
NOT_A_CHAIN_ID = ("Not a chain id: expected the wallet's EIP-155 chain id (its eth_chainId) in decimal digits, "
                  "below 2**256.")
# The port a URI's scheme implies when it names none (an origin's port, as browsers compare them).
DEFAULT_PORTS = {"http": 80, "https": 443}

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """The app's IDENTITY_SIWE_* settings (identity.config)."""

    domain: str
    uri: str
    nonce_seconds: int
    chain_ids: tuple[int, ...] | None
    key_seconds: int


def settings():
    """The sign-in settings of the current app; SigninOff when IDENTITY_SIWE_DOMAIN is not set."""
    config = current_app.config
    domain = config.get("IDENTITY_SIWE_DOMAIN")
    if not domain:
        raise SigninOff()
    return Settings(
        domain=domain, uri=config.get("IDENTITY_SIWE_URI") or f"https://{domain}",
        nonce_seconds=config["IDENTITY_SIWE_NONCE_SECONDS"],
        chain_ids=config.get("IDENTITY_SIWE_CHAIN_IDS"), key_seconds=config["IDENTITY_SIWE_KEY_SECONDS"],
    )


def check_on():
    """SigninOff unless sign-in with Ethereum is on (IDENTITY_SIWE_DOMAIN is set)."""
    settings()


def when_on(function):
    """`function`, called only while sign-in with Ethereum is on: SigninOff (naming IDENTITY_SIWE_DOMAIN) before
    anything else it does, a budget spent or a body read included. The console's wallet sign-in is wrapped in
    it; the API's sign-in routes name check_on in their access (identity.web.auth), which runs it first."""

    @wraps(function)
    def on(*args, **kwargs):
        check_on()
        return function(*args, **kwargs)

    return on


def is_on():
    """Whether sign-in with Ethereum is on (IDENTITY_SIWE_DOMAIN is set)."""
    return bool(current_app.config.get("IDENTITY_SIWE_DOMAIN"))


def issue_nonce():
    """A fresh nonce, which stores nothing until a sign-in spends it: {nonce, expires_at, domain, uri}."""
    config = settings()
    nonce, expires_at = nonces.issue(utcnow(), config.nonce_seconds)
    return {"nonce": nonce, "expires_at": expires_at, "domain": config.domain, "uri": config.uri}


def wallet_message(address, chain_id, statement=None):
    """The EIP-4361 message for the wallet at `address` (0x and 40 hex digits, in any case) on the chain `chain_id`
    (its decimal digits) to sign, naming a fresh nonce of issue_nonce: issue_nonce's answer with the `message` and
    its `address` in EIP-55 form, for the wallet to sign as it is.

    The message has no Expiration Time: a sign-in ends what it grants (a key, a console session) at the message's
    Expiration Time, and the nonce's expiry (expires_at) already bounds when the message can be used (check 4).
    InvalidParameters naming `address` or `chain_id` when either is not what a wallet answers; then no nonce is
    issued. SigninOff as issue_nonce.
    """
    wrong = {}
    if not (isinstance(address, str) and is_address(address)):
        wrong["address"] = [NOT_AN_ADDRESS]
    # The length first: int() never sees more digits than a 256-bit number has.
    if not (isinstance(chain_id, str) and chain_id.isascii() and chain_id.isdigit() and len(chain_id) <= 78
            and int(chain_id) <= siwe.MAX_CHAIN_ID):
        wrong["chain_id"] = [NOT_A_CHAIN_ID]
    if wrong:
        raise InvalidParameters(wrong)
    issued = issue_nonce()
    message = siwe.SiweMessage(
        domain=issued["domain"], address=to_checksum_address(address), statement=statement, uri=issued["uri"],
        version=siwe.VERSION, chain_id=int(chain_id), nonce=issued["nonce"], issued_at=utcnow(),
    )
    return {**issued, "address": message.address, "message": siwe.text_of(message)}


def sign_in(text, signature, scope=None, label=None):
    """Check the EIP-4361 message `text` and its personal_sign `signature` in the contract's order, and issue
    a key for its wallet, of `scope` (default: the wallet's grant, write for a wallet the service has not seen)
    and `label` (default DEFAULT_LABEL); returns the issued key's record with its `user` (see signed_in_record).
    A wallet the service has not seen becomes a User.

    Raises InvalidMessage (check 1) or SigninRefused (checks 2 to 6); see checked_sign_in. BeyondGrant when every
    check passed but `scope` is write and the wallet is granted read only: nothing is issued, the nonce is spent.
    """

    def issue(session, message, now, expires_at):
        user = user_of_wallet(session, message.address, "User", now)
        granted = granted_scope(user, scope)
        if granted is None:
            record_beyond_grant(user)
            return None, None, user
        record_login(session, user, now)
        key, api_key = add_key(session, user["id"], now, granted, label or DEFAULT_LABEL, expires_at, created_by=SIWE)
        record_signed_in(api_key, user)
        return key, api_key, user

    message, (key, api_key, user) = checked_sign_in(text, signature, issue)
    if api_key is None:
        raise beyond_grant(message)
    key_log.info("key %s issued for %s by sign-in with Ethereum", api_key.id, message.address, extra={
        "key_id": api_key.id, "wallet": message.address, "acting_wallet": SIWE, "scope": api_key.scope,
    })
    return signed_in_record(key, api_key, user)


def granted_scope(user, asked):
    """The scope of the key a sign-in of `user` (a mapping of its columns) gets when it asks for `asked` (None:
    its grant); None when it asks for write and is granted read only."""
    grant = user.get("grant") or "write"
    if asked is None:
        return grant
    return None if asked == "write" and grant == "read" else asked


ASK_FOR_READ = ('ask for "scope": "read" (or leave scope out) with a new message. An Admin widens the grant by '
                "issuing the wallet a write key (POST /keys, or `flask keys create --scope write`).")


def beyond_grant(message, what_to_do=ASK_FOR_READ):
    """BeyondGrant for the wallet of `message`, which asked for write and is granted read only; logged as a refusal
    is. Its detail ends with `what_to_do`."""
    log.info("sign-in of %s refused: it asked for write and is granted read only", message.address,
             extra={"wallet": message.address, "check": "grant"})
    return BeyondGrant(beyond_grant_detail(message.address, what_to_do))


def beyond_grant_detail(wallet, what_to_do=ASK_FOR_READ):
    return (f"{wallet} is granted read access only, so a sign-in gives it read access alone (its nonce is spent): "
            f"{what_to_do}")


def checked_sign_in(text, signature, admit):
    """The contract's checks of the EIP-4361 message `text` and its personal_sign `signature`, in its order, and
    the nonce spent; returns (the message, what `admit` returned).

    When every check passes, admit(session, message, now, expires_at) runs in the transaction that spends the
    nonce, and whatever it writes commits with it: `expires_at` is when a key it issues must expire (the
    message's Expiration Time, and no later than IDENTITY_SIWE_KEY_SECONDS from now). POST /auth/siwe issues a
    key there (sign_in); the console opens a session (identity.core.sessions). admit must not raise to refuse
    (that would undo the spend): it returns what tells its caller to.

    Raises InvalidMessage (check 1) or SigninRefused (checks 2 to 6). Once the message parses, a nonce this
    service issued and that has not expired is spent whatever comes next; the refusal is the first failing
    check's, in the contract's order. Checks 2, 3, 5 and 6 need no database and a nonce's proof none either:
    they are worked out first, so that the nonce is spent and the key issued in one transaction.
    """
    config = settings()
    try:
        message = siwe.parse(text)
    except siwe.MessageError as error:
        raise InvalidMessage(error.line, error.detail) from None
    now = utcnow()
    nonce_expires_at = nonces.expiry_of(message.nonce)
    failure = _failed_domain(message, config) or _failed_chain(message, config)
    if nonce_expires_at is None:
        failure = failure or (4, "The nonce was not issued by this service: ask GET /auth/nonce for a fresh one "
                              "and sign a new message.")
    elif nonce_expires_at <= now:
        failure = failure or (4, "The nonce has expired (IDENTITY_SIWE_NONCE_SECONDS after it was issued): ask GET "
                              "/auth/nonce for a fresh one and sign a new message.")
    else:
        # Worked out only when no earlier check failed: a refusal names the first failing check alone.
        later = None if failure else _failed_times(message, now) or _failed_signature(message, text, signature)
        expires_at = now + timedelta(seconds=config.key_seconds)
        if message.expiration_time is not None:
            expires_at = min(expires_at, message.expiration_time)
        with write_transaction() as session:
            first_use = nonces.spend(session, message.nonce, nonce_expires_at, now)
            if first_use and failure is None and later is None:
                return message, admit(session, message, now, expires_at)
        if first_use and failure is None and isinstance(later, WalletChainUnavailable):
            audit.record_now("signin.siwe", "signin", message.address, outcome="refused",
                             detail="check 6 (signature): the chain's endpoint did not answer",
                             actor={"wallet": message.address})
            raise later
        failure = failure or (None if first_use else (
            4, "The nonce is spent: a sign-in used it already (the first sign-in that names a nonce spends it, "
            "whatever its outcome). Ask GET /auth/nonce for a fresh one and sign a new message.")) or later
    raise _refused(*failure, message)


def record_signed_in(api_key, user):
    """The audit entry of a sign-in that passed every check (in the transaction that spends its nonce): the
    key it issued; never the message's signature."""
    audit.record("signin.siwe", "key", api_key.id, actor={
        "user_id": user["id"], "wallet": user["wallet"], "role": user["role"], "key_id": None,
    }, after={"scope": api_key.scope, "label": api_key.label, "expires_at": api_key.expires_at})


def record_beyond_grant(user):
    """The audit entry of a sign-in refused because it asked for more than its wallet's grant (in the
    transaction that spends its nonce)."""
    audit.record("signin.siwe", "signin", user["wallet"], outcome="refused", detail="grant (asked for write, granted read)",
                 actor={"user_id": user["id"], "wallet": user["wallet"], "role": user["role"], "key_id": None})


def record_login(session, user, now):
    """A sign-in's mark on its user (a mapping of its columns, updated too): last_login is `now`."""
    session.execute(update(User).where(User.id == user["id"]).values(last_login=now))
    user["last_login"] = now


def signed_in_record(key, api_key, user):
    """A key just issued by sign-in: its record, its plaintext this once, and its user (a mapping of its columns)."""
    return {**key_record(api_key, SimpleNamespace(**user)), "key": key, "user": user}


def _failed_domain(message, config):
    """Check 2, as (2, detail) when it fails: the message names this service's domain, the scheme of
    IDENTITY_SIWE_URI when it names one, and a URI at the origin (scheme, host, port) of IDENTITY_SIWE_URI."""
    if message.domain.lower() != config.domain.lower():
        return 2, (f"The message is for {message.domain}, not for this service, which signs in at {config.domain}: "
                   f"sign a message whose first line names {config.domain}.")
    scheme = config.uri.partition(":")[0].lower()
    if message.scheme is not None and message.scheme.lower() != scheme:
        return 2, (f"The message is for {message.scheme}://{message.domain}; this service signs in at "
                   f"{scheme}://{config.domain}.")
    here = _origin(config.uri)
    # IDENTITY_SIWE_URI has an origin (identity.config); an app configured without one accepts its URI alone.
    if (_origin(message.uri) != here) if here is not None else message.uri != config.uri:
        origin = f"{here[0]}://{here[1]}:{here[2]}" if here is not None else config.uri
        return 2, (f"The message's URI, {message.uri}, is not at this service's origin, {origin}: sign a message "
                   f"whose URI is {config.uri} (the uri that GET /auth/nonce answers).")
    return None


def _origin(uri):
    """The origin (scheme, host, port) of `uri`, in lower case with its scheme's default port; None when it has no
    host (a URN) or an unreadable port."""
    parts = urlsplit(uri)
    try:
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS.get(scheme)


def _failed_chain(message, config):
    """Check 3, as (3, detail) when it fails: the message's Chain ID is one of IDENTITY_SIWE_CHAIN_IDS, when that
    is set (its Version, 1, is the grammar's: check 1)."""
    if config.chain_ids is not None and message.chain_id not in config.chain_ids:
        accepted = ", ".join(map(str, config.chain_ids))
        return 3, (f"Chain ID {message.chain_id} is not one this service accepts ({accepted}): switch the wallet "
                   "to one of them and sign again.")
    return None


def _failed_times(message, now):
    """Check 5, as (5, detail) when it fails: Issued At, Expiration Time and Not Before allow `now`."""
    try:
        siwe.check_times(message, now)
    except siwe.TimeCheckError as error:
        return 5, f"{error.detail} Sign a new message, with a fresh nonce."
    return None


def _failed_signature(message, text, signature):
    """Check 6, as (6, detail) when it fails, or as the WalletChainUnavailable to raise once the nonce is spent:
    the signature is personal_sign's of `text` by the message's wallet, or its contract's on the message's chain
    (identity.core.contract_wallets), asked only when it does not recover to the wallet."""
    wallet, chain = message.address, message.chain_id
    try:
        contract_wallets.check(wallet, siwe.personal_sign_message(text), signature, chain,
                               contract_wallets.Endpoints.of(current_app.config))
    except contract_wallets.NotSigned as error:
        if error.contract:
            return 6, (f"The signature is not {wallet}'s: it does not recover to {wallet}, and the contract at "
                       f"{wallet} on chain {chain} does not accept it (EIP-1271's isValidSignature, or EIP-6492's "
                       "validator for a wallet not yet deployed). Sign the message with the wallet it names (a Safe: "
                       "with as many of its owners as its threshold), on the chain the message names.")
        if error.problem is not None:
            return 6, f"{error.problem} Send the wallet's personal_sign signature of the message's exact text."
        return 6, (f"The signature is not {wallet}'s: it recovers to another wallet. Sign the message with the wallet "
                   "it names (a contract wallet's signature, EIP-1271 or EIP-6492, is checked on its chain).")
    except contract_wallets.NoEndpoint as error:
        why = error.problem or "it recovers to another wallet"
        return 6, (f"The signature does not recover to {wallet} ({why.rstrip('.')}), so only a contract wallet at "
                   f"{wallet} on chain {chain} (EIP-1271, EIP-6492) could accept it, and this service has no "
                   f"endpoint for chain {chain}: its operator names one in {contract_wallets.RPC_SETTING}. An "
                   "ordinary wallet sends its personal_sign signature of the message's exact text (65 bytes).")
    except contract_wallets.ChainUnavailable as error:
        return WalletChainUnavailable(
            f"Sign-in could not finish check 6 (signature): the signature does not recover to {wallet}, so the "
            f"contract at {wallet} was asked on chain {chain}, and chain {chain}'s endpoint "
            f"({contract_wallets.RPC_SETTING}) gave no answer: {error.reason}. Nothing was accepted; this message's "
            "nonce is spent: ask GET /auth/nonce for a fresh one and sign again after the seconds in Retry-After.",
            chain)
    return None


def _refused(number, detail, message):
    """The refusal of check `number` for `message`, logged with its wallet (never the message or signature)."""
    check = CHECKS[number]
    audit.record_now("signin.siwe", "signin", message.address, outcome="refused", detail=f"check {number} ({check})",
                     actor={"wallet": message.address})
    log.info("sign-in of %s refused at check %d (%s)", message.address, number, check,
             extra={"wallet": message.address, "check": check})
    return SigninRefused(check, f"Sign-in refused at check {number} ({check}): {detail}")
