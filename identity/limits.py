"""Rate limits per API key: one budget for reads, one for creates, counted by the `limits` library.

The limits sit under `auth.login_required` on each view, so they are checked after the key is:
a request with a missing, unknown or revoked key is refused with 401 before it can touch any
budget, and the budget is named by the key's id, never by the key itself.

`limits` does the counting (fixed windows, in memory or in a shared storage such as Redis); this
module is the Flask side of it, and only what the service needs: two budgets, named by key id,
headers on every limited response, and a 429 as problem details. (Flask-Limiter did this job first;
its general machinery for per-request limit resolution, exemptions and callbacks was a quarter of a
read's time, see the Performance section of the README.)
"""

import logging
import math
import threading
import time
from functools import wraps

from flask import current_app, g
from limits import parse_many
from limits.errors import StorageError
from limits.storage import MemoryStorage, storage_from_string
from werkzeug.exceptions import TooManyRequests

from .auth import current_caller

log = logging.getLogger(__name__)

KEY_PREFIX = "identity"
# While the shared storage fails, counts are kept in the process; it is tried again after this many
# seconds, doubled after each further failure up to the last figure.
RETRY_SHARED_SECONDS = (1, 60)
# Counter names are kept for this many (budget, key) pairs, then made afresh.
MAX_NAMED_KEYS = 10_000


class SweepingMemoryStorage(MemoryStorage):
    """limits' in-memory storage, freeing expired counters at most once a second.

    The base class starts a new timer thread 10 ms after its last sweep whenever a counter moves:
    under steady load, a hundred thread starts a second, each of which the request that starts it
    waits for. Sweeping only frees memory: a counter whose window has ended is dropped when it is
    next read, so the counts are the same either way.
    """

    SWEEP_SECONDS = 1.0

    def __init__(self, uri=None, **options):
        self._next_sweep = 0.0
        super().__init__(uri, **options)  # which starts a first, 10 ms timer

    # The base class's (name-mangled) hook, called on every change of a counter.
    def _MemoryStorage__schedule_expiry(self):
        now = time.monotonic()
        if now < self._next_sweep or self.timer.is_alive():
            return
        self._next_sweep = now + self.SWEEP_SECONDS
        self.timer = threading.Timer(self.SWEEP_SECONDS, self._MemoryStorage__expire_events)
        self.timer.daemon = True
        self.timer.start()


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
        self.local = SweepingMemoryStorage()
        uri = config["IDENTITY_RATELIMIT_STORAGE"]
        self.shared = None if uri.startswith("memory://") else storage_from_string(uri, wrap_exceptions=True)
        self._shared_failures = 0
        self._retry_shared_at = 0.0
        self._names = {}

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
        # limit beats refusing every request.
        return self._spend(self.local, budget, key_id)

    def _spend(self, storage, budget, key_id):
        # limits' fixed window, as FixedWindowRateLimiter.hit does it (count up, compare), keeping the
        # count that incr returns instead of reading it again for the headers.
        items = self._counters(budget, key_id)
        for item, key in items:
            count = storage.incr(key, item.get_expiry())
            if count > item.amount:
                return Window(False, item.amount, 0, storage.get_expiry(key))
            if item is items[0][0]:
                # Within every limit, the headers describe the one of the smallest window.
                shown = Window(True, item.amount, item.amount - count, storage.get_expiry(key))
        return shown

    def _counters(self, budget, key_id):
        """[(limit, counter name)] of a key's budget: the names are made once per key and budget."""
        counters = self._names.get((budget, key_id))
        if counters is None:
            counters = [(item, item.key_for(KEY_PREFIX, key_id, budget)) for item in self.budgets[budget]]
            if len(self._names) >= MAX_NAMED_KEYS:
                self._names.clear()
            self._names[(budget, key_id)] = counters
        return counters

    def _shared_failed(self, error):
        delay = min(RETRY_SHARED_SECONDS[0] * 2**self._shared_failures, RETRY_SHARED_SECONDS[1])
        self._shared_failures += 1
        self._retry_shared_at = time.monotonic() + delay
        log.warning("rate limit storage unreachable (%s); counting in this process for %d s",
                    type(error.storage_error).__name__, delay)


def rate_limits(app):
    return app.extensions["identity_rate_limits"]


def _budget(setting, budget, what):
    """A decorator that spends `budget`: shared by every route it decorates, so the singular and
    plural paths spend one budget."""

    def decorate(view):
        @wraps(view)
        def limited(*args, **kwargs):
            app = current_app._get_current_object()
            window = rate_limits(app).spend(budget, current_caller().key_id)
            # Every response to this request carries the headers, errors included: see send_headers.
            g._get_current_object().rate_limit_window = window
            if not window.allowed:
                raise TooManyRequests(
                    f"Too many {what} with this API key: the limit is {app.config[setting]}. "
                    "Retry after the number of seconds in Retry-After."
                )
            return view(*args, **kwargs)

        return limited

    return decorate


reads = _budget("IDENTITY_RATELIMIT_READ", "read", "reads")
creates = _budget("IDENTITY_RATELIMIT_CREATE", "create", "creates")


def send_headers(response):
    window = g._get_current_object().get("rate_limit_window")
    if window is not None:
        window.add_headers(response.headers)  # none of them is set before
    return response


def init_app(app):
    app.extensions["identity_rate_limits"] = RateLimits(app.config)
    app.after_request(send_headers)
