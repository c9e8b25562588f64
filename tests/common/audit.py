"""What the audit log's tests share: the entries as the log holds them, and a search of their JSON."""

import json

from identity.core import audit_log
from identity.storage.database import db

SECRET_WORDS = ("idsk_",)


def entries(app, action=None):
    """Every entry, oldest first, as GET /audit shows them (a mapping each); only `action`'s when given."""
    with app.app_context():
        found = [audit_log.audit.shown(row) for row in audit_log.entries()]
        db.session.remove()
    return [entry for entry in found if action is None or entry["action"] == action]


def only(app, action, via=None):
    """The one entry of `action` (made `via` api, console, cli or service, when given)."""
    found = [entry for entry in entries(app, action) if via is None or entry["actor"]["via"] == via]
    assert len(found) == 1, [entry["action"] for entry in entries(app)]
    return found[0]


def assert_no_secret(app, *secrets):
    """None of `secrets` (a key, a webhook secret, an upstream key, a signature) is in any entry's JSON."""
    text = json.dumps(entries(app))
    for secret in secrets:
        assert secret and secret not in text, f"a secret is in the audit log: {secret[:8]}…"


def verified(app, expect=None):
    with app.app_context():
        result = audit_log.verify(expect)
        db.session.remove()
    return result
