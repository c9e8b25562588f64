"""`flask --app app mirrors ...`: register, list, pause, resume and remove the upstreams this instance
follows, and `mirrors run`, a follower on its own."""

import sys

import click
from flask.cli import pass_script_info, with_appcontext
from marshmallow import ValidationError

from ..core.errors import MirrorNotFound, ServiceError
from ..data import follower, mirrors
from ..schemas import MirrorCreateSchema, MirrorPatchSchema
from ..storage.readiness import flask_command
from . import needs_database
from .background import run_alone

KEY_HELP = "An API key of the upstream (read scope is enough); `-` reads it from standard input, out of the shell's history."


@click.group("mirrors")
@with_appcontext
@needs_database
def mirrors_group():
    """Follow other instances and keep a verified copy of their identities."""


def _key(key):
    return sys.stdin.readline().strip() if key == "-" else key


def _checked(schema, values):
    try:
        return schema.load(values)
    except ValidationError as error:
        problems = "; ".join(f"{name}: {' '.join(map(str, messages))}" for name, messages in error.messages.items())
        raise click.UsageError(problems) from None


def _show(mirror):
    state = mirrors.state(mirror)
    lag = state["lag_seconds"]
    return (f"{mirror.id}  {mirror.name}  {mirror.url}  {'active' if mirror.active else 'paused'}  position "
            f"{mirror.position} of {mirror.upstream_head}, lag {state['lag_entries']} entries, "
            f"{'-' if lag is None else f'{lag:g}'} s; applied {mirror.applied}, already present {mirror.already_present}, "
            f"rejected {mirror.rejected}" + (f"; {'failing' if state['failing'] else 'past error'} "
                                             f"{mirror.last_error_at:%Y-%m-%dT%H:%M:%SZ}: {mirror.last_error}"
                                             if mirror.last_error else ""))


@mirrors_group.command("add")
@click.argument("url")
@click.option("--key", required=True, help=KEY_HELP)
@click.option("--name", default=None, help="What the mirror is called (unique; default: the upstream's host).")
@with_appcontext
def add_mirror(url, key, name):
    """Follow the upstream at URL from the start of its feed; prints the mirror's id on the last line."""
    fields = _checked(MirrorCreateSchema(), {"url": url, "key": _key(key), **({"name": name} if name else {})})
    try:
        mirror = mirrors.register(**fields)
    except ServiceError as error:
        raise click.ClickException(" ".join([error.detail, *sum(error.extra.get("errors", {}).values(), [])])) from None
    click.echo(f"Mirror {mirror.name} registered; serving processes (or `mirrors run`) follow it.", err=True)
    click.echo(mirror.id)


@mirrors_group.command("list")
@with_appcontext
def list_mirrors():
    """List the mirrors: state, position, lag, counts and last error (never their keys)."""
    for mirror in mirrors.all_mirrors():
        click.echo(_show(mirror))


def _unknown(mirror_id):
    return click.ClickException(f"No mirror has the id {mirror_id}; `{flask_command('mirrors', 'list')}` lists them.")


def _change(mirror_id, changes):
    try:
        mirror = mirrors.update(mirror_id, _checked(MirrorPatchSchema(), changes))
    except MirrorNotFound:
        raise _unknown(mirror_id) from None
    click.echo(_show(mirror))


@mirrors_group.command("pause")
@click.argument("mirror_id", type=click.UUID)
@with_appcontext
def pause_mirror(mirror_id):
    """Stop following MIRROR_ID (see `mirrors list`) until it is resumed."""
    _change(mirror_id, {"active": False})


@mirrors_group.command("resume")
@click.argument("mirror_id", type=click.UUID)
@click.option("--key", default=None, help="A new key of the upstream to follow it with. " + KEY_HELP)
@with_appcontext
def resume_mirror(mirror_id, key):
    """Follow MIRROR_ID again from where it stopped."""
    _change(mirror_id, {"active": True, **({"key": _key(key)} if key else {})})


@mirrors_group.command("remove")
@click.argument("mirror_id", type=click.UUID)
@with_appcontext
def remove_mirror(mirror_id):
    """Stop following MIRROR_ID and forget it; the identities it copied stay, as this instance's own."""
    try:
        mirrors.remove(mirror_id)
    except MirrorNotFound:
        raise _unknown(mirror_id) from None
    click.echo(f"Mirror {mirror_id} removed.")


@mirrors_group.command("run")
@pass_script_info
def run_follower(script_info):
    """Follow the active mirrors until stopped (SIGINT or SIGTERM); one follower works at a time, through the lease."""
    run_alone(follower.Follower(script_info.load_app()), "Following the mirrors")
