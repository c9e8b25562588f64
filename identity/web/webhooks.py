"""Webhooks: an Admin registers URLs to which every entry of the change log is POSTed, in order, signed."""

from ..core.errors import WebhookNotFound
from ..feed import webhooks
from ..schemas import (
    DeliveryListSchema,
    WebhookCreatedSchema,
    WebhookCreateSchema,
    WebhookListSchema,
    WebhookPatchSchema,
    WebhookSchema,
)
from . import limits
from .auth import ADMIN_ONLY_DETAIL, auth
from .blueprint import blp, operation, problem, shared_problems
from .docs import DELIVERY_EXAMPLES, WEBHOOK_CREATED_EXAMPLE, WEBHOOK_EXAMPLE
from .problems import problem_body

WEBHOOK_ID = {
    "in": "path",
    "name": "webhook_id",
    "required": True,
    "description": "The webhook's id, as its registration answered.",
    "schema": {"type": "string", "format": "uuid"},
    "example": WEBHOOK_EXAMPLE["id"],
}
URL_REFUSED = problem_body(
    422, "Invalid fields: url.",
    errors={"url": ["The host 10.0.0.1 is or resolves to a private address (10.0.0.1); webhooks are delivered to "
                    "public addresses only (IDENTITY_WEBHOOKS_ALLOW_PRIVATE=1 allows others)."]},
)


def _common(view):
    """What every webhook route documents: an Admin key, the budget, the database (the key itself: operation())."""
    return shared_problems(problem(403, ADMIN_ONLY_DETAIL)(view))


def _body_problems(view):
    """What a route with a JSON body documents."""
    for decorate in (
        problem(400, "The body is not valid JSON or not UTF-8."),
        problem(413, "The body is larger than the limit (64 KiB by default)."),
        problem(422, "An invalid, unknown or refused field; errors names each.", example=URL_REFUSED),
    ):
        view = decorate(view)
    return view


@blp.route("/webhooks", methods=["POST"], endpoint="create_webhook")
@auth.login_required(role="Admin")
@limits.creates
@operation("createWebhook")
@_common
@blp.arguments(WebhookCreateSchema, example={"url": WEBHOOK_EXAMPLE["url"], "description": "Search index"})
@blp.response(201, WebhookCreatedSchema, example=WEBHOOK_CREATED_EXAMPLE)
@_body_problems
@problem(415, "The body is not sent as application/json.")
def create_webhook(fields):
    """Register a webhook (Admin keys only); the answer carries its secret, shown this once."""
    return webhooks.register(**fields), 201


@blp.route("/webhooks", endpoint="list_webhooks")
@auth.login_required(role="Admin")
@limits.reads
@operation("listWebhooks")
@_common
@blp.response(200, WebhookListSchema, example={"data": [WEBHOOK_EXAMPLE]})
def list_webhooks():
    """List the webhooks, without their secrets (Admin keys only)."""
    return {"data": webhooks.all_webhooks()}


@blp.route("/webhooks/<uuid:webhook_id>", endpoint="get_webhook", parameters=[WEBHOOK_ID])
@auth.login_required(role="Admin")
@limits.reads
@operation("getWebhook")
@_common
@blp.response(200, WebhookSchema, example=WEBHOOK_EXAMPLE)
@problem(404, WebhookNotFound.DETAIL)
def get_webhook(webhook_id):
    """Fetch a webhook, without its secret (Admin keys only)."""
    return webhooks.get(webhook_id)


@blp.route("/webhooks/<uuid:webhook_id>", methods=["PATCH"], endpoint="update_webhook", parameters=[WEBHOOK_ID])
@auth.login_required(role="Admin")
@limits.creates
@operation("updateWebhook")
@_common
@blp.arguments(WebhookPatchSchema, example={"active": True})
@blp.response(200, WebhookSchema, example=WEBHOOK_EXAMPLE)
@_body_problems
@problem(404, WebhookNotFound.DETAIL)
@problem(415, "The body is not sent as application/json or application/merge-patch+json.")
def update_webhook(changes, webhook_id):
    """Change a webhook's url, description or active; active true resumes it where it stopped (Admin keys only)."""
    return webhooks.update(webhook_id, changes)


@blp.route("/webhooks/<uuid:webhook_id>", methods=["DELETE"], endpoint="delete_webhook", parameters=[WEBHOOK_ID])
@auth.login_required(role="Admin")
@limits.creates
@operation("deleteWebhook")
@_common
@blp.response(204, description="Removed; nothing more is delivered to it.")
@problem(404, WebhookNotFound.DETAIL)
def delete_webhook(webhook_id):
    """Remove a webhook and its deliveries log (Admin keys only)."""
    webhooks.remove(webhook_id)


@blp.route("/webhooks/<uuid:webhook_id>/deliveries", endpoint="list_webhook_deliveries", parameters=[WEBHOOK_ID])
@auth.login_required(role="Admin")
@limits.reads
@operation("listWebhookDeliveries")
@_common
@blp.response(200, DeliveryListSchema, example={"data": DELIVERY_EXAMPLES})
@problem(404, WebhookNotFound.DETAIL)
def list_webhook_deliveries(webhook_id):
    """The latest attempts at delivering to a webhook, newest first (Admin keys only)."""
    return {"data": webhooks.deliveries(webhook_id)}
