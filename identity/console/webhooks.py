"""The webhooks: each with its state (active, failing since, how far behind the feed), registering one (its
secret shown once, on the page that answers the form), pausing, resuming and deleting one, and its
deliveries, through identity.feed.webhooks as /webhooks uses it."""

from flask import redirect, request, url_for
from marshmallow import ValidationError

from ..core.errors import InvalidFields
from ..feed import webhooks
from ..schemas import WebhookCreateSchema
from . import bp
from .pages import field_messages, render

DONE = {
    "paused": "The webhook is paused: nothing is delivered to it until it is resumed.",
    "resumed": "The webhook is resumed: it goes on from the entry where it stopped.",
    "deleted": "The webhook is deleted, with its deliveries log.",
}
_create = WebhookCreateSchema()


@bp.route("/webhooks")
def webhooks_page():
    """Every webhook, oldest first, with how far behind the feed it is."""
    return _webhooks_page()


def _webhooks_page(status=200, form=None, form_errors=None):
    rows = [(webhook, *webhooks.backlog(webhook)) for webhook in webhooks.all_webhooks()]
    return render("webhooks.html", status, rows=rows, form=form or {}, form_errors=form_errors or {},
                  done=DONE.get(request.args.get("done")))


@bp.route("/webhooks", methods=["POST"])
def register_webhook():
    """Register a webhook; the answer shows its secret this once."""
    form = {name: request.form.get(name, "").strip() for name in ("url", "description")}
    try:
        fields = _create.load({name: value for name, value in form.items() if value})
        webhook = webhooks.register(**fields)
    except ValidationError as invalid:
        return _webhooks_page(422, form, field_messages(invalid.normalized_messages()))
    except InvalidFields as invalid:
        return _webhooks_page(422, form, field_messages(invalid.errors))
    return render("webhook_registered.html", 201, webhook=webhook)


@bp.route("/webhooks/<uuid:webhook_id>")
def webhook_page(webhook_id):
    """One webhook and its latest delivery attempts, newest first."""
    webhook = webhooks.get(webhook_id)
    entries, waiting_since = webhooks.backlog(webhook)
    return render("webhook.html", webhook=webhook, entries=entries, waiting_since=waiting_since,
                  deliveries=webhooks.deliveries(webhook_id), done=DONE.get(request.args.get("done")))


@bp.route("/webhooks/<uuid:webhook_id>/pause", methods=["POST"])
def pause_webhook(webhook_id):
    webhooks.update(webhook_id, {"active": False})
    return redirect(url_for("console.webhook_page", webhook_id=webhook_id, done="paused"), 303)


@bp.route("/webhooks/<uuid:webhook_id>/resume", methods=["POST"])
def resume_webhook(webhook_id):
    webhooks.update(webhook_id, {"active": True})
    return redirect(url_for("console.webhook_page", webhook_id=webhook_id, done="resumed"), 303)


@bp.route("/webhooks/<uuid:webhook_id>/delete")
def confirm_delete(webhook_id):
    """The confirmation step before a webhook is deleted."""
    return render("webhook_delete.html", webhook=webhooks.get(webhook_id))


@bp.route("/webhooks/<uuid:webhook_id>/delete", methods=["POST"])
def delete_webhook(webhook_id):
    webhooks.remove(webhook_id)
    return redirect(url_for("console.webhooks_page", done="deleted"), 303)
