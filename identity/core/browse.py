"""Browse and search identities: the filtered, sorted, paginated listing of GET /identities.

How a page stays cheap at any size (see docs/browse-and-search.md):

- Order: every sort key has an index with the id as unique tie-breaker, alone, under a creator and
  under a status (models.Identity.__table_args__). A page is read in index order; a cursor continues
  with a keyset condition `(key, id) < (last key, last id)`, never an OFFSET; `page=` uses an OFFSET,
  bounded by page × limit <= 10,000.
- Filters: `q` goes through a full-text index and `displayName` through a trigram index (SQLite FTS5
  tables, PostgreSQL GIN indexes, migration 0002), so their cost follows the matches, not the table.
- total: without q and displayName, the sum of a few rows of identity_counts, which database triggers
  keep exact on every insert, delete and change of status; with them, a count through their index.
"""

import re
import secrets
import unicodedata
from dataclasses import asdict, dataclass, replace
from datetime import datetime

from flask import current_app
from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import and_, case, func, literal, or_, select, text, tuple_
from sqlalchemy.exc import IntegrityError

from ..storage.database import db, write_transaction
from ..storage.models import Identity, IdentityCount, ServiceSecret, User
from .errors import Forbidden, InvalidParameters
from .wallets import checksum_wallet

DEFAULT_LIMIT = 20
CURSOR_SALT = "identity.browse.cursor.v1"
RELEVANCE = "relevance"  # the order of a q without sortBy
# Words as both full-text indexes see them: runs of letters and digits.
_WORDS = re.compile(r"[^\W_]+")
_SORT_COLUMNS = {
    "created_at": Identity.created_at,
    "updated_at": Identity.updated_at,
    "display_name": Identity.display_name,
    "num_positions": Identity.num_positions,
}
_TIMESTAMP_KEYS = {"created_at", "updated_at"}


@dataclass(frozen=True)
class Listing:
    """What a page lists: the filters and order a cursor carries, and where the page starts."""

    sort: str = "created_at"  # a key of _SORT_COLUMNS, or RELEVANCE
    direction: str = "desc"
    creator: str | None = None  # EIP-55 wallet
    status: str | None = None
    display_name: str | None = None  # NFC
    q: str | None = None
    limit: int = DEFAULT_LIMIT
    page: int = 1
    after: tuple | None = None  # the sort key values of the last item of the previous page


def list_identities(args, caller):
    """The page that query arguments `args` (IdentityListArgsSchema) ask for, as the page schema dumps it."""
    listing = _listing(args)
    if listing.status == "removed" and caller.role != "Admin":
        raise Forbidden("Only an Admin key may list removed identities.")
    creator_id = None
    if listing.creator is not None:
        creator_id = db.session.execute(select(User.id).where(User.wallet == listing.creator)).scalar()
        if creator_id is None:  # a wallet the service has never seen created nothing
            db.session.commit()
            return {"page": listing.page, "limit": listing.limit, "total": 0, "data": [], "next": None}
    conditions = _conditions(listing, creator_id)
    order = _order(listing)
    query = select(Identity, *(expression for expression, _ in order)).where(*conditions)
    if listing.after is not None:
        query = query.where(_after(order, _bounds(listing)))
    elif listing.page > 1:
        query = query.offset((listing.page - 1) * listing.limit)
    query = query.order_by(*(expression.desc() if descending else expression.asc() for expression, descending in order))
    rows = db.session.execute(query.limit(listing.limit + 1)).all()
    total = _total(listing, creator_id, conditions)
    db.session.commit()
    following = None
    if len(rows) > listing.limit:
        rows = rows[: listing.limit]
        last = tuple(rows[-1][1:])
        if listing.sort == "display_name":
            # Content never changes: the id finds the name again, and a cursor need not carry 256 characters.
            last = (None, last[1])
        following = _encode(replace(listing, page=listing.page + 1, after=last))
    return {
        "page": listing.page,
        "limit": listing.limit,
        "total": total,
        "data": [row[0] for row in rows],
        "next": following,
    }


def _listing(args):
    """The Listing of the query arguments; with a cursor, the cursor's, which the arguments may only repeat."""
    asked = Listing(
        sort=args.get("sortBy") or (RELEVANCE if _words(args.get("q")) else "created_at"),
        direction=args.get("direction", "desc"),
        creator=checksum_wallet(args["creator"].lower()) if "creator" in args else None,
        status=args.get("status"),
        display_name=unicodedata.normalize("NFC", args["displayName"]) if "displayName" in args else None,
        q=args.get("q") if _words(args.get("q")) else None,
        limit=args.get("limit", DEFAULT_LIMIT),
        page=args.get("page", 1),
    )
    if "cursor" not in args:
        return asked
    listing = _decode(args["cursor"])
    # Filters and order sent along with a cursor must be the cursor's own: a cursor continues one listing.
    for parameter, field in (("sortBy", "sort"), ("direction", "direction"), ("creator", "creator"),
                             ("status", "status"), ("displayName", "display_name"), ("q", "q")):
        if parameter in args and getattr(asked, field) != getattr(listing, field):
            raise InvalidParameters({parameter: ["Differs from the listing the cursor continues; leave it out."]})
    if "limit" in args:
        listing = replace(listing, limit=args["limit"])
    return listing


def _words(q):
    return _WORDS.findall(q) if q else []


def _conditions(listing, creator_id):
    dialect = db.session.get_bind().dialect.name
    conditions = [Identity.status == listing.status if listing.status else Identity.status != "removed"]
    if creator_id is not None:
        conditions.append(Identity.creator_id == creator_id)
    if listing.display_name is not None:
        conditions.append(_substring(dialect, listing.display_name))
    if listing.q is not None:
        conditions.append(_full_text(dialect, _words(listing.q)))
    return conditions


def _substring(dialect, needle):
    """display_name contains `needle`, case ignored: through the trigram index (3 characters or more)."""
    if dialect == "sqlite" and len(needle) >= 3:
        # The trigram tokenizer folds case as unicode61 does; a quoted string is a run of trigrams.
        phrase = '"' + needle.replace('"', '""') + '"'
        return text(
            "identities.rowid IN (SELECT rowid FROM identity_search_names WHERE identity_search_names MATCH :needle)"
        ).bindparams(needle=phrase)
    pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    if dialect == "sqlite":
        # Shorter than a trigram: a scan, in which SQLite's LIKE ignores the case of ASCII letters.
        return Identity.display_name.like(pattern, escape="\\")
    return Identity.display_name.ilike(pattern, escape="\\")  # pg_trgm's GIN index serves ILIKE


def _full_text(dialect, words, column=None):
    """Every word is the start of a word of display_name or description (or of `column` alone)."""
    if dialect == "sqlite":
        expression = " ".join('"' + word + '"*' for word in words)
        if column is not None:
            expression = f"{column} : ({expression})"
        if column is None:
            return _MATCH_WORDS.bindparams(words=expression)
        return _MATCH_NAME_WORDS.bindparams(name_words=expression)
    query = func.identity_search_query(" & ".join(f"'{word}':*" for word in words))
    description = None if column is not None else Identity.description
    return func.identity_search_vector(Identity.display_name, description).op("@@")(query)


# One bound name per fragment: a statement may hold both (the filter, and the relevance of a name match).
_MATCH_WORDS = text(
    "identities.rowid IN (SELECT rowid FROM identity_search_words WHERE identity_search_words MATCH :words)"
)
_MATCH_NAME_WORDS = text(
    "identities.rowid IN (SELECT rowid FROM identity_search_words WHERE identity_search_words MATCH :name_words)"
)


def _order(listing):
    """[(expression, descending)]: the sort key(s), then the id as unique tie-breaker."""
    descending = listing.direction == "desc"
    if listing.sort == RELEVANCE:
        # Best match first: identities whose display_name alone holds every word, then the rest; within
        # each, newest first. A property of each identity alone (unlike bm25, which moves with the
        # corpus), so that a cursor's position stays valid while identities are created.
        dialect = db.session.get_bind().dialect.name
        in_name = _full_text(dialect, _words(listing.q), column="display_name")
        tier = case((in_name, 0), else_=1)
        return [(tier, False), (Identity.created_at, descending), (Identity.id, descending)]
    return [(_SORT_COLUMNS[listing.sort], descending), (Identity.id, descending)]


def _bounds(listing):
    """The sort key values of the last item of the previous page, as SQL expressions."""
    if listing.sort == "display_name":
        name = select(Identity.display_name).where(Identity.id == listing.after[1]).scalar_subquery()
        return [name, literal(listing.after[1], Identity.id.type)]
    return [literal(value, expression.type) for (expression, _), value in zip(_order(listing), listing.after, strict=True)]


def _after(order, bound):
    """Rows strictly after `bound` (expressions of the sort keys) in `order`: a keyset condition."""
    directions = {descending for _, descending in order}
    if len(directions) == 1:
        # One direction: a row-value comparison, which both databases answer from the sort index.
        columns = tuple_(*(expression for expression, _ in order))
        return columns < tuple_(*bound) if directions == {True} else columns > tuple_(*bound)
    alternatives = []
    for index, (expression, descending) in enumerate(order):
        equal = [order[i][0] == bound[i] for i in range(index)]
        beyond = expression < bound[index] if descending else expression > bound[index]
        alternatives.append(and_(*equal, beyond))
    return or_(*alternatives)


def _total(listing, creator_id, conditions):
    """The exact number of identities matching: kept counts, or a count through the search indexes."""
    if listing.display_name is None and listing.q is None:
        status = IdentityCount.status == listing.status if listing.status else IdentityCount.status != "removed"
        query = select(func.coalesce(func.sum(IdentityCount.n), 0)).where(
            IdentityCount.scope == (creator_id or ""), status
        )
        return int(db.session.execute(query).scalar())
    return db.session.execute(select(func.count()).select_from(Identity).where(*conditions)).scalar()


# --- cursors ---------------------------------------------------------------------------------------

def _serializer():
    """Signs cursors with the secret that migration 0002 stored once for every worker and node."""
    cache = current_app.extensions.setdefault("identity.browse", {})
    if "serializer" not in cache:
        cache["serializer"] = URLSafeSerializer(cursor_secret(), salt=CURSOR_SALT)
    return cache["serializer"]


def cursor_secret():
    """The secret that signs cursors, shared by every worker and node through the database."""
    query = select(ServiceSecret.value).where(ServiceSecret.name == "cursor")
    value = db.session.execute(query).scalar()
    db.session.commit()
    if value is None:
        # The migration made one; should the row have gone, the first node to notice makes another.
        try:
            with write_transaction() as session:
                if session.execute(query).scalar() is None:
                    session.add(ServiceSecret(name="cursor", value=secrets.token_urlsafe(48)))
        except IntegrityError:
            pass  # another node stored it first
        value = db.session.execute(query).scalar()
        db.session.commit()
    return value


def _encode(listing):
    state = asdict(listing)
    if listing.sort in _TIMESTAMP_KEYS or listing.sort == RELEVANCE:
        position = 0 if listing.sort in _TIMESTAMP_KEYS else 1
        after = list(listing.after)
        after[position] = after[position].isoformat()
        state["after"] = after
    return _serializer().dumps([state[field] for field in _CURSOR_FIELDS])


_CURSOR_FIELDS = ("sort", "direction", "creator", "status", "display_name", "q", "limit", "page", "after")


def _decode(token):
    try:
        state = dict(zip(_CURSOR_FIELDS, _serializer().loads(token), strict=True))
        after = list(state["after"])
        if state["sort"] in _TIMESTAMP_KEYS:
            after[0] = datetime.fromisoformat(after[0])
        elif state["sort"] == RELEVANCE:
            after[1] = datetime.fromisoformat(after[1])
        listing = Listing(**{**state, "after": tuple(after)})
    except (BadSignature, TypeError, ValueError, KeyError, IndexError):
        raise InvalidParameters({"cursor": ["Not a cursor this service issued; use the next of a page."]}) from None
    return listing
