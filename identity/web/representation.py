"""GET /identity/<identity_id>: the identity's JSON body and ETag, made once for each state of its row.

A GET dumps 28 fields with the Identity schema, encodes the JSON and hashes the body for its ETag:
the same work, with the same result, every time an identity that has not changed is read. The body
is a function of the row alone (the identity's columns and its creator's; the same for every
caller), so it is made once for each distinct row and kept, with its ETag, in a cache of
CACHED_BODIES entries per process, least recently used out first, keyed by the row's values as the
driver gives them (service.get_identity_row). A write to the identity (updated_at moves) or to its
creator (last_login) gives another key, and the old entry ages out: nothing in the cache can be
served stale, since its key is what the request has just read. A body not in the cache is made from
that same row, converted to the models' types by SQLAlchemy's own result processors.
"""

from functools import lru_cache

from flask import Response, current_app

from ..core.errors import IdentityNotFound, IdentityRemoved
from ..core.identities import IDENTITIES, get_identity_row, identity_record
from ..schemas import identity_schema
from .headers import body_etag

# About 2 KiB each with its key: some 8 MB at most per process.
CACHED_BODIES = 4096
JSON_MIMETYPE = "application/json"
_STATUS = IDENTITIES.c.keys().index("status")


def identity_response(identity_id):
    """The answer to GET /identity/<identity_id>: the Identity with its strong ETag; IdentityNotFound
    or IdentityRemoved (404, 410) raised."""
    row = get_identity_row(identity_id)
    if row is None:
        raise IdentityNotFound()
    if row[_STATUS] == "removed":
        raise IdentityRemoved(identity_id)
    body, etag, mimetype = _encoded(tuple(row), current_app.json)
    # Flask's Response, the app's response_class, named rather than read through current_app (see wrappers).
    response = Response(body, mimetype=mimetype)
    response.set_etag(etag)
    return response


@lru_cache(maxsize=CACHED_BODIES)
def _encoded(row, json):
    """(body, ETag, media type) of the identity whose row is `row`."""
    # As flask-smorest's response decorator makes it: the schema's dump, then the encoding of the app's
    # JSON provider (jsonify's; its response() sends exactly dumps() as application/json).
    body = json.dumps(identity_schema.dump(identity_record(row))).encode()
    return body, body_etag(body), JSON_MIMETYPE
