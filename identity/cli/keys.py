"""`flask --app app keys ...`: issue, list, rotate and revoke API keys."""

import click
from flask.cli import with_appcontext

from ..core import keys as service
from ..core import users
from ..core.errors import ServiceError, UserNotFound
from ..storage.readiness import flask_command
from . import needs_database


@click.group()
@with_appcontext
@needs_database
def keys():
    """Issue, list, rotate and revoke API keys."""


@keys.command("create")
@click.option("--wallet", required=True, help="Ethereum address of the key's user.")
@click.option("--role", type=click.Choice(service.ROLES), default=None, help="Role of a new user (default User), or the new role of a known one.")
@click.option("--scope", type=click.Choice(service.SCOPES), default="write", show_default=True, help="read: the key may only read.")
@click.option("--label", default=None, help="What the key is for (1 to 128 characters).")
@click.option(
    "--expires-in", type=click.IntRange(service.MIN_EXPIRES_IN, service.MAX_EXPIRES_IN), default=None, metavar="SECONDS",
    help="Seconds until the key expires (60 to 10 years); default: never.",
)
@with_appcontext
def create_key(wallet, role, scope, label, expires_in):
    """Issue a key; it is printed once, alone on the last line."""
    if label is not None and not 1 <= len(label) <= 128:
        raise click.BadParameter("must be 1 to 128 characters.", param_hint="--label")
    try:
        key, api_key = service.issue_key(wallet, role, scope=scope, label=label, expires_in=expires_in)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--wallet") from None
    click.echo(
        f"Issued key {api_key.id} ({api_key.scope}) for {api_key.user.wallet} ({api_key.user.role}). "
        "It is shown once; store it now.",
        err=True,
    )
    click.echo(key)


@keys.command("list")
@with_appcontext
def list_keys():
    """List keys without their secrets: scope, label, expiry and last use too, and each user's grant (the most a
    sign-in with Ethereum issues its wallet)."""
    rows = service.all_keys()
    click.echo(
        f"{'id':36}  {'hint':9}  {'wallet':42}  {'role':5}  {'grant':5}  {'scope':5}  {'label':20}  "
        f"{'created_at':20}  {'expires_at':20}  {'last_used_at':20}  revoked_at"
    )
    for api_key in rows:
        label = (api_key.label or "-")[:20]
        user = api_key.user
        click.echo(
            f"{api_key.id:36}  {api_key.hint:9}  {user.wallet:42}  {user.role:5}  {user.grant:5}  {api_key.scope:5}  "
            f"{label:20}  {_moment(api_key.created_at):20}  {_moment(api_key.expires_at):20}  "
            f"{_moment(api_key.last_used_at):20}  {_moment(api_key.revoked_at)}"
        )


def _moment(value):
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else "-"


@keys.command("grant")
@click.option("--wallet", required=True, help="Ethereum address of a known user.")
@click.argument("grant", type=click.Choice(users.GRANTS))
@with_appcontext
def grant_wallet(wallet, grant):
    """Set the most a sign-in with Ethereum issues --wallet: `read` narrows it (its sign-ins get read keys
    alone), `write` widens it, as issuing the wallet a write key does. Its keys stay as they are: revoke its
    write keys (`keys revoke --wallet`) to take write access away now."""
    try:
        user = users.set_grant(wallet, grant)
    except UserNotFound:
        raise click.BadParameter("no user has this wallet: `keys create --wallet ADDRESS --scope read` makes one "
                                 "granted read.", param_hint="--wallet") from None
    click.echo(f"{user['wallet']} ({user['role']}) is granted {user['grant']}.")


@keys.command("revoke")
@click.argument("key_id", required=False)
@click.option("--wallet", help="Revoke every live key of this wallet instead.")
@with_appcontext
def revoke_key(key_id, wallet):
    """Revoke a key by its id (see `keys list`), or all keys of --wallet."""
    if (key_id is None) == (wallet is None):
        raise click.UsageError("Give a KEY_ID or --wallet, not both and not neither.")
    try:
        count = service.revoke_key(key_id=key_id, wallet=wallet)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--wallet") from None
    if count == 0:
        raise click.ClickException("No live key matched.")
    click.echo(f"Revoked {count} key{'s' if count != 1 else ''}.")


@keys.command("rotate")
@click.argument("key_id")
@click.option(
    "--grace", "grace_seconds", type=click.IntRange(0, service.MAX_GRACE_SECONDS), default=0, show_default=True,
    metavar="SECONDS", help="Seconds the old key keeps working.",
)
@with_appcontext
def rotate_key(key_id, grace_seconds):
    """Replace a key: issue a new one for the same user, scope, label and expiry, and revoke KEY_ID
    (see `keys list`), after --grace seconds.

    The new key is printed once, alone on the last line. Without a grace the old one is refused from
    the next request on: by this process at once, by every other worker within IDENTITY_KEY_CACHE_SECONDS.
    """
    try:
        key, api_key = service.rotate_key(key_id, grace_seconds)
    except (ValueError, ServiceError) as error:
        raise click.BadParameter(str(error), param_hint="KEY_ID") from None
    click.echo(
        f"Revoked key {key_id}{f' (in {grace_seconds} s)' if grace_seconds else ''} and issued key {api_key.id} "
        f"for {api_key.user.wallet} ({api_key.user.role}). It is shown once; store it now.",
        err=True,
    )
    click.echo(key)


DEVELOPMENT_WALLET = "0x1111111111111111111111111111111111111111"


@keys.command("bootstrap")
@click.option("--wallet", default=DEVELOPMENT_WALLET, show_default=True, help="Wallet of the first key.")
@click.option("--base-url", default="http://127.0.0.1:8000", show_default=True, help="Where the service answers.")
@with_appcontext
def bootstrap_key(wallet, base_url):
    """On a database with no keys, issue a first Admin key and show how to use it; else do nothing."""
    if service.all_keys():
        click.echo(f"Keys exist already: `{flask_command('keys', 'create', '--wallet', 'ADDRESS')}` issues another.", err=True)
        return
    key, _ = service.issue_key(wallet, "Admin")
    click.echo(
        "\nA development Admin key was issued. It is shown once; keep it.\n"
        "Try it:\n\n"
        f"  curl -s -X POST {base_url}/identity -H 'x-api-key: {key}' "
        "-H 'Content-Type: application/json' -d '{\"display_name\": \"Hello\"}'\n",
        err=True,
    )
    click.echo(key)
