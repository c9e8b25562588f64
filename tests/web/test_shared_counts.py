"""Rate-limit counts in a mapped file, shared by processes (identity/web/shared_counts.py)."""

import multiprocessing
import os
import threading
import time
from types import SimpleNamespace

import pytest
from limits import parse
from limits.strategies import FixedWindowRateLimiter

from identity.web.budgets import RateLimits, WindowCounts, share_counts
from identity.web.shared_counts import FRESH, PROBE, RUN, SLOT, SLOTS, SharedWindowCounts, create_counts_file

CONFIG = {"IDENTITY_RATELIMIT_READ": "3/minute", "IDENTITY_RATELIMIT_CREATE": "3/minute",
          "IDENTITY_RATELIMIT_SIGNIN": "3/minute", "IDENTITY_RATELIMIT_STORAGE": "memory://"}


@pytest.fixture
def counts_file(tmp_path):
    path = tmp_path / "counts"
    create_counts_file(path)
    return path


@pytest.fixture
def counts(counts_file):
    storage = SharedWindowCounts(counts_file)
    yield storage
    storage.close()


@pytest.fixture
def one_run(tmp_path):
    """A table of a single run of slots: every name competes for the same PROBE slots."""
    path = tmp_path / "small"
    create_counts_file(path, slots=PROBE)
    storage = SharedWindowCounts(path)
    yield storage
    storage.close()


def test_the_default_table_is_512_kib_of_empty_slots(counts_file, counts):
    assert os.path.getsize(counts_file) == SLOTS * SLOT.size == 512 * 1024
    assert counts.get("anything") == 0
    assert counts.get_expiry("anything") == pytest.approx(time.time(), abs=1)


def test_a_count_adds_up_within_its_window_and_says_when_it_ends(counts):
    before = time.time()
    assert [counts.incr("a", 60) for _ in range(3)] == [1, 2, 3]
    assert counts.incr("a", 60, amount=5) == 8
    assert counts.get("a") == 8 and counts.get("b") == 0
    assert before + 60 <= counts.get_expiry("a") <= time.time() + 60


def test_a_count_starts_over_when_its_window_is_over(counts):
    assert counts.incr("a", 0.2) == 1
    assert counts.incr("a", 0.2) == 2
    time.sleep(0.25)
    assert counts.get("a") == 0
    assert counts.incr("a", 60) == 1
    assert counts.get_expiry("a") > time.time() + 59


def test_slots_whose_windows_are_over_are_taken_again(one_run):
    for name in range(PROBE):
        one_run.incr(f"old {name}", 0.2)
    time.sleep(0.25)
    # Every slot of the run held a window, now over: new names take them, and count from one.
    for name in range(PROBE):
        assert one_run.incr(f"new {name}", 60) == 1
        assert one_run.incr(f"new {name}", 60) == 2
    assert all(one_run.get(f"new {name}") == 2 for name in range(PROBE))
    assert all(one_run.get(f"old {name}") == 0 for name in range(PROBE))


def test_when_every_slot_is_live_the_window_that_ends_first_gives_way(one_run):
    for name in range(PROBE):
        one_run.incr(f"key {name}", 60 + name, amount=10)
    assert one_run.incr("newcomer", 60) == 1
    # key 0's window ended first: its count starts over; every other count is kept.
    assert one_run.get("key 0") == 0
    assert [one_run.get(f"key {name}") for name in range(1, PROBE)] == [10] * (PROBE - 1)
    assert one_run.incr("newcomer", 60) == 2


def test_clear_and_reset(counts):
    counts.incr("a", 60)
    counts.incr("b", 60)
    counts.clear("a")
    assert (counts.get("a"), counts.get("b")) == (0, 1)
    assert counts.reset() == 1
    assert counts.get("b") == 0
    assert counts.check()


def test_a_file_that_is_no_table_is_refused(tmp_path):
    path = tmp_path / "other"
    path.write_bytes(b"not a table")
    with pytest.raises(ValueError, match="not a table of rate-limit counts"):
        SharedWindowCounts(path)


def test_limits_counts_through_it(counts):
    limiter = FixedWindowRateLimiter(counts)
    item = parse("3/minute")
    assert [limiter.hit(item, "identity", "key-1", "read") for _ in range(4)] == [True, True, True, False]
    stats = limiter.get_window_stats(item, "identity", "key-1", "read")
    assert stats.remaining == 0 and stats.reset_time > time.time() + 50
    assert limiter.get_window_stats(item, "identity", "key-2", "read").remaining == 3


def add(path, key, times):
    storage = SharedWindowCounts(path)  # as a worker does: its own mapping of the master's file
    for _ in range(times):
        storage.incr(key, 60)


def test_two_processes_adding_to_one_count_at_once_lose_nothing(counts_file, counts):
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=add, args=(counts_file, "shared", 20_000)) for _ in range(2)]
    for process in processes:
        process.start()
    for _ in range(5_000):  # and this process too, through the mapping it made before the fork
        counts.incr("shared", 60)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert counts.get("shared") == 45_000


def test_threads_adding_to_one_count_at_once_lose_nothing(counts):
    threads = [threading.Thread(target=lambda: [counts.incr("shared", 60) for _ in range(5_000)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counts.get("shared") == 20_000


def test_rate_limits_count_in_the_file_the_server_hands_each_worker(counts_file):
    first, second = (SimpleNamespace(extensions={"identity_rate_limits": RateLimits(CONFIG)}) for _ in range(2))
    for worker in (first, second):  # two workers' views of one file
        share_counts(worker, str(counts_file))
    first, second = first.extensions["identity_rate_limits"], second.extensions["identity_rate_limits"]
    assert isinstance(first.local.storage, SharedWindowCounts)
    assert [first.spend("read", "key-1").remaining, second.spend("read", "key-1").remaining] == [2, 1]
    assert first.spend("read", "key-1").remaining == 0
    assert not second.spend("read", "key-1").allowed


def test_without_the_file_rate_limits_count_in_the_process():
    assert isinstance(RateLimits(CONFIG).local.storage, WindowCounts)


def hold_the_run_of(path, name, held, release):
    """Another worker in the middle of counting `name`: it holds the lock on the bytes of its run."""
    storage = SharedWindowCounts(path)
    _digest, offset = storage.locate(name)
    storage.lock(offset, RUN.size)
    held.set()
    release.wait(30)
    storage.unlock(offset, RUN.size)


def test_a_count_waits_only_for_a_worker_counting_a_name_whose_slots_may_be_its_own(counts_file, counts):
    busy = "key-0/read"
    apart = next(name for name in (f"key-{number}/read" for number in range(1, 50))
                 if abs(counts.locate(name)[1] - counts.locate(busy)[1]) >= RUN.size)
    context = multiprocessing.get_context("fork")
    held, release = context.Event(), context.Event()
    holder = context.Process(target=hold_the_run_of, args=(counts_file, busy, held, release))
    holder.start()
    try:
        assert held.wait(30)
        started = time.monotonic()
        assert counts.incr(apart, 60) == 1  # no wait for the other worker
        assert time.monotonic() - started < 1
        waiting = threading.Thread(target=counts.incr, args=(busy, 60))
        waiting.start()
        waiting.join(0.5)
        assert waiting.is_alive()  # its run's bytes are held: it waits for them
        release.set()
        waiting.join(30)
        assert not waiting.is_alive() and counts.get(busy) == 1
    finally:
        release.set()
        holder.join(30)
    assert holder.exitcode == 0


def test_a_windows_expiry_read_after_its_count_is_the_one_of_the_window_now(counts_file, counts):
    # limits reads a window as get() then get_expiry(): the second may answer from the first's read,
    # but never across a count this thread added, nor once FRESH has passed.
    assert counts.get("k") == 0
    counts.incr("k", 60)
    assert counts.get_expiry("k") > time.time() + 59
    assert counts.get("other") == 0
    other_worker = SharedWindowCounts(counts_file)
    try:
        other_worker.incr("other", 60)
        time.sleep(FRESH * 2)
        assert counts.get_expiry("other") > time.time() + 59
    finally:
        other_worker.close()
    counts.incr("gone", 60)
    assert counts.get("gone") == 1
    counts.clear("gone")
    assert counts.get_expiry("gone") == pytest.approx(time.time(), abs=1)


def test_a_window_read_right_after_a_count_is_the_one_that_count_wrote(counts_file, counts):
    # limits reads a request's window (get, get_expiry) right after counting it (incr): the window that
    # count wrote answers, without a lock of the table, even when another worker counted meanwhile;
    # once FRESH has passed, the table answers.
    other_worker = SharedWindowCounts(counts_file)
    try:
        assert counts.incr("k", 60) == 1
        other_worker.incr("k", 60)
        assert counts.get("k") == 1
        assert counts.get_expiry("k") > time.time() + 59
        time.sleep(FRESH * 2)
        assert counts.get("k") == 2
    finally:
        other_worker.close()
