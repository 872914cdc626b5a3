"""What Gymnasium's own vector tests ask of fastvec, beyond the contract suite.

Found by running Gymnasium 1.4's ``tests/vector`` against fastvec
(``benchmarks/gymnasium_vector_tests.py``): ``reset_async``/``reset_wait`` and the
``timeout`` of ``step_wait``/``reset_wait``, as ``AsyncVectorEnv`` has them, and
a ``WorkerTimeout`` that code catching ``multiprocessing.TimeoutError`` catches.
"""

from __future__ import annotations

import multiprocessing
import time

import numpy as np
import pytest
from gymnasium.error import AlreadyPendingCallError, NoAsyncCallError

import fastvec
from fastvec.errors import FastVecError, WorkerTimeout
from tests.envs import CountingEnv, SlowEnv, make_fns

N = 4


def sync(fns, **kwargs):
    return fastvec.SyncVecEnv(fns, **kwargs)


def subproc(fns, **kwargs):
    return fastvec.SubprocVecEnv(fns, num_workers=2, context="fork", **kwargs)


def local(fns, **kwargs):
    return fastvec.SubprocVecEnv(fns, num_workers=1, context="fork", local_block=True,
                                 **kwargs)


MAKERS = [
    pytest.param(sync, id="sync"),
    pytest.param(subproc, id="subproc", marks=pytest.mark.subprocess),
    pytest.param(local, id="subproc-local", marks=pytest.mark.subprocess),
]


def test_worker_timeout_is_a_multiprocessing_timeout_error():
    assert issubclass(WorkerTimeout, multiprocessing.TimeoutError)
    assert issubclass(WorkerTimeout, TimeoutError)
    assert issubclass(WorkerTimeout, FastVecError)


@pytest.mark.parametrize("make", MAKERS)
def test_reset_async_then_reset_wait_is_reset(make):
    envs, ref = make(make_fns(CountingEnv, N)), fastvec.SyncVecEnv(make_fns(CountingEnv, N))
    try:
        for vec in (envs, ref):
            vec.reset(seed=3)
            vec.step(np.arange(N) % 4)
        envs.reset_async(seed=5, options={"reset_mask": np.array([True, False, True, False])})
        obs, infos = envs.reset_wait(timeout=10)
        ref_obs, ref_infos = ref.reset(
            seed=5, options={"reset_mask": np.array([True, False, True, False])})
        np.testing.assert_array_equal(obs, ref_obs)
        assert obs.tolist() == [0, 1, 0, 1]
        assert envs.np_random_seed == ref.np_random_seed
        obs, *_ = envs.step(np.ones(N, dtype=np.int64))
        assert obs.tolist() == [1, 2, 1, 2]
    finally:
        envs.close()
        ref.close()


@pytest.mark.parametrize("make", MAKERS)
def test_reset_async_misuse_gives_gymnasiums_errors(make):
    envs = make(make_fns(CountingEnv, N))
    try:
        with pytest.raises(NoAsyncCallError, match="reset_wait"):
            envs.reset_wait()
        with pytest.raises(ValueError):  # refused arguments leave nothing pending
            envs.reset_async(seed=[1, 2])
        with pytest.raises(NoAsyncCallError):
            envs.reset_wait()
        envs.reset_async()
        for call in (lambda: envs.reset(), lambda: envs.reset_async(),
                     lambda: envs.step_async(np.zeros(N, dtype=np.int64)),
                     lambda: envs.step(np.zeros(N, dtype=np.int64))):
            with pytest.raises(AlreadyPendingCallError, match="reset_async"):
                call()
        with pytest.raises(FastVecError, match="reset is pending"):
            envs.call("scaled_count", 1)
        with pytest.raises(NoAsyncCallError):
            envs.step_wait()
        envs.reset_wait()
        envs.step_async(np.zeros(N, dtype=np.int64))
        with pytest.raises(AlreadyPendingCallError, match="step"):
            envs.reset_async()
        with pytest.raises(ValueError, match="timeout"):
            envs.step_wait(timeout=-1)
        envs.step_wait(timeout=10)  # still pending after the refused timeout
    finally:
        envs.close()


@pytest.mark.parametrize("make", MAKERS)
def test_close_with_a_reset_pending(make):
    fns = make_fns(CountingEnv, N)
    envs = make(fns)
    envs.reset_async(seed=0)
    envs.close()
    assert envs.closed


@pytest.mark.subprocess
@pytest.mark.parametrize("wait", ["step_wait", "reset_wait"])
def test_a_wait_past_its_timeout_is_a_worker_timeout(wait):
    envs = subproc(make_fns(SlowEnv, N, delay=0.0))
    try:
        envs.reset()
        envs.set_attr("delay", [0.0, 1.0, 0.0, 0.0])
        if wait == "step_wait":
            envs.step_async(np.zeros(N, dtype=np.int64))
        else:
            envs.reset_async()
        start = time.monotonic()
        with pytest.raises(multiprocessing.TimeoutError, match="timeout=0.1"):
            getattr(envs, wait)(timeout=0.1)
        assert time.monotonic() - start < 0.6
        with pytest.raises(FastVecError):  # unusable, as after any timeout
            envs.reset()
        start = time.monotonic()
    finally:
        envs.close(terminate=True)
    assert time.monotonic() - start < 3


@pytest.mark.subprocess
def test_a_wait_within_its_timeout_leaves_no_limit_behind():
    envs = subproc(make_fns(SlowEnv, N, delay=0.05))
    try:
        envs.reset()
        envs.step_async(np.zeros(N, dtype=np.int64))
        envs.step_wait(timeout=5)
        envs.set_attr("delay", 0.3)
        envs.step(np.zeros(N, dtype=np.int64))  # no limit: the env's own timeout (None)
    finally:
        envs.close()
