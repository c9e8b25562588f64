"""The folders a gunicorn server makes for the files its workers share (metrics, rate-limit counts), and the
sweep of those a server left behind when it was killed outright.

A server removes its folders when it exits (gunicorn.conf.py's on_exit), but a master killed by
SIGKILL, the OOM killer or a crash never runs that hook, and would leave its folders in /dev/shm
(memory) or the temporary directory until the machine restarted. So each folder is held by its
server for as long as any of its processes lives: the master takes a shared lock (flock(2))
on the folder, and its workers inherit it. A server starting on the same machine removes the
folders of its own kind that nobody holds any more. flock works whatever the process ids are (a
folder shared between containers), and a lock dies with the last process that held it, however it
died.
"""

import fcntl
import os
import shutil
import tempfile

# A folder with this file in it was locked by its server before the file was made: one without it (being
# made at this moment, or not made by make_server_folder) is never swept.
HELD_MARKER = "held-by-its-server"


def make_server_folder(prefix, directory=None):
    """A fresh folder (tempfile.mkdtemp's) in `directory`, held by this process and its children until
    they all exit; returns its path."""
    path = tempfile.mkdtemp(prefix=prefix, dir=directory)
    # Never closed: the descriptor, and its lock, last as long as the process (a bare descriptor is
    # not closed by the garbage collector, as a file object would be).
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(descriptor, fcntl.LOCK_SH)
    # Kept across gunicorn's re-exec (USR2), whose new master goes on using the folders it inherits.
    os.set_inheritable(descriptor, True)
    with open(os.path.join(path, HELD_MARKER), "w"):
        pass
    return path


def sweep_left_behind(prefix, directory=None):
    """Remove the folders named `prefix`... in `directory` (the temporary directory by default), made
    by make_server_folder, that no living process holds; returns their paths."""
    directory = directory or tempfile.gettempdir()
    try:
        names = [name for name in os.listdir(directory) if name.startswith(prefix)]
    except OSError:
        return []
    swept = []
    for name in names:
        path = os.path.join(directory, name)
        if _unheld(path):
            shutil.rmtree(path, ignore_errors=True)
            swept.append(path)
    return swept


def _unheld(path):
    try:
        if os.stat(path).st_uid != os.getuid() or not os.path.exists(os.path.join(path, HELD_MARKER)):
            return False
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False  # a process of its server holds it
    finally:
        os.close(descriptor)  # the lock, if taken, goes with it
