"""The service describes itself: the OpenAPI document's extras and the interactive page at /docs.

flask-smorest writes /openapi.json from the blueprint's decorators and schemas, and renders /docs with
Swagger UI. Swagger UI's scripts and styles come from the installed flask-swagger-ui package and are
served here, so the page needs no network but the service.
"""

import json
from datetime import datetime
from importlib.resources import files
from types import SimpleNamespace

from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Blueprint

from ..core import content
from ..schemas import IdentityPatchSchema, IdentitySchema, WebhookPatchSchema
from ..schemas.fields import documented_validators, safe_integers
from .auth import HEADER


class DocumentedFields(MarshmallowPlugin):
    """apispec's marshmallow plugin, with this service's attribute functions added as it starts, before
    flask-smorest converts its own schemas: the validators' patterns, and the 2^53 - 1 cap on integers."""

    def init_spec(self, spec):
        super().init_spec(spec)
        self.converter.add_attribute_function(documented_validators)
        self.converter.add_attribute_function(safe_integers)


def spec_kwargs():
    """The `spec_kwargs` of the app's flask_smorest.Api."""
    return {"marshmallow_plugin": DocumentedFields()}


def init_app(app, api):
    """Complete `api`'s document and serve the Swagger UI assets that /docs loads."""
    api.spec.components.security_scheme("ApiKeyAuth", {"type": "apiKey", "in": "header", "name": HEADER})
    # A patch must change something: the document says so, as the schema's validator does.
    api.spec.components.schema("IdentityPatch", {"minProperties": 1}, schema=IdentityPatchSchema)
    api.spec.components.schema("WebhookPatch", {"minProperties": 1}, schema=WebhookPatchSchema)
    assets = Blueprint(
        "swagger_ui_assets",
        __name__,
        static_folder=str(files("flask_swagger_ui") / "dist"),
        static_url_path=app.config["OPENAPI_SWAGGER_UI_URL"].rstrip("/"),
    )
    app.register_blueprint(assets)


# Examples for the document, made by the same code and schemas as real responses so that they cannot drift.
CREATE_EXAMPLE = {
    "display_name": "Vitalik Buterin",
    "description": "Co-founder of Ethereum.",
    "image": "https://example.com/avatar.png",
    "external_reference": "https://vitalik.eth.limo",
}
_ADDRESS = content.address(CREATE_EXAMPLE)
_AT = datetime.fromisoformat("2026-11-21T09:30:00.123456+00:00")
IDENTITY_EXAMPLE = IdentitySchema().dump(
    SimpleNamespace(
        id="3f6c2a9e-8b1d-4c7a-9e52-0a4b6d8c1f27", identity_id=_ADDRESS.identity_id,
        identity_hash=_ADDRESS.identity_hash, vault_id=0, corpora_id=None, semantic=None,
        created_at=_AT, updated_at=_AT, num_positions=0, assets_sum=0, conviction_sum=0, conviction_price=0,
        status="complete", is_user=False, user_conviction=0, user_conviction_value=0, **_ADDRESS.content,
        creator=SimpleNamespace(
            id="9b2e4c1a-6f0d-4e8b-a5c3-2d7f1e9a0b64", created_at=_AT, updated_at=_AT, last_login=_AT,
            wallet="0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045", role="User",
        ),
    )
)
CONTENT_EXAMPLE = _ADDRESS.content
ETAG_EXAMPLE = f'"{_ADDRESS.content_id}"'
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
    "created_at": "2026-11-21T09:30:00.123456Z",
    "updated_at": "2026-11-21T09:30:00.123456Z",
}
WEBHOOK_CREATED_EXAMPLE = {**WEBHOOK_EXAMPLE, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/Q3IuWtkbbI="}
DELIVERY_EXAMPLES = [
    {"seq": 43, "attempt": 2, "at": "2026-11-21T09:46:02.000000Z", "duration_ms": 31, "status": 200, "error": None},
    {"seq": 43, "attempt": 1, "at": "2026-11-21T09:46:00.000000Z", "duration_ms": 12, "status": 503,
     "error": "answered 503"},
]
