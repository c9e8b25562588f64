"""Keys and users as the HTTP API reads them: the caller's own key and user, one key, the Admin
listing of keys (paged as the identity listing is), and a user with its identity count.

Issuing, rotating and revoking are in identity.service, shared with the command line.
"""

from datetime import datetime

from flask import current_app
from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import func, literal, not_, select, tuple_

from .browse import cursor_secret
from .errors import InvalidParameters, KeyNotFound, UserNotFound
from .extensions import db
from .models import ApiKey, IdentityCount, User, utcnow
from .service import is_key_id, live
from .wallets import checksum_wallet

DEFAULT_LIMIT = 20
CURSOR_SALT = "identity.keyring.cursor.v1"
_KEY_COLUMNS = ("id", "scope", "label", "created_at", "expires_at", "last_used_at", "revoked_at", "created_by")


def key_record(api_key, user):
    """An ApiKey and its user as the Key schema dumps them; never the secret, nor its hash."""
    return {**{name: getattr(api_key, name) for name in _KEY_COLUMNS}, "wallet": user.wallet, "role": user.role}


def issued_record(key, api_key):
    """A key just issued: its record and, this once, its plaintext."""
    user = db.session.get(User, api_key.user_id)
    db.session.commit()
    return {**key_record(api_key, user), "key": key}


def me(caller):
    """The caller's user and key."""
    api_key, user = _key_and_user(caller.key_id)
    return {"user": user, "key": key_record(api_key, user)}


def get_key(key_id):
    """The key with this id, as key_record makes it; KeyNotFound if none."""
    return key_record(*_key_and_user(key_id))


def _key_and_user(key_id):
    if not is_key_id(key_id):
        raise KeyNotFound()
    row = db.session.execute(select(ApiKey, User).join(User).where(ApiKey.id == key_id)).one_or_none()
    db.session.commit()
    if row is None:
        raise KeyNotFound()
    return row


def user_of(wallet):
    """The user of `wallet` (any case) with identity_count, the identities it created that are not removed."""
    try:
        wallet = checksum_wallet(wallet)
    except ValueError:
        raise UserNotFound() from None
    user = db.session.execute(select(User).where(User.wallet == wallet)).scalar_one_or_none()
    if user is None:
        db.session.commit()
        raise UserNotFound()
    # The counts that triggers keep (migration 0002): a few rows, however many identities.
    count = select(func.coalesce(func.sum(IdentityCount.n), 0)).where(
        IdentityCount.scope == user.id, IdentityCount.status != "removed"
    )
    identity_count = int(db.session.execute(count).scalar())
    db.session.commit()
    return {**{column.key: getattr(user, column.key) for column in User.__table__.c}, "identity_count": identity_count}


def list_keys(args):
    """The page of keys that query arguments `args` (KeyListArgsSchema) ask for, newest first."""
    wallet = checksum_wallet(args["wallet"].lower()) if "wallet" in args else None  # any case, as documented
    active = args.get("active")
    limit, page, after = args.get("limit", DEFAULT_LIMIT), args.get("page", 1), None
    if "cursor" in args:
        wallet_, active_, limit_, page, after = _decode(args["cursor"])
        for name, asked, carried in (("wallet", wallet, wallet_), ("active", active, active_)):
            if name in args and asked != carried:
                raise InvalidParameters({name: ["Differs from the listing the cursor continues; leave it out."]})
        wallet, active, limit = wallet_, active_, args.get("limit", limit_)
    conditions = []
    if wallet is not None:
        conditions.append(User.wallet == wallet)
    if active is not None:
        working = live(utcnow())
        conditions.append(working if active else not_(working))
    query = select(ApiKey, User).join(User).where(*conditions)
    if after is not None:
        bound = (literal(after[0], ApiKey.created_at.type), literal(after[1], ApiKey.id.type))
        query = query.where(tuple_(ApiKey.created_at, ApiKey.id) < tuple_(*bound))
    elif page > 1:
        query = query.offset((page - 1) * limit)
    rows = db.session.execute(query.order_by(ApiKey.created_at.desc(), ApiKey.id.desc()).limit(limit + 1)).all()
    total = db.session.execute(select(func.count()).select_from(ApiKey).join(User).where(*conditions)).scalar()
    db.session.commit()
    following = None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1][0]
        following = _serializer().dumps([wallet, active, limit, page + 1, last.created_at.isoformat(), last.id])
    return {
        "page": page,
        "limit": limit,
        "total": total,
        "data": [key_record(api_key, user) for api_key, user in rows],
        "next": following,
    }


def _serializer():
    """Signs cursors with the service's shared secret (the one identity.browse's cursors use), salted apart."""
    cache = current_app.extensions.setdefault("identity.keyring", {})
    if "serializer" not in cache:
        cache["serializer"] = URLSafeSerializer(cursor_secret(), salt=CURSOR_SALT)
    return cache["serializer"]


def _decode(token):
    try:
        wallet, active, limit, page, created_at, key_id = _serializer().loads(token)
        return wallet, active, int(limit), int(page), (datetime.fromisoformat(created_at), str(key_id))
    except (BadSignature, TypeError, ValueError):
        raise InvalidParameters({"cursor": ["Not a cursor this service issued; use the next of a page."]}) from None

