"""`flask identities snapshot PATH.car`, read back by a CAR reader written by others: @ipld/car, run by node."""

import fcntl
import json
import os
import shutil
import signal
import subprocess

import pytest
from sqlalchemy import select

from bench.portable import export_lines
from identity import seed
from identity.core import identities as service
from identity.data import exports
from identity.data import snapshot as car
from identity.storage.database import db
from identity.storage.models import Identity
from tests.common.apps import make_app, migrate
from tests.common.live import ROOT

CAR_READER = ROOT / "tests" / "car"  # package.json and package-lock.json pin @ipld/car and its codecs
MIB = 1024 * 1024


@pytest.fixture(scope="session")
def read_car():
    """read_car(path) -> what tests/car/check.mjs found in the file, with @ipld/car and @ipld/dag-cbor."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node and npm are needed to read snapshots with @ipld/car")
    # One install, even when parallel test processes all get here at once.
    with open(CAR_READER / "node_modules.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (CAR_READER / "node_modules" / "@ipld" / "car").is_dir():
            installed = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=CAR_READER, capture_output=True, text=True, timeout=600)
            assert installed.returncode == 0, installed.stderr

    def read(path):
        result = subprocess.run([node, "check.mjs", str(path)], cwd=CAR_READER, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    return read


def import_lines(app, lines):
    result = app.test_cli_runner().invoke(args=["identities", "import", "-"], input=b"".join(lines))
    assert result.exit_code == 0, result.output


def snapshot(app, path, *options):
    result = app.test_cli_runner().invoke(args=["identities", "snapshot", str(path), *options])
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def contents(app):
    """{content_id: canonical content as text} of every stored identity."""
    with app.app_context():
        identities = db.session.execute(select(Identity)).scalars().all()
        return {identity.content_id: service.canonical_content(identity.__dict__).decode() for identity in identities}


def test_snapshot_is_a_car_whose_root_reaches_every_identity_as_a_raw_block(app, tmp_path, read_car):
    count = 2 * car.FANOUT + 52  # three first-level index blocks under the root
    import_lines(app, export_lines(count))
    seed.create_identity(app, "Zoë ✓ \u00e9", description="Ünïcode\nand lines", image="ipfs://bafkreib/x.png")
    root = snapshot(app, tmp_path / "identities.car")
    found = read_car(tmp_path / "identities.car")
    assert found["roots"] == [root] and root.startswith("bafyrei")
    assert found["badHashes"] == 0  # every block hashes to its CID
    assert found["missing"] == [] and found["unreached"] == []  # the root reaches every block, and all exist
    assert found["largest"] < MIB
    assert found["raw"] == contents(app)  # every content_id is a block holding exactly its canonical content
    assert found["blocks"] == count + 1 + 3 + 1


def test_the_same_identities_inserted_in_another_order_give_the_same_root(app, empty_database_url, tmp_path):
    lines = list(export_lines(car.FANOUT + 10))
    import_lines(app, lines)
    migrate(empty_database_url)
    other = make_app(empty_database_url)
    import_lines(other, reversed(lines[100:]))
    import_lines(other, lines[:100])
    first, second = snapshot(app, tmp_path / "a.car"), snapshot(other, tmp_path / "b.car")
    assert first == second
    assert (tmp_path / "a.car").read_bytes() == (tmp_path / "b.car").read_bytes()
    import_lines(other, export_lines(1, first=len(lines)))
    assert snapshot(other, tmp_path / "c.car") != first
    with other.app_context():
        db.engine.dispose()


def test_an_empty_service_gives_a_car_with_an_empty_index(app, tmp_path, read_car):
    root = snapshot(app, tmp_path / "empty.car")
    found = read_car(tmp_path / "empty.car")
    assert found["roots"] == [root] and found["blocks"] == 1 and found["raw"] == {}


def test_a_snapshot_replaces_an_earlier_file_only_when_complete(app, tmp_path, read_car):
    (tmp_path / "out").mkdir()
    path = tmp_path / "out" / "identities.car"
    path.write_bytes(b"an older snapshot")
    import_lines(app, export_lines(3))
    root = snapshot(app, path, "--overwrite")
    assert read_car(path)["roots"] == [root]
    assert [p.name for p in path.parent.iterdir()] == ["identities.car"]


def interrupt_after_first_batch(done):
    """A progress callback that sends this process a real SIGINT (Ctrl-C) once some rows are written."""
    os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_during_a_snapshot_leaves_no_file(app, tmp_path, ctrl_c):
    import_lines(app, export_lines(car.READ_BATCH + 10))
    folder = tmp_path / "out"
    folder.mkdir()
    with app.app_context(), pytest.raises(KeyboardInterrupt):
        with exports.replacing(folder / "identities.car") as stream:
            car.write_snapshot(stream, interrupt_after_first_batch)
    assert list(folder.iterdir()) == []
