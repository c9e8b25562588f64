"""`flask identities export` and `identities import`: JSON Lines that round-trip byte for byte, and an
import that recomputes every id from its content."""

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios

import orjson
import pytest
from sqlalchemy import create_engine, func, select, text

from bench.portable import export_lines
from identity import seed
from identity.data import imports
from identity.data.plain_lines import load_common
from identity.schemas import identity_import_schema
from identity.storage.database import db
from identity.storage.models import Change, Identity, User
from tests.common.apps import ADMIN_WALLET, OTHER_WALLET, make_app, migrate, restore_ctrl_c
from tests.common.live import BIN, ROOT

BIG = str(2**200 + 7)


@pytest.fixture
def second_database_url(empty_database_url):
    """Another migrated, empty database: the service the data moves to."""
    migrate(empty_database_url)
    return empty_database_url


@pytest.fixture
def populated(app, client, admin_key):
    """Identities in every status, with figures and curation fields, by two creators."""
    ids = []
    for number, status in enumerate(("complete", "pending", "removed", "error")):
        identity = seed.create_identity(
            app, f"Ada {number} Lovelace ✓", description=f"Line one\nline {number}" if number % 2 else None,
            image="ipfs://bafkreib/ada.png" if number == 1 else None,
            external_reference="https://example.org/ada" if number == 2 else None,
            creator=(ADMIN_WALLET, OTHER_WALLET)[number % 2],
        )
        body = {"status": status, "num_positions": number + 3, "assets_sum": BIG, "vault_id": str(number),
                "corpora_id": f"corpus {number}", "conviction_price": "12345678901234567890123"}
        response = client.patch(f"/identity/{identity['identity_id']}", json=body, headers={"x-api-key": admin_key})
        assert response.status_code == 200, response.text
        ids.append(identity["identity_id"])
    return ids


def export(app, *args):
    result = app.test_cli_runner().invoke(args=["identities", "export", *args])
    assert result.exit_code == 0, result.output
    return result


def run_import(app, path, *args):
    return app.test_cli_runner().invoke(args=["identities", "import", str(path), *args])


def test_export_import_export_gives_byte_equal_files(app, populated, second_database_url, tmp_path):
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    export(app, str(first))
    other = make_app(second_database_url)
    result = run_import(other, first)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == "imported 4, skipped 0, refused 0"
    export(other, str(second))
    assert first.read_bytes() == second.read_bytes()
    lines = [orjson.loads(line) for line in first.read_bytes().splitlines()]
    assert [line["status"] for line in lines] == ["complete", "pending", "removed", "error"]
    assert lines[0]["creator"] == ADMIN_WALLET and lines[0]["assets_sum"] == BIG
    with other.app_context():
        db.engine.dispose()


def test_export_to_standard_output_is_the_admin_identity_with_the_creator_as_its_wallet(app, client, admin_key, populated):
    lines = export(app).stdout_bytes.splitlines()
    assert len(lines) == 4
    exported = orjson.loads(lines[0])
    served = client.get(f"/identity/{populated[0]}", headers={"x-api-key": admin_key}).json
    assert exported == {**served, "creator": served["creator"]["wallet"]}
    assert list(exported) == list(served)


def test_export_is_sorted_by_created_at_then_id(app, second_database_url, tmp_path):
    lines = list(export_lines(30))
    source = tmp_path / "shuffled.jsonl"
    source.write_bytes(b"".join(reversed(lines)))
    other = make_app(second_database_url)
    assert run_import(other, source).exit_code == 0
    assert export(other).stdout_bytes == b"".join(lines)
    with other.app_context():
        db.engine.dispose()


def test_altered_display_name_is_refused_with_its_line_number_and_nothing_of_it_is_written(app, tmp_path):
    lines = list(export_lines(5))
    altered = orjson.loads(lines[2])
    altered["display_name"] = "Someone else"
    lines[2] = orjson.dumps(altered) + b"\n"
    source = tmp_path / "altered.jsonl"
    source.write_bytes(b"".join(lines))
    result = run_import(app, source)
    assert result.exit_code == 1
    assert "line 3: refused: identity_id" in result.stderr and "not the address of this content" in result.stderr
    assert result.stdout.strip() == "imported 4, skipped 0, refused 1"
    with app.app_context():
        names = db.session.execute(select(Identity.display_name)).scalars().all()
        logged = db.session.execute(select(func.count()).select_from(Change)).scalar_one()
    assert "Someone else" not in names and "Identity 2" not in names and len(names) == 4
    assert logged == 4


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"status": "gone"}, "status"),
        ({"created_at": "yesterday"}, "created_at"),
        ({"assets_sum": "-1"}, "assets_sum"),
        ({"creator": "0xnotawallet"}, "creator"),
        ({"nickname": "Ada"}, "nickname"),
        ({"image": "javascript:alert(1)"}, "image"),
    ],
)
def test_line_with_an_invalid_field_is_refused_naming_the_field(app, tmp_path, change, named):
    lines = list(export_lines(2))
    lines[1] = orjson.dumps({**orjson.loads(lines[1]), **change}) + b"\n"
    source = tmp_path / "invalid.jsonl"
    source.write_bytes(b"".join(lines))
    result = run_import(app, source)
    assert result.exit_code == 1
    assert f"line 2: refused: invalid fields: {named}:" in result.stderr
    assert result.stdout.strip() == "imported 1, skipped 0, refused 1"


@pytest.mark.parametrize("moment", [
    "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "10000-01-01T00:00:00Z", "0000-12-31T00:00:00Z",
])
@pytest.mark.parametrize("name", ["created_at", "updated_at"])
def test_a_timestamp_out_of_range_is_refused_by_its_line_and_the_lines_after_it_are_imported(app, tmp_path, name, moment):
    lines = list(export_lines(5))
    lines[2] = orjson.dumps({**orjson.loads(lines[2]), name: moment}) + b"\n"
    source = tmp_path / "out-of-range.jsonl"
    source.write_bytes(b"".join(lines))
    result = run_import(app, source)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output  # no traceback
    assert f"line 3: refused: invalid fields: {name}:" in result.stderr
    assert result.stdout.strip() == "imported 4, skipped 0, refused 1"
    with app.app_context():
        names = set(db.session.execute(select(Identity.display_name)).scalars())
    assert names == {f"Identity {number}" for number in (0, 1, 3, 4)}


def test_a_line_that_is_not_json_is_refused_and_blank_lines_are_ignored(app, tmp_path):
    source = tmp_path / "broken.jsonl"
    source.write_bytes(next(export_lines(1)) + b"\n{not json\n[1, 2]\n")
    result = run_import(app, source)
    assert result.exit_code == 1
    assert "line 3: refused: not JSON" in result.stderr and "line 4: refused: not a JSON object" in result.stderr
    assert result.stdout.strip() == "imported 1, skipped 0, refused 2"


def test_present_identities_are_skipped_and_counted(app, tmp_path):
    source = tmp_path / "some.jsonl"
    source.write_bytes(b"".join(export_lines(3)))
    assert run_import(app, source).exit_code == 0
    source.write_bytes(b"".join(export_lines(5)) + next(export_lines(1)))  # the first twice in the file
    result = run_import(app, source)
    assert result.exit_code == 0
    assert result.stdout.strip() == "imported 2, skipped 4, refused 0"


def test_import_keeps_timestamps_status_figures_makes_users_and_logs_created_entries(app, client, admin_key, tmp_path):
    lines = list(export_lines(4))
    source = tmp_path / "four.jsonl"
    source.write_bytes(b"".join(lines))
    assert run_import(app, source, "--by", ADMIN_WALLET.lower()).exit_code == 0
    for line in lines:
        expected = orjson.loads(line)
        if expected["status"] == "removed":
            continue  # 410 Gone; the export's round trip covers it
        served = client.get(f"/identity/{expected['identity_id']}", headers={"x-api-key": admin_key}).json
        assert {**served, "creator": served["creator"]["wallet"]} == expected
        assert served["creator"]["role"] == "User"
    feed = client.get("/changes?after=0", headers={"x-api-key": admin_key}).json["data"]
    assert [(entry["kind"], entry["identity_id"], entry["wallet"]) for entry in feed] == [
        ("created", orjson.loads(line)["identity_id"], ADMIN_WALLET) for line in lines
    ]
    with app.app_context():
        wallets = db.session.execute(select(User.wallet)).scalars().all()
    assert {orjson.loads(line)["creator"] for line in lines} <= set(wallets)


def test_identities_from_another_namespace_keep_their_ids(app, client, admin_key, tmp_path):
    source = tmp_path / "other.jsonl"
    source.write_bytes(b"".join(export_lines(2, namespace="elsewhere")))
    assert run_import(app, source).exit_code == 0
    identity_id = orjson.loads(next(export_lines(1, namespace="elsewhere")))["identity_id"]
    served = client.get(f"/identity/{identity_id}", headers={"x-api-key": admin_key}).json
    assert served["identity_id"] == identity_id


def test_import_reads_standard_input(app, tmp_path):
    result = app.test_cli_runner().invoke(args=["identities", "import", "-"], input=b"".join(export_lines(3)))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "imported 3, skipped 0, refused 0"


def test_export_into_a_missing_folder_says_so(app, tmp_path):
    result = app.test_cli_runner().invoke(args=["identities", "export", str(tmp_path / "nowhere" / "x.jsonl")])
    assert result.exit_code == 2
    assert "No folder" in result.output and "Traceback" not in result.output


@pytest.mark.sqlite_only
def test_ctrl_c_during_an_import_keeps_and_reports_what_was_committed(database_url):
    """Two batches and a half, then a pause: the first two batches are committed; Ctrl-C reports them and they stay."""
    batch = imports.IMPORT_BATCH
    env = {**os.environ, "DATABASE_URL": database_url}
    process = subprocess.Popen(
        [str(BIN / "flask"), "--app", "app", "identities", "import", "-"], cwd=ROOT, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=restore_ctrl_c,
    )
    process.stdin.write(b"".join(export_lines(2 * batch + batch // 2)))
    process.stdin.flush()
    engine = create_engine(database_url)
    try:
        while True:
            with engine.connect() as connection:
                if connection.execute(text("SELECT count(*) FROM identities")).scalar_one() >= 2 * batch:
                    break
            assert process.poll() is None, process.stderr.read().decode()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT count(*) FROM identities")).scalar_one()
    finally:
        engine.dispose()
    assert process.returncode == 130
    assert "Interrupted after line " in stderr.decode()
    assert f": imported {2 * batch}, skipped 0, refused 0 (committed" in stderr.decode()
    assert stored == 2 * batch


# VmHWM, the peak RSS of this process image: getrusage's ru_maxrss would carry over the peak of the
# pytest process this one was forked from.
RSS_SCRIPT = """
import sys
from flask.cli import main
sys.argv = ["flask", "--app", "app", *sys.argv[1:]]
try:
    main()
except SystemExit as exit:
    assert not exit.code, exit.code
with open("/proc/self/status") as status:
    print(next(line.split()[1] for line in status if line.startswith("VmHWM:")), file=sys.stderr)
"""


def peak_rss(database_url, *args, stdin=None):
    """The peak RSS (KiB) of `flask --app app ARGS` run in a process of its own.

    The import's SQLite page cache is SQLite's default size here (2 MB), so that what grows is what
    the command holds, not the cache that IDENTITY_IMPORT_CACHE_MB allows to grow up to its size.
    """
    env = {**os.environ, "DATABASE_URL": database_url, "IDENTITY_IMPORT_CACHE_MB": "2"}
    result = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT, *args], cwd=ROOT, env=env,
        stdin=stdin, capture_output=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return int(result.stderr.decode().strip().splitlines()[-1])


@pytest.mark.sqlite_only
def test_memory_stays_flat_from_20000_to_40000_identities(database_url, tmp_path, report):
    """Twice the identities, nearly the same peak memory, for import, export and snapshot alike (from
    two batches of an import on, as many as it holds at once)."""
    small_size, large_size = 2 * imports.IMPORT_BATCH, 4 * imports.IMPORT_BATCH
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_bytes(b"".join(export_lines(small_size)))
    large.write_bytes(b"".join(export_lines(large_size - small_size, first=small_size)))
    peaks = {}
    for size, source in ((small_size, small), (large_size, large)):
        with source.open("rb") as stdin:
            peaks[("import", size)] = peak_rss(database_url, "identities", "import", "-", stdin=stdin)
        peaks[("export", size)] = peak_rss(database_url, "identities", "export", str(tmp_path / f"{size}.jsonl"))
        peaks[("snapshot", size)] = peak_rss(database_url, "identities", "snapshot", str(tmp_path / f"{size}.car"))
    for step in ("import", "export", "snapshot"):
        ratio = peaks[(step, large_size)] / peaks[(step, small_size)]
        report(f"{step}: peak RSS {peaks[(step, small_size)] // 1024} MB at {small_size:,}, "
               f"{peaks[(step, large_size)] // 1024} MB at {large_size:,}")
        # 20,000 more rows held in memory would add well over 15 MB (an exported line is ~700 bytes).
        assert peaks[(step, large_size)] - peaks[(step, small_size)] < 8 * 1024, (step, ratio)


@pytest.mark.parametrize("command", [["import", "-"], ["export"], ["snapshot", "x.car"]])
def test_an_unreachable_database_is_one_line_saying_what_to_do(unreachable_database_url, tmp_path, command):
    app = make_app(unreachable_database_url)
    if command[0] == "snapshot":
        command = ["snapshot", str(tmp_path / "x.car")]
    result = app.test_cli_runner().invoke(args=["identities", *command], input=next(export_lines(1)))
    assert result.exit_code == 1
    assert "The database does not answer" in result.output and len(result.output.strip().splitlines()) == 1
    assert "Check DATABASE_URL" in result.output and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.sqlite_only
def test_a_terminal_gets_a_progress_bar_with_rows_and_rate_and_a_pipe_gets_none(database_url, tmp_path):
    source = tmp_path / "lines.jsonl"
    source.write_bytes(b"".join(export_lines(50)))
    env = {**os.environ, "DATABASE_URL": database_url}
    command = [str(BIN / "flask"), "--app", "app", "identities", "import", str(source)]
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 24 rows of 100 columns
    with os.fdopen(leader, "rb", buffering=0) as terminal:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=follower)
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = terminal.read(4096)
            except OSError:  # EIO: the command closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        stdout, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert b"50 identities" in shown and b"identities/s" in shown  # rows done and the rate
    assert stdout.decode().strip() == "imported 50, skipped 0, refused 0"
    piped = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert piped.stderr == b"" and piped.stdout.decode().strip() == "imported 0, skipped 50, refused 0"


def test_an_id_taken_by_another_identity_is_refused(app, tmp_path):
    first, second, third, fourth = (orjson.loads(line) for line in export_lines(4))
    source = tmp_path / "taken.jsonl"
    source.write_bytes(orjson.dumps(first) + b"\n")
    assert run_import(app, source).exit_code == 0
    source.write_bytes(b"\n".join(orjson.dumps(line) for line in ({**second, "id": first["id"]}, third, {**fourth, "id": third["id"]})))
    result = run_import(app, source)
    assert result.exit_code == 1
    assert result.stdout.strip() == "imported 1, skipped 0, refused 2"
    assert f"line 1: refused: id {first['id']} belongs to another identity" in result.stderr
    assert f"line 3: refused: id {third['id']} is the id of an earlier line's identity" in result.stderr


COMMON_VARIANTS = [
    {},
    {"description": None, "image": None},
    {"image": "ipfs://bafkreib/ada.png", "external_reference": "https://example.org/ada?x=1#y"},
    {"display_name": 'Quote " and \\ back', "isUser": True, "num_positions": 2**53 - 1},
    {"assets_sum": "9" * 77, "vault_id": "12345678901234567890123"},
    {"creator": "0x" + "ab" * 20, "status": "error"},
    {"created_at": "1999-12-31T23:59:59.000000Z"},
]
UNCOMMON_VARIANTS = [
    {"display_name": "Ada Lovelace ✓"},
    {"display_name": " padded "},
    {"description": "Line one\nline two"},
    {"description": ""},
    {"image": "javascript:alert(1)"},
    {"external_reference": "ipfs://bafkreib/ada"},
    {"vault_id": "01"},
    {"assets_sum": "9" * 78},
    {"created_at": "2026-13-01T00:00:00.000000Z"},
    {"updated_at": "2026-01-01T00:00:00Z"},
    {"num_positions": 2**53},
    {"num_positions": 3.0},
    {"isUser": 0},
    {"status": "gone"},
    {"corpora_id": "corpus"},
    {"creator": "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d358"},
    {"id": "00000000-0000-4000-8000-00000000000A"},
    {"nickname": "Ada"},
]


@pytest.mark.sqlite_only
@pytest.mark.parametrize("change", COMMON_VARIANTS)
def test_a_line_in_the_common_form_loads_fast_exactly_as_the_schema_loads_it(change):
    data = {**orjson.loads(next(export_lines(1, first=3))), **change}
    fast = load_common(data)
    assert fast is not None
    assert fast == {**identity_import_schema.load(data), "id": data["id"]}


@pytest.mark.sqlite_only
@pytest.mark.parametrize("change", UNCOMMON_VARIANTS)
def test_a_line_in_any_other_form_is_left_to_the_schema(change):
    data = {**orjson.loads(next(export_lines(1, first=3))), **change}
    assert load_common(data) is None


@pytest.mark.sqlite_only
def test_export_writes_a_timestamp_stored_without_microseconds_as_the_api_does(app, client, admin_key, populated):
    with app.app_context():
        db.session.execute(text("UPDATE identities SET updated_at = '2026-01-02 03:04:05' WHERE identity_id = :id"),
                           {"id": populated[0]})
        db.session.commit()
    exported = orjson.loads(export(app).stdout_bytes.splitlines()[0])
    served = client.get(f"/identity/{populated[0]}", headers={"x-api-key": admin_key}).json
    assert exported["updated_at"] == served["updated_at"] == "2026-01-02T03:04:05.000000Z"
