"""What Gymnasium's own vector tests ask of fastvec, beyond the contract suite.

Found by running Gymnasium 1.4's ``tests/vector`` against fastvec
(``benchmarks/gymnasium_vector_tests.py``): ``reset_async``/``reset_wait`` and the
``timeout`` of ``step_wait``/``reset_wait``, as ``AsyncVectorEnv`` has them, and
a ``WorkerTimeout`` that code catching ``multiprocessing.TimeoutError`` catches.
Then ``observation_mode`` (``"different"``, or the user's own pair of spaces),
which Gymnasium's vector envs take: the same spaces and observations as
``gymnasium.vector.SyncVectorEnv``, and the errors for spaces that cannot share
one record layout.
"""

from __future__ import annotations

import multiprocessing
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.error import AlreadyPendingCallError, NoAsyncCallError
from gymnasium.vector.utils import batch_differing_spaces

import fastvec
from fastvec.errors import FastVecError, SpacesMismatchError, WorkerTimeout
from tests.support.envs import CountingEnv, SlowEnv, make_fns

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


# -- observation_mode ------------------------------------------------------------------


class BoundsEnv(gym.Env):
    """Observations drawn from its own space (by the env's seeded generator), whose
    bounds depend on ``env_id``: ``Box(-k, k)`` and ``Discrete(k + 1, start=k)`` for
    ``k = env_id + 1``.  Episodes end after ``3 + env_id`` steps.  ``space`` picks
    the observation space: ``"box"``, ``"dict"``, or a space given as it is."""

    def __init__(self, env_id: int = 0, space: object = "box") -> None:
        k = env_id + 1
        box = spaces.Box(-k, k, (3,), np.float32)
        if space == "box":
            self.observation_space = box
        elif space == "dict":
            self.observation_space = spaces.Dict(
                {"kind": spaces.Discrete(k + 1, start=k), "pos": box})
        else:
            self.observation_space = space
        self.action_space = spaces.Discrete(3)
        self.episode_len, self.t = 3 + env_id, 0

    def _obs(self):
        return self.observation_space.sample()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action) + self.t, self.t >= self.episode_len, False, {}


def bounds_fns(space="box", spaces_by_env=None):
    if spaces_by_env is not None:
        return make_fns(BoundsEnv, len(spaces_by_env), per_env={"space": spaces_by_env})
    return make_fns(BoundsEnv, N, space=space)


def assert_same_tree(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same_tree(a[key], b[key])
    else:
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def assert_runs_as_gymnasium(envs, ref, steps=8):
    obs, _ = envs.reset(seed=7)
    ref_obs, _ = ref.reset(seed=7)
    assert_same_tree(obs, ref_obs)
    for t in range(steps):
        actions = (np.arange(N) + t) % 3
        got, want = envs.step(actions), ref.step(actions)
        assert_same_tree(got[0], want[0])
        for mine, theirs in zip(got[1:4], want[1:4], strict=True):
            np.testing.assert_array_equal(mine, theirs)
        assert envs.observation_space.contains(got[0])


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("space", ["box", "dict"])
def test_observation_mode_different_runs_as_gymnasium(make, space):
    """Spaces that differ in bounds only: Gymnasium's batched space
    (``batch_differing_spaces``), env 0's single space, the same observations."""
    envs = make(bounds_fns(space), observation_mode="different")
    ref = gym.vector.SyncVectorEnv(bounds_fns(space), observation_mode="different")
    try:
        assert envs.observation_mode == "different"
        assert envs.observation_space == ref.observation_space
        assert envs.observation_space == batch_differing_spaces(
            [env.observation_space for env in ref.envs])
        assert envs.single_observation_space == ref.single_observation_space
        assert envs.single_observation_space == ref.envs[0].observation_space
        assert envs.observation_space != gym.vector.utils.batch_space(
            envs.single_observation_space, N)  # the bounds really differ
        assert_runs_as_gymnasium(envs, ref)
    finally:
        envs.close()
        ref.close()


@pytest.mark.parametrize("make", MAKERS)
def test_observation_mode_as_the_users_pair_of_spaces(make):
    single = spaces.Box(-10, 10, (3,), np.float32)
    batched = spaces.Box(-10, 10, (N, 3), np.float32)
    mode = (batched, single)
    envs = make(bounds_fns("box"), observation_mode=mode)
    ref = gym.vector.SyncVectorEnv(bounds_fns("box"), observation_mode=mode)
    try:
        assert envs.observation_space is batched
        assert envs.single_observation_space is single
        assert_runs_as_gymnasium(envs, ref)
    finally:
        envs.close()
        ref.close()


@pytest.mark.parametrize("make", MAKERS)
def test_observation_mode_same_refuses_other_bounds_and_says_what_to_use(make):
    with pytest.raises(SpacesMismatchError, match="observation_mode='different'") as info:
        make(bounds_fns("box"))
    assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)


def refused(*args, **kwargs):
    raise AssertionError("no env is built for a refused observation_mode")


@pytest.mark.parametrize("make", MAKERS)
def test_an_unknown_observation_mode_is_refused_before_any_env_is_built(make):
    with pytest.raises(ValueError, match=r"Invalid `observation_mode`.*actual got diff"):
        make([refused] * N, observation_mode="diff")
    with pytest.raises(TypeError, match="both Gymnasium spaces"):
        make([refused] * N, observation_mode=("same", "different"))


BOX3 = spaces.Box(0, 1, (3,), np.float32)
MISMATCHES = {
    # (the odd env's space, what the message says)
    "shape": (spaces.Box(0, 1, (4,), np.float32), r"obs has shape \(4,\), expected \(3,\)"),
    "dtype": (spaces.Box(0, 1, (3,), np.float64), "obs has dtype float64, expected float32"),
    "type": (spaces.MultiBinary(3), "obs is a MultiBinary, expected a Box"),
    "leaf": (spaces.Dict({"a": BOX3, "b": spaces.Discrete(2)}), "is a Dict, expected a Box"),
}


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("odd", [1, 3], ids=["env1", "env3"])  # local block: 1 is in it
@pytest.mark.parametrize("kind", list(MISMATCHES))
def test_observation_mode_different_refuses_other_shapes_naming_the_env(make, odd, kind):
    space, says = MISMATCHES[kind]
    by_env = [BOX3] * N
    by_env[odd] = space
    with pytest.raises(SpacesMismatchError, match=f"env {odd} .*{says}"):
        make(bounds_fns(spaces_by_env=by_env), observation_mode="different")


@pytest.mark.parametrize("make", MAKERS)
def test_observation_mode_different_refuses_dict_keys_in_another_order(make):
    """Each env's record follows its space's key order: another order is another
    layout (Gymnasium allows it; fastvec says so instead of mixing up leaves)."""
    ab = spaces.Dict({"a": BOX3, "b": spaces.Discrete(2)}, sort_keys=False)
    ba = spaces.Dict({"b": spaces.Discrete(2), "a": BOX3}, sort_keys=False)
    with pytest.raises(SpacesMismatchError, match=r"env 2 .*keys \['b', 'a'\], expected "
                                                  r"\['a', 'b'\] \(in that order\)"):
        make(bounds_fns(spaces_by_env=[ab, ab, ba, ab]), observation_mode="different")
    nested = spaces.Dict({"x": ab, "y": BOX3})
    other = spaces.Dict({"x": spaces.Dict({"a": BOX3, "b": spaces.Discrete(3)}), "y": BOX3})
    envs = make(bounds_fns(spaces_by_env=[nested, other, nested, other]),
                observation_mode="different")  # Discrete(2) and (3): bounds only
    try:
        obs, _ = envs.reset(seed=0)
        assert obs["x"]["b"].shape == (N,) and obs["y"].shape == (N, 3)
    finally:
        envs.close()


@pytest.mark.parametrize("make", MAKERS)
def test_observation_mode_pair_refuses_envs_unlike_its_single_space(make):
    mode = (spaces.Box(0, 1, (N, 5), np.float32), spaces.Box(0, 1, (5,), np.float32))
    with pytest.raises(SpacesMismatchError, match=r"single_observation_space .*"
                                                  r"obs has shape \(3,\), expected \(5,\)"):
        make(bounds_fns("box"), observation_mode=mode)


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("mode", ["different", "pair"])
def test_games_need_observation_mode_same(make, mode):
    single = spaces.Box(-1e6, 1e6, (4,), np.float32)
    observation_mode = (batch_differing_spaces([single] * 6), single) if mode == "pair" \
        else mode
    pytest.importorskip("pettingzoo")
    from tests.support.games import RelayGame, game_fns
    with pytest.raises(ValueError, match="games need observation_mode='same'"):
        make(game_fns(RelayGame, 2), observation_mode=observation_mode)


def test_make_passes_observation_mode_through():
    with fastvec.make(BoundsEnv, num_envs=2, vector_kwargs={
            "observation_mode": "different"}) as envs:
        assert envs.observation_mode == "different"
        assert envs.observation_space == batch_differing_spaces([BoundsEnv().observation_space] * 2)
