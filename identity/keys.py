"""API keys: how they are made and what is stored of them."""

import hashlib
import secrets

# A fixed prefix lets secret scanners find a leaked key; 32 random bytes give 256 bits of entropy.
KEY_PREFIX = "idsk_"


def new_api_key():
    """Return a fresh key (the plaintext, shown once) and the hash that is stored."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, hash_api_key(key)


def hash_api_key(key):
    """The SHA-256 of a key, in hex: the only form the database holds, and the one keys are looked up by."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
