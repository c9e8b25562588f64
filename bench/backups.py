"""`make bench` for backups kept elsewhere: a backup to an S3 store on this machine (SeaweedFS's `weed mini`,
as the tests start it) against the floor of doing it by hand, at 1,000,000 identities on SQLite.

- the service's way: `flask backup` to IDENTITY_BACKUP_URL (online backup, then Zstandard streamed into a
  multipart upload, and the check after it: size and SHA-256 of a download), as a scheduled backup runs, with
  the peak of its temporary folder's bytes (the contract: at most one backup);
- the floor: `flask backup PATH` followed by a plain upload of that file with the same client (boto3's
  upload_file, its defaults).

Goal (the contract): the first at most 1.5 times the second. Each runs as a process of its own, measured by its
wall time and its peak RSS (VmHWM). BENCH_BACKUPS_N sets the number of identities; BENCH_SKIP_1M=1 or
BENCH_QUICK=1 makes it 20,000.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.portable import FLASK_WITH_PEAK, export_lines  # noqa: E402
from bench.run import SKIP_SCALE  # noqa: E402
from tests.common.seaweed import BUCKET, Seaweed  # noqa: E402
from tests.common.space import Watcher  # noqa: E402

GOAL = 1.5

# A plain upload of one file with boto3's defaults; prints its peak RSS (KiB) last on stderr.
PLAIN_UPLOAD = """
import sys
import boto3
boto3.client("s3").upload_file(sys.argv[1], sys.argv[2], sys.argv[3])
with open("/proc/self/status") as status:
    print(next(line.split()[1] for line in status if line.startswith("VmHWM:")), file=sys.stderr)
"""


def timed(args, env, stdin=None):
    """Run `args`; returns (wall seconds, peak RSS in MB, stdout)."""
    started = time.perf_counter()
    result = subprocess.run(args, cwd=ROOT, env=env, stdin=stdin, capture_output=True, timeout=7200)
    seconds = time.perf_counter() - started
    if result.returncode:
        raise SystemExit(f"{' '.join(map(str, args[:4]))} failed:\n{result.stderr.decode()[-2000:]}")
    return seconds, int(result.stderr.decode().split()[-1]) / 1024, result.stdout.decode()


def main():
    count = int(os.environ.get("BENCH_BACKUPS_N") or (20_000 if SKIP_SCALE else 1_000_000))
    with tempfile.TemporaryDirectory(prefix="bench-backups-") as folder:
        folder = Path(folder)
        store = Seaweed(folder / "store").start()
        try:
            store.client().create_bucket(Bucket=BUCKET)
            env = {**os.environ, "DATABASE_URL": f"sqlite:///{folder / 'identity.db'}", **store.env(),
                   "IDENTITY_BACKUP_URL": f"s3://{BUCKET}/bench/"}
            flask = [sys.executable, "-c", FLASK_WITH_PEAK]
            timed([*flask, "db", "upgrade"], env)
            lines = folder / "identities.jsonl"
            with lines.open("wb") as stream:
                stream.writelines(export_lines(count))
            with lines.open("rb") as stdin:
                timed([*flask, "identities", "import", "-"], env, stdin=stdin)
            lines.unlink()
            size = (folder / "identity.db").stat().st_size
            scratch = folder / "tmp"
            scratch.mkdir()
            with Watcher(scratch, every=0.005) as watcher:
                service, service_rss, name = timed([*flask, "backup"], {**env, "TMPDIR": str(scratch)})
            scratch_peak = watcher.peak
            local, local_rss, _ = timed([*flask, "backup", str(folder / "copy.db")], env)
            upload, upload_rss, _ = timed([sys.executable, "-c", PLAIN_UPLOAD, str(folder / "copy.db"), BUCKET,
                                           "bench/plain.db"], env)
            stored = store.client().head_object(Bucket=BUCKET, Key=f"bench/{name.strip().splitlines()[-1]}")
        finally:
            store.stop()
    floor = local + upload
    ratio = service / floor
    print(f"backups to an S3 store on this machine (SeaweedFS), {count:,} identities on SQLite "
          f"({size / 2**20:,.0f} MiB database):")
    print(f"  flask backup (to the store)        {service:7.1f} s   peak RSS {service_rss:4.0f} MB   "
          f"object {stored['ContentLength'] / 2**20:,.0f} MiB (compressed), verified after the upload")
    print(f"    temporary space at its peak      {scratch_peak / 2**20:7.1f} MiB ({scratch_peak / size:.2f} of the "
          "database file; the goal: at most one backup)")
    print(f"  flask backup PATH                  {local:7.1f} s   peak RSS {local_rss:4.0f} MB")
    print(f"  + plain boto3 upload of that file  {upload:7.1f} s   peak RSS {upload_rss:4.0f} MB")
    verdict = "ok" if ratio <= GOAL else "ABOVE GOAL"
    print(f"  ratio {ratio:.2f} of the floor ({floor:.1f} s) (goal at most {GOAL}, {verdict})")


if __name__ == "__main__":
    main()
