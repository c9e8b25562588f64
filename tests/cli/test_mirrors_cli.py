"""flask mirrors ...: add, list, pause, resume, remove, as the routes do, and run, a follower on its own; the
upstream key never printed."""

import os
import signal
import subprocess
import time
import uuid

from identity.data import mirrors
from identity.storage.database import db
from identity.storage.models import Lease
from tests.common.live import BIN, ROOT
from tests.common.mirroring import LyingUpstream, doc, entry

UPSTREAM_KEY = "idsk_the-upstreams-key-printed-nowhere"


def add(runner, *args, key=UPSTREAM_KEY, stdin=None):
    return runner.invoke(args=["mirrors", "add", *args, "--key", key], input=stdin)


def test_add_prints_the_id_last_and_list_shows_the_mirror_without_its_key(runner, client, admin_key):
    added = add(runner, "http://10.0.0.7:8000/", "--name", "replica")
    assert added.exit_code == 0, added.output
    mirror_id = added.stdout.strip().splitlines()[-1]
    assert uuid.UUID(mirror_id)
    listed = runner.invoke(args=["mirrors", "list"])
    assert listed.exit_code == 0 and mirror_id in listed.output and "replica" in listed.output
    assert "active" in listed.output and "position 0 of 0" in listed.output
    shown = client.get(f"/mirrors/{mirror_id}", headers={"x-api-key": admin_key}).json
    assert (shown["name"], shown["url"]) == ("replica", "http://10.0.0.7:8000")
    for result in (added, listed):
        assert UPSTREAM_KEY not in result.output


def test_the_key_can_come_from_standard_input(runner, app):
    added = add(runner, "http://10.0.0.7:8000", key="-", stdin=UPSTREAM_KEY + "\n")
    assert added.exit_code == 0, added.output
    with app.app_context():
        assert mirrors.get(added.stdout.strip().splitlines()[-1]).api_key == UPSTREAM_KEY


def test_pause_resume_and_remove(runner, app):
    mirror_id = add(runner, "http://10.0.0.7:8000").stdout.strip().splitlines()[-1]
    paused = runner.invoke(args=["mirrors", "pause", mirror_id])
    assert paused.exit_code == 0 and "paused" in paused.output
    resumed = runner.invoke(args=["mirrors", "resume", mirror_id, "--key", "idsk_a-new-one"])
    assert resumed.exit_code == 0 and "active" in resumed.output and "idsk_a-new-one" not in resumed.output
    with app.app_context():
        assert mirrors.get(mirror_id).api_key == "idsk_a-new-one"
    removed = runner.invoke(args=["mirrors", "remove", mirror_id])
    assert removed.exit_code == 0
    again = runner.invoke(args=["mirrors", "remove", mirror_id])
    assert again.exit_code == 1 and "mirrors list" in again.output


def test_bad_input_is_one_line_saying_what_is_wrong(runner):
    bad_url = add(runner, "ftp://10.0.0.7/")
    assert bad_url.exit_code == 2 and "url" in bad_url.output and "Traceback" not in bad_url.output
    credentials = add(runner, "http://user:pw@10.0.0.7/")
    assert credentials.exit_code == 2 and "user name or password" in credentials.output
    add(runner, "http://10.0.0.7/")
    twice = add(runner, "http://10.0.0.7/", "--name", "other")
    assert twice.exit_code == 1 and "registered already" in twice.output
    unknown = runner.invoke(args=["mirrors", "pause", "not-an-id"])
    assert unknown.exit_code == 2


def test_mirrors_run_follows_on_its_own_until_sigterm_and_gives_its_lease_up(app, database_url):
    with LyingUpstream([entry(n, doc(n)) for n in range(1, 6)]) as upstream:
        with app.app_context():
            mirror_id = mirrors.register(upstream.url, UPSTREAM_KEY).id
        env = {**os.environ, "DATABASE_URL": database_url}
        running = subprocess.Popen([str(BIN / "flask"), "--app", "app", "mirrors", "run"], cwd=ROOT, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while True:
                with app.app_context():
                    position = mirrors.get(mirror_id).position
                if position == 5 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        finally:
            running.send_signal(signal.SIGTERM)
            _, err = running.communicate(timeout=30)
    assert position == 5, err[-2000:]
    assert running.returncode == 0 and "Following the mirrors" in err and UPSTREAM_KEY not in err
    with app.app_context():
        assert db.session.get(Lease, "mirrors") is None
        db.session.commit()
