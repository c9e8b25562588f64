"""An export line in its common form, loaded without marshmallow's per-field machinery.

`identities import` validates every line as schemas.IdentityImportSchema does. Nearly every line of a
real export is in one plain form: the keys export writes, ids and numbers as export writes them, text that is
printable ASCII with no white space at its ends (so normalization leaves it as it is). For such a
line, load_common gives exactly what the schema's load gives, running the schema's own validators
for the text and URLs, at a fraction of the cost. Anything else (another form, an odd value, an
error) gives None, and the caller loads the line with the schema, which accepts or refuses it with
its usual message. Every check here is at least as strict as the schema's.
"""

import re
from datetime import datetime

from marshmallow import ValidationError

from ..core.wallets import checksum_wallet
from ..schemas import STATUSES, identity_import_schema
from ..schemas.fields import MAX_SAFE_INTEGER

_KEYS = frozenset(identity_import_schema.fields)
_KEYS_WITHOUT_CHAIN = _KEYS - {"creator_signature_chain_id"}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_IDENTITY_ID = re.compile(r"did:[a-z0-9]+:ipfs:bafkrei[a-z2-7]{52}")
_IDENTITY_HASH = re.compile(r"0x[0-9a-f]{64}")
# 77 digits or fewer is always below 2**256 (78 digits): the schema's range check cannot fail.
_UINT256 = re.compile(r"0|[1-9][0-9]{0,76}")
# A signature in the form export writes it (identity.core.signatures.canonical_signature), or null.
_SIGNATURE = re.compile(r"0x[0-9a-f]{128}(1b|1c)")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
# Printable ASCII, not starting or ending with a space: NFC and trimming leave it unchanged.
_PLAIN_TEXT = re.compile(r"[!-~](?:[ -~]*[!-~])?")
_UINT256_KEYS = ("vault_id", "assets_sum", "conviction_sum", "conviction_price", "user_conviction", "user_conviction_value")
_TEXT_KEYS = ("display_name", "description", "image", "external_reference")
_STATUSES = frozenset(STATUSES)


class _Uncommon(Exception):
    """The line is not in the common form: the schema decides."""


def _text(name, value):
    field = identity_import_schema.fields[name]
    if value is None:
        if not field.allow_none:
            raise _Uncommon
        return None
    if type(value) is not str or len(value) > field.raw_max_length or not _PLAIN_TEXT.fullmatch(value):
        raise _Uncommon
    for validator in field.validators:
        validator(value)
    return value


def _match(pattern, value):
    if type(value) is not str or not pattern.fullmatch(value):
        raise _Uncommon
    return value


def load_common(data):
    """What identity_import_schema.load(data) returns, for a line (a dict) in the common form; else None."""
    # An export made before creator_signature_chain_id lacks it: its lines are unsigned or ordinary wallets'.
    if data.keys() != _KEYS and data.keys() != _KEYS_WITHOUT_CHAIN:
        return None
    try:
        fields = {name: _text(name, data[name]) for name in _TEXT_KEYS}
        fields["id"] = _match(_UUID, data["id"])  # lower-case hex: its str() as a UUID is itself
        fields["identity_id"] = _match(_IDENTITY_ID, data["identity_id"])
        fields["identity_hash"] = _match(_IDENTITY_HASH, data["identity_hash"])
        fields["creator"] = checksum_wallet(data["creator"])
        for name in _UINT256_KEYS:
            fields[name] = int(_match(_UINT256, data[name]))
        for name in ("created_at", "updated_at"):
            fields[name] = datetime.fromisoformat(_match(_TIMESTAMP, data[name]))
        signature = data["creator_signature"]
        fields["creator_signature"] = None if signature is None else _match(_SIGNATURE, signature)
        # A contract wallet's signature (on a chain) is for the schema, and its chain's endpoint.
        if data.get("creator_signature_chain_id") is not None:
            raise _Uncommon
        fields["creator_signature_chain_id"] = None
        for name in ("corpora_id", "semantic"):
            if data[name] is not None:
                raise _Uncommon
            fields[name] = None
        positions, status, is_user = data["num_positions"], data["status"], data["isUser"]
        if type(positions) is not int or not 0 <= positions <= MAX_SAFE_INTEGER or status not in _STATUSES:
            raise _Uncommon
        if type(is_user) is not bool:
            raise _Uncommon
    except (_Uncommon, ValidationError, ValueError, TypeError):
        return None
    fields.update(num_positions=positions, status=status, is_user=is_user)
    return fields
