"""Webhooks: an Admin registers URLs to which every entry of the change log is POSTed, in order, signed."""

from ..feed import webhooks
from ..schemas import (
    DeliveryListSchema,
    WebhookCreatedSchema,
    WebhookCreateSchema,
    WebhookListSchema,
    WebhookPatchSchema,
    WebhookSchema,
)
from . import blp, budgets
from .auth import auth
from .openapi import BODY, DELIVERY_EXAMPLES, NOT_FOUND, WEBHOOK_CREATED_EXAMPLE, WEBHOOK_EXAMPLE, operation, problems
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


URL_PROBLEM = {"description": "An invalid, unknown or refused field; errors names each.", "example": URL_REFUSED}


@blp.route("/webhooks", methods=["POST"], endpoint="create_webhook")
@auth.login_required(role="Admin")
@budgets.creates
@operation("createWebhook")
@blp.arguments(WebhookCreateSchema(), example={"url": WEBHOOK_EXAMPLE["url"], "description": "Search index"})
@blp.response(201, WebhookCreatedSchema, example=WEBHOOK_CREATED_EXAMPLE)
@problems(BODY, 403, _422=URL_PROBLEM)
def create_webhook(fields):
    """Register a webhook (Admin keys only); the answer carries its secret, shown this once."""
    return webhooks.register(**fields), 201


@blp.route("/webhooks", endpoint="list_webhooks")
@auth.login_required(role="Admin")
@budgets.reads
@operation("listWebhooks")
@blp.response(200, WebhookListSchema, example={"data": [WEBHOOK_EXAMPLE]})
@problems(403)
def list_webhooks():
    """List the webhooks, without their secrets (Admin keys only)."""
    return {"data": webhooks.all_webhooks()}


@blp.route("/webhooks/<uuid:webhook_id>", endpoint="get_webhook", parameters=[WEBHOOK_ID])
@auth.login_required(role="Admin")
@budgets.reads
@operation("getWebhook")
@blp.response(200, WebhookSchema, example=WEBHOOK_EXAMPLE)
@problems(403, 404, _404=NOT_FOUND["webhook"])
def get_webhook(webhook_id):
    """Fetch a webhook, without its secret (Admin keys only)."""
    return webhooks.get(webhook_id)


@blp.route("/webhooks/<uuid:webhook_id>", methods=["PATCH"], endpoint="update_webhook", parameters=[WEBHOOK_ID])
@auth.login_required(role="Admin")
@budgets.creates
@operation("updateWebhook")
@blp.arguments(WebhookPatchSchema(), example={"active": True})
@blp.response(200, WebhookSchema, example=WEBHOOK_EXAMPLE)
@problems(BODY, 403, 404, _404=NOT_FOUND["webhook"], _422=URL_PROBLEM,
          _415="The body is not sent as application/json or application/merge-patch+json.")
def update_webhook(changes, webhook_id):
    """Change a webhook's url, description or active; active true resumes it where it stopped (Admin keys only)."""
    return webhooks.update(webhook_id, changes)


@blp.route("/webhooks/<uuid:webhook_id>", methods=["DELETE"], endpoint="delete_webhook", parameters=[WEBHOOK_ID])
@auth.login_required(role="Admin")
@budgets.creates
@operation("deleteWebhook")
@blp.response(204, description="Removed; nothing more is delivered to it.")
@problems(403, 404, _404=NOT_FOUND["webhook"])
def delete_webhook(webhook_id):
    """Remove a webhook and its deliveries log (Admin keys only)."""
    webhooks.remove(webhook_id)


@blp.route("/webhooks/<uuid:webhook_id>/deliveries", endpoint="list_webhook_deliveries", parameters=[WEBHOOK_ID])
@auth.login_required(role="Admin")
@budgets.reads
@operation("listWebhookDeliveries")
@blp.response(200, DeliveryListSchema, example={"data": DELIVERY_EXAMPLES})
@problems(403, 404, _404=NOT_FOUND["webhook"])
def list_webhook_deliveries(webhook_id):
    """The latest attempts at delivering to a webhook, newest first (Admin keys only)."""
    return {"data": webhooks.deliveries(webhook_id)}
