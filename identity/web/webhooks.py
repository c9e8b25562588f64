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
from .answers import BODY, answers
from .auth import access
from .openapi import DELIVERY_EXAMPLES, WEBHOOK_CREATED_EXAMPLE, WEBHOOK_EXAMPLE

WEBHOOK_ID = {
    "in": "path",
    "name": "webhook_id",
    "required": True,
    "description": "The webhook's id, as its registration answered.",
    "schema": {"type": "string", "format": "uuid"},
    "example": WEBHOOK_EXAMPLE["id"],
}
@blp.route("/webhooks", methods=["POST"], endpoint="create_webhook")
@access(budgets.creates, role="Admin")
@blp.doc(operationId="createWebhook", responses=answers(BODY, "AdminOnly", "UrlRefused"))
@blp.arguments(WebhookCreateSchema(), example={"url": WEBHOOK_EXAMPLE["url"], "description": "Search index"})
@blp.response(201, WebhookCreatedSchema, example=WEBHOOK_CREATED_EXAMPLE)
def create_webhook(fields):
    """Register a webhook (Admin keys only); the answer carries its secret, shown this once."""
    return webhooks.register(**fields), 201


@blp.route("/webhooks", endpoint="list_webhooks")
@access(budgets.reads, role="Admin")
@blp.doc(operationId="listWebhooks", responses=answers("AdminOnly"))
@blp.response(200, WebhookListSchema, example={"data": [WEBHOOK_EXAMPLE]})
def list_webhooks():
    """List the webhooks, without their secrets (Admin keys only)."""
    return {"data": webhooks.all_webhooks()}


@blp.route("/webhooks/<uuid:webhook_id>", endpoint="get_webhook", parameters=[WEBHOOK_ID])
@access(budgets.reads, role="Admin")
@blp.doc(operationId="getWebhook", responses=answers("AdminOnly", "WebhookNotFound"))
@blp.response(200, WebhookSchema, example=WEBHOOK_EXAMPLE)
def get_webhook(webhook_id):
    """Fetch a webhook, without its secret (Admin keys only)."""
    return webhooks.get(webhook_id)


@blp.route("/webhooks/<uuid:webhook_id>", methods=["PATCH"], endpoint="update_webhook", parameters=[WEBHOOK_ID])
@access(budgets.creates, role="Admin")
@blp.doc(operationId="updateWebhook", responses=answers(
    BODY, "AdminOnly", "WebhookNotFound", "UrlRefused", "NotJsonOrMergePatch"))
@blp.arguments(WebhookPatchSchema(), example={"active": True})
@blp.response(200, WebhookSchema, example=WEBHOOK_EXAMPLE)
def update_webhook(changes, webhook_id):
    """Change a webhook's url, description or active; active true resumes it where it stopped (Admin keys only)."""
    return webhooks.update(webhook_id, changes)


@blp.route("/webhooks/<uuid:webhook_id>", methods=["DELETE"], endpoint="delete_webhook", parameters=[WEBHOOK_ID])
@access(budgets.creates, role="Admin")
@blp.doc(operationId="deleteWebhook", responses=answers("AdminOnly", "WebhookNotFound"))
@blp.response(204, description="Removed; nothing more is delivered to it.")
def delete_webhook(webhook_id):
    """Remove a webhook and its deliveries log (Admin keys only)."""
    webhooks.remove(webhook_id)


@blp.route("/webhooks/<uuid:webhook_id>/deliveries", endpoint="list_webhook_deliveries", parameters=[WEBHOOK_ID])
@access(budgets.reads, role="Admin")
@blp.doc(operationId="listWebhookDeliveries", responses=answers("AdminOnly", "WebhookNotFound"))
@blp.response(200, DeliveryListSchema, example={"data": DELIVERY_EXAMPLES})
def list_webhook_deliveries(webhook_id):
    """The latest attempts at delivering to a webhook, newest first (Admin keys only)."""
    return {"data": webhooks.deliveries(webhook_id)}
