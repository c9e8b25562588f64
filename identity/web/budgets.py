"""Rate limits per API key: one budget for reads, one for writes (IDENTITY_RATELIMIT_CREATE: every POST, PATCH
and DELETE of identities, previews, keys, webhooks and mirrors), counted by the `limits` library; and per
client address, the budgets of the two sign-in routes, which take no key.

A view names its budget with auth.access, which spends it after the key is checked: a request with a
missing, unknown or revoked key is refused with 401 before it can touch any budget, and the budget is
named by the key's id, never by the key itself. A valid key refused on an Admin route (403) spends its
budget all the same (spend_on_refusal), before its refusal is logged.

A client's address is the peer's, unless the peer is a proxy trusted by FORWARDED_ALLOW_IPS (the nginx
recipe's, on the same host by default): then it is the address that proxy saw, the last one it added
to X-Forwarded-For (the ones before it are the client's own say); a proxy on the service's Unix socket is
trusted as gunicorn trusts it. An IPv6 client counts by its /64,
which one host commonly holds whole.

`limits` does the counting (fixed windows, in memory or in a shared storage such as Redis); this
module is the Flask side of it, and only what the service needs: two budgets named by key id, two
named by client address, headers on every limited response, a 429 as problem details, and counting on in memory while a
shared storage does not answer.

In memory means, under gunicorn.conf.py, in a file that every worker of the server maps
(identity.web.shared_counts; identity.server hands it over with share_counts), so that the workers
share one count; elsewhere (`flask run`, the test client, an app that embeds the service), in the process.
"""

import ipaddress
import logging
import math
import threading
import time
from functools import wraps

from flask import current_app, request
from limits import parse_many
from limits.errors import StorageError
from limits.storage import Storage, storage_from_string
from limits.strategies import FixedWindowRateLimiter
from werkzeug.exceptions import TooManyRequests

from ..core.errors import TooManyStreams
from .shared_counts import SharedWindowCounts

log = logging.getLogger(__name__)

KEY_PREFIX = "identity"
# While the shared storage fails, counts are kept in memory; it is tried again after this many
# seconds, doubled after each further failure up to the last figure.
RETRY_SHARED_SECONDS = (1, 60)


class WindowCounts(Storage):
    """Fixed-window counts in this process's memory: limits' documented custom storage interface.

    limits' own MemoryStorage starts a timer thread every 10 ms under load to expire counts: a thread
    created and started (and waited for) inside a request, every hundredth GET or so, and a wake-up
    that competes with requests for the GIL, or for gevent's loop. Here a count expires when it is
    next read, and the whole table is swept at most once a second, so it holds only live windows.
    """

    STORAGE_SCHEME = ["identity-memory"]
    SWEEP_SECONDS = 1.0

    def __init__(self, uri=None, wrap_exceptions=False, **options):
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self.storage = {}  # key -> [count, expiry (Unix time)], named as in limits' MemoryStorage
        self.lock = threading.Lock()
        self.next_sweep = 0.0

    @property
    def base_exceptions(self):
        return ValueError

    def incr(self, key, expiry, amount=1):
        now = time.time()
        with self.lock:
            if now >= self.next_sweep:
                self.storage = {name: entry for name, entry in self.storage.items() if entry[1] > now}
                self.next_sweep = now + self.SWEEP_SECONDS
            entry = self.storage.get(key)
            if entry is None or entry[1] <= now:
                entry = self.storage[key] = [0, now + expiry]
            entry[0] += amount
            return entry[0]

    def get(self, key):
        entry = self.storage.get(key)
        return entry[0] if entry is not None and entry[1] > time.time() else 0

    def get_expiry(self, key):
        entry = self.storage.get(key)
        return entry[1] if entry is not None else time.time()

    def check(self):
        return True

    def reset(self):
        with self.lock:
            cleared = len(self.storage)
            self.storage = {}
        return cleared

    def clear(self, key):
        with self.lock:
            self.storage.pop(key, None)


class Window:
    """What a request learnt of its budget: allowed or not, and the limit its headers describe."""

    __slots__ = ("allowed", "limit", "remaining", "reset")

    def __init__(self, allowed, limit, remaining, reset):
        self.allowed = allowed
        self.limit = limit
        self.remaining = remaining
        self.reset = reset  # Unix time at which the window ends

    def add_headers(self, headers):
        """The window in `headers` (Werkzeug's); Retry-After only when the request was refused.

        (On any other response it would ask a client to wait for nothing: RFC 9110 gives it meaning
        with 429, 503 and redirects.)
        """
        headers.add("X-RateLimit-Limit", str(self.limit))
        headers.add("X-RateLimit-Remaining", str(self.remaining))
        headers.add("X-RateLimit-Reset", str(math.ceil(self.reset)))
        if not self.allowed:
            headers.add("Retry-After", str(max(1, math.ceil(self.reset - time.time()))))


class RateLimits:
    """One app's budgets, and where their counts are kept."""

    def __init__(self, config):
        # Each budget is one or more rates ("10/second;120/minute"), smallest window first.
        self.budgets = {
            "read": sorted(parse_many(config["IDENTITY_RATELIMIT_READ"])),
            "create": sorted(parse_many(config["IDENTITY_RATELIMIT_CREATE"])),
            "nonce": sorted(parse_many(config["IDENTITY_RATELIMIT_SIGNIN"])),
            "signin": sorted(parse_many(config["IDENTITY_RATELIMIT_SIGNIN"])),
        }
        self.local = FixedWindowRateLimiter(WindowCounts())
        uri = config["IDENTITY_RATELIMIT_STORAGE"]
        self.shared = (
            None if uri.startswith("memory://")
            else FixedWindowRateLimiter(storage_from_string(uri, wrap_exceptions=True))
        )
        self._shared_failures = 0
        self._retry_shared_at = 0.0

    def spend(self, budget, key_id):
        """Count one request of `key_id` against `budget` ("read" or "create")."""
        if self.shared is not None and time.monotonic() >= self._retry_shared_at:
            try:
                window = self._spend(self.shared, budget, key_id)
            except StorageError as error:
                self.shared_failed(error)
            else:
                if self._shared_failures:
                    log.warning("rate limit storage answers again; counting there")
                    self._shared_failures = 0
                return window
        # The in-memory storage, or its stand-in while the shared one does not answer: a degraded
        # limit beats refusing every request. (Under gunicorn.conf.py, shared by the server's workers.)
        return self._spend(self.local, budget, key_id)

    def _spend(self, limiter, budget, key_id):
        windows = self.budgets[budget]
        for item in windows:
            if not limiter.hit(item, KEY_PREFIX, key_id, budget):
                stats = limiter.get_window_stats(item, KEY_PREFIX, key_id, budget)
                return Window(False, item.amount, 0, stats.reset_time)
        # Within every limit, the headers describe the one of the smallest window.
        stats = limiter.get_window_stats(windows[0], KEY_PREFIX, key_id, budget)
        return Window(True, windows[0].amount, stats.remaining, stats.reset_time)

    def counts(self):
        """The storage that counts now: the shared one unless it has failed lately, else the local one."""
        if self.shared is not None and time.monotonic() >= self._retry_shared_at:
            return self.shared.storage
        return self.local.storage

    def shared_failed(self, error):
        delay = min(RETRY_SHARED_SECONDS[0] * 2**self._shared_failures, RETRY_SHARED_SECONDS[1])
        self._shared_failures += 1
        self._retry_shared_at = time.monotonic() + delay
        log.warning("rate limit storage unreachable (%s); counting in memory for %d s",
                    type(error.storage_error).__name__, delay)


class OpenStreams:
    """Each key's open streams and long polls of GET /changes, counted across the processes of a server (and
    across nodes when the rate limits' storage is shared) in the rate limits' own storage, against
    IDENTITY_MAX_STREAMS_PER_KEY.

    A storage of counts knows no "open": counts live in windows of WINDOW seconds, and each process keeps
    what it holds added to the current window and to the next one (as it opens them, and for those it still
    holds at each look, every RECOUNT seconds while any is held: a thread, a greenlet under gevent). So when
    a window begins, every process's streams are in it already, and a key's count is its current window's.
    Opening adds first and takes itself off again when that is over the cap: of two processes opening at
    once, the one that counts past the cap refuses. A process that closes a stream takes it off at once; a
    process that dies without closing them stops adding them, and their places free themselves within two
    windows (5 seconds).
    """

    WINDOW = 2.5
    RECOUNT = 0.5

    def __init__(self, rate_limits):
        self.rate_limits = rate_limits
        self.lock = threading.Lock()
        self.held = {}  # key id -> streams this process holds open
        self.counted = {}  # window -> {key id: streams this process added to it}
        self.recounting = None

    def hold(self, key_id, cap):
        """Count one more stream of `key_id`; TooManyStreams when it would be over `cap`. Returns its release."""
        with self.lock:
            try:
                storage, window, count = self._open(key_id)
            except StorageError as error:  # the shared storage failed: counted in memory meanwhile, as budgets are
                self.rate_limits.shared_failed(error)
                self.counted.clear()
                storage, window, count = self._open(key_id)
            if count > cap:
                self._add(storage, key_id, window, -1)
                raise TooManyStreams(cap)
            self._add(storage, key_id, window + 1, 1)
            self.held[key_id] = self.held.get(key_id, 0) + 1
            for counted in (self.counted[window], self.counted[window + 1]):
                counted[key_id] = counted.get(key_id, 0) + 1
            if self.recounting is None or not self.recounting.is_alive():
                self.recounting = threading.Thread(target=self._recount_while_held, name="identity-streams", daemon=True)
                self.recounting.start()
        released = []

        def release():
            if released:
                return
            released.append(True)
            with self.lock:
                self.held[key_id] -= 1
                if not self.held[key_id]:
                    del self.held[key_id]
                for window, keys in self.counted.items():
                    if keys.get(key_id):
                        keys[key_id] -= 1
                        try:
                            self._add(self.rate_limits.counts(), key_id, window, -1)
                        except (StorageError, OSError, ValueError) as error:  # freed within two windows anyway
                            log.warning("a closed stream was not taken off its count (%s); it frees itself within "
                                        "%g s", type(error).__name__, 2 * self.WINDOW)

        return release

    def _open(self, key_id):
        """(storage, the current window, `key_id`'s count in it with one more stream added)."""
        storage = self.rate_limits.counts()
        window = self._recount(storage)
        return storage, window, self._add(storage, key_id, window, 1)

    def _add(self, storage, key_id, window, amount):
        return storage.incr(f"{KEY_PREFIX}/streams/{key_id}/{window}", int(3 * self.WINDOW) + 1, amount)

    def _recount(self, storage):
        """The current window, this process's streams added to it and to the next where they are not yet (with
        the lock held); earlier windows are forgotten, as no count reads them."""
        window = int(time.time() // self.WINDOW)
        for upcoming in (window, window + 1):
            if upcoming not in self.counted:
                for key_id, held in self.held.items():
                    self._add(storage, key_id, upcoming, held)
                self.counted[upcoming] = dict(self.held)
        self.counted = {seen: keys for seen, keys in self.counted.items() if seen >= window}
        return window

    def _recount_while_held(self):
        while True:
            time.sleep(self.RECOUNT)
            with self.lock:
                if not self.held:
                    self.recounting = None
                    return
                try:
                    self._recount(self.rate_limits.counts())
                except (StorageError, OSError, ValueError) as error:
                    self.counted.clear()  # added again at the next look
                    log.warning("open streams not recounted (%s); trying again", type(error).__name__)


def share_counts(app, path):
    """Count in memory in the file at `path`, which every worker of the server maps (identity.server makes
    it before they fork), rather than in this process alone."""
    rate_limits(app).local = FixedWindowRateLimiter(SharedWindowCounts(path))


def rate_limits(app):
    return app.extensions["identity_rate_limits"]


def caller_key_id():
    """The id of the request's key, which web.auth has checked (hooks.Request.caller)."""
    return request.caller.key_id


def client_address():
    """The address of the client, as the module's docstring says: a budget's name for the routes without a key
    (an IPv6 client's /64, which one subscriber holds)."""
    address = _client()
    is_v6 = isinstance(address, ipaddress.IPv6Address)
    return str(ipaddress.ip_network(f"{address}/64", strict=False) if is_v6 else address)


def client_ip():
    """The client's own address, as the audit log keeps it (not the budget's /64)."""
    return str(_client())


def _client():
    """The peer's address, or the last X-Forwarded-For hop when the peer is a trusted proxy; an IPv4 client of a
    dual-stack socket (::ffff:a.b.c.d) as IPv4; the peer's text (at most 64 characters) when it is not an IP
    address (a Unix socket's peer)."""
    peer = request.remote_addr or ""
    forwarded = request.headers.get("X-Forwarded-For")
    if forwarded and _trusted(peer):
        peer = forwarded.rpartition(",")[2].strip()
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return peer[:64]
    if address.version == 6 and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(peer):
    proxies = current_app.extensions["identity_trusted_proxies"]
    if proxies is None:  # FORWARDED_ALLOW_IPS=*
        return True
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return True  # a Unix socket's peer, which only the host's own processes can be: trusted, as gunicorn does
    return any(address in network for network in proxies if network.version == address.version)


class Budget:
    """One budget: its setting, its counters' name, and whose it is (`who()`: the key's id, or the client's
    address). A route spends it through auth.access (the API's views) or as a decorator (the console's page);
    every route that spends it shares it, so the singular and plural paths spend one budget."""

    def __init__(self, setting, name, what, who=caller_key_id, by="with this API key", named=""):
        self.setting, self.name, self.who = setting, name, who
        self.per_key = who is caller_key_id
        self.refusal = f"Too many {what} {by}{named}: the limit is {{}}. Retry after the number of seconds in Retry-After."

    def spend(self):
        """Count this request against the budget; TooManyRequests when it is spent."""
        window = rate_limits(current_app).spend(self.name, self.who())
        # Every response to this request carries the headers, errors included (hooks.finish_response).
        request.rate_limit_window = window
        if not window.allowed:
            raise TooManyRequests(self.refusal.format(current_app.config[self.setting]))

    def __call__(self, view):
        """`view`, called once this request has spent the budget."""

        @wraps(view)
        def limited(*args, **kwargs):
            self.spend()
            return view(*args, **kwargs)

        return limited


reads = Budget("IDENTITY_RATELIMIT_READ", "read", "reads")
# The write budget: creates, previews and changes of identities, keys, webhooks and mirrors. Its counters and
# its variable keep the name "create", which deployments set.
creates = Budget("IDENTITY_RATELIMIT_CREATE", "create", "writes", named=" (the write budget, IDENTITY_RATELIMIT_CREATE)")
nonces = Budget("IDENTITY_RATELIMIT_SIGNIN", "nonce", "sign-in nonces", client_address, "from this address")
signins = Budget("IDENTITY_RATELIMIT_SIGNIN", "signin", "sign-ins", client_address, "from this address")


def spend_on_refusal():
    """Spend the caller's budget for a request refused on an Admin route for its key's role (web.auth), as the
    route would have: reads for GET, HEAD and OPTIONS, else writes. Past the budget it raises TooManyRequests."""
    (reads if request.method in ("GET", "HEAD", "OPTIONS") else creates).spend()


def open_streams(app):
    return app.extensions["identity_open_streams"]


def init_app(app):
    proxies = app.config["FORWARDED_ALLOW_IPS"].strip()
    app.extensions["identity_trusted_proxies"] = None if proxies == "*" else tuple(
        ipaddress.ip_network(item.strip(), strict=False) for item in proxies.split(",")
    )
    app.extensions["identity_rate_limits"] = counted = RateLimits(app.config)
    app.extensions["identity_open_streams"] = OpenStreams(counted)
