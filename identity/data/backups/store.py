"""Where backups go: an S3-compatible bucket and prefix (boto3, with the AWS SDK's own settings for
credentials, region and endpoint) or a folder. Both hold a backup as one object and, beside it, its
manifest (`NAME.json`), written last: a backup lists only once its manifest is there, so nothing partial
ever lists.

Every failure of the store is a StoreError whose message says what went wrong, in words, and what to do;
none carries a secret (botocore's messages name the key id at most, never the secret key).
"""

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import boto3
from boto3.exceptions import S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from .streams import Piped, off_the_loop

MANIFEST = ".json"
PREFIX = "identity-"
MiB = 1024 * 1024

_REFUSED = {"SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "InvalidToken", "ExpiredToken",
            "AuthorizationHeaderMalformed", "InvalidSecurity", "403"}
_NO_BUCKET = {"NoSuchBucket"}


class StoreError(Exception):
    """The store could not do what was asked; the message says why and what to do, and holds no secret."""


@dataclass
class Stored:
    name: str
    size: int


def open_store(url, addressing="auto", part_mb=16):
    """The store IDENTITY_BACKUP_URL names: an S3Store for s3://, else a FolderStore."""
    if url.startswith("s3://"):
        return S3Store(url, addressing, part_mb)
    return FolderStore(Path(unquote(urlsplit(url).path)) if url.startswith("file://") else Path(url))


class FolderStore:
    """Backups in a folder (a mounted disk of another machine, say): written under a temporary name and
    renamed when complete. The folder must exist: a missing one is reported, never created."""

    def __init__(self, folder):
        self.folder = folder
        self.where = str(folder)

    def _checked(self):
        if not self.folder.is_dir():
            raise StoreError(f"The backup folder {self.folder} does not exist: create it (the service does not), "
                             "or fix IDENTITY_BACKUP_URL.")
        return self.folder

    def _faults(self, doing, error):
        return StoreError(f"The backup folder {self.folder} could not be {doing}: {error.strerror or error}. "
                          "Check that it is mounted, writable and has free space.")

    def abort_incomplete(self, keep=()):
        """Remove what an interrupted upload left (a temporary file), except the names in `keep`."""
        for partial in self._checked().glob(f".{PREFIX}*.partial"):
            if not any(partial.name.startswith(f".{name}.") for name in keep):
                partial.unlink(missing_ok=True)
        return []

    def put(self, name, made):
        """Write the backup `made` (archive.Made) here as `name`: poured into a temporary file of this folder, off
        the loop, synced, and renamed once whole."""
        folder = self._checked()
        partial = folder / f".{name}.partial"
        try:
            handle, partial = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=folder)
            with os.fdopen(handle, "wb") as target:
                off_the_loop(_poured, made, target)
            made.finish()
            os.replace(partial, folder / name)
        except BaseException as error:
            Path(partial).unlink(missing_ok=True)  # nothing partial stays, whatever stopped the backup
            if isinstance(error, OSError):
                raise self._faults("written", error) from None
            raise

    def put_manifest(self, name, manifest):
        folder = self._checked()
        try:
            partial = folder / f".{name}{MANIFEST}.partial"
            partial.write_text(json.dumps(manifest, indent=1, sort_keys=True))
            os.replace(partial, folder / f"{name}{MANIFEST}")
        except OSError as error:
            raise self._faults("written", error) from None

    def size(self, name):
        try:
            return (self._checked() / name).stat().st_size
        except OSError as error:
            raise self._faults("read", error) from None

    def open(self, name):
        try:
            return open(self._checked() / name, "rb")
        except FileNotFoundError:
            raise StoreError(f"No backup {name} in {self.folder}: `flask backups list` names those there.") from None
        except OSError as error:
            raise self._faults("read", error) from None

    def copy(self, name, write):
        """Pass the bytes of `name` to write(block), a block at a time, in order."""
        with self.open(name) as source:
            while True:
                try:
                    block = source.read(MiB)
                except OSError as error:
                    raise self._faults("read", error) from None
                if not block:
                    return
                write(block)

    def listing(self):
        """(name, size, manifest) of every backup whose manifest is there."""
        found = []
        try:
            for path in self._checked().glob(f"{PREFIX}*{MANIFEST}"):
                name = path.name.removesuffix(MANIFEST)
                if (self.folder / name).is_file():
                    found.append((name, (self.folder / name).stat().st_size, parse_manifest(path.read_bytes())))
        except OSError as error:
            raise self._faults("read", error) from None
        return found

    def delete(self, name):
        try:
            (self._checked() / f"{name}{MANIFEST}").unlink(missing_ok=True)
            (self.folder / name).unlink(missing_ok=True)
        except OSError as error:
            raise self._faults("written", error) from None


class S3Store:
    """Backups under a prefix of an S3 bucket. Uploads go in parts (boto3's managed transfer), and an upload
    that fails is aborted: by boto3 at once, or by abort_incomplete() at the next contact."""

    def __init__(self, url, addressing, part_mb=16):
        # Parts of `part_mb` MiB, four at a time: memory stays near five parts whatever the size (16 MiB parts
        # reach 160 GiB in S3's 10,000).
        self.transfer = TransferConfig(multipart_threshold=part_mb * MiB, multipart_chunksize=part_mb * MiB,
                                       max_concurrency=4, use_threads=True)
        # A stream's parts are read into memory before they are sent: four at most, and the one being read.
        self.transfer.max_in_memory_upload_chunks = 4
        parts = urlsplit(url)
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/") + "/" if parts.path.strip("/") else ""
        self.where = f"s3://{self.bucket}/{self.prefix}"
        session = boto3.session.Session()
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if addressing == "auto":
            # A store other than AWS is reached at its endpoint's own host: the bucket goes in the path.
            addressing = "path" if endpoint else "auto"
        self.endpoint = endpoint or "AWS"
        self.client = session.client("s3", config=Config(
            s3={"addressing_style": addressing}, retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5, read_timeout=60,
        ))

    def _key(self, name):
        return f"{self.prefix}{name}"

    def _error(self, error):
        return StoreError(describe(error, self.bucket, self.endpoint))

    def abort_incomplete(self, keep=()):
        """Abort every multipart upload of a backup under the prefix, except those of the names in `keep`
        (backups running now); returns the keys aborted."""
        aborted = []
        try:
            listed = self.client.list_multipart_uploads(Bucket=self.bucket, Prefix=self._key(PREFIX))
            for upload in listed.get("Uploads", []):
                if upload["Key"].removeprefix(self.prefix) not in keep:
                    self.client.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"],
                                                       UploadId=upload["UploadId"])
                    aborted.append(upload["Key"])
        except (BotoCoreError, ClientError) as error:
            raise self._error(error) from None
        return aborted

    def put(self, name, made):
        """Upload the backup `made` (archive.Made) as `name`, its bytes made as they are sent: poured on a thread
        into a pipe that boto3 reads a part at a time. An upload that fails, or whose bytes break off, is aborted
        (by boto3), and completes only once `made` ended well."""
        stream = Piped(made.pour, made.finish)
        try:
            self.client.upload_fileobj(stream, self.bucket, self._key(name), Config=self.transfer)
        except (BotoCoreError, ClientError, S3UploadFailedError) as error:
            raise self._error(error) from None
        finally:
            stream.close()

    def put_manifest(self, name, manifest):
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(f"{name}{MANIFEST}"),
                                   Body=json.dumps(manifest, indent=1, sort_keys=True).encode(),
                                   ContentType="application/json")
        except (BotoCoreError, ClientError) as error:
            raise self._error(error) from None

    def size(self, name):
        try:
            return self.client.head_object(Bucket=self.bucket, Key=self._key(name))["ContentLength"]
        except (BotoCoreError, ClientError) as error:
            raise self._error(error) from None

    def open(self, name):
        """The object's bytes as a stream (read in order, never held whole)."""
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(name))["Body"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise StoreError(f"No backup {name} in {self.where}: `flask backups list` names those there.") from None
            raise self._error(error) from None
        except BotoCoreError as error:
            raise self._error(error) from None

    def copy(self, name, write):
        """Pass the object's bytes to write(block), a block at a time, as they download: never held whole."""
        with self.open(name) as body:
            while True:
                try:
                    block = body.read(MiB)
                except (BotoCoreError, ClientError) as error:
                    raise self._error(error) from None
                if not block:
                    return
                write(block)

    def listing(self):
        try:
            objects = {}
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                              Prefix=self._key(PREFIX)):
                for item in page.get("Contents", []):
                    objects[item["Key"].removeprefix(self.prefix)] = item["Size"]
            found = []
            for name, size in objects.items():
                if not name.endswith(MANIFEST) and f"{name}{MANIFEST}" in objects:
                    body = self.client.get_object(Bucket=self.bucket, Key=self._key(f"{name}{MANIFEST}"))["Body"]
                    found.append((name, size, parse_manifest(body.read())))
            return found
        except (BotoCoreError, ClientError) as error:
            raise self._error(error) from None

    def delete(self, name):
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(f"{name}{MANIFEST}"))
            self.client.delete_object(Bucket=self.bucket, Key=self._key(name))
        except (BotoCoreError, ClientError) as error:
            raise self._error(error) from None


def describe(error, bucket, endpoint):
    """A boto3 failure in words: what happened and what to do."""
    if isinstance(error, NoCredentialsError):
        return ("No credentials for the store: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or another of the "
                "AWS SDK's ways).")
    code = ""
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
    elif isinstance(error, S3UploadFailedError):
        text = str(error)
        code = next((known for known in (*_REFUSED, *_NO_BUCKET) if f"({known})" in text), "")
    if code in _NO_BUCKET or (code == "404" and isinstance(error, ClientError)
                              and error.operation_name in ("HeadBucket", "ListObjectsV2")):
        return (f"The bucket {bucket} does not exist at {endpoint}: create it (the service never creates one), or "
                "fix IDENTITY_BACKUP_URL.")
    if code in _REFUSED:
        return (f"The store at {endpoint} refused the credentials ({code}): check AWS_ACCESS_KEY_ID and "
                f"AWS_SECRET_ACCESS_KEY, and that they may write to the bucket {bucket}.")
    if code:
        return f"The store at {endpoint} answered {code} for the bucket {bucket}; check the bucket and its settings."
    if isinstance(error, BotoCoreError | S3UploadFailedError):
        return (f"The store at {endpoint} could not be reached or stopped answering "
                f"({type(error).__name__}): check that it is up and AWS_ENDPOINT_URL; the backup is tried again.")
    return f"The store at {endpoint} failed ({type(error).__name__})."


def _poured(made, target):
    made.pour(target)
    target.flush()
    os.fsync(target.fileno())


def parse_manifest(raw):
    try:
        manifest = json.loads(raw)
    except ValueError:
        return {}
    return manifest if isinstance(manifest, dict) else {}
