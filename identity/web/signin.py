"""Sign-in with Ethereum (EIP-4361): a nonce, then a wallet's signed message for a key of its own. No key is
needed; each route has a budget per client address (web.budgets). Both are 404 until IDENTITY_SIWE_DOMAIN is set.
"""

from ..core import signin
from ..schemas import SignedInSchema, SigninNonceSchema, signin_schema
from . import blp, budgets
from .answers import BODY, answers
from .auth import access
from .keys import ISSUED_EXAMPLE, ME_EXAMPLE
from .openapi import SIGNIN_WALLET as _WALLET

NONCE_EXAMPLE = {
    "nonce": "3xGq0Rk7ZtP2aW8mYc5dLb9fN4hJ6sV1eT0uQ7iK3oA2pX", "expires_at": "2026-11-21T09:40:00Z",
    "domain": "identity.example.com", "uri": "https://identity.example.com",
}
# A message of that nonce, and its wallet's personal_sign signature (the signature recovers to _WALLET).
SIGNIN_EXAMPLE = {
    "message": "\n".join([
        f"identity.example.com wants you to sign in with your Ethereum account:\n{_WALLET}\n",
        "Sign in to the Identity service.\n", "URI: https://identity.example.com", "Version: 1", "Chain ID: 1",
        "Nonce: 3xGq0Rk7ZtP2aW8mYc5dLb9fN4hJ6sV1eT0uQ7iK3oA2pX", "Issued At: 2026-11-21T09:30:00Z",
    ]),
    "signature": "0xeb7316b906af9741b0035b8f0b120c784bc6fa5c4f7624cba74661d44b4fad7014cfc198a018e0669e9e302aea313a9fa9"
    "b8d841f49ea4ae21564f2d4796197d1b",
}
SIGNED_IN_EXAMPLE = {
    **ISSUED_EXAMPLE, "wallet": _WALLET, "scope": "write", "label": signin.DEFAULT_LABEL, "created_by": signin.SIWE,
    "expires_at": "2026-11-28T09:30:00.123456Z", "user": {**ME_EXAMPLE["user"], "wallet": _WALLET},
}
NO_STORE = {"Cache-Control": {"schema": {"type": "string", "enum": ["no-store"]}, "description": "no-store"}}
@blp.route("/auth/nonce", endpoint="get_signin_nonce")
@access(budgets.nonces, when=signin.check_on)
@blp.doc(operationId="getSigninNonce", security=[],
         responses=answers("SigninOff", "SigninRateLimited", "Unavailable"))
@blp.response(200, SigninNonceSchema, example=NONCE_EXAMPLE, headers=NO_STORE)
def get_signin_nonce():
    """A nonce for a sign-in with Ethereum, with the domain and URI its message names.

    Single use, valid on every node of the service until expires_at; issuing it stores nothing. No API key needed.
    """
    return signin.issue_nonce(), 200, {"Cache-Control": "no-store"}


@blp.route("/auth/siwe", methods=["POST"], endpoint="sign_in_with_ethereum")
@access(budgets.signins, when=signin.check_on)
@blp.doc(operationId="signInWithEthereum", security=[], responses=answers(
    BODY, "SigninRefused", "BeyondGrant", "SigninOff", "NotASigninMessage", "SigninRateLimited", "ChainUnavailable"))
@blp.arguments(signin_schema, example=SIGNIN_EXAMPLE)
@blp.response(201, SignedInSchema, example=SIGNED_IN_EXAMPLE, headers=NO_STORE,
              description="A key for the message's wallet, shown this once, and its user (a new wallet becomes a User).")
def sign_in_with_ethereum(fields):
    """Sign in with Ethereum (EIP-4361): a wallet's personal_sign signature of a message naming a nonce, for a
    key of that wallet's user, issued by `siwe`.

    The key's scope is the body's, or the wallet's grant when the body names none: a wallet granted read only
    (GET /users/{wallet}) gets a read key, and asking for write is 403.

    The key expires at the message's Expiration Time, and no later than IDENTITY_SIWE_KEY_SECONDS (7 days)
    from now. No API key needed.
    """
    signed_in = signin.sign_in(fields["message"], fields["signature"], fields.get("scope"), fields.get("label"))
    return signed_in, 201, {"Cache-Control": "no-store"}
