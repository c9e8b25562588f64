"""Disk space a step uses: the bytes in a folder's files, and their peak while the step runs, read from a thread
(the backups' temporary space, in tests/backups/test_temporary_space.py and bench/backups.py)."""

import os
import threading


def folder_bytes(folder):
    """The bytes of the files under `folder` now."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                pass  # removed between the listing and the stat
    return total


class Watcher:
    """The peak of the bytes in the files under `folder` while the `with` block runs, read every `every` seconds;
    `extra` is the peak less what was there at the start."""

    def __init__(self, folder, every=0.001):
        self.folder, self.every, self.peak, self.stopping = folder, every, 0, threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.start = folder_bytes(folder)

    def _watch(self):
        while not self.stopping.is_set():
            self.peak = max(self.peak, folder_bytes(self.folder))
            self.stopping.wait(self.every)

    @property
    def extra(self):
        return self.peak - self.start

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_):
        self.stopping.set()
        self.thread.join()
