"""The service's refusals of its own rules, in the domain's words: raised by the core, answered as problem
details by identity.web.problems (which gives each its HTTP status)."""


class ServiceError(Exception):
    """A refusal of the service's own rules; `detail` says what to do about it."""

    def __init__(self, detail, **extra):
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class Forbidden(ServiceError):
    """The caller may not do this."""


class ReadOnlyKey(Forbidden):
    """A key of scope `read` asked to change something."""

    DETAIL = (
        "This API key is read-only (scope read): it may read, and revoke itself with DELETE /me/key, "
        "but not change anything. Send a key of scope write; an Admin issues one with POST /keys."
    )

    def __init__(self):
        super().__init__(self.DETAIL)


class KeyNotFound(ServiceError):
    DETAIL = "No API key has this id; GET /keys lists them."

    def __init__(self):
        super().__init__(self.DETAIL)


class UserNotFound(ServiceError):
    DETAIL = "No user has this wallet: a wallet becomes a user when it is issued a key or creates an identity."

    def __init__(self):
        super().__init__(self.DETAIL)


class KeyNotLive(ServiceError):
    """Only a live key, not rotated out already, can be rotated."""



class IdentityExists(ServiceError):
    """The content exists already; `identity_id` names the identity that holds it."""

    DETAIL = "An identity with this content already exists."

    def __init__(self, identity_id):
        super().__init__(self.DETAIL, identity_id=identity_id)
        self.identity_id = identity_id


class IdentityNotFound(ServiceError):
    DETAIL = "No Identity exists for the provided id."

    def __init__(self):
        super().__init__(self.DETAIL)


class IdentityRemoved(ServiceError):
    """The identity is in status `removed`: its record stays, but it is not served."""

    DETAIL = "This identity was removed by an administrator."

    def __init__(self, identity_id):
        super().__init__(self.DETAIL, identity_id=identity_id)
        self.identity_id = identity_id


class WebhookNotFound(ServiceError):
    DETAIL = "No webhook exists with this id; GET /webhooks lists them."

    def __init__(self):
        super().__init__(self.DETAIL)


class MirrorNotFound(ServiceError):
    DETAIL = "No mirror has this id; GET /mirrors lists them."

    def __init__(self):
        super().__init__(self.DETAIL)


class MirrorConflict(ServiceError):
    """A mirror of that name or of that upstream is registered already; the detail names it."""


class PreconditionFailed(ServiceError):
    """If-Match named another representation than the current one: nothing was changed."""

    DETAIL = "If-Match does not name the identity's current ETag; nothing was changed. Fetch it again."

    def __init__(self):
        super().__init__(self.DETAIL)


class BeyondFeedEnd(ServiceError):
    """A position in the change feed above every number the feed ever issued: no entry will come after it.
    `feed_end` is that highest number."""

    def __init__(self, position, feed_end, name="after"):
        super().__init__(
            f"{name} {position} is beyond the end of this service's change feed: the highest seq it ever issued is "
            f"{feed_end}, so no entry will come after {position}. The position is from before the service's database "
            f"was restored from an older backup, or from another service. Read the feed again from after=0 and "
            f"rebuild what you hold from it, or follow only new entries from after={feed_end}.",
            feed_end=feed_end,
        )
        self.feed_end = feed_end


class TooManyStreams(ServiceError):
    """The key holds as many streams and long polls of the change feed as IDENTITY_MAX_STREAMS_PER_KEY allows."""


    def __init__(self, cap):
        super().__init__(
            f"This API key holds {cap} open streams and long polls of the change feed already, the most "
            "IDENTITY_MAX_STREAMS_PER_KEY allows. Close one first, or follow the feed with another key."
        )


class InvalidFields(ServiceError):
    """Validation refused the body; `errors` maps each field to its messages, as a 422 body does."""


    def __init__(self, messages):
        errors = flatten_messages(messages)
        named = sorted(field for field in errors if field != "_schema")
        detail = "The body must be a JSON object." if "_schema" in errors else ""
        if named:
            detail = (detail + " Invalid fields: " + ", ".join(named) + ".").strip()
        super().__init__(detail, errors=errors)
        self.errors = errors


class InvalidMessage(InvalidFields):
    """A sign-in message that is not an EIP-4361 message (identity.core.siwe.MessageError): its first wrong line."""

    def __init__(self, line, detail):
        where = f"line {line}: " if line else ""
        super().__init__({"message": [where + detail]})
        self.detail = f"The message is not an EIP-4361 (Sign-In with Ethereum) message: {where}{detail}."


class SigninOff(ServiceError):
    DETAIL = (
        "Sign-in with Ethereum is off on this service: it is turned on by setting IDENTITY_SIWE_DOMAIN to the "
        "host that users sign in to (e.g. identity.example.com). Ask for an API key instead."
    )

    def __init__(self):
        super().__init__(self.DETAIL)


class SigninRefused(ServiceError):
    """A sign-in message that failed one of the contract's checks (`check`: its name); the detail says which."""

    def __init__(self, check, detail):
        super().__init__(detail)
        self.check = check


class BeyondGrant(ServiceError):
    """A sign-in whose checks all passed, asking for more than its wallet is granted (users.grant); the detail says
    what to ask for instead."""


class WalletChainUnavailable(ServiceError):
    """A contract wallet's signature could not be checked: its chain's endpoint (IDENTITY_ETH_RPC_URLS) gave no
    usable answer. Nothing was accepted; the request may be sent again after `retry_after` seconds."""

    RETRY_AFTER = 5

    def __init__(self, detail, chain_id):
        super().__init__(detail, chain_id=chain_id)
        self.retry_after = self.RETRY_AFTER


class InvalidParameters(ServiceError):
    """Query parameters refused: unknown ones, or out-of-range values; `errors` maps each to its messages."""


    def __init__(self, messages):
        errors = flatten_messages(messages)
        detail = "Invalid query parameters: " + ", ".join(sorted(errors)) + "."
        super().__init__(detail, errors=errors)
        self.errors = errors


def flatten_messages(messages):
    """webargs nests messages under the location ({"json": {...}}); clients want field -> list."""
    if not isinstance(messages, dict):
        return {"_schema": [str(messages)]}
    if set(messages) <= {"json", "view_args", "query", "headers"}:
        merged = {}
        for value in messages.values():
            merged.update(flatten_messages(value))
        return merged
    flat = {}
    for field, value in (messages or {}).items():
        if isinstance(value, dict):
            flat[field] = [m for msgs in flatten_messages(value).values() for m in msgs]
        elif isinstance(value, list):
            flat[field] = [str(m) for m in value]
        else:
            flat[field] = [str(value)]
    return flat
