"""The Flask and Request classes of the service: Flask's own, with two costs of every request removed."""

import time
from inspect import CO_COROUTINE, CO_ITERABLE_COROUTINE
from types import FunctionType, MethodType

from flask import Flask, Request

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
