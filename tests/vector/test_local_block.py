"""SubprocVecEnv(local_block=True): the trainer's process steps the first block itself.

Results are bit-identical to Gymnasium's SyncVectorEnv in every autoreset mode,
with and without copies, with async batches (which take the local block in its
turn, never starving it or the workers); a local env that raises gives the
WorkerError a worker's env would (``worker_index=None``), and restart rebuilds
the local envs in place.
"""

from __future__ import annotations

import collections
import fcntl
import functools
import re
import threading
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import fastvec
from fastvec.errors import FastVecError, WorkerError
from tests.support.compare import assert_tree_equal, check_attributes, run_parity
from tests.support.envs import (
    CountingEnv,
    DictCountingEnv,
    EnvBoom,
    ObjectSpaceEnv,
    ProbeEnv,
    RaisingEnv,
    SyntheticEnv,
    gym_fns,
    make_fns,
)

pytestmark = [pytest.mark.subprocess, pytest.mark.fastvec_only]

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
CASES = {
    "counting": (lambda n: make_fns(CountingEnv, n, per_env={"episode_len": [2, 3, 5, 4, 6, 7]
                                                            [:n]}), 40),
    "dict_counting": (lambda n: make_fns(DictCountingEnv, n, per_env={"episode_len": [3] * n}),
                      30),
    "cartpole": (lambda n: gym_fns("CartPole-v1", n), 120),
    "synthetic_dict_infos": (lambda n: make_fns(SyntheticEnv, n, layout="dict",
                                                action_kind="box"), 50),
    "object_text": (lambda n: make_fns(ObjectSpaceEnv, n, kind="text", info_kind="rich"), 40),
}


@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
@pytest.mark.parametrize("case", list(CASES))
def test_parity_with_sync_vector_env(make_subproc, make_ref, case, mode):
    fns, steps = CASES[case]
    copy = case != "counting"  # views too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the object-path warning is tested elsewhere
        vec = make_subproc(fns(5), num_workers=2, local_block=True, context="fork",
                           autoreset_mode=mode, copy=copy)
    ref = make_ref(fns(5), autoreset_mode=mode, copy=copy)
    check_attributes(vec, ref, mode)
    assert run_parity(vec, ref, mode=mode, copy=copy, steps=steps) > 0


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_parity_other_contexts_and_episode_statistics(make_subproc, make_vec, context):
    fns = CASES["counting"][0](4)
    vec = make_subproc(fns, num_workers=1, local_block=True, context=context,
                       episode_statistics=True)
    ref = make_vec(fns, episode_statistics=True)
    out, exp = vec.reset(seed=3), ref.reset(seed=3)
    for t in range(20):
        actions = np.full(4, t % 2)
        out, exp = vec.step(actions), ref.step(actions)
        for infos in (out[4], exp[4]):
            infos.get("episode", {}).pop("t", None)
        assert_tree_equal(out, exp, f"step {t}")


def test_async_batches_match_per_env_and_take_turns(make_subproc, make_vec):
    fns = CASES["counting"][0](6)
    vec = make_subproc(fns, num_workers=2, local_block=True, batch_size=2, context="fork")
    ref = make_vec(fns)
    ref_obs, _ = ref.reset(seed=0)
    vec.async_reset(seed=0)
    seen = collections.Counter()
    steps = np.zeros(6, np.int64)
    history: dict[int, list] = {i: [ref_obs[i].tolist()] for i in range(6)}
    got: dict[int, list] = {i: [] for i in range(6)}
    for _ in range(60):
        obs, rewards, term, trunc, infos, ids = vec.recv()
        seen[int(ids[0]) // 2] += 1
        for k, i in enumerate(ids):
            got[int(i)].append(obs[k].tolist())
        vec.send(np.ones(len(ids), np.int64), ids)
        steps[ids] += 1
    assert set(seen) == {0, 1, 2}, f"a block never came back: {seen}"
    # Each env saw the trajectory a synchronous loop gives it.
    for _ in range(int(steps.max())):
        obs = ref.step(np.ones(6, np.int64))[0]
        for i in range(6):
            history[i].append(obs[i].tolist())
    for i in range(6):
        assert got[i] == history[i][:len(got[i])], f"env {i}"


def test_views_with_copy_false_share_the_batch(make_subproc):
    vec = make_subproc(make_fns(CountingEnv, 4), num_workers=1, local_block=True, copy=False,
                       context="fork")
    obs, _ = vec.reset(seed=0)
    again, *_ = vec.step(np.zeros(4, np.int64))
    assert np.shares_memory(obs, again)  # one batch: local rows and the workers' rows


def test_control_calls_reach_local_and_worker_envs(make_subproc):
    fns = make_fns(ProbeEnv, 4)
    vec = make_subproc(fns, num_workers=1, local_block=True, context="fork")
    pids = [p["pid"] for p in vec.call("process")]
    assert pids[0] == pids[1] != pids[2] == pids[3]  # envs 0, 1 here; 2, 3 in the worker
    assert vec.get_attr("env_id") == (0, 1, 2, 3)
    vec.set_attr("env_id", [10, 11, 12, 13])
    assert vec.call_each(lambda env: env.env_id, indices=[3, 0]) == (13, 10)
    with pytest.raises(WorkerError, match=r"env 1 \(local block\) raised EnvBoom") as caught:
        vec.call("fail_if", [11, 12])  # lowest env first, though both raise
    assert caught.value.worker_index is None and isinstance(caught.value.__cause__, EnvBoom)
    assert vec.get_attr("env_id") == (10, 11, 12, 13)  # still usable


def test_local_env_raising_in_step_is_a_worker_error(make_subproc):
    fns = make_fns(RaisingEnv, 4, per_env={"faulty": [False, True, False, False]},
                   raise_at=3)
    vec = make_subproc(fns, num_workers=1, local_block=True, context="fork")
    vec.reset(seed=0)
    vec.step(np.zeros(4, np.int64))
    with pytest.raises(WorkerError, match=r"env 1 \(local block\) raised EnvBoom during "
                                          r"a step") as caught:
        for _ in range(3):
            vec.step(np.zeros(4, np.int64))
    error = caught.value
    assert (error.env_index, error.worker_index, error.exitcode) == (1, None, None)
    assert isinstance(error.__cause__, EnvBoom)
    vec.reset(seed=0)  # usable, as after a worker's env raised
    vec.step(np.zeros(4, np.int64))


def test_restart_rebuilds_the_local_envs_in_place(make_subproc):
    fns = make_fns(RaisingEnv, 4, per_env={"faulty": [True, False, False, False]},
                   raise_at=2)
    vec = make_subproc(fns, num_workers=1, local_block=True, context="fork",
                       on_worker_failure="restart")
    vec.reset(seed=0)
    vec.step(np.zeros(4, np.int64))
    obs, rewards, term, trunc, infos = vec.step(np.zeros(4, np.int64))
    assert trunc.tolist() == [True, True, False, False]
    assert rewards[:2].tolist() == [0.0, 0.0]
    assert infos["worker_restarted"].tolist() == [True, True, False, False]
    obs, *_ = vec.step(np.zeros(4, np.int64))  # the rebuilt envs step on


def test_local_env_failing_to_build_is_a_worker_error_and_leaves_nothing(make_subproc):
    fns = [functools.partial(divmod, 1, 0)] + make_fns(CountingEnv, 3)
    with pytest.raises(WorkerError, match=r"env 0 \(local block\) raised ZeroDivisionError "
                                          "during building its envs"):
        make_subproc(fns, num_workers=1, local_block=True, context="fork")


def test_the_local_block_never_pickles_its_env_fns(make_subproc):
    lock = threading.Lock()  # cannot be pickled: fine in the trainer's own block
    fns = [lambda: CountingEnv(env_id=0) if lock else None] + make_fns(CountingEnv, 4)[1:]
    assert make_subproc(fns, num_workers=1, local_block=True, context="fork").num_envs == 4
    with pytest.raises(fastvec.errors.EnvFnError, match=r"env_fns\[0\] cannot be pickled"):
        make_subproc(fns, num_workers=1, context="fork")


def test_async_messages_number_the_workers_after_the_local_block(make_subproc):
    """Blocks: envs 0..1 (the local block), 2..3 (worker 0), 4..5 (worker 1), as the
    ``WorkerError`` of an env of theirs would name them."""
    vec = make_subproc(make_fns(CountingEnv, 6), num_workers=2, local_block=True,
                       batch_size=2, context="fork")
    names = {0: "envs 0..1 (the local block)", 2: "envs 2..3 (worker 0)",
             4: "envs 4..5 (worker 1)"}
    vec.async_reset(seed=0)
    ids = vec.recv()[-1]
    for first, name in names.items():
        if first not in ids:  # reset, not received yet
            with pytest.raises(ValueError, match=re.escape(f"{name} are already in flight")):
                vec.send(np.zeros(2, np.int64), np.array([first, first + 1]))
    holder = names[int(ids[0])].split("(")[1].rstrip(")")
    with pytest.raises(ValueError, match=f"whole worker blocks of 2 envs: {holder} holds"):
        vec.send(np.zeros(1, np.int64), ids[:1])
    busy = [name.split("(")[1].rstrip(")") for first, name in names.items() if first not in ids]
    with pytest.raises(ValueError, match=f"reset_mask selects envs of {', '.join(busy)}, in "
                                         "flight"):
        vec.async_reset(options={"reset_mask": np.ones(6, bool)})


@pytest.mark.parametrize("kwargs, match", [
    ({"num_workers": 4}, r"num_workers in \[1, 3\] with local_block=True"),
    ({"num_workers": 1, "batch_size": 1}, r"multiple of num_envs // \(num_workers \+ 1\) = 2"),
    ({"num_workers": 2, "batch_size": 2}, r"not divisible by num_workers \+ 1 = 3"),
])
def test_bad_arguments_say_what_works(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fastvec.SubprocVecEnv(make_fns(CountingEnv, 4), local_block=True, **kwargs)


def test_make_passes_local_block_through():
    with fastvec.make("CartPole-v1", 4, backend="subproc",
                      vector_kwargs={"local_block": True, "num_workers": 1,
                                     "context": "fork"}) as vec:
        assert vec.local_block and vec.num_workers == 1
        obs, _ = vec.reset(seed=0)
        ref = SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4)
        assert_tree_equal(obs, ref.reset(seed=0)[0])
        ref.close()


def test_unusable_after_a_worker_dies_even_with_a_local_block(make_subproc):
    vec = make_subproc(make_fns(CountingEnv, 4), num_workers=1, local_block=True,
                       context="fork")
    vec.reset(seed=0)
    with pytest.raises(WorkerError, match="worker 0 exited with code 3 during call_each"):
        vec.call_each(lambda env: __import__("os")._exit(3), indices=[3])
    with pytest.raises(FastVecError, match="unusable"):
        vec.step(np.zeros(4, np.int64))


class InsideStepEnv(gym.Env):
    """Counts, in a file shared by every process, how many envs are inside ``step()``;
    the file holds ``"<now> <most ever>"``.
    """

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, path: str) -> None:
        self.path = path

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self._count(+1)
        time.sleep(0.02)  # long enough for the other blocks to come in
        self._count(-1)
        return np.zeros(1, np.float32), 0.0, False, False, {}

    def _count(self, delta: int) -> None:
        with open(self.path, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes
            now, most = (int(x) for x in f.read().split())
            f.seek(0)
            f.truncate()
            f.write(f"{now + delta} {max(most, now + delta)}")


@pytest.mark.parametrize("batch_size", [None, 3])
def test_max_concurrency_counts_the_trainers_block(tmp_path, batch_size):
    path = tmp_path / "inside"
    path.write_text("0 0")
    fns = [functools.partial(InsideStepEnv, str(path))] * 6
    with fastvec.SubprocVecEnv(fns, num_workers=4, max_concurrency=2, local_block=True,
                               batch_size=batch_size, context="fork") as vec:
        assert vec.num_workers == 1  # and the trainer's block: 2 blocks of 3 envs
        if batch_size is None:
            vec.reset(seed=0)
            for _ in range(4):
                vec.step(np.zeros(6, np.int64))
        else:
            vec.async_reset(seed=0)
            for _ in range(8):
                *_, ids = vec.recv()
                vec.send(np.zeros(len(ids), np.int64), ids)
    now, most = (int(x) for x in path.read_text().split())
    assert most == 2, f"{most} envs stepped at once with max_concurrency=2"
    with fastvec.SubprocVecEnv(fns, num_workers=4, max_concurrency=3, local_block=True,
                               context="fork") as vec:
        assert vec.num_workers == 2
    with pytest.raises(ValueError, match="max_concurrency >= 2 with local_block=True"):
        fastvec.SubprocVecEnv(fns, max_concurrency=1, local_block=True)
