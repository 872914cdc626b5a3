"""SubprocVecEnv's own: worker blocks and processes, values that cannot be sent to a
worker, errors naming the worker, close stopping the workers, constructor
arguments, what a worker's process looks like (MPI variables, SIGINT), and
replies of any size on the pipe.

What every backend does is in the contract suite (``test_contract_*.py``);
failures of processes are in ``test_faults.py``, async batches in
``test_async.py``.

Most tests use 5 envs on 2 workers started the default way (forkserver), so
that per-env values are split across uneven blocks (envs 0-2 and 3-4).
"""

from __future__ import annotations

import functools
import gc
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from tests.support import leaks
from tests.support.compare import assert_obs_equal, assert_tree_equal
from tests.support.envs import CountingEnv, ProbeEnv, RaisingEnv, make_fns

pytestmark = pytest.mark.subprocess

REPO_ROOT = Path(__file__).resolve().parents[2]
N = 5  # envs in most tests: blocks 0-2 and 3-4 on 2 workers


@pytest.fixture
def make(make_subproc):
    """``make(env_fns, **kwargs)``: a SubprocVecEnv with 2 workers unless told otherwise."""
    def make(env_fns, **kwargs):
        kwargs.setdefault("num_workers", min(2, len(env_fns)))
        return make_subproc(env_fns, **kwargs)
    return make


def zeros(n: int = N) -> np.ndarray:
    return np.zeros(n, dtype=np.int64)


# ---------------------------------------------------------------------------
# defaults and worker blocks


@pytest.mark.fastvec_only
def test_defaults(impl, make_subproc):
    vec = make_subproc(make_fns(CountingEnv, 6))
    assert vec.num_workers == min(6, os.cpu_count() or 1)
    assert vec.context == "forkserver"
    assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert vec.copy is True


@pytest.mark.fastvec_only
@pytest.mark.parametrize(
    "num_envs, num_workers, blocks",
    [
        (5, 2, [0, 0, 0, 1, 1]),
        (7, 3, [0, 0, 0, 1, 1, 2, 2]),
        (4, 4, [0, 1, 2, 3]),
        (3, 1, [0, 0, 0]),
    ],
)
def test_envs_run_in_contiguous_blocks_of_named_daemonic_workers(num_envs, num_workers, blocks,
                                                                 make):
    vec = make(make_fns(ProbeEnv, num_envs), num_workers=num_workers)
    procs = vec.call("process")
    assert [p["name"] for p in procs] == [f"fastvec-worker-{w}" for w in blocks]
    assert all(p["daemon"] for p in procs)
    pids = [p["pid"] for p in procs]
    assert os.getpid() not in pids
    for i, j in zip(range(num_envs), range(1, num_envs), strict=False):
        assert (pids[i] == pids[j]) == (blocks[i] == blocks[j]), f"pids {pids}"
    assert len(set(pids)) == num_workers


# ---------------------------------------------------------------------------
# values that cannot be sent to a worker


def unpicklable(x):
    return lambda: x  # a closure: multiprocessing's pickler refuses it


PICKLING_ERRORS = (pickle.PicklingError, AttributeError, TypeError)  # by Python version


# Gymnasium's AsyncVectorEnv gets out of step here too: later calls return the
# replies to the failed one.
@pytest.mark.fastvec_only
def test_set_attr_with_a_value_that_cannot_be_sent_changes_nothing(make):
    # The last env's value cannot be pickled: no worker may be left with a request
    # that a later call would then take for its own.
    vec = make(make_fns(CountingEnv, N, per_env={"episode_len": [4, 5, 6, 7, 8]}))
    with pytest.raises(PICKLING_ERRORS):
        vec.set_attr("label", ["a", "b", "c", "d", unpicklable(0)])
    assert vec.get_attr("label") == tuple(f"counting-{i}" for i in range(N))
    assert vec.get_attr("episode_len") == (4, 5, 6, 7, 8)
    vec.set_attr("label", ["a", "b", "c", "d", "e"])
    assert vec.get_attr("label") == ("a", "b", "c", "d", "e")


@pytest.mark.fastvec_only
def test_reset_with_a_seed_that_cannot_be_sent_changes_nothing(make):
    vec = make(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    with pytest.raises(PICKLING_ERRORS):
        vec.reset(seed=[10, 11, 12, 13, unpicklable(14)])
    vec.reset(seed=20)
    assert vec.get_attr("np_random_seed") == (20, 21, 22, 23, 24)
    assert vec.get_attr("reset_count") == (2,) * N


# ---------------------------------------------------------------------------
# an env raising in a call or a step: the error names it and its worker


@pytest.mark.fastvec_only
@pytest.mark.parametrize("bad_env, worker", [(1, 0), (3, 1), (4, 1)])
def test_an_env_raising_in_call_is_a_worker_error_naming_it(bad_env, worker, impl, make):
    vec = make(make_fns(ProbeEnv, N))
    vec.reset(seed=0)
    vec.step(zeros())  # so that stepping state cannot stand in for the call's env
    with pytest.raises(impl.errors.WorkerError) as info:
        vec.call("fail_if", [bad_env])
    error = info.value
    assert error.env_index == bad_env, str(error)
    assert error.worker_index == worker, str(error)
    assert re.search(rf"\benv {bad_env}\b", str(error)), str(error)
    assert "EnvBoom" in str(error)
    assert "raised in a call on purpose" in str(error.__cause__)  # the remote traceback
    # The env stays usable (Gymnasium's AsyncVectorEnv closes the failed worker's pipe).
    assert vec.call("fail_if", []) == tuple(range(N))
    _, rewards, *_ = vec.step(np.arange(N) % 4)
    assert_tree_equal(rewards, (np.arange(N) % 4).astype(np.float64), "rewards")


@pytest.mark.fastvec_only
def test_when_envs_of_several_workers_raise_in_call_the_lowest_is_reported(impl, make):
    # Workers finish in any order; the error must not depend on which came first.
    vec = make(make_fns(ProbeEnv, N))
    for _ in range(10):
        with pytest.raises(impl.errors.WorkerError) as info:
            vec.call("fail_if", [3, 1])
        assert info.value.env_index == 1, str(info.value)


@pytest.mark.fastvec_only
def test_when_envs_of_several_workers_raise_in_step_the_lowest_is_reported(impl, make):
    fns = make_fns(RaisingEnv, N, per_env={"faulty": [False, True, False, True, False]},
                   raise_at=2)
    for _ in range(5):
        vec = make(fns, context="fork")
        vec.reset(seed=0)
        vec.step(zeros())
        with pytest.raises(impl.errors.WorkerError) as info:
            vec.step(zeros())
        assert info.value.env_index == 1, str(info.value)
        vec.close()


# ---------------------------------------------------------------------------
# close stops the workers


@pytest.mark.fastvec_only
def test_close_stops_every_worker(make):
    vec = make(make_fns(ProbeEnv, N))
    pids = {p["pid"] for p in vec.call("process")}
    assert pids <= set(leaks.live_children())
    vec.reset(seed=0)
    vec.close()
    assert not pids & set(leaks.wait_no_children(2.0)), "workers outlived close()"


@pytest.mark.fastvec_only
def test_an_unclosed_env_that_is_dropped_stops_its_workers(impl):
    vec = impl.SubprocVecEnv(make_fns(ProbeEnv, N), num_workers=2)
    pids = {p["pid"] for p in vec.call("process")}
    assert pids <= set(leaks.live_children())
    del vec
    gc.collect()
    assert not pids & set(leaks.wait_no_children(2.0)), "workers outlived their env"


# ---------------------------------------------------------------------------
# constructor arguments


@pytest.mark.fastvec_only
@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"num_workers": 0}, r"num_workers.*0"),
        ({"num_workers": -1}, r"num_workers.*-1"),
        ({"num_workers": 7}, r"num_workers.*\b6\b.*\b7\b|num_workers.*\b7\b"),
        ({"on_worker_failure": "ignore"}, r"on_worker_failure.*ignore"),
        ({"timeout": 0}, r"timeout"),
        ({"timeout": -1.5}, r"timeout"),
        ({"context": "bogus"}, r"bogus"),
        ({"autoreset_mode": "EveryOtherStep"}, r"EveryOtherStep"),
    ],
    ids=["workers_0", "workers_negative", "workers_above_num_envs", "on_worker_failure",
         "timeout_0", "timeout_negative", "context", "autoreset_mode"],
)
def test_invalid_constructor_arguments_are_value_errors(kwargs, pattern, impl):
    start = time.monotonic()
    with pytest.raises(ValueError) as info:
        impl.SubprocVecEnv(make_fns(CountingEnv, 6), **kwargs)
    assert re.search(pattern, str(info.value)), str(info.value)
    assert time.monotonic() - start < 10.0
    assert leaks.wait_no_children(2.0) == [], "a failed constructor left workers behind"


# ---------------------------------------------------------------------------
# the worker's process: MPI variables, SIGINT

MPI_VARS = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "PMI_RANK": "0",
            "PMI_SIZE": "2"}
KEPT_VAR = {"FASTVEC_TEST_KEPT": "yes"}  # an ordinary variable, which workers must keep
PREFIXES = ("OMPI_", "PMI_", "FASTVEC_TEST_")


@pytest.mark.fastvec_only
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_mpi_variables_set_in_the_parent_are_absent_in_workers(context, make, monkeypatch):
    # (With forkserver, workers inherit the forkserver's environment, fixed when it
    # started; see the fresh-interpreter test below.)
    for name, value in {**MPI_VARS, **KEPT_VAR}.items():
        monkeypatch.setenv(name, value)
    vec = make(make_fns(ProbeEnv, 3), context=context)
    assert vec.call("environ_with_prefix", *PREFIXES) == (KEPT_VAR,) * 3
    assert all(os.environ[name] == value for name, value in MPI_VARS.items()), (
        "the parent's MPI variables were changed")


MPI_SCRIPT = """
import json
import fastvec
from tests.support.envs import ProbeEnv, make_fns

if __name__ == "__main__":
    with fastvec.SubprocVecEnv(make_fns(ProbeEnv, 3), num_workers=2) as envs:
        print(json.dumps([envs.context, envs.call("environ_with_prefix", *{prefixes!r})]))
"""


@pytest.mark.fastvec_only
def test_mpi_variables_are_absent_in_workers_of_a_trainer_started_under_mpi(impl):
    # As under mpirun: the variables are there before Python starts, so the
    # forkserver (the default context) inherits them too.
    path = os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, **MPI_VARS, **KEPT_VAR, "PYTHONPATH": path}
    script = textwrap.dedent(MPI_SCRIPT.format(prefixes=PREFIXES)).replace(
        "import fastvec", f"import {impl.__name__} as fastvec")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    context, environs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert context == "forkserver"
    assert environs == [KEPT_VAR] * 3


@pytest.mark.fastvec_only
@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_workers_ignore_sigint(context, make):
    vec = make(make_fns(ProbeEnv, 3), context=context)
    assert vec.call("sigint_handler") == (signal.SIG_IGN,) * 3
    vec.reset(seed=0)
    for pid in {p["pid"] for p in vec.call("process")}:
        os.kill(pid, signal.SIGINT)
    time.sleep(0.1)
    obs, *_ = vec.step(np.zeros(3, dtype=np.int64))  # every worker still serves
    assert_obs_equal(obs, np.ones(3, dtype=np.int64))


# ---------------------------------------------------------------------------
# replies on the pipe: small ones are written before the wake-up, big ones after


class SizedInfoEnv(CountingEnv):
    """Infos carrying ``size`` bytes, so that a worker's reply is small or big."""

    def __init__(self, size: int, env_id: int = 0):
        super().__init__(episode_len=3, env_id=env_id)
        self.size = size

    def step(self, action):
        obs, reward, terminated, truncated, _ = super().step(action)
        payload = np.full(self.size, self.t + self.env_id, dtype=np.uint8)
        return obs, reward, terminated, truncated, {"payload": payload}


@pytest.mark.parametrize("size", [16, 30_000, 200_000])
def test_infos_of_any_size_arrive(size, make):
    fns = [functools.partial(SizedInfoEnv, size, env_id=i) for i in range(4)]
    vec = make(fns)
    ref = gym.vector.SyncVectorEnv(fns)
    vec.reset(seed=0)
    ref.reset(seed=0)
    for _ in range(7):
        got, want = vec.step(zeros(4)), ref.step(zeros(4))
        assert_tree_equal(got[4], want[4])
    ref.close()
