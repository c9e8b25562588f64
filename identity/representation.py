"""GET /identity/<identity_id>: the identity's JSON body and ETag, made once for each state of its row.

A GET dumps 28 fields with the Identity schema, encodes the JSON and hashes the body for its ETag:
the same work, with the same result, every time an identity that has not changed is read. The body
is a function of the row alone (the identity's columns and its creator's; the same for every
caller), so it is made once for each distinct row and kept, with its ETag, in a cache of
CACHED_BODIES entries per process, least recently used out first, keyed by the row's values as the
driver gives them (service.get_identity_row). A write to the identity (updated_at moves) or to its
creator (last_login) gives another key, and the old entry ages out: nothing in the cache can be
served stale, since its key is what the request has just read.
"""

from functools import lru_cache

from flask import current_app

from .errors import IdentityNotFound, IdentityRemoved
from .headers import body_etag
from .schemas import identity_schema
from .service import IDENTITIES, get_identity_row, get_identity_rows, identity_record

# About 2 KiB each with its key: some 8 MB at most per process.
CACHED_BODIES = 4096
_IDENTITY_ID, _STATUS = (IDENTITIES.c.keys().index(name) for name in ("identity_id", "status"))


def identity_response(identity_id):
    """The answer to GET /identity/<identity_id>: the Identity with its strong ETag; IdentityNotFound
    or IdentityRemoved (404, 410) raised."""
    row = get_identity_row(identity_id)
    _refuse_missing_or_removed(identity_id, row)
    json = current_app.json
    try:
        body, etag, mimetype = _encoded(row, json)
    except _Changed as changed:  # written between this request's two reads: the later one answers
        _refuse_missing_or_removed(identity_id, changed.rows and changed.rows[0])
        body, etag, mimetype = _encode(changed.rows[1], json)
    response = current_app.response_class(body, mimetype=mimetype)
    response.set_etag(etag)
    return response


def _refuse_missing_or_removed(identity_id, row):
    if row is None:
        raise IdentityNotFound()
    if row[_STATUS] == "removed":
        raise IdentityRemoved(identity_id)


class _Changed(Exception):
    """The row read again (to make its body) is not the row the request read first."""

    def __init__(self, rows):
        super().__init__()
        self.rows = rows


@lru_cache(maxsize=CACHED_BODIES)
def _encoded(row, json):
    """(body, ETag, media type) of the identity whose row is `row`; read again in the models' types,
    from the same statement as a row to compare with `row` (an exception is not cached)."""
    rows = get_identity_rows(row[_IDENTITY_ID])
    if rows is None or rows[0] != row:
        raise _Changed(rows)
    return _encode(rows[1], json)


def _encode(typed_row, json):
    # As flask-smorest's response decorator makes it: the schema's dump, then jsonify's encoding.
    response = json.response(identity_schema.dump(identity_record(typed_row)))
    body = response.get_data()
    return body, body_etag(body), response.mimetype
