"""A backup taken in a gevent worker (the default server's) leaves the worker's other greenlets running: the
copy (or pg_dump's output), its compression, encryption and hash run off the worker's loop, on the way to a folder
or to the S3 store."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
from gevent import monkey; monkey.patch_all()
import os, sys, tempfile, time
from pathlib import Path
import gevent
from flask_migrate import upgrade
from sqlalchemy import text
from identity import create_app
from identity.data.backups import archive
from identity.data.backups.store import open_store
from identity.storage.database import db

app = create_app({"SQLALCHEMY_DATABASE_URI": sys.argv[1]})
sqlite = sys.argv[1].startswith("sqlite")
with app.app_context():
    upgrade()
    db.session.execute(text("DROP TABLE IF EXISTS backup_test_filler"))  # one a failed run left
    db.session.execute(text("CREATE TABLE backup_test_filler (b %s)" % ("BLOB" if sqlite else "BYTEA")))
    for _ in range(40):  # 40 MB that compression cannot shrink much: work that takes a while
        db.session.execute(text("INSERT INTO backup_test_filler VALUES (:b)"), {"b": os.urandom(1000000)})
    db.session.commit()
ticks = []
def tick():
    while True:
        gevent.sleep(0.005)
        ticks.append(time.monotonic())
ticker = gevent.spawn(tick)
gevent.sleep(0.05)
with app.app_context(), tempfile.TemporaryDirectory() as folder:
    target = sys.argv[2] if sys.argv[2].startswith("s3://") else Path(folder) / "target"
    if not sys.argv[2].startswith("s3://"):
        target.mkdir()
    store = open_store(str(target), "auto", 5)
    before = len(ticks)
    with archive.prepared(db.engine, Path(folder)) as made:
        store.put("identity-serving" + made.extension, made)
    during = len(ticks) - before
    db.session.execute(text("DROP TABLE backup_test_filler"))
    db.session.commit()
ticker.kill()
print(during, made.size)
"""


@pytest.mark.parametrize("where", ["folder", "s3"])
def test_a_backup_in_a_gevent_worker_leaves_its_other_greenlets_running(database_url, where, request):
    env = {**os.environ}
    target = "folder"
    if where == "s3":
        env.update(request.getfixturevalue("s3_env").env())
        target = request.getfixturevalue("target")
    done = subprocess.run([sys.executable, "-c", SCRIPT, database_url, target], capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).parents[2], env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    during, size = map(int, done.stdout.split()[-2:])
    assert size > 30_000_000  # the backup holds the filler
    assert during >= 3, f"the worker's other greenlets ran {during} times while the backup was made"
