"""The folders a server's processes share, held for as long as any of them lives (identity.server.files)."""

import os
import signal
import subprocess
import sys
import time

from identity.server.files import sweep_left_behind

MAKE = "import sys, time; from identity.server.files import make_server_folder; " \
       "print(make_server_folder('identity-test-', sys.argv[1]), flush=True); time.sleep(float(sys.argv[2]))"


def made_by_a_process(directory, lives_for):
    process = subprocess.Popen([sys.executable, "-c", MAKE, str(directory), str(lives_for)], stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().strip()


def test_only_the_folders_no_living_process_holds_are_swept(tmp_path):
    exited, left = made_by_a_process(tmp_path, 0)
    exited.wait(timeout=30)
    living, held = made_by_a_process(tmp_path, 60)
    unmarked = tmp_path / "identity-test-from-an-earlier-version"
    unmarked.mkdir()
    try:
        assert sweep_left_behind("identity-test-", str(tmp_path)) == [left]
        assert sorted(path.name for path in tmp_path.iterdir()) == sorted([held.rsplit("/", 1)[1], unmarked.name])
    finally:
        living.kill()
        living.wait(timeout=30)
    assert sweep_left_behind("identity-test-", str(tmp_path)) == [held]


def test_a_folder_held_by_a_child_stays_when_its_maker_is_gone(tmp_path):
    # gunicorn's workers inherit the master's hold: a master killed outright leaves workers that still use the files.
    code = MAKE.replace(
        "time.sleep(float(sys.argv[2]))",
        "import subprocess; child = subprocess.Popen(['sleep', sys.argv[2]], close_fds=False, "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(child.pid, flush=True)",
    )
    maker = subprocess.run([sys.executable, "-c", code, str(tmp_path), "60"], capture_output=True, text=True, timeout=30)
    held, child = maker.stdout.split()
    try:
        assert sweep_left_behind("identity-test-", str(tmp_path)) == []
    finally:
        os.kill(int(child), signal.SIGKILL)
    for _ in range(100):  # the child is reaped by init, its hold released with it
        if sweep_left_behind("identity-test-", str(tmp_path)) == [held]:
            break
        time.sleep(0.1)
    assert not os.path.exists(held)
