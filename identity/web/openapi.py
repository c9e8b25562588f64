"""The OpenAPI document: its examples, parameters and headers that several operations share, its extras, the
aliases' operations, and the interactive page at /docs (the problem answers are web.answers').

flask-smorest writes /openapi.json from the blueprint's decorators and schemas (`blp.arguments`,
`blp.response`, `blp.doc`), and renders /docs with Swagger UI, whose scripts come from the installed
flask-swagger-ui package: the page needs no network but the service.
"""

import json
from datetime import datetime
from importlib.resources import files
from types import SimpleNamespace

from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Blueprint

from ..core import content
from ..schemas import IdentityPatchSchema, IdentitySchema, MirrorPatchSchema, WebhookPatchSchema, identity_body
from ..schemas.fields import CONTENT_ID_PATTERN, IDENTITY_ID_PATTERN, documented_validators, safe_integers
from .auth import HEADER

_STRING = {"schema": {"type": "string"}}
# The wallet of the sign-in examples (its key is public: the Keccak-256 of "identity example wallet").
SIGNIN_WALLET = "0x745c96f26fa0E004E60E41d1411169408B45accA"

# --- examples, made by the same code and schemas as real answers so that they cannot drift --------------

CREATE_EXAMPLE = {
    "display_name": "Vitalik Buterin",
    "description": "Co-founder of Ethereum.",
    "image": "https://example.com/avatar.png",
    "external_reference": "https://vitalik.eth.limo",
}
_ADDRESS = content.address(CREATE_EXAMPLE)
_AT = datetime.fromisoformat("2026-11-21T09:30:00.123456+00:00")
_IDENTITY = SimpleNamespace(
    id="3f6c2a9e-8b1d-4c7a-9e52-0a4b6d8c1f27", identity_id=_ADDRESS.identity_id,
    identity_hash=_ADDRESS.identity_hash, vault_id=0, corpora_id=None, semantic=None,
    created_at=_AT, updated_at=_AT, num_positions=0, assets_sum=0, conviction_sum=0, conviction_price=0,
    status="complete", is_user=False, user_conviction=0, user_conviction_value=0, **_ADDRESS.content,
    creator_signature=None, creator_signature_chain_id=None,
    creator=SimpleNamespace(
        id="9b2e4c1a-6f0d-4e8b-a5c3-2d7f1e9a0b64", created_at=_AT, updated_at=_AT, last_login=_AT,
        wallet="0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045", role="User",
    ),
)
IDENTITY_EXAMPLE = IdentitySchema().dump(_IDENTITY)
CONTENT_EXAMPLE = _ADDRESS.content
# What each route's ETag is: for an identity, the hash of its exact body (IDENTITY_EXAMPLE's here); for its
# content, the content_id.
IDENTITY_ETAG_EXAMPLE = f'"{identity_body(_IDENTITY)[1]}"'
CONTENT_ETAG_EXAMPLE = f'"{_ADDRESS.content_id}"'
PATCH_EXAMPLE = {"status": "complete", "vault_id": "4242", "num_positions": 3, "assets_sum": "1000000000000000000"}
CHANGE_EXAMPLE = {
    "seq": 42,
    "identity_id": _ADDRESS.identity_id,
    "at": "2026-11-21T09:45:00.654321Z",
    "wallet": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "kind": "changed",
    "fields": {"status": {"before": "complete", "after": "removed"}},
}
_EVENT_DATA = {key: CHANGE_EXAMPLE[key] for key in ("seq", "identity_id", "at", "wallet", "kind", "fields")}
# The stream of feed=eventsource, as the 200 response's second media type. Its schema is that of one
# event, as SSE clients (and Schemathesis) parse the stream into events: OpenAPI 3.2 calls it itemSchema.
EVENT_STREAM_DOC = {
    "content": {
        "text/event-stream": {
            "schema": {
                "type": "object",
                "description": "feed=eventsource: Server-Sent Events, one per entry, in sequence order; on the wire "
                "`id: 42`, `event: change`, `data: {...}` lines and a blank line. A comment line (`: heartbeat`) "
                "comes every `heartbeat` milliseconds. The stream ends after `timeout`, when given, when the key "
                "stops being valid, and when the server shuts down: reconnect with Last-Event-ID.",
                "required": ["id", "event", "data"],
                "properties": {
                    "id": {"type": "string", "pattern": "^[1-9][0-9]{0,15}$",
                           "description": "The entry's seq: what Last-Event-ID sends back."},
                    "event": {"type": "string", "enum": ["change"]},
                    "data": {"type": "string", "contentMediaType": "application/json",
                             "contentSchema": {"$ref": "#/components/schemas/Change"},
                             "description": "The entry, a Change object as the JSON feed has it, on one line."},
                },
            },
            "example": {"id": "42", "event": "change", "data": json.dumps(_EVENT_DATA, separators=(",", ":"))},
        }
    }
}
WEBHOOK_EXAMPLE = {
    "id": "7d1e5c3a-2b4f-4a6e-9c8d-1f0a2b3c4d5e",
    "url": "https://hooks.example.com/identity",
    "description": "Search index",
    "active": True,
    "position": 42,
    "attempts": 0,
    "failing_since": None,
    "next_attempt_at": None,
    "stalled": None,
    "created_at": "2026-11-21T09:30:00.123456Z",
    "updated_at": "2026-11-21T09:30:00.123456Z",
}
WEBHOOK_CREATED_EXAMPLE = {**WEBHOOK_EXAMPLE, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/Q3IuWtkbbI="}
DELIVERY_EXAMPLES = [
    {"seq": 43, "attempt": 2, "at": "2026-11-21T09:46:02.000000Z", "duration_ms": 31, "status": 200, "error": None},
    {"seq": 43, "attempt": 1, "at": "2026-11-21T09:46:00.000000Z", "duration_ms": 12, "status": 503,
     "error": "answered 503"},
]
MIRROR_EXAMPLE = {
    "id": "5c9e2f1a-7d3b-4e8a-b6c1-9f0e1d2c3b4a",
    "name": "eu-west",
    "url": "https://identity.example.org",
    "active": True,
    "position": 120345,
    "upstream_head": 120350,
    "lag_entries": 5,
    "lag_seconds": 0.42,
    "applied": 118002,
    "already_present": 2340,
    "rejected": 3,
    "last_error": None,
    "last_error_at": None,
    "failing": False,
    "created_at": "2026-11-21T09:30:00.123456Z",
    "updated_at": "2026-11-21T09:30:00.123456Z",
}

# --- parameters and headers that several operations document ---------------------------------------

IDENTITY_ID = {
    "in": "path",
    "name": "identity_id",
    "required": True,
    "description": "The identity_id: did:<namespace>:ipfs:<content_id>.",
    "schema": {"type": "string", "pattern": IDENTITY_ID_PATTERN},
    "example": IDENTITY_EXAMPLE["identity_id"],
}
# The ETag of an identity's content: its content_id, quoted (the content never changes).
ETAG = {
    "description": "The content_id, quoted.",
    "schema": {"type": "string", "pattern": f'^"{CONTENT_ID_PATTERN}"$'},
    "example": CONTENT_ETAG_EXAMPLE,
}
IF_NONE_MATCH = {
    "in": "header",
    "name": "If-None-Match",
    "required": False,
    "description": "The ETag of an earlier answer (a hash of its body, quoted): while the identity and its creator "
    "are as they were, the answer is 304 with no body.",
    "schema": {"type": "string"},
    "example": IDENTITY_ETAG_EXAMPLE,
}
IF_NONE_MATCH_CONTENT = {
    **IF_NONE_MATCH,
    "description": "The ETag of an earlier answer (the content_id, quoted): when it names this content, the answer "
    "is 304 with no body.",
    "example": CONTENT_ETAG_EXAMPLE,
}
IF_MATCH = {
    "in": "header",
    "name": "If-Match",
    "required": False,
    "description": "The ETag of the identity as last fetched or changed (a hash of its body, quoted): the change "
    "is made only if it is still current, else 412 and nothing changes.",
    "schema": {"type": "string"},
    "example": IDENTITY_ETAG_EXAMPLE,
}
LOCATION = {"schema": {"type": "string", "pattern": "^/identity/" + IDENTITY_ID_PATTERN[1:]}}
ETAG_HEADERS = {
    "ETag": {"description": "Strong tag of this exact body: its hash, quoted. Send it back in If-None-Match (GET) "
             "or If-Match (PATCH).", "schema": {"type": "string", "pattern": '^"[0-9a-f]{40}"$'},
             "example": IDENTITY_ETAG_EXAMPLE},
    "Cache-Control": {"description": "private", **_STRING},
}
class DocumentedFields(MarshmallowPlugin):
    """apispec's marshmallow plugin, with this service's attribute functions added as it starts, before
    flask-smorest converts its own schemas: the validators' patterns, and the 2^53 - 1 cap on integers."""

    def init_spec(self, spec):
        super().init_spec(spec)
        self.converter.add_attribute_function(documented_validators)
        self.converter.add_attribute_function(safe_integers)


def spec_kwargs(*plugins):
    """The `spec_kwargs` of the app's flask_smorest.Api, with apispec `plugins` besides the marshmallow one."""
    return {"marshmallow_plugin": DocumentedFields(), "extra_plugins": list(plugins)}


def init_app(app, api):
    """Complete `api`'s document before the blueprint's operations join it, and serve the Swagger UI assets
    that /docs loads."""
    api.spec.components.security_scheme("ApiKeyAuth", {"type": "apiKey", "in": "header", "name": HEADER})
    # A patch must change something: the document says so, as the schema's validator does.
    api.spec.components.schema("IdentityPatch", {"minProperties": 1}, schema=IdentityPatchSchema)
    api.spec.components.schema("WebhookPatch", {"minProperties": 1}, schema=WebhookPatchSchema)
    api.spec.components.schema("MirrorPatch", {"minProperties": 1}, schema=MirrorPatchSchema)
    assets = Blueprint(
        "swagger_ui_assets",
        __name__,
        static_folder=str(files("flask_swagger_ui") / "dist"),
        static_url_path=app.config["OPENAPI_SWAGGER_UI_URL"].rstrip("/"),
    )
    app.register_blueprint(assets)


def document_aliases(app, api, aliases):
    """Document the aliases whose path the document names for another method.

    `aliases` ({(rule, method): the rule it serves the same as}) are the contract's plural paths, served
    but not documented as operations of their own, so that a generated client has one method per
    operation. Where an alias's path is documented for another method, a client that reads the document
    would find the method missing: there it is documented, as a deprecated alias (`x-alias-of`) of the
    operation it serves, with that operationId and "Alias".
    """
    paths = api.spec.to_dict()["paths"]
    for (rule, method), of in aliases.items():
        path = _openapi_path(rule)
        if path in paths and method.lower() not in paths[path]:
            documented = dict(paths[_openapi_path(of)][method.lower()])
            documented.update(
                operationId=documented["operationId"] + "Alias", deprecated=True,
                **{"x-alias-of": documented["operationId"]},
                summary=f"Alias of {method} {_openapi_path(of)}",
                description=f"Served exactly as {method} {_openapi_path(of)} ({documented['operationId']}), "
                "for clients of the hosted service, which named it so; new code calls that operation.",
            )
            rule_object = next(found for found in app.url_map.iter_rules() if found.rule == rule)
            api.spec.path(rule=rule_object, operations={method.lower(): documented})


def _openapi_path(rule):
    """A Flask rule as an OpenAPI path: /identity/<identity_id> -> /identity/{identity_id}."""
    parts = []
    for part in rule.split("/"):
        if part.startswith("<") and part.endswith(">"):
            part = "{" + part[1:-1].split(":")[-1] + "}"
        parts.append(part)
    return "/".join(parts)
