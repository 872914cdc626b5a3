"""SubprocVecEnv when things go wrong: each failure for real, with real processes.

Every test asserts the error type, what its message names, and a time bound.
Envs raise, workers are killed from outside or die inside an env (exit code,
SIGKILL, a real segfault), steps time out, workers are restarted (with full
batches and with async batches), and trainers are interrupted with Ctrl-C or
killed with SIGKILL.  Bad actions never reaching a worker: the contract suite
(``test_contract_errors.py``).
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fastvec.errors import FastVecError, WorkerError, WorkerTimeout
from tests.support import internals
from tests.support.envs import (
    CountingEnv,
    CrashingEnv,
    EnvBoom,
    HangingEnv,
    RaisingEnv,
    SlowEnv,
    crashing_fns,
    make_fns,
)
from tests.support.processes import start_time, timer, wait_gone

pytestmark = [pytest.mark.subprocess]

ROOT = Path(__file__).resolve().parents[3]
CONTEXTS = ["fork", "spawn", "forkserver"]
REPORT_SECONDS = 1.0  # a dead worker is reported within this long
CLOSE_SECONDS = 3.0  # close() after a failure returns within this long
GONE_SECONDS = 5.0  # processes of a killed trainer are gone within this long
ZEROS = np.zeros(4, dtype=np.int64)


def worker_pids(envs: Any) -> list[int]:
    return internals.worker_pids(envs)


def assert_unusable(envs: Any) -> None:
    """After a fatal failure: an error at once, never a hang."""
    with timer() as took:
        with pytest.raises(FastVecError):
            envs.step(ZEROS)
    assert took[0] < REPORT_SECONDS


def assert_closes_promptly(envs: Any) -> None:
    pids = {pid: start_time(pid) for pid in worker_pids(envs) if start_time(pid) is not None}
    with timer() as took:
        envs.close()
    assert took[0] < CLOSE_SECONDS, f"close() took {took[0]:.2f} s"
    assert wait_gone(pids, 1.0) == [], "workers still running after close()"


# ---------------------------------------------------------------------------
# envs and factories local to these tests


class SysExitEnv(CountingEnv):
    """A counting env that calls ``sys.exit(exitcode)`` at step ``exit_at`` if ``faulty``."""

    def __init__(self, exit_at: int = 2, exitcode: int = 3, faulty: bool = True,
                 episode_len: int = 100, env_id: int = 0):
        super().__init__(episode_len, env_id)
        self.exit_at, self.exitcode, self.faulty = exit_at, exitcode, faulty

    def step(self, action):
        if self.faulty and self.t + 1 == self.exit_at:
            sys.exit(self.exitcode)
        return super().step(action)


def build_or_fail(env_id: int, fail_id: int, error: str) -> CountingEnv:
    """A counting env, except that building env ``fail_id`` raises ``error``."""
    if env_id == fail_id:
        if error == "EnvBoom":
            raise EnvBoom(f"building env {env_id} failed on purpose")
        if error == "FileNotFoundError":
            open(os.path.join(os.sep, "nonexistent", f"asset-{env_id}.bin"))
    return CountingEnv(env_id=env_id)


# ---------------------------------------------------------------------------
# an env raises: the worker lives, the error names env, worker, type and message


def check_env_error(exc: WorkerError, env: int, worker: int, what: str, function: str) -> None:
    message = str(exc)
    assert exc.env_index == env and exc.worker_index == worker and exc.exitcode is None
    assert f"env {env}" in message and f"worker {worker}" in message, message
    assert "EnvBoom" in message and "on purpose" in message, message
    assert what in message, message
    cause = exc.__cause__
    assert cause is not None, "the remote traceback is not attached as __cause__"
    assert "Traceback" in str(cause) and function in str(cause), str(cause)
    assert "EnvBoom" in str(cause)


@pytest.mark.parametrize("context", CONTEXTS)
def test_env_raising_in_step(make_subproc, context):
    fns = make_fns(RaisingEnv, 4, per_env={"faulty": [False, False, True, False]}, raise_at=2)
    envs = make_subproc(fns, num_workers=2, context=context)
    pids = worker_pids(envs)
    envs.reset(seed=0)
    envs.step(np.array([1, 2, 3, 1]))
    with timer() as took:
        with pytest.raises(WorkerError) as info:
            envs.step(np.array([1, 2, 3, 1]))
    assert took[0] < REPORT_SECONDS
    check_env_error(info.value, env=2, worker=1, what="step", function="_maybe_raise")
    assert "step 2" in str(info.value)
    # Nobody died, and the vector env goes on after a reset.
    assert worker_pids(envs) == pids and internals.worker_exitcodes(envs) == [None] * len(pids)
    obs, _ = envs.reset(seed=0)
    np.testing.assert_array_equal(obs, [0, 0, 0, 0])
    obs, rew, term, trunc, _ = envs.step(np.array([3, 2, 1, 0]))
    np.testing.assert_array_equal(obs, [1, 1, 1, 1])
    np.testing.assert_array_equal(rew, [3.0, 2.0, 1.0, 0.0])
    assert not term.any() and not trunc.any()
    assert worker_pids(envs) == pids


def test_env_raising_in_reset(make_subproc):
    fns = make_fns(RaisingEnv, 4, per_env={"faulty": [False, False, False, True]}, raise_at=0)
    envs = make_subproc(fns, num_workers=2, context="fork")
    pids = worker_pids(envs)
    with timer() as took:
        with pytest.raises(WorkerError) as info:
            envs.reset(seed=0)
    assert took[0] < REPORT_SECONDS
    check_env_error(info.value, env=3, worker=1, what="reset", function="_maybe_raise")
    # The workers still serve calls, and once the env behaves, reset and step work.
    assert envs.get_attr("faulty") == (False, False, False, True)
    envs.set_attr("faulty", False)
    obs, _ = envs.reset(seed=0)
    np.testing.assert_array_equal(obs, [0, 0, 0, 0])
    obs, rew, *_ = envs.step(np.array([1, 1, 2, 2]))
    np.testing.assert_array_equal(obs, [1, 1, 1, 1])
    np.testing.assert_array_equal(rew, [1.0, 1.0, 2.0, 2.0])
    assert worker_pids(envs) == pids


@pytest.mark.parametrize("error", ["EnvBoom", "FileNotFoundError"])
@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_env_raising_while_being_built(make_subproc, context, error):
    fns = [functools.partial(build_or_fail, i, 3, error) for i in range(4)]
    with timer() as took:
        with pytest.raises(WorkerError) as info:
            make_subproc(fns, num_workers=2, context=context)
    exc, message = info.value, str(info.value)
    assert exc.env_index == 3 and exc.worker_index == 1 and exc.exitcode is None, message
    assert "env 3" in message and "worker 1" in message and error in message, message
    assert "build_or_fail" in str(exc.__cause__)
    # Start-up is quick here (~0.05 s forked, well under 1.5 s from the forkserver);
    # the healthy worker must be told to stop, not left to a grace period and SIGTERM.
    assert took[0] < (0.8 if context == "fork" else 2.0), f"took {took[0]:.2f} s"


# ---------------------------------------------------------------------------
# a worker dies: WorkerError with the exit code, within a second, never a hang


def kill_worker_1(envs: Any) -> None:
    os.kill(internals.worker_pids(envs)[1], signal.SIGKILL)


ONLY_ENV_2 = {"faulty": [False, False, True, False]}
# name -> (env factories for 4 envs (env 2 in worker 1 is the victim), what to do
# before the second step, the expected exit code, what the message says)
DEATHS: dict[str, tuple[Callable[[], list], Callable[[Any], None] | None, int, str]] = {
    "sigkill-from-outside": (lambda: make_fns(CountingEnv, 4, episode_len=100),
                             kill_worker_1, -signal.SIGKILL, "killed by SIGKILL"),
    "sigkill-inside": (lambda: crashing_fns(4, 2, mode="sigkill", crash_at=2), None,
                       -signal.SIGKILL, "killed by SIGKILL"),
    "os._exit": (lambda: crashing_fns(4, 2, mode="exit", exitcode=3, crash_at=2), None,
                 3, "exited with code 3"),
    "sys.exit": (lambda: make_fns(SysExitEnv, 4, per_env=ONLY_ENV_2), None,
                 3, "exited with code 3"),
    "segfault": (lambda: crashing_fns(4, 2, mode="segfault", crash_at=2), None,
                 -signal.SIGSEGV, "killed by SIGSEGV"),
}


@pytest.mark.crash
@pytest.mark.parametrize("death", list(DEATHS))
def test_worker_death_is_a_worker_error_with_the_exit_code(make_subproc, death):
    make_env_fns, before, exitcode, says = DEATHS[death]
    envs = make_subproc(make_env_fns(), num_workers=2, context="fork")
    envs.reset(seed=0)
    envs.step(ZEROS)
    with timer() as took:
        if before is not None:
            before(envs)
        with pytest.raises(WorkerError) as info:
            envs.step(ZEROS)
    assert took[0] < REPORT_SECONDS, f"reported after {took[0]:.2f} s"
    exc = info.value
    assert exc.worker_index == 1 and exc.exitcode == exitcode, str(exc)
    assert "worker 1" in str(exc) and says in str(exc), str(exc)
    assert_unusable(envs)
    assert_closes_promptly(envs)


@pytest.mark.crash
@pytest.mark.parametrize("context", CONTEXTS)
def test_killed_worker_is_reported_in_every_context(make_subproc, context):
    envs = make_subproc(make_fns(CountingEnv, 4), num_workers=2, context=context)
    envs.reset(seed=0)
    kill_worker_1(envs)
    with timer() as took:
        with pytest.raises(WorkerError, match="worker 1 was killed by SIGKILL") as info:
            envs.step(ZEROS)
    assert took[0] < REPORT_SECONDS
    assert info.value.exitcode == -signal.SIGKILL
    assert_closes_promptly(envs)


@pytest.mark.crash
@pytest.mark.parametrize("how", ["killed-from-outside", "crash-inside"])
def test_death_is_reported_while_other_workers_are_busy(make_subproc, how):
    """Worker 0 takes 3 s for the step in which worker 1 dies early."""
    fns = [functools.partial(SlowEnv, delay=0.0, env_id=i) for i in range(4)]
    if how == "crash-inside":
        fns[2:] = make_fns(CrashingEnv, 2, per_env={"faulty": [True, False]},
                           mode="sigkill", crash_at=1, parent_pid=os.getpid())
    envs = make_subproc(fns, num_workers=2, context="fork")
    envs.reset(seed=0)
    envs.set_attr("delay", 1.5)  # worker 0 (and worker 1 when killed from outside) is busy
    if how == "killed-from-outside":
        killer = threading.Timer(0.2, kill_worker_1, args=(envs,))
        killer.start()
    with timer() as took:
        with pytest.raises(WorkerError, match="worker 1 was killed by SIGKILL"):
            envs.step(ZEROS)
    died_at = 0.2 if how == "killed-from-outside" else 0.0
    assert took[0] < died_at + REPORT_SECONDS, f"reported after {took[0]:.2f} s"
    assert_closes_promptly(envs)


@pytest.mark.parametrize("context", CONTEXTS)
def test_workers_outlive_the_thread_that_started_them(make_subproc, context):
    """A vector env made in a thread that then ends (a thread pool, a launcher) keeps
    its workers: Linux's parent-death signal is tied to the starting thread."""
    made: dict[str, Any] = {}

    def build() -> None:
        made["envs"] = make_subproc(make_fns(CountingEnv, 4), num_workers=2, context=context)

    builder = threading.Thread(target=build)
    builder.start()
    builder.join()
    envs = made["envs"]
    time.sleep(0.2)
    assert internals.worker_exitcodes(envs) == [None, None]
    envs.reset(seed=0)
    obs, *_ = envs.step(np.array([1, 2, 3, 0]))
    np.testing.assert_array_equal(obs, [1, 1, 1, 1])


# ---------------------------------------------------------------------------
# timeouts


@pytest.mark.parametrize("during", ["step", "reset"])
def test_timeout(make_subproc, during):
    if during == "step":
        fns = make_fns(HangingEnv, 4, per_env={"faulty": [False, True, False, False]},
                       hang_at=2)
        late = "workers [0]"
    else:
        fns = make_fns(SlowEnv, 4, per_env={"delay": [0.0, 0.0, 0.0, 60.0]})
        late = "workers [1]"
    envs = make_subproc(fns, num_workers=2, context="fork", timeout=0.3)
    if during == "step":
        envs.reset(seed=0)
        envs.step(ZEROS)
    with timer() as took:
        with pytest.raises(WorkerTimeout) as info:
            envs.step(ZEROS) if during == "step" else envs.reset(seed=0)
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, FastVecError)
    assert 0.3 <= took[0] < 0.3 + 0.5, f"raised after {took[0]:.2f} s"
    assert late in str(info.value) and "timeout=0.3" in str(info.value), str(info.value)
    assert_unusable(envs)
    assert_closes_promptly(envs)


# ---------------------------------------------------------------------------
# on_worker_failure="restart"

RESTART_STEPS = 5  # env 3 (worker 1) fails in step 3; steps 4 and 5 follow


def restart_fns(failure: str) -> list:
    """6 counting envs of 4-step episodes; env 3 fails at its 3rd step."""
    faulty = [i == 3 for i in range(6)]
    if failure == "raise":
        return make_fns(RaisingEnv, 6, per_env={"faulty": faulty}, raise_at=3, episode_len=4)
    if failure == "segfault":
        return crashing_fns(6, 3, mode="segfault", crash_at=3, episode_len=4)
    if failure == "hang":  # past the timeout: killed and restarted as if it had died
        return make_fns(HangingEnv, 6, per_env={"faulty": faulty}, hang_at=3, episode_len=4)
    return make_fns(CountingEnv, 6, episode_len=4)  # killed from outside


@pytest.mark.crash
@pytest.mark.parametrize("failure", ["raise", "sigkill-from-outside", "segfault", "hang"])
def test_restart_replaces_the_worker_and_reports_its_envs_truncated(
        make_subproc, make_ref, failure):
    envs = make_subproc(restart_fns(failure), num_workers=3, context="fork",
                        on_worker_failure="restart",
                        timeout=0.5 if failure == "hang" else None)
    ref = make_ref(make_fns(CountingEnv, 6, episode_len=4))
    fresh_obs = restart_fns(failure)[2]().reset(seed=None)[0]
    block, others = [2, 3], [0, 1, 4, 5]
    pids = worker_pids(envs)
    obs, _ = envs.reset(seed=0)
    ref.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 4, size=(RESTART_STEPS, 6))
    for step, action in enumerate(actions, start=1):
        if step == 3 and failure == "sigkill-from-outside":
            kill_worker_1(envs)
        with timer() as took:
            obs, rew, term, trunc, infos = envs.step(action)
        r_obs, r_rew, r_term, r_trunc, _ = ref.step(action)
        where = f"step {step}"
        # The other envs are not affected, on the failing step or after it.
        np.testing.assert_array_equal(obs[others], r_obs[others], err_msg=where)
        np.testing.assert_array_equal(rew[others], r_rew[others], err_msg=where)
        np.testing.assert_array_equal(term[others], r_term[others], err_msg=where)
        np.testing.assert_array_equal(trunc[others], r_trunc[others], err_msg=where)
        if step == 3:
            assert took[0] < 5.0, f"the restarting step took {took[0]:.2f} s"
            for i in block:
                np.testing.assert_array_equal(obs[i], fresh_obs, err_msg=f"env {i}")
            assert (rew[block] == 0).all() and trunc[block].all() and not term[block].any()
            np.testing.assert_array_equal(infos["worker_restarted"][block], True)
            np.testing.assert_array_equal(infos["_worker_restarted"],
                                          [i in block for i in range(6)])
            new_pids = worker_pids(envs)
            assert new_pids[0] == pids[0] and new_pids[2] == pids[2]
            assert new_pids[1] != pids[1]
        elif step > 3:  # the restarted envs are on the first steps of a new episode
            np.testing.assert_array_equal(obs[block], [step - 3] * 2, err_msg=where)
            np.testing.assert_array_equal(rew[block], action[block], err_msg=where)
            assert not term[block].any() and not trunc[block].any(), where
            assert "worker_restarted" not in infos, where
        else:
            assert "worker_restarted" not in infos, where
            np.testing.assert_array_equal(obs[block], r_obs[block], err_msg=where)
    assert all(code is None for code in internals.worker_exitcodes(envs))


# ---------------------------------------------------------------------------
# async batches: the same failures while batches interleave


def test_env_error_in_async_mode(make_subproc):
    fns = make_fns(RaisingEnv, 4, per_env={"faulty": [False, False, True, False]}, raise_at=2)
    envs = make_subproc(fns, num_workers=2, batch_size=2)
    envs.async_reset(seed=0)
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        while time.monotonic() - start < 5.0:  # until the faulty worker's turn comes
            ids = envs.recv()[-1]
            envs.send(np.zeros(2, np.int64), ids)
    assert info.value.env_index == 2 and info.value.worker_index == 1


def test_worker_death_in_async_mode_is_reported_fast(make_subproc):
    envs = make_subproc(make_fns(CountingEnv, 4, episode_len=1000), num_workers=2, batch_size=2)
    envs.async_reset(seed=0)
    ids = envs.recv()[-1]
    victim = 1 - int(ids[0]) // 2
    os.kill(internals.worker_pids(envs)[victim], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerError, match="SIGKILL") as info:
        while time.monotonic() - start < 5.0:
            envs.send(np.zeros(2, np.int64), ids)
            ids = envs.recv()[-1]
    assert time.monotonic() - start < 1.5
    assert info.value.exitcode == -signal.SIGKILL


def test_restart_in_async_mode(make_subproc):
    fns = make_fns(RaisingEnv, 4, per_env={"faulty": [False, False, True, False]}, raise_at=2)
    envs = make_subproc(fns, num_workers=2, batch_size=2, on_worker_failure="restart")
    envs.async_reset(seed=0)
    restarted = False
    start = time.monotonic()
    while not restarted and time.monotonic() - start < 10.0:
        obs, rew, term, trunc, infos, ids = envs.recv()
        if "worker_restarted" in infos:
            restarted = True
            assert list(ids) == [2, 3]
            assert trunc.all() and not term.any() and (rew == 0).all()
            assert infos["_worker_restarted"].all()
        envs.send(np.zeros(2, np.int64), ids)
    assert restarted


def test_a_hung_worker_is_restarted_in_async_mode(make_subproc):
    """Past the timeout, a hung worker takes its place in the next batch as a restart,
    however quickly the healthy one keeps finishing."""
    fns = make_fns(HangingEnv, 4, per_env={"faulty": [False, False, False, True]}, hang_at=2)
    envs = make_subproc(fns, num_workers=2, batch_size=2, timeout=0.5,
                        on_worker_failure="restart")
    envs.async_reset(seed=0)
    start = time.monotonic()
    restarted_at = None
    while restarted_at is None and time.monotonic() - start < 10.0:
        obs, rew, term, trunc, infos, ids = envs.recv()
        if "worker_restarted" in infos:
            restarted_at = time.monotonic() - start
            assert list(ids) == [2, 3] and trunc.all() and not term.any()
        envs.send(np.zeros(2, np.int64), ids)
    assert restarted_at is not None and 0.5 <= restarted_at < 3.0, restarted_at
    assert envs.total_restarts == 1
    ids = envs.recv()[-1]  # and it goes on
    envs.send(np.zeros(2, np.int64), ids)


def test_timeout_in_async_mode(make_subproc):
    fns = make_fns(HangingEnv, 4, per_env={"faulty": [False, False, False, True]}, hang_at=1)
    envs = make_subproc(fns, num_workers=2, batch_size=2, timeout=0.5)
    envs.async_reset(seed=0)
    start = time.monotonic()
    with pytest.raises(WorkerTimeout):
        # The healthy worker keeps batches coming; the hung one must still be reported.
        while time.monotonic() - start < 5.0:
            ids = envs.recv()[-1]
            envs.send(np.zeros(2, np.int64), ids)
    assert time.monotonic() - start < 1.5
    closing = time.monotonic()
    envs.close()
    assert time.monotonic() - closing < 4.0
