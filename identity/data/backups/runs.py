"""Backups to the target: take one (made, uploaded, checked after the upload, its manifest written last),
list them, verify one, and keep IDENTITY_BACKUP_KEEP scheduled ones. Each run is a row of backup_runs,
where its outcome and its last failure are read by the Status page and /metrics on every node.
"""

import hashlib
import logging
import tempfile
from datetime import timedelta
from pathlib import Path

from flask import current_app
from sqlalchemy import select, update

from ...core import audit
from ...storage.database import db, one_statement, write_transaction
from ...storage.models import BackupRun, utcnow
from . import archive, opening
from .store import StoreError, open_store

log = logging.getLogger(__name__)
RUNS = BackupRun.__table__
VERSION = "0.1.0"


class NoTarget(Exception):
    """IDENTITY_BACKUP_URL is not set."""


def target(url=None):
    """The store of IDENTITY_BACKUP_URL (or of `url`, an s3:// or folder URL given on the command line)."""
    config = current_app.config
    url = url or config.get("IDENTITY_BACKUP_URL")
    if not url:
        raise NoTarget("No backup target: set IDENTITY_BACKUP_URL to s3://BUCKET/PREFIX or a folder (docs/backup.md), "
                       "or give a PATH to write one file.")
    return open_store(url, config.get("IDENTITY_BACKUP_S3_ADDRESSING", "auto"), config.get("IDENTITY_BACKUP_PART_MB", 16))


def service_version():
    from importlib import metadata

    try:
        return metadata.version("identity-service")
    except metadata.PackageNotFoundError:
        return VERSION


def take(kind, run_id=None, holder=None, scheduled_for=None):
    """Take one backup to the target now (`kind`: scheduled or manual), recorded in the row `run_id` (a new row
    for a manual one); returns (name, manifest). Raises archive.BackupFailed or StoreError, recorded on the row
    with the back-off before the next attempt."""
    target()  # no target: nothing to record, the command says what to set
    if run_id is None:
        run_id = start_run(kind, holder)
    try:
        name, manifest = _take(kind, run_id, scheduled_for)
    except (archive.BackupFailed, StoreError) as error:
        failed(run_id, str(error))
        audit.record_now("database.backup", "backup", None, outcome="failed", detail=str(error)[:500],
                         after={"kind": kind})
        raise
    except OSError as error:
        failed(run_id, f"the temporary folder failed: {error.strerror or error}")
        raise archive.BackupFailed(f"The backup failed in the temporary folder: {error.strerror or error}. "
                                   "Check its free space (TMPDIR names another folder).") from None
    except Exception as error:
        # Recorded, so that the run is tried again after its back-off rather than left running.
        failed(run_id, f"an unexpected {type(error).__name__}; the service's log has its trace")
        raise
    return name, manifest


def _take(kind, run_id, scheduled_for):
    config = current_app.config
    store = target()
    started = utcnow()
    with tempfile.TemporaryDirectory(prefix="identity-backup-") as folder:
        aborted = store.abort_incomplete(keep=running_names())
        if aborted:
            log.warning("backups: aborted %d upload(s) an earlier run left unfinished", len(aborted))
        # The audit log's head before the copy: every entry up to it is in the backup. Kept off the machine with
        # the manifest, it shows any later edit of the log (flask audit verify --expect SEQ:HASH).
        audit_head = audit.head()
        with archive.prepared(db.engine, Path(folder), config.get("IDENTITY_BACKUP_ENCRYPTION_KEY")) as made:
            name = f"identity-{started:%Y%m%dT%H%M%SZ}-{kind}{made.extension}"
            _record(run_id, name=name)
            store.put(name, made)
        manifest = {
            "name": name, "format": made.format, "database": made.database, "migration": made.migration,
            "issued_up_to": made.issued_up_to, "identities": made.identities, "sha256": made.sha256,
            "size": made.size, "database_size": made.database_size, "version": service_version(), "time": started.isoformat(), "kind": kind,
            "encrypted": made.format.endswith("+age"),
            "scheduled_for": scheduled_for.isoformat() if scheduled_for else None,
            "audit_head": audit_head,
        }
        problem = check_upload(store, name, made)
        manifest.update(verified=problem is None, verified_at=utcnow().isoformat(), verify_error=problem)
        store.put_manifest(name, manifest)
    if problem:
        raise archive.BackupFailed(f"{name} was uploaded but does not verify: {problem}; it does not count toward "
                                   "IDENTITY_BACKUP_KEEP.")
    finished(run_id, name, made.size)
    audit.record_now("database.backup", "backup", name, after={
        "kind": kind, "size": made.size, "identities": made.identities, "issued_up_to": made.issued_up_to})
    return name, manifest


def check_upload(store, name, made):
    """What is wrong with the uploaded object `name` against what was sent (its size and SHA-256), or None."""
    size = store.size(name)
    if size != made.size:
        return f"the store holds {size} bytes where {made.size} were sent"
    sha = hashlib.sha256()
    with store.open(name) as body:
        while block := body.read(archive.BLOCK):
            sha.update(block)
    if sha.hexdigest() != made.sha256:
        return "the store's bytes differ from those sent (SHA-256)"
    return None


def listing(store=None):
    """The target's backups, newest first: dicts of name, time, size, kind, database, migration, issued_up_to,
    identities, verified (from their manifests)."""
    store = store or target()
    found = []
    for name, size, manifest in store.listing():
        found.append({**manifest, "name": name, "size": size, "time": manifest.get("time", ""),
                      "kind": manifest.get("kind", "manual" if "-manual" in name else "scheduled")})
    return sorted(found, key=lambda backup: (backup["time"], backup["name"]), reverse=True)


def verify(name, script, store=None):
    """Check the backup `name` as it downloads: its bytes against its manifest (size, SHA-256), then opened (SQLite:
    decompressed into the temporary folder, integrity_check and a known migration; PostgreSQL: read by
    pg_restore --list from a pipe); the manifest records the outcome. Returns a line saying what was found.
    Raises archive.BackupFailed or StoreError."""
    store = store or target()
    key = current_app.config.get("IDENTITY_BACKUP_ENCRYPTION_KEY")
    manifest = opening.manifest_of(store, name)
    with tempfile.TemporaryDirectory(prefix="identity-verify-") as folder:
        try:
            opening.identity_for(manifest, key)  # a format this version reads, and the key it needs
            if manifest.get("database") == "postgresql":
                entries = archive.check_dump(lambda sink: opening.receive(store, name, manifest, key, sink), db.engine)
                found = f"pg_restore --list reads {entries} entries"
            else:
                migration, identities, issued = archive.sqlite_facts(_received(store, name, manifest, key, folder))
                if script.get_revision(migration) is None:
                    raise archive.BackupFailed(f"its migration {migration} is not one this version knows")
                found = f"integrity check ok, migration {migration}, {identities} identities, issued up to {issued}"
        except archive.BackupFailed as error:
            manifest.update(verified=False, verified_at=utcnow().isoformat(), verify_error=str(error))
            store.put_manifest(name, manifest)
            raise
        manifest.update(verified=True, verified_at=utcnow().isoformat(), verify_error=None)
        store.put_manifest(name, manifest)
    return found


def _received(store, name, manifest, key, folder):
    """The SQLite database of the backup `name`, decompressed into `folder` as it downloads: the one file there."""
    archive.check_space(folder, opening.needed_space(manifest), doing="opening this backup (its database, "
                        "decompressed)")
    plain = Path(folder) / "identity.db"
    try:
        with open(plain, "wb") as out:
            opening.receive(store, name, manifest, key, out)
    except OSError as error:
        raise archive.BackupFailed(f"The backup could not be written in {folder}: {error.strerror or error}. Check "
                                   "its free space (TMPDIR names another folder).") from None
    return plain


def keep_newest(keep, store=None):
    """Delete the scheduled backups beyond the `keep` newest that verified (and unverified scheduled ones older
    than those); manual ones are never deleted. Returns the names deleted."""
    store = store or target()
    scheduled = [backup for backup in listing(store) if backup["kind"] == "scheduled"]
    verified = [backup for backup in scheduled if backup.get("verified")]
    if len(verified) <= keep:
        return []
    oldest_kept = verified[keep - 1]["time"]
    doomed = verified[keep:] + [b for b in scheduled if not b.get("verified") and b["time"] < oldest_kept]
    for backup in doomed:
        store.delete(backup["name"])
    return [backup["name"] for backup in doomed]


# The rows of backup_runs.

def start_run(kind, holder=None, scheduled_for=None):
    with write_transaction() as session:
        run = BackupRun(kind=kind, status="running", holder=holder, scheduled_for=scheduled_for, failures=0,
                        started_at=utcnow())
        session.add(run)
        session.flush()
        return run.id


def _record(run_id, **values):
    with write_transaction() as session:
        session.execute(update(RUNS).where(RUNS.c.id == run_id).values(**values))


def finished(run_id, name, size):
    _record(run_id, status="ok", name=name, size=size, finished_at=utcnow(), next_attempt_at=None)


def failed(run_id, why):
    """Record a failed attempt: its cause, and when the next is due (the back-off doubles per failure)."""
    config = current_app.config
    with write_transaction() as session:
        run = session.get(BackupRun, run_id)
        run.failures += 1
        pause = min(config["IDENTITY_BACKUP_RETRY_MIN_SECONDS"] * 2 ** (run.failures - 1),
                    config["IDENTITY_BACKUP_RETRY_MAX_SECONDS"])
        run.status, run.last_error, run.last_error_at = "failed", why[:2000], utcnow()
        run.next_attempt_at = utcnow() + timedelta(seconds=pause)
    log.warning("backups: a %s backup failed: %s; tried again in %.0f s", run.kind, why, pause)


def running_names():
    """The names of the backups that a run is uploading now (theirs are not incomplete uploads to abort)."""
    with one_statement() as connection:
        names = connection.execute(select(RUNS.c.name).where(RUNS.c.status == "running", RUNS.c.name.is_not(None)))
        return set(names.scalars())

