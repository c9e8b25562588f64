"""Rate limits per API key: one budget for reads, one for creates, counted by the `limits` library.

The limits sit under `auth.login_required` on each view, so they are checked after the key is:
a request with a missing, unknown or revoked key is refused with 401 before it can touch any
budget, and the budget is named by the key's id, never by the key itself.

`limits` does the counting (fixed windows, in memory or in a shared storage such as Redis); this
module is the Flask side of it, and only what the service needs: two budgets, named by key id,
headers on every limited response, a 429 as problem details, and counting on in memory while a
shared storage does not answer.

In memory means, under gunicorn.conf.py, in a file that every worker of the server maps
(identity.web.shared_counts; identity.server hands it over with share_counts), so that the workers
share one count; elsewhere (`flask run`, the test client, an app that embeds the service), in the process.
"""

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

from .auth import current_caller
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
        # Each budget is one or more limits ("10/second;120/minute"), smallest window first.
        self.budgets = {
            "read": sorted(parse_many(config["IDENTITY_RATELIMIT_READ"])),
            "create": sorted(parse_many(config["IDENTITY_RATELIMIT_CREATE"])),
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
                self._shared_failed(error)
            else:
                if self._shared_failures:
                    log.warning("rate limit storage answers again; counting there")
                    self._shared_failures = 0
                return window
        # The in-memory storage, or its stand-in while the shared one does not answer: a degraded
        # limit beats refusing every request. (Under gunicorn.conf.py, shared by the server's workers.)
        return self._spend(self.local, budget, key_id)

    def _spend(self, limiter, budget, key_id):
        limits = self.budgets[budget]
        for item in limits:
            if not limiter.hit(item, KEY_PREFIX, key_id, budget):
                stats = limiter.get_window_stats(item, KEY_PREFIX, key_id, budget)
                return Window(False, item.amount, 0, stats.reset_time)
        # Within every limit, the headers describe the one of the smallest window.
        stats = limiter.get_window_stats(limits[0], KEY_PREFIX, key_id, budget)
        return Window(True, limits[0].amount, stats.remaining, stats.reset_time)

    def _shared_failed(self, error):
        delay = min(RETRY_SHARED_SECONDS[0] * 2**self._shared_failures, RETRY_SHARED_SECONDS[1])
        self._shared_failures += 1
        self._retry_shared_at = time.monotonic() + delay
        log.warning("rate limit storage unreachable (%s); counting in memory for %d s",
                    type(error.storage_error).__name__, delay)


def share_counts(app, path):
    """Count in memory in the file at `path`, which every worker of the server maps (identity.server makes
    it before they fork), rather than in this process alone."""
    rate_limits(app).local = FixedWindowRateLimiter(SharedWindowCounts(path))


def rate_limits(app):
    return app.extensions["identity_rate_limits"]


def _budget(setting, budget, what):
    """A decorator that spends `budget`: shared by every route it decorates, so the singular and
    plural paths spend one budget."""

    def decorate(view):
        @wraps(view)
        def limited(*args, **kwargs):
            window = rate_limits(current_app).spend(budget, current_caller().key_id)
            # Every response to this request carries the headers, errors included (finish.py).
            request.rate_limit_window = window
            if not window.allowed:
                raise TooManyRequests(
                    f"Too many {what} with this API key: the limit is {current_app.config[setting]}. "
                    "Retry after the number of seconds in Retry-After."
                )
            return view(*args, **kwargs)

        return limited

    return decorate


reads = _budget("IDENTITY_RATELIMIT_READ", "read", "reads")
creates = _budget("IDENTITY_RATELIMIT_CREATE", "create", "creates")


def init_app(app):
    app.extensions["identity_rate_limits"] = RateLimits(app.config)
