"""The Flask and Request classes of the service: Flask's own, with some costs of every request removed.

One cost is everywhere: each attribute asked of a context proxy (`request`, `g`, `current_app`)
first fails as an ordinary lookup, and the AttributeError raised and caught inside makes it cost
about as much as a small function call. Code run on every request takes the object behind the proxy
once, with `_get_current_object()`, and asks that.
"""

import time
from inspect import CO_COROUTINE, CO_ITERABLE_COROUTINE
from types import FunctionType, MethodType

from flask import Flask, Request
from flask.signals import request_tearing_down

_ASYNC = CO_COROUTINE | CO_ITERABLE_COROUTINE


class IdentityRequest(Request):
    """A request that knows when it started: the access log and the latency metric both time it."""

    def __init__(self, *args, **kwargs):
        self.started = time.perf_counter()
        super().__init__(*args, **kwargs)


class IdentityFlask(Flask):
    request_class = IdentityRequest

    def ensure_sync(self, func):
        """Flask's ensure_sync, answering for plain functions and methods without inspect's general search.

        Flask asks it about every view, decorator layer and request hook, some twenty times a
        request; none of them is a coroutine here, and a plain function says so in its code flags.
        """
        function = func.__func__ if type(func) is MethodType else func
        if (
            type(function) is FunctionType
            and not function.__code__.co_flags & _ASYNC
            # What inspect.markcoroutinefunction (Python 3.12) sets on a plain function it marks.
            and "_is_coroutine_marker" not in function.__dict__
        ):
            return func
        return super().ensure_sync(func)

    def preprocess_request(self):
        """Flask's, returning at once when there is nothing to run: no URL value preprocessor and no
        before_request function, here or in any blueprint. (Flask's looks up the request's blueprints
        through the request proxy first, on every request.)"""
        if any(self.url_value_preprocessors.values()) or any(self.before_request_funcs.values()):
            return super().preprocess_request()
        return None

    def do_teardown_request(self, *args, **kwargs):
        """Flask's, returning at once when there is nothing to run: no teardown_request function and
        no receiver of the request_tearing_down signal."""
        if any(self.teardown_request_funcs.values()) or request_tearing_down.receivers:
            super().do_teardown_request(*args, **kwargs)
