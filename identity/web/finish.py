"""What every response gets on its way out, in one after_request hook: the rate-limit window, the
security headers and the request id in its headers; then its metrics and its access line.

One hook rather than one for each of them: Flask looks up whether each hook is a coroutine and calls
it, on every request, and each of them read the request again (its route, method and duration for
the metrics, then all over again for the access line). Here the response's facts are read once, and
the steps run in the order written below. (Errors pass through it too: Flask runs after_request
hooks on the responses of error handlers.)
"""

from flask import request

from . import logs, metrics
from .headers import add_security_headers
from .request_id import HEADER as REQUEST_ID_HEADER


def init_app(app):
    observe = metrics.observe if app.config["IDENTITY_METRICS_ENABLED"] else None

    @app.after_request
    def finish_response(response):
        # What the request learnt on its way, read in one call (wrappers.Request).
        route, method, seconds, request_id, window, caller = request.facts()
        headers = response.headers
        if window is not None:
            window.add_headers(headers)  # none of them is set before
        add_security_headers(headers)
        headers[REQUEST_ID_HEADER] = request_id
        status = response.status_code
        if observe is not None:
            observe(route, method, status, seconds)
        logs.log_access(method, route, status, seconds, request_id, caller.key_id if caller else None)
        return response
