"""Liveness and readiness, for load balancers and orchestrators: no key needed."""

from ..schemas import StatusSchema
from ..storage import readiness
from . import blp
from .answers import answers
from .problems import problem


@blp.route("/healthz")
@blp.doc(operationId="getHealth", security=[])
@blp.response(200, StatusSchema, example={"status": "ok"})
def healthz():
    """The process is alive."""
    return {"status": "ok"}


@blp.route("/readyz")
@blp.doc(operationId="getReadiness", security=[], responses=answers("Unavailable"))
@blp.response(200, StatusSchema, example={"status": "ok"})
def readyz():
    """The database answers, its schema is at the latest migration, and it can take writes; else 503 saying why."""
    try:
        readiness.check()
    except readiness.NotReady as not_ready:
        # Migrating is an operator's act, not a moment's wait: no Retry-After then. Otherwise the same
        # Retry-After as every other route's 503 for the same outage.
        retry = None if isinstance(not_ready, readiness.SchemaNotCurrent) else {"Retry-After": "1"}
        return problem(503, not_ready.detail, headers=retry)
    return {"status": "ok"}
