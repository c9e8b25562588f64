"""The Python API: issue keys and create identities from code, as the HTTP API would.

For projects that run the service inside their own tests (see identity.pytest_plugin) and for
scripts that fill a database. Identities go through the route's own code: the shared
identity_create_schema validates, identities.create_identity addresses and stores, identity_schema
shapes the result. Every function takes the app and works inside or outside its app context.
"""

import secrets
from contextlib import contextmanager

from eth_utils import to_checksum_address
from flask import current_app, has_app_context
from marshmallow import ValidationError

from .core import curation, identities, keys
from .core.errors import IdentityExists, IdentityNotFound, InvalidFields
from .schemas import identity_create_schema, identity_patch_schema, identity_schema

__all__ = [
    "IdentityExists", "IdentityNotFound", "InvalidFields", "create_identity", "issue_key", "new_wallet", "set_status",
]

# Who the history names for a change made through this API without `by`.
SEED_WALLET = "seed"


def new_wallet():
    """A random Ethereum address in EIP-55 form, for a user whose wallet does not matter."""
    return to_checksum_address(secrets.token_bytes(20))


def issue_key(app, wallet=None, role="User"):
    """Issue an API key on `app` and return it, the plaintext that goes in the x-api-key header.

    `wallet` defaults to a new random one. A role belongs to the wallet's user, not to one key:
    for a wallet that has keys already, `role` becomes the role of all of them, as
    `flask keys create --role` does. Raises ValueError for a malformed wallet or an unknown role.
    """
    with _app_context(app):
        key, _ = keys.issue_key(wallet or new_wallet(), role)
    return key


def create_identity(app, display_name, *, description=None, image=None, external_reference=None, creator=None):
    """Create an identity on `app` and return it as POST /identity does: a JSON-ready dict.

    Validation, content addressing and storage are the route's own, so the same content gets the
    same identity_id either way. None means a field is absent, as JSON null does.

    The call has an Admin key's authority without needing a key: `creator` may be any wallet (one
    the service has not seen becomes a User with no key), and defaults to a new random wallet.

    Raises InvalidFields where the route answers 422 (`.errors` maps each field to the same
    messages), and IdentityExists where it answers 409 (`.identity_id` names the existing one).
    """
    body = {
        "display_name": display_name,
        "description": description,
        "image": image,
        "external_reference": external_reference,
        "creator": creator,
    }
    try:
        fields = identity_create_schema.load(body)
    except ValidationError as error:
        raise InvalidFields(error.messages) from None
    caller = keys.Caller(user_id=None, key_id=None, wallet=fields["creator"] or new_wallet(), role="Admin")
    with _app_context(app):
        return identity_schema.dump(identities.create_identity(fields, caller))


def set_status(app, identity_id, status, *, by=None):
    """Set an identity's status on `app`, as PATCH by an Admin key does; returns the identity as a dict.

    `status` is one of pending, complete, removed, error; a removed identity answers 410 Gone until
    another status is set. The change is recorded in its history, acted by wallet `by` (default the
    word "seed"). Raises InvalidFields for an unknown status, IdentityNotFound for an unknown id.
    """
    try:
        changes = identity_patch_schema.load({"status": status})
    except ValidationError as error:
        raise InvalidFields(error.messages) from None
    with _app_context(app):
        identity = curation.update_identity(identity_id, changes, by or SEED_WALLET)
        return identity_schema.dump(identity)


@contextmanager
def _app_context(app):
    # Inside app's own context, reuse it: a second context would get a second database session,
    # which waits for the write lock that an open transaction of the first one may hold.
    if has_app_context() and current_app._get_current_object() is app:
        yield
    else:
        with app.app_context():
            yield
