"""Hygiene: what fastvec leaves open, writes, and survives from a misbehaving worker,
and misuse from threads and signal handlers.

- Shared memory is anonymous (``memfd``: no name in any filesystem), pipes and
  sockets are anonymous too, all owned by the trainer's user; the only way in
  is ``/proc/<pid>/fd``, readable by that user alone (mode ``0500``).
- A run writes nothing to the temp dir, the working directory or
  ``/dev/shm`` once it exited (each start method).
- A worker returning gigantic infos (200 MB) or a gigantic ``call`` result
  delivers it whole, and the trainer lets go of it afterwards.
- Two threads using one vector env at once get a clear ``FastVecError``; a
  signal handler re-entering a call too; ``close()`` from a signal handler,
  another thread or ``atexit`` (with a step pending) closes cleanly.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from fastvec.errors import ClosedEnvError, FastVecError
from tests.support import internals, leaks
from tests.support.envs import DictCountingEnv, SlowEnv, make_fns

ROOT = Path(__file__).resolve().parents[2]
BIG_MB = 200


def fd_targets(pid: int) -> list[tuple[str, os.stat_result]]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append((os.readlink(f"/proc/{pid}/fd/{fd}"), os.stat(f"/proc/{pid}/fd/{fd}")))
        except OSError:
            pass  # the listing's own descriptor, or closed meanwhile
    return out


def unix_socket_paths() -> dict[str, str]:
    """Inode -> bound path of every Unix socket (empty path: anonymous)."""
    paths = {}
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            parts = line.split()
            paths[parts[6]] = parts[7] if len(parts) > 7 else ""
    return paths


@pytest.mark.subprocess
@pytest.mark.parametrize("local_block", [False, True])
def test_shared_memory_and_pipes_are_anonymous_and_the_users_own(make_subproc, local_block):
    envs = make_subproc(make_fns(DictCountingEnv, 4), num_workers=2, context="fork",
                        local_block=local_block)
    envs.reset(seed=0)
    envs.step(np.zeros(4, np.int64))
    sockets = unix_socket_paths()
    uid = os.getuid()
    seen = {"memfd": 0, "pipe": 0, "socket": 0}
    for pid in [os.getpid(), *internals.worker_pids(envs)]:
        fd_dir = os.stat(f"/proc/{pid}/fd")
        assert fd_dir.st_uid == uid and stat.S_IMODE(fd_dir.st_mode) == 0o500, \
            f"/proc/{pid}/fd is reachable by others: {oct(fd_dir.st_mode)}"
        for target, st in fd_targets(pid):
            if target.startswith("/memfd:fastvec"):
                seen["memfd"] += 1
                assert target.endswith("(deleted)"), target  # no name anywhere
                assert st.st_uid == uid, (target, st.st_uid)
            elif target.startswith("pipe:"):
                seen["pipe"] += 1
                assert st.st_uid == uid and stat.S_IMODE(st.st_mode) == 0o600, (target, st)
            elif target.startswith("socket:"):
                seen["socket"] += 1
                inode = target[len("socket:["):-1]
                assert sockets.get(inode, "") == "", f"a socket bound to {sockets[inode]}"
                assert st.st_uid == uid
            else:  # nothing of fastvec's is a named file, nothing in /dev/shm has a name
                assert "fastvec" not in target, target
                assert not target.startswith("/dev/shm") or target.endswith("(deleted)"), target
    assert seen["memfd"] and seen["pipe"] and seen["socket"], seen


WRITE_NOTHING = """
import sys, numpy as np, fastvec
from tests.support.envs import DictCountingEnv, ObjectSpaceEnv, make_fns
for context in ("fork", "forkserver", "spawn"):
    for cls, kw in ((DictCountingEnv, {}), (ObjectSpaceEnv, {"kind": "text"})):
        with fastvec.SubprocVecEnv(make_fns(cls, 4, **kw), num_workers=2,
                                   context=context) as envs:
            envs.reset(seed=0)
            for _ in range(5):
                envs.step(np.zeros(4, np.int64))
    with fastvec.SubprocVecEnv(make_fns(DictCountingEnv, 4), num_workers=1,
                               local_block=True, batch_size=2, context=context) as envs:
        envs.async_reset(seed=0)
        for _ in range(4):
            *_, ids = envs.recv()
            envs.send(np.zeros(len(ids), np.int64), ids)
print("done")
"""

SHM_PATTERNS = ("sem.", "psm_", "mp-", "fastvec")


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_run_writes_nothing_to_tmp_cwd_or_dev_shm(tmp_path):
    tmp, cwd = tmp_path / "tmp", tmp_path / "cwd"
    tmp.mkdir()
    cwd.mkdir()
    shm_before = leaks.shm_entries()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT),
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", WRITE_NOTHING], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "done" in done.stdout, done.stderr
    assert list(tmp.iterdir()) == [], f"left in TMPDIR: {list(tmp.iterdir())}"
    assert list(cwd.iterdir()) == [], f"left in the working directory: {list(cwd.iterdir())}"
    new = {e for e in leaks.shm_entries() - shm_before if e.startswith(SHM_PATTERNS)}
    assert not new, f"left in /dev/shm: {new}"


# ---------------------------------------------------------------------------
# gigantic infos and call results


class BigInfoEnv(gym.Env):
    """Returns a ``mb`` MiB info (``blob``, bytes equal to ``env_id + 1``) at step
    ``at``, small infos otherwise; ``big()`` returns ``mb`` MiB."""

    metadata: dict[str, Any] = {}

    def __init__(self, env_id: int = 0, mb: int = BIG_MB, at: int = 2, big_env: int = 1):
        self.env_id, self.mb, self.at, self.big_env = env_id, mb, at, big_env
        self.observation_space = spaces.Box(0, 1e6, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([self.env_id, 0], np.float32), {}

    def step(self, action):
        self.t += 1
        info: dict[str, Any] = {"small": self.t}
        if self.t == self.at and self.env_id == self.big_env:
            info = {"blob": np.full(self.mb * 2**20, self.env_id + 1, np.uint8)}
        return np.array([self.env_id, self.t], np.float32), 0.0, False, False, info

    def big(self) -> np.ndarray:
        return np.full(self.mb * 2**20, self.env_id + 1, np.uint8)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.subprocess
@pytest.mark.slow
def test_gigantic_infos_and_call_results_are_delivered_whole_and_let_go(make_subproc):
    envs = make_subproc(make_fns(BigInfoEnv, 4), num_workers=2, context="fork", timeout=60)
    envs.reset(seed=0)
    base = rss_mb()
    for t in (1, 2, 3):
        start = time.monotonic()
        obs, _, _, _, infos = envs.step(np.zeros(4, np.int64))
        took = time.monotonic() - start
        np.testing.assert_array_equal(obs, [[i, t] for i in range(4)])
        if t == 2:
            assert infos["_blob"].tolist() == [False, True, False, False]
            blob = infos["blob"][1]
            assert blob.nbytes == BIG_MB * 2**20 and blob.min() == blob.max() == 2
            assert took < 30, f"{BIG_MB} MB of infos took {took:.1f} s"
        else:
            assert infos["small"].tolist() == [t] * 4 and "blob" not in infos
        del infos
    results = envs.call("big")
    assert [r.nbytes for r in results] == [BIG_MB * 2**20] * 4
    assert [int(r[0]) for r in results] == [1, 2, 3, 4]
    del results, blob
    envs.step(np.zeros(4, np.int64))
    assert rss_mb() - base < 64, f"the trainer holds on to {rss_mb() - base:.0f} MiB"


# ---------------------------------------------------------------------------
# threads, signal handlers, atexit


def in_thread(fn: Any) -> tuple[threading.Thread, list]:
    out: list = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            out.append(exc)

    thread = threading.Thread(target=run, name="stepper")
    thread.start()
    return thread, out


@pytest.mark.subprocess
@pytest.mark.parametrize("kind", ["sync", "subproc", "subproc-async"])
def test_two_threads_at_once_get_a_clear_error_and_one_at_a_time_works(vec_envs, kind):
    fns = make_fns(SlowEnv, 4, delay=0.3)
    if kind == "sync":
        envs = vec_envs.make(fns)
    else:
        batch = {"batch_size": 2} if kind == "subproc-async" else {}
        envs = vec_envs.make_subproc(fns, num_workers=2, context="fork", **batch)
    if kind == "subproc-async":
        envs.async_reset(seed=0)
        first = lambda: envs.recv()  # noqa: E731
        second = envs.recv
    else:
        envs.reset(seed=0)
        first = lambda: envs.step(np.ones(4, np.int64))  # noqa: E731
        second = lambda: envs.step(np.ones(4, np.int64))  # noqa: E731
    thread, out = in_thread(first)
    time.sleep(0.1)
    with pytest.raises(FastVecError, match="while thread stepper is inside .* not thread-safe"):
        second()
    with pytest.raises(FastVecError, match="not thread-safe"):
        envs.call("scaled_count", 1)
    thread.join()
    assert not isinstance(out[0], BaseException), out[0]
    second()  # the other thread is done: this one may go on
    if kind != "subproc-async":
        obs = second()[0]
        np.testing.assert_array_equal(obs, [3, 3, 3, 3])  # three steps, none lost


@pytest.mark.subprocess
@pytest.mark.parametrize("kind", ["sync", "subproc"])
def test_close_from_a_signal_handler_mid_step_is_a_closed_env_error(vec_envs, kind):
    fns = make_fns(SlowEnv, 4, delay=0.3)
    envs = vec_envs.make(fns) if kind == "sync" else vec_envs.make_subproc(
        fns, num_workers=2, context="fork")
    envs.reset(seed=0)
    reentered: list = []

    def handler(signum: int, frame: Any) -> None:
        try:
            envs.step(np.zeros(4, np.int64))
        except FastVecError as exc:
            reentered.append(exc)
        envs.close()

    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(ClosedEnvError, match="closed while a call was in progress"):
            envs.step(np.zeros(4, np.int64))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert reentered and "same thread" in str(reentered[0]), reentered
    assert envs.closed
    with pytest.raises(ClosedEnvError):
        envs.step(np.zeros(4, np.int64))


@pytest.mark.subprocess
def test_close_from_a_signal_handler_and_another_thread_with_a_step_pending(make_subproc):
    for closer in ("signal", "thread"):
        envs = make_subproc(make_fns(SlowEnv, 4, delay=0.2), num_workers=2, context="fork")
        envs.reset(seed=0)
        envs.step_async(np.zeros(4, np.int64))
        pids = internals.worker_pids(envs)
        if closer == "signal":
            old = signal.signal(signal.SIGUSR1, lambda *_, envs=envs: envs.close())
            try:
                os.kill(os.getpid(), signal.SIGUSR1)
                time.sleep(0.01)  # the handler runs between bytecodes
            finally:
                signal.signal(signal.SIGUSR1, old)
        else:
            thread, out = in_thread(envs.close)
            thread.join()
            assert out == [None]
        assert envs.closed
        with pytest.raises(ClosedEnvError):
            envs.step_wait()
        assert all(not os.path.exists(f"/proc/{pid}/status") or
                   "State:\tZ" in open(f"/proc/{pid}/status").read() for pid in pids)


ATEXIT_SCRIPT = """
import atexit, numpy as np, fastvec
from tests.support.envs import SlowEnv, make_fns
envs = fastvec.SubprocVecEnv(make_fns(SlowEnv, 4, delay=0.2), num_workers=2, context="{ctx}")
atexit.register(envs.close)
envs.reset(seed=0)
envs.step_async(np.zeros(4, np.int64))
print("pending", flush=True)
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("ctx", ["fork", "forkserver"])
def test_close_from_atexit_with_a_step_pending(ctx):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(ATEXIT_SCRIPT.format(ctx=ctx))],
                          env=env, capture_output=True, text=True, timeout=60,
                          start_new_session=True)
    assert done.returncode == 0, done.stderr
    assert "pending" in done.stdout and "Traceback" not in done.stderr, done.stderr
    assert time.monotonic() - start < 20
