"""A backup read back from the store as it downloads, for `backups verify` and `restore NAME`: its bytes hashed
(SHA-256) and counted against the manifest, decrypted (age) when encrypted, and decompressed (Zstandard) on
SQLite, straight into the one place that needs them: the SQLite file that integrity_check opens and a restore
puts in place, or pg_restore's standard input. Nothing else is written, and memory holds a few blocks.

The object's last block is passed on only once the whole object's size and SHA-256 match the manifest: what
reads the bytes (pg_restore above all) never reaches the end of a damaged or altered backup, and fails rather
than completes. The download is read by the caller (cooperatively, in a gevent worker); SHA-256, age,
Zstandard and the writes run on a thread (streams.in_background), fed through a pipe.
"""

import hashlib
import os

import pyrage
import zstandard

from .archive import BackupFailed
from .store import MANIFEST, StoreError, parse_manifest
from .streams import BLOCK, in_background, off_the_loop

FORMATS = ("sqlite+zstd", "pg_dump-custom")


def manifest_of(store, name):
    """The manifest of the backup `name` on `store` (a dict); StoreError when there is none."""
    try:
        with store.open(f"{name}{MANIFEST}") as raw:
            return parse_manifest(raw.read())
    except StoreError:
        raise StoreError(f"No backup {name} at {store.where} (no manifest {name}{MANIFEST}: an upload that never "
                         "finished, or a wrong name): `flask backups list` names those there.") from None


def identity_for(manifest, key):
    """The age identity that opens the backup of `manifest` (None when it is not encrypted), once its format is one
    this version reads: checked before anything is downloaded. Raises BackupFailed."""
    fmt = manifest.get("format", "")
    if fmt.removesuffix("+age") not in FORMATS:
        raise BackupFailed(f"The backup's format {fmt or '(none)'} is not one this version of the service reads.")
    if not fmt.endswith("+age"):
        return None
    if not key:
        raise BackupFailed("This backup is encrypted (age): set IDENTITY_BACKUP_ENCRYPTION_KEY (or _FILE) to the "
                           "key it was made with, and run the command again. Nothing was changed.")
    return pyrage.x25519.Identity.from_str(key)


def needed_space(manifest):
    """The bytes that opening the backup of `manifest` writes: the SQLite database, decompressed (its size as the
    manifest gives it; a manifest without it gives the object's, the least it can be); none for pg_dump's
    archive, which pg_restore reads from a pipe."""
    if manifest.get("database") != "sqlite":
        return 0
    return manifest.get("database_size") or manifest.get("size") or 0


def receive(store, name, manifest, key, sink):
    """Write the plain database of the backup `name` (the SQLite file, or pg_dump's archive) into `sink`, a writable,
    as it downloads; returns the bytes written. Raises BackupFailed (the object does not match its manifest, the
    key does not open it, it does not decompress), StoreError, or the OSError of a write into `sink`."""
    identity = identity_for(manifest, key)
    read, write = os.pipe()
    wait = in_background(_unpack_from, read, manifest, identity, sink)
    pipe = os.fdopen(write, "wb", buffering=BLOCK)
    try:
        store.copy(name, lambda block: off_the_loop(pipe.write, block))
        off_the_loop(pipe.flush)
    except BrokenPipeError:
        pass  # the thread stopped reading: wait() raises why
    except BaseException:
        _close(pipe)  # the thread meets the end of the bytes, and stops
        try:
            wait()
        except Exception:  # noqa: BLE001 - the download's own failure is the cause, and the one reported
            pass
        raise
    _close(pipe)
    return wait()


def _close(pipe):
    try:
        pipe.close()
    except OSError:
        pass  # a reader that stopped early: the bytes it left are not wanted


def _unpack_from(fd, manifest, identity, sink):
    with os.fdopen(fd, "rb", buffering=BLOCK) as source:  # closed on return: a writer still writing stops
        return unpack(source, manifest, identity, sink)


def unpack(source, manifest, identity, sink):
    """The backup's bytes read from `source` (a readable), checked, decrypted with `identity` (when not None) and
    decompressed (SQLite), written into `sink`; returns the bytes written. C code over files: run it off the
    loop."""
    checked = Checked(source, manifest)
    written = Written(sink)
    target = written
    if manifest.get("format", "").startswith("sqlite+zstd"):
        target = zstandard.ZstdDecompressor().stream_writer(written, write_size=BLOCK, closefd=False)
    try:
        if identity is not None:
            pyrage.decrypt_io(checked, target, [identity])
        else:
            while block := checked.read(BLOCK):
                target.write(block)
        target.flush()
    except (pyrage.DecryptError, zstandard.ZstdError, OSError) as error:
        raise checked.failure or written.failure or _unreadable(error) from None
    expected = manifest.get("database_size")
    if target is not written and expected is not None and written.size != expected:
        raise BackupFailed(f"The backup decompresses to {written.size} bytes where its manifest says {expected}: it is "
                           "damaged. Restore another backup. Nothing was changed.")
    return written.size


def _unreadable(error):
    if isinstance(error, pyrage.DecryptError):
        return BackupFailed("The encryption key does not open this backup: it was made with another key. Set "
                            "IDENTITY_BACKUP_ENCRYPTION_KEY to that one. Nothing was changed.")
    if isinstance(error, zstandard.ZstdError):
        return BackupFailed(f"The backup does not decompress ({error}): it is damaged. Restore another backup. "
                            "Nothing was changed.")
    return BackupFailed(f"The backup does not decrypt ({error}): it is damaged or cut short. Restore another backup. "
                        "Nothing was changed.")


class Checked:
    """A readable over the object's bytes that hashes (SHA-256) and counts them, and holds the last block back until
    the end, when size and hash are checked against the manifest: on a mismatch it raises BackupFailed (kept in
    `failure`, for a reader such as pyrage that reports it as its own error) and never gives that block."""

    def __init__(self, source, manifest):
        self.source, self.sha, self.size = source, hashlib.sha256(), 0
        self.expected_size, self.expected_sha = manifest.get("size"), manifest.get("sha256")
        self.held, self.view, self.offset, self.ended, self.failure = b"", memoryview(b""), 0, False, None

    def readable(self):
        return True

    def read(self, size=-1):
        if self.failure is not None:
            raise self.failure
        while self.offset >= len(self.view) and not self.ended:
            self._advance()
        end = len(self.view) if size is None or size < 0 else self.offset + size
        data = bytes(self.view[self.offset:end])
        self.offset += len(data)
        return data

    def _advance(self):
        block = self.source.read(BLOCK)
        if block:
            self.sha.update(block)
            self.size += len(block)
            if self.expected_size is not None and self.size > self.expected_size:
                self._fail(" or more")
            released, self.held = self.held, block
        else:
            if (self.expected_size not in (None, self.size)
                    or self.expected_sha not in (None, self.sha.hexdigest())):
                self._fail("")
            released, self.held, self.ended = self.held, b"", True
        self.view, self.offset = memoryview(released), 0

    def _fail(self, more):
        sha = self.sha.hexdigest()
        self.failure = BackupFailed(
            f"The downloaded backup does not match its manifest ({self.size} bytes{more}, SHA-256 {sha[:12]}..., where the manifest says {self.expected_size} bytes, "
            f"{str(self.expected_sha)[:12]}...): it is damaged or was altered. Restore another backup. Nothing was "
            "changed.")
        raise self.failure


class Written:
    """A writable that counts the bytes it passes on to `sink`, and keeps the OSError of a write that failed (a full
    disk, a reader gone) in `failure`."""

    def __init__(self, sink):
        self.sink, self.size, self.failure = sink, 0, None

    def write(self, data):
        try:
            self.sink.write(data)
        except OSError as error:
            self.failure = error
            raise
        self.size += len(data)
        return len(data)

    def flush(self):
        try:
            self.sink.flush()
        except OSError as error:
            self.failure = error
            raise
