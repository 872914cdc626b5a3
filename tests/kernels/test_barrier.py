"""Stress tests of the step barrier (``fastvec._kernels.barrier``), with no env.

The parent posts commands, workers (threads, or processes forked over one
anonymous shared mapping) serve them and finish with a status, the parent waits.
Timing on both sides is shuffled with random short sleeps and spins.  Every
round must complete well within a second: the waits sleep at most a few
milliseconds at a time before re-checking, so a lost wake-up would not hang
forever, it would make rounds slow; the latency test below catches that too.

Protocol of the stress workers: command ``CLOSE`` ends the loop; any other
command ``c`` is answered by writing ``payload_in[0] * 10 + w`` to
``payload_out[w]``, counting it in ``served[w]`` and finishing with status
``c + w``, so a command delivered to the wrong worker, served twice, lost, or a
payload not yet visible when ``finish`` is seen, shows up as a wrong number.
"""

from __future__ import annotations

import mmap
import multiprocessing as mp
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fastvec._kernels.barrier import Barrier, barrier_nbytes

CLOSE = 1
ROUND_LIMIT = 1.0  # seconds a round may take before the test fails
IDLE_EXIT = 10.0  # a stress worker that hears nothing this long gives up


class Shared:
    """One anonymous shared mapping: the barrier, then payload words for the test."""

    def __init__(self, n_workers: int) -> None:
        self.n_workers = n_workers
        self.nbytes = barrier_nbytes(n_workers)
        self.mem = mmap.mmap(-1, self.nbytes + 4096)  # MAP_SHARED: survives fork
        words = np.frombuffer(self.mem, dtype=np.int64, offset=self.nbytes)
        self.payload_in = words[:1]
        self.payload_out = words[8:8 + n_workers]
        self.served = words[64:64 + n_workers]

    def barrier(self, max_spin_us: float = 300.0) -> Barrier:
        return Barrier(self.mem, self.n_workers, max_spin_us)


def _jitter(rng: random.Random) -> None:
    """Nothing, a short spin, a yield or a short sleep, at random."""
    kind = rng.random()
    if kind < 0.4:
        return
    if kind < 0.6:
        for _ in range(rng.randrange(2000)):
            pass
    elif kind < 0.7:
        os.sched_yield()
    else:
        time.sleep(rng.random() * 3e-4)


def serve(shared: Shared, w: int, seed: int, max_spin_us: float) -> int:
    """A stress worker's loop (thread or process); returns 0, or 2 when left idle."""
    barrier = shared.barrier(max_spin_us)
    barrier.start_worker(w)
    rng = random.Random(seed)
    idle_since = time.monotonic()
    while True:
        command = barrier.wait_command(w, 0.05)
        if command is None:
            if time.monotonic() - idle_since > IDLE_EXIT:
                return 2
            continue
        idle_since = time.monotonic()
        if command == CLOSE:
            barrier.finish(w, 0)
            return 0
        _jitter(rng)
        shared.payload_out[w] = shared.payload_in[0] * 10 + w
        shared.served[w] += 1
        barrier.finish(w, command + w)


def _serve_process(shared: Shared, w: int, seed: int, max_spin_us: float) -> None:
    os._exit(serve(shared, w, seed, max_spin_us))


def drive(shared: Shared, rounds: int, seed: int, max_spin_us: float = 300.0) -> list[float]:
    """Run ``rounds`` rounds from the parent's side; returns each round's duration.

    Each round posts to all workers or to a random subset, sometimes first
    waits for only some of them (``want``), and checks what came back.
    """
    barrier = shared.barrier(max_spin_us)
    rng = random.Random(seed)
    n = shared.n_workers
    expected_served = np.zeros(n, dtype=np.int64)
    durations = []
    for r in range(rounds):
        workers = list(range(n)) if rng.random() < 0.6 else sorted(
            rng.sample(range(n), rng.randint(1, n)))
        command = 2 + r % 1000
        shared.payload_in[0] = r
        _jitter(rng)
        start = time.monotonic()
        barrier.post(workers, command)
        if len(workers) > 1 and rng.random() < 0.3:
            want = rng.randint(1, len(workers) - 1)
            ready = barrier.wait(workers, want, ROUND_LIMIT)
            assert ready >= want, f"round {r}: {ready} of {workers} done after " \
                                  f"{ROUND_LIMIT} s, wanted {want}"
            assert len(barrier.done_in_order(workers)) >= want
            _jitter(rng)
        ready = barrier.wait(workers, -1, ROUND_LIMIT)
        took = time.monotonic() - start
        assert ready == len(workers) and took < ROUND_LIMIT, (
            f"round {r}: {ready} of workers {workers} done after {took:.3f} s "
            f"(lost wake-up?); done: {barrier.done_in_order(workers)}")
        assert sorted(barrier.done_in_order(workers)) == workers
        for w in workers:
            assert barrier.is_done(w)
            assert barrier.status(w) == command + w, f"round {r}, worker {w}"
            assert shared.payload_out[w] == r * 10 + w, f"round {r}, worker {w}: stale payload"
        expected_served[workers] += 1
        durations.append(took)
    barrier.post(range(n), CLOSE)
    assert barrier.wait(range(n), -1, ROUND_LIMIT) == n, "workers did not answer CLOSE"
    np.testing.assert_array_equal(shared.served, expected_served,
                                  err_msg="commands served per worker")
    return durations


# ---------------------------------------------------------------------------
# stress


@pytest.mark.parametrize("max_spin_us", [0.0, 300.0], ids=["sleep-only", "spin-then-sleep"])
def test_stress_threads(max_spin_us):
    shared = Shared(3)
    results: dict[int, Any] = {}

    def target(w: int) -> None:
        try:
            results[w] = serve(shared, w, 100 + w, max_spin_us)
        except BaseException as exc:  # reported below
            results[w] = exc

    threads = [threading.Thread(target=target, args=(w,), daemon=True) for w in range(3)]
    for thread in threads:
        thread.start()
    try:
        durations = drive(shared, 2000, seed=1, max_spin_us=max_spin_us)
    finally:
        shared.barrier().post(range(3), CLOSE)  # if the test failed half-way
        for thread in threads:
            thread.join(IDLE_EXIT + 2)
    assert results == {0: 0, 1: 0, 2: 0}
    assert len(durations) == 2000


@pytest.mark.subprocess
@pytest.mark.parametrize("max_spin_us", [0.0, 300.0], ids=["sleep-only", "spin-then-sleep"])
def test_stress_processes(max_spin_us):
    shared = Shared(2)
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_serve_process, args=(shared, w, 200 + w, max_spin_us),
                         daemon=True) for w in range(2)]
    for proc in procs:
        proc.start()
    try:
        durations = drive(shared, 3000, seed=2, max_spin_us=max_spin_us)
        for proc in procs:
            proc.join(5)
        assert [proc.exitcode for proc in procs] == [0, 0]
    finally:
        _reap(procs)
    assert len(durations) == 3000


def _reap(procs: list) -> None:
    for proc in procs:
        if proc.exitcode is None:
            proc.kill()
        proc.join(5)


@pytest.mark.subprocess
def test_wake_up_from_sleep_is_prompt():
    """With spinning off, every wait sleeps on a futex; a posted command must wake it at
    once.  A lost wake-up costs up to the longest single sleep (5 ms) instead of tens
    of microseconds, so the median round trip shows it."""
    shared = Shared(1)
    proc = mp.get_context("fork").Process(
        target=_serve_process, args=(shared, 0, 7, 0.0), daemon=True)
    proc.start()
    barrier = shared.barrier(max_spin_us=0.0)
    durations = []
    try:
        for r in range(100):
            time.sleep(0.002)  # the worker is asleep by now
            shared.payload_in[0] = r
            start = time.monotonic()
            barrier.post(0, 5)
            assert barrier.wait([0], -1, ROUND_LIMIT) == 1, f"round {r} lost"
            durations.append(time.monotonic() - start)
            assert shared.payload_out[0] == r * 10
        barrier.post(0, CLOSE)
        assert barrier.wait([0], -1, ROUND_LIMIT) == 1
        proc.join(5)
        assert proc.exitcode == 0
    finally:
        _reap([proc])
    median = statistics.median(durations)
    assert median < 0.002, f"median round trip from sleep {median * 1e3:.2f} ms"


@pytest.mark.subprocess
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs sched_setaffinity and two CPUs")
@pytest.mark.parametrize("sharing", ["a busy process", "the worker"])
def test_a_yield_that_lets_another_process_run_turns_spinning_off(sharing):
    """A spinning waiter yields its core every few dozen checks.  When another process
    is runnable on that core, the yield hands it a time slice and the waiter comes
    back long after the worker it waited for was done: it must then sleep on the
    futex for its next waits, where the ring wakes it at once.  When the yield runs
    the worker it waits for, it comes back just after that worker was done, and keeps
    spinning.
    Here the waiter may use one core, shared with ``sharing``."""
    allowed = os.sched_getaffinity(0)
    cpu = min(allowed)
    busy = subprocess.Popen([sys.executable, "-c", (
        f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nend = time.monotonic() + 20\n"
        "while time.monotonic() < end: pass")]) if sharing == "a busy process" else None
    shared = Shared(1)
    stop = threading.Event()

    def serve() -> None:  # on the other cores, or on the waiter's
        os.sched_setaffinity(0, {cpu} if busy is None else allowed - {cpu})  # this thread
        barrier = shared.barrier()
        barrier.start_worker(0)
        while not stop.is_set():
            if barrier.wait_command(0, 0.05) is not None:
                end = time.perf_counter() + 0.0002  # the waiter spins meanwhile
                while time.perf_counter() < end:
                    pass
                barrier.finish(0)

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        os.sched_setaffinity(0, {cpu})  # this thread
        time.sleep(0.05)  # the busy process is running
        states = []
        for _ in range(3):  # without the busy process, anything else on the machine
            # could steal the core once: one clean try of three is enough
            barrier = shared.barrier()  # spins up to 300 us per wait, yielding
            assert barrier.spin_state == (75.0, 0, 0)
            for _ in range(20):
                barrier.post(0, 5)
                assert barrier.wait([0], -1, ROUND_LIMIT) == 1
                if barrier.spin_state[2]:
                    break
            states.append(barrier.spin_state)
            if busy is not None or states[-1][1:] == (0, 0):
                break
        _, skip, backoff = states[-1]
        if busy is not None:
            assert backoff >= 64 and 0 < skip <= backoff, states
        else:
            if (skip, backoff) != (0, 0) and os.getloadavg()[0] >= len(allowed):
                pytest.skip(f"every try lost the core to other processes (load average "
                            f"{os.getloadavg()[0]:.1f} on {len(allowed)} CPUs): too busy "
                            "a machine for a yield that runs only the worker")
            assert (skip, backoff) == (0, 0), states
    finally:
        os.sched_setaffinity(0, allowed)
        stop.set()
        worker.join(5)
        if busy is not None:
            busy.kill()
            busy.wait(5)


# ---------------------------------------------------------------------------
# waits


def _blocked_workers(shared: Shared, gates: list[threading.Event]) -> list[threading.Thread]:
    """Threads that serve one command each, finishing only when their gate opens."""

    def target(w: int) -> None:
        barrier = shared.barrier()
        barrier.start_worker(w)
        command = barrier.wait_command(w, 10.0)
        if command is not None and gates[w].wait(10.0):
            barrier.finish(w, command + w)

    threads = [threading.Thread(target=target, args=(w,), daemon=True)
               for w in range(len(gates))]
    for thread in threads:
        thread.start()
    return threads


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    result = fn()
    return result, time.monotonic() - start


def test_wait_for_want_returns_as_soon_as_that_many_are_done():
    shared = Shared(3)
    barrier = shared.barrier()
    gates = [threading.Event() for _ in range(3)]
    threads = _blocked_workers(shared, gates)
    try:
        barrier.post([0, 1, 2], 9)
        ready, took = _timed(lambda: barrier.wait([0, 1, 2], 1, 0.2))
        assert ready == 0 and 0.15 < took < 1.0, "nothing done: wait(want=1) times out"
        for opened, want in ((1, 1), (2, 2), (0, 3)):
            gates[opened].set()
            ready, took = _timed(lambda want=want: barrier.wait([0, 1, 2], want, 5.0))
            assert ready == want and took < 0.5, f"want={want}: {ready} after {took:.3f} s"
        assert barrier.done_in_order([0, 1, 2]) == [1, 2, 0]
        assert [barrier.status(w) for w in range(3)] == [9, 10, 11]
    finally:
        for gate in gates:
            gate.set()
        for thread in threads:
            thread.join(5)


def test_wait_counts_only_the_workers_asked_about():
    shared = Shared(3)
    barrier = shared.barrier()
    gates = [threading.Event() for _ in range(3)]
    threads = _blocked_workers(shared, gates)
    try:
        barrier.post([0, 1, 2], 4)
        gates[0].set()
        gates[2].set()
        assert barrier.wait([0, 2], -1, 5.0) == 2
        ready, took = _timed(lambda: barrier.wait([1], -1, 0.1))
        assert ready == 0 and took >= 0.08
        assert barrier.done_in_order([1, 2, 0]) in ([0, 2], [2, 0])
        assert not barrier.is_done(1)
    finally:
        for gate in gates:
            gate.set()
        for thread in threads:
            thread.join(5)


@pytest.mark.parametrize("timeout", [0.0, 0.05, 0.3])
def test_wait_command_returns_none_after_its_timeout(timeout):
    shared = Shared(2)
    worker = shared.barrier()
    worker.start_worker(1)
    command, took = _timed(lambda: worker.wait_command(1, timeout))
    assert command is None
    assert timeout * 0.9 <= took < timeout + 0.5


@pytest.mark.parametrize("timeout", [0.0, 0.05, 0.3])
def test_parent_wait_honours_its_timeout(timeout):
    shared = Shared(2)
    barrier = shared.barrier()
    barrier.post([0, 1], 3)
    ready, took = _timed(lambda: barrier.wait([0, 1], -1, timeout))
    assert ready == 0
    assert timeout * 0.9 <= took < timeout + 0.5


def test_wait_command_wakes_when_posted_from_another_thread():
    shared = Shared(1)
    parent, worker = shared.barrier(), shared.barrier()
    worker.start_worker(0)
    timer = threading.Timer(0.1, parent.post, args=(0, 6))
    timer.start()
    try:
        command, took = _timed(lambda: worker.wait_command(0, 5.0))
    finally:
        timer.join()
    assert command == 6
    assert 0.05 < took < 1.0


def test_a_command_is_served_once():
    shared = Shared(1)
    parent, worker = shared.barrier(), shared.barrier()
    worker.start_worker(0)
    parent.post(0, 8)
    assert worker.wait_command(0, 1.0) == 8
    worker.finish(0, 3)
    assert parent.wait([0], -1, 1.0) == 1 and parent.status(0) == 3
    assert worker.wait_command(0, 0.05) is None


def test_all_workers_share_one_post():
    shared = Shared(4)
    parent = shared.barrier()
    parent.post(range(4), 12)
    for w in range(4):
        worker = shared.barrier()
        worker.start_worker(w)
        assert worker.wait_command(w, 0.5) == 12
        worker.finish(w, w)
    assert parent.wait(range(4), -1, 1.0) == 4
    assert [parent.status(w) for w in range(4)] == [0, 1, 2, 3]


# ---------------------------------------------------------------------------
# replacing a worker


def test_settle_then_a_replacement_serves_a_command_posted_before_it_started():
    shared = Shared(2)
    parent = shared.barrier()
    old = shared.barrier()
    old.start_worker(1)
    parent.post([0, 1], 20)
    assert old.wait_command(1, 1.0) == 20  # ... and the old worker dies without finishing
    assert not parent.is_done(1)
    parent.settle(1)
    assert parent.is_done(1) and parent.status(1) == 0
    assert parent.wait([1], -1, 0.0) == 1
    parent.post(1, 21)  # posted before the replacement starts
    new = shared.barrier()
    new.start_worker(1)
    command, took = _timed(lambda: new.wait_command(1, 1.0))
    assert command == 21 and took < 0.5
    new.finish(1, 5)
    assert parent.wait([1], -1, 1.0) == 1 and parent.status(1) == 5
    assert new.wait_command(1, 0.05) is None


def test_settle_then_a_replacement_does_not_serve_the_dead_workers_command():
    shared = Shared(1)
    parent = shared.barrier()
    old = shared.barrier()
    old.start_worker(0)
    parent.post(0, 30)
    assert old.wait_command(0, 1.0) == 30
    parent.settle(0)
    new = shared.barrier()
    new.start_worker(0)
    assert new.wait_command(0, 0.05) is None
    parent.post(0, 31)
    assert new.wait_command(0, 1.0) == 31


def _hold_then_serve(shared: Shared, w: int, hold_on: int) -> None:
    """A worker process that serves commands but hangs forever on ``hold_on``."""
    barrier = shared.barrier()
    barrier.start_worker(w)
    deadline = time.monotonic() + IDLE_EXIT
    while time.monotonic() < deadline:
        command = barrier.wait_command(w, 0.05)
        if command == hold_on:
            time.sleep(IDLE_EXIT)
        elif command == CLOSE:
            barrier.finish(w, 0)
            os._exit(0)
        elif command is not None:
            barrier.finish(w, command + w)
    os._exit(2)


@pytest.mark.subprocess
def test_replacement_process_after_a_kill_mid_command():
    shared = Shared(2)
    ctx = mp.get_context("fork")
    parent = shared.barrier()
    procs = [ctx.Process(target=_hold_then_serve, args=(shared, w, 40), daemon=True)
             for w in range(2)]
    for proc in procs:
        proc.start()
    try:
        parent.post([0, 1], 3)
        assert parent.wait([0, 1], -1, ROUND_LIMIT) == 2
        parent.post([0, 1], 40)  # both hang
        assert parent.wait([0, 1], -1, 0.1) == 0
        os.kill(procs[1].pid, signal.SIGKILL)
        procs[1].join(5)
        assert procs[1].exitcode == -signal.SIGKILL
        parent.settle(1)
        parent.post(1, 41)
        procs[1] = ctx.Process(target=_hold_then_serve, args=(shared, 1, 40), daemon=True)
        procs[1].start()
        assert parent.wait([1], -1, 5.0) == 1, "replacement never served the command"
        assert parent.status(1) == 42 and not parent.is_done(0)
        for r in range(50):
            parent.post(1, 50 + r)
            assert parent.wait([1], -1, ROUND_LIMIT) == 1 and parent.status(1) == 51 + r
        parent.post(1, CLOSE)
        procs[1].join(5)
        assert procs[1].exitcode == 0
    finally:
        _reap(procs)


# ---------------------------------------------------------------------------
# arguments


def test_nbytes_is_a_line_per_worker_plus_two():
    assert [barrier_nbytes(n) for n in (1, 2, 8)] == [192, 256, 640]


def test_too_little_memory():
    mem = mmap.mmap(-1, 4096)
    with pytest.raises(ValueError, match="at least 256 bytes of memory, got 255"):
        Barrier(memoryview(mem)[:255], 2)
    with pytest.raises(ValueError, match="at least 256 bytes of memory, got 192"):
        Barrier(memoryview(mem)[:192], 2)
    Barrier(memoryview(mem)[:256], 2)


def test_misaligned_memory():
    mem = mmap.mmap(-1, 4096)
    for offset in (1, 4, 32):
        with pytest.raises(ValueError, match="aligned to 64 bytes"):
            Barrier(memoryview(mem)[offset:], 2)
    Barrier(memoryview(mem)[64:], 2)


def test_read_only_memory():
    with pytest.raises((BufferError, ValueError, TypeError)):
        Barrier(bytes(4096), 2)


def test_no_workers():
    with pytest.raises(ValueError, match="at least one worker"):
        Barrier(mmap.mmap(-1, 4096), 0)


@pytest.mark.parametrize("worker", [-1, 3, 1000])
@pytest.mark.parametrize("call", [
    lambda b, w: b.post(w, 2),
    lambda b, w: b.post([0, w], 2),
    lambda b, w: b.wait([w], -1, 0.0),
    lambda b, w: b.is_done(w),
    lambda b, w: b.status(w),
    lambda b, w: b.settle(w),
    lambda b, w: b.done_in_order([w]),
    lambda b, w: b.wait_command(w, 0.0),
    lambda b, w: b.start_worker(w),
    lambda b, w: b.finish(w, 0),
], ids=["post", "post-list", "wait", "is_done", "status", "settle", "done_in_order",
        "wait_command", "start_worker", "finish"])
def test_worker_index_out_of_range(call, worker):
    barrier = Barrier(mmap.mmap(-1, 4096), 3)
    with pytest.raises(IndexError, match=f"worker {worker} out of range"):
        call(barrier, worker)


def test_a_post_with_a_bad_index_posts_nothing():
    barrier = Barrier(mmap.mmap(-1, 4096), 3)
    with pytest.raises(IndexError):
        barrier.post([0, 3], 2)
    assert barrier.is_done(0), "worker 0 was given a command by a post that raised"
