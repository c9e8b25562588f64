"""Liveness and readiness, for load balancers and orchestrators: no key needed."""

from .. import readiness
from ..errors import problem as problem_response
from ..schemas import StatusSchema
from .base import UNAVAILABLE, blp, problem


@blp.route("/healthz")
@blp.response(200, StatusSchema, example={"status": "ok"})
def healthz():
    """The process is alive."""
    return {"status": "ok"}


@blp.route("/readyz")
@blp.response(200, StatusSchema, example={"status": "ok"})
@problem(503, **UNAVAILABLE)
def readyz():
    """The database answers, its schema is at the latest migration, and it can take writes; else 503 saying why."""
    try:
        readiness.check()
    except readiness.NotReady as not_ready:
        return problem_response(503, not_ready.detail, headers={"Retry-After": "5"})
    return {"status": "ok"}
