"""Liveness and readiness, for load balancers and orchestrators: no key needed."""

from ..schemas import StatusSchema
from ..storage import readiness
from .blueprint import UNAVAILABLE, blp, operation, problem
from .problems import problem as problem_response


@blp.route("/healthz")
@operation("getHealth", security=[])
@blp.response(200, StatusSchema, example={"status": "ok"})
def healthz():
    """The process is alive."""
    return {"status": "ok"}


@blp.route("/readyz")
@operation("getReadiness", security=[])
@blp.response(200, StatusSchema, example={"status": "ok"})
@problem(503, **UNAVAILABLE)
def readyz():
    """The database answers, its schema is at the latest migration, and it can take writes; else 503 saying why."""
    try:
        readiness.check()
    except readiness.NotReady as not_ready:
        # Migrating is an operator's act, not a moment's wait: no Retry-After then.
        retry = None if isinstance(not_ready, readiness.SchemaNotCurrent) else {"Retry-After": "5"}
        return problem_response(503, not_ready.detail, headers=retry)
    return {"status": "ok"}
