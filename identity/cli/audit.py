"""`flask --app app audit ...`: list, export (JSON Lines), verify (walk the chain) and prune the audit log; and
what the command line gives each entry it records (via cli, the command, an id for the run)."""

import json
import sys

import click
from flask import has_request_context
from flask.cli import with_appcontext
from marshmallow import ValidationError

from ..core import audit, audit_log, audit_retention
from ..core.errors import InvalidParameters
from ..schemas import AuditListArgsSchema
from . import faults, needs_database

_RUN_ID = "identity_audit_request_id"
_list_args = AuditListArgsSchema()


def cli_context():
    """The context of an entry recorded by a command (core.audit.provide), else None: via cli, the command's
    path (never its arguments, which may carry a secret) as the user agent, one id for the whole run."""
    context = click.get_current_context(silent=True)
    if context is None or has_request_context():
        return None
    root = context.find_root()
    run_id = root.meta.setdefault(_RUN_ID, audit.new_request_id())
    command = " ".join(["flask", *context.command_path.split()[1:]])  # the root's name is the program's
    return {"via": "cli", "request_id": run_id, "client_address": None, "user_agent": command, "caller": None}


def init_app(app):
    audit.provide(cli_context)


@click.group("audit")
@with_appcontext
@needs_database
def audit_group():
    """Read, export, verify and prune the audit log."""


def _filters(actor, action, target, since, until, limit=None):
    asked = {name: value for name, value in (("actor", actor), ("action", action), ("target", target),
                                             ("since", since), ("until", until), ("limit", limit)) if value is not None}
    try:
        return _list_args.load(asked)
    except ValidationError as invalid:
        name, messages = next(iter(invalid.normalized_messages().items()))
        raise click.BadParameter(" ".join(map(str, messages)), param_hint=f"--{name}") from None


_FILTER_OPTIONS = (
    click.option("--actor", help="Only what this wallet did."),
    click.option("--action", help="Only this action, e.g. key.revoke."),
    click.option("--target", help="Only what was done to this target id."),
    click.option("--since", help="Only entries at or after this time (RFC 3339)."),
    click.option("--until", help="Only entries at or before this time (RFC 3339)."),
)


def filter_options(command):
    for option in reversed(_FILTER_OPTIONS):
        command = option(command)
    return command


@audit_group.command("list")
@filter_options
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True, help="Entries to show.")
@with_appcontext
def list_command(actor, action, target, since, until, limit):
    """Show the newest entries, one a line: seq, time, who (wallet, via), action, target, outcome."""
    args = _filters(actor, action, target, since, until, limit)
    try:
        with faults("The listing"):
            page = audit_log.list_entries(args)
    except InvalidParameters as invalid:
        raise click.BadParameter(str(invalid.errors)) from None
    for entry in page["data"]:
        who = entry["actor"]["wallet"] or "-"
        target_text = f"{entry['target']['kind']}:{entry['target']['id'] or '-'}"
        click.echo(f"{entry['seq']:>8}  {entry['at']}  {who:42}  {entry['actor']['via']:7}  {entry['action']:24}  "
                   f"{target_text}  {entry['outcome']}")


@audit_group.command("export")
@click.option("--after", type=click.IntRange(0), default=0, show_default=True, metavar="SEQ",
              help="Only the entries after this seq.")
@with_appcontext
def export_command(after):
    """Write every entry, oldest first, as JSON Lines to standard output, each with its hash and prev_hash."""
    written = 0
    with faults("The export"):
        for row in audit_log.entries(after):
            sys.stdout.write(json.dumps(audit.shown(row), separators=(",", ":"), ensure_ascii=False) + "\n")
            written += 1
    click.echo(f"exported {written} entries", err=True)


@audit_group.command("verify")
@click.option("--expect", metavar="SEQ:HASH", default=None,
              help="A head kept elsewhere (from /metrics or a backup's manifest): that entry must still be there, unchanged.")
@with_appcontext
def verify_command(expect):
    """Walk the chain from its start to its head, and name the first entry changed, removed or inserted
    (exit 1); exit 0 when every entry is as it was appended."""
    expected = None
    if expect is not None:
        seq, _, hash_ = expect.partition(":")
        if not (seq.isdigit() and len(hash_) == 64 and all(c in "0123456789abcdef" for c in hash_)):
            raise click.BadParameter("give the seq and the hash of an entry, as SEQ:HASH (64 hex digits).",
                                     param_hint="--expect")
        expected = (int(seq), hash_)
    with faults("The verification"):
        verified = audit_log.verify(expected)
    if verified.finding is not None:
        click.echo(f"The audit log does not verify: {verified.finding}. Entries up to there: {verified.checked} "
                   "checked. Compare with an export or a backup kept elsewhere to see what was there.", err=True)
        sys.exit(1)
    click.echo(f"The audit log verifies: {verified.checked} entries from seq {verified.start_seq + 1} to the head, "
               f"seq {verified.head_seq}, hash {verified.head_hash}.")


@audit_group.command("prune")
@click.option("--days", type=click.IntRange(0), default=None, metavar="DAYS",
              help="Keep this many days (default IDENTITY_AUDIT_RETENTION_DAYS; 0 keeps all).")
@with_appcontext
def prune_command(days):
    """Delete the entries older than the retention now, in batches; the chain stays verifiable from the oldest kept."""
    with faults("The prune"):
        removed = audit_retention.prune(days)
    click.echo(f"pruned {removed} entries")
