"""What every response gets on its way out, in one after_request hook: the rate-limit window, the
security headers and the request id in its headers; then its metrics and its access line.

One hook rather than one for each of them: Flask looks up whether each hook is a coroutine and calls
it, on every request, and each of them read the request again (its route, method and duration for
the metrics, then all over again for the access line). Here the response's facts are read once, and
the steps run in the order written below. (Errors pass through it too: Flask runs after_request
hooks on the responses of error handlers.)
"""

from flask import request

from . import limits, logs, metrics
from .auth import current_caller
from .headers import add_security_headers
from .request_id import HEADER as REQUEST_ID_HEADER
from .request_id import current_request_id


def init_app(app):
    observe = metrics.observe if app.config["IDENTITY_METRICS_ENABLED"] else None

    @app.after_request
    def finish_response(response):
        headers = response.headers
        limits.add_headers(headers)
        add_security_headers(headers)
        request_id = headers[REQUEST_ID_HEADER] = current_request_id()
        # The rule, not the path: one route is one value, and no id or stray secret in a URL is copied
        # into the metrics or the logs. Unmatched paths (404, 405) have no rule.
        rule = request.url_rule
        route = rule.rule if rule else None
        method, status, seconds = request.method, response.status_code, logs.elapsed_seconds()
        if observe is not None:
            observe(route, method, status, seconds)
        caller = current_caller()
        logs.log_access(method, route, status, seconds, request_id, caller.key_id if caller else None)
        return response
