"""The audit log over HTTP: GET /audit (Admin keys; a read key is enough), and what the web gives each entry
recorded while it serves a request (the way in, the request's id, the client's address and user agent, the
caller), for the API's routes and the console's pages alike."""

from flask import has_request_context, request
from marshmallow import RAISE

from ..core import audit, audit_log
from ..core.keys import KEY_PREFIX
from ..schemas import AuditListArgsSchema, AuditPageSchema
from . import blp, budgets
from .answers import answers
from .auth import access

# A user agent is kept to this many characters: it is the client's to choose.
MAX_USER_AGENT = 512
WITHHELD = "(withheld: it held an API key)"
ENTRY_EXAMPLE = {
    "seq": 42, "at": "2026-11-21T09:30:00.123456Z",
    "actor": {"user_id": "9b2e4c1a-6f0d-4e8b-a5c3-2d7f1e9a0b64", "wallet": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
              "role": "Admin", "key_id": "6e0c7a52-3b1f-4d8e-9f20-7c4b1a2d5e93", "key_hint": "idsk_Q2hh", "via": "api"},
    "action": "key.revoke", "target": {"kind": "key", "id": "0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5"},
    "outcome": "ok", "detail": None, "request_id": "5f1c0e0b8a7d4c2e9b6a3f1d0c8e7a6b", "client_address": "203.0.113.7",
    "user_agent": "curl/8.5.0", "before": {"revoked_at": None}, "after": {"revoked_at": "2026-11-21T09:30:00.123456Z"},
    "prev_hash": "3b8e" + "0" * 60, "hash": "9f2a" + "1" * 60,
}


def web_context():
    """The context of an entry recorded while a request is served (core.audit.provide), else None."""
    if not has_request_context():
        return None
    return {
        "via": "console" if request.blueprint == "console" else "api",
        "request_id": getattr(request, "request_id", None),
        "client_address": budgets.client_ip(),
        "user_agent": user_agent(),
        "caller": getattr(request, "caller", None),
    }


def user_agent():
    """The request's User-Agent, at most MAX_USER_AGENT characters; withheld when it holds an API key (a client
    that sends its key there must not get it kept), as a request id is."""
    agent = request.headers.get("User-Agent")
    if not agent:
        return None
    return WITHHELD if KEY_PREFIX in agent else agent[:MAX_USER_AGENT]


@blp.route("/audit", endpoint="list_audit")
@access(budgets.reads, role="Admin")
@blp.doc(operationId="listAudit", responses=answers("InvalidAuditQuery", "AdminOnly"))
@blp.arguments(AuditListArgsSchema(), location="query", error_status_code=400, unknown=RAISE)
@blp.response(200, AuditPageSchema, example={"limit": 20, "data": [ENTRY_EXAMPLE], "next": None})
def list_audit(args):
    """The audit log, newest first (Admin keys only; a read key is enough): who did what to keys, users,
    webhooks, mirrors and identities, sign-ins and console sessions, and the data commands; each entry with
    its hash and the previous entry's, filtered by actor (a wallet), action, target, since and until."""
    return audit_log.list_entries(args)


def init_app(app):
    audit.provide(web_context)
