"""SubprocVecEnv's trainer interrupted for real: Ctrl-C (to it or its process group),
SIGKILL and SIGTERM, in every start method.  Nothing it started may be left
running, no shared memory left behind, and no worker prints a traceback."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import leaks
from tests.support.processes import cmdline, descendants, running, wait_gone

pytestmark = [pytest.mark.subprocess]

ROOT = Path(__file__).resolve().parents[3]
CONTEXTS = ["fork", "spawn", "forkserver"]
GONE_SECONDS = 5.0  # processes of a killed trainer are gone within this long

# ---------------------------------------------------------------------------
# the trainer: Ctrl-C, SIGKILL

TRAINER = """
import sys
import time
import numpy as np
import fastvec
from tests.support import internals
from tests.support.envs import SlowEnv, make_fns

if __name__ == "__main__":
    context, busy = sys.argv[1], sys.argv[2]
    envs = fastvec.SubprocVecEnv(make_fns(SlowEnv, 4, delay=0.0), num_workers=2,
                                 context=context)
    envs.reset(seed=0)
    envs.set_attr("delay", 0.1 if busy == "workers" else 0.0)
    print("workers", *internals.worker_pids(envs), flush=True)
    actions = np.zeros(4, dtype=np.int64)
    while True:
        envs.step(actions)
        if busy == "trainer":
            time.sleep(0.1)  # the trainer's own work, while the workers wait
"""


def start_trainer(context: str, busy: str) -> tuple[subprocess.Popen, list[int]]:
    """The trainer script in a new session; returns it and its worker pids.

    ``busy``: ``"workers"`` (steps take 0.2 s, the trainer mostly waits for them)
    or ``"trainer"`` (steps are instant, the workers mostly wait for commands).
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONFAULTHANDLER", None)
    # SIGINT as a terminal's foreground job has it, even when these tests run in a
    # background job (which starts with SIGINT ignored, and so would the trainer)
    proc = subprocess.Popen([sys.executable, "-c", TRAINER, context, busy], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    ready, _, _ = select.select([proc.stdout], [], [], 30.0)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("workers"):
        proc.kill()
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"the trainer did not start: {line!r}\n{err.decode()}")
    return proc, [int(pid) for pid in line.split()[1:]]


@contextmanager
def trainer(context: str, busy: str = "workers"
            ) -> Iterator[tuple[subprocess.Popen, list[int], dict[int, int]]]:
    """A running trainer, its worker pids, and all its descendants (pid -> start time).

    Whatever happens, nothing it started is left running afterwards.
    """
    proc, workers = start_trainer(context, busy)
    time.sleep(0.3)  # a few steps
    family = descendants(proc.pid)
    try:
        assert set(workers) <= set(family), f"workers {workers} not among {family}"
        yield proc, workers, family
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
        for pid, started in family.items():
            if running(pid, started):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("target, busy", [
    ("group", "workers"), ("group", "trainer"), ("process", "workers"),
], ids=["group-in-step", "group-between-steps", "trainer-only-in-step"])
def test_ctrl_c_in_the_trainer_shuts_down_cleanly(context, target, busy):
    """SIGINT to the trainer, or (as a terminal sends it) to its whole process group."""
    with trainer(context, busy) as (proc, workers, family):
        interrupted = time.monotonic()
        if target == "group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGINT)
        try:
            _, err_bytes = proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            pytest.fail("the trainer did not exit within 5 s of Ctrl-C")
        took = time.monotonic() - interrupted
        err = err_bytes.decode(errors="replace")
        left = wait_gone(family, 2.0)
    assert took < 3.0, f"the trainer took {took:.2f} s to exit"
    assert proc.returncode != 0
    assert err.count("Traceback (most recent call last)") == 1, err
    assert err.rstrip().splitlines()[-1] == "KeyboardInterrupt", err
    assert "fastvec-worker" not in err and "_worker.py" not in err, err
    assert not left, "still running:\n" + "\n".join(f"{p}: {cmdline(p)}" for p in left)


@pytest.mark.crash
@pytest.mark.parametrize("context", CONTEXTS)
def test_sigkill_of_the_trainer_leaves_no_process_and_no_shared_memory(context):
    shm_before = leaks.shm_entries()
    with trainer(context) as (proc, workers, family):
        kinds = {pid: cmdline(pid) for pid in family}
        proc.kill()
        proc.wait(5.0)
        left = wait_gone(family, GONE_SECONDS)
    assert not left, "still running after the trainer was killed:\n" + "\n".join(
        f"{pid}: {kinds[pid]}" for pid in left)
    new_shm = leaks.wait_shm_released(shm_before, 1.0)
    assert not new_shm, f"new in /dev/shm: {sorted(new_shm)}"


@pytest.mark.crash
@pytest.mark.parametrize("context", CONTEXTS)
def test_sigterm_to_the_trainer_leaves_nothing_and_no_worker_tracebacks(context):
    """A cluster scheduler's SIGTERM: the trainer ends, and so does everything it started."""
    shm_before = leaks.shm_entries()
    with trainer(context) as (proc, workers, family):
        proc.terminate()
        try:
            _, err_bytes = proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            pytest.fail("the trainer did not exit within 5 s of SIGTERM")
        left = wait_gone(family, GONE_SECONDS)
    assert proc.returncode == -signal.SIGTERM
    err = err_bytes.decode(errors="replace")
    assert "Traceback" not in err and "fastvec-worker" not in err, err
    assert not left, "still running after SIGTERM:\n" + "\n".join(
        f"{pid}: {cmdline(pid)}" for pid in left)
    assert not leaks.wait_shm_released(shm_before, 1.0)
