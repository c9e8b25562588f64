"""The app's request class: Flask's, with what the service notes about each request kept on it.

Every read of an attribute of `flask.request`, `flask.g` or `flask.current_app` goes through
Werkzeug's context-local proxy: some 9,000 instructions (valgrind), about a microsecond, where the
attribute itself costs a few dozen. A GET made 33 such reads (plain Flask doing the same work, 6).
What a request learns on its way (when it began, its id, its rate-limit window, its caller) was kept
in `g` and read back one proxy read at a time. It is now kept on the request object, and the
after_request hook takes all of it with one call (`facts`), inside which every read is a plain one;
the start is noted as the request object is made, with no before_request hook. A GET now makes 21.
"""

import time
from typing import NamedTuple

import flask
from werkzeug.utils import cached_property

from .request_id import request_id_of


class Facts(NamedTuple):
    """What a response's headers, its metrics and its access line tell of its request."""

    # The rule, not the path: one route is one value, and no id or stray secret in a URL is copied into
    # the metrics or the logs. None where no rule matched (a 404 or 405).
    route: str | None
    method: str
    seconds: float  # since the request began
    request_id: str
    rate_limit_window: object  # limits.Window, or None where no budget was spent
    caller: object  # auth.Caller, or None where no valid key was given


class Request(flask.Request):
    """`Flask.request_class` of the app (create_app)."""

    #: The window of the budget this request spent (limits), or None.
    rate_limit_window = None
    #: The Caller of the request's key once it is known good (auth.authenticate), or None.
    caller = None

    def __init__(self, environ, *args, **kwargs):
        super().__init__(environ, *args, **kwargs)
        # Made as the request begins: its access line and its latency metric are timed from here.
        self.started = time.perf_counter()

    @cached_property
    def request_id(self):
        """The request's id: X-Request-ID when it is safe to echo, generated otherwise; made on first use."""
        return request_id_of(self.headers)

    def facts(self):
        """The request's Facts, as its response leaves."""
        rule = self.url_rule
        return Facts(
            None if rule is None else rule.rule,
            self.method,
            time.perf_counter() - self.started,
            self.request_id,
            self.rate_limit_window,
            self.caller,
        )
