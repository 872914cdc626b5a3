"""Fuzz: generated spaces, infos and bad inputs through fastvec, against Gymnasium.

Hypothesis draws nested observation spaces (``Box`` of float16/32/64, bool,
int8, uint8, int32, int64 and uint64, zero-size and large dimensions;
``Discrete`` and ``MultiDiscrete`` with ``start``; ``MultiBinary`` n-d; ``Dict``
and ``Tuple`` nested up to four deep), action spaces, and infos (nested dicts,
arrays whose shape changes from step to step, strings, None, keys that come and
go).  Each case steps a fastvec vector env and Gymnasium's ``SyncVectorEnv``
on the same seeds and actions, across autoresets and a reseeding, and every
result must be bit-identical (``tests/support/compare.py``).  ``SyncVecEnv`` gets many
examples, ``SubprocVecEnv`` (fork; with and without a local block) a few.

Bad inputs: generated bad action batches (wrong length or shape, out-of-range
or non-integer discrete actions, a scalar) always raise ``ValueError`` before any
env steps, and the env steps normally afterwards; a generated leaf of a
generated space returned with the wrong shape or dtype raises
``ObservationError`` (a ``ValueError``) naming the env and the leaf's path.
Envs written to the old Gym API get a ``ValueError`` saying so and how to wrap
them.

``--fuzz-examples N`` sets the examples per test (default: the CI tier).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastvec
from fastvec.errors import ObjectSpaceWarning, ObservationError, WorkerError
from tests.support.compare import run_parity
from tests.support.envs import FuzzEnv

pytestmark = [pytest.mark.fuzz]

INFO_KINDS = ["int", "float", "str", "none", "array", "nested"]
BOX_DTYPES = [np.float16, np.float32, np.float64, np.bool_, np.int8, np.uint8, np.int32,
              np.int64, np.uint64]


def examples(config: pytest.Config, default: int) -> int:
    """``default`` (the CI tier), or ``--fuzz-examples N`` for every test."""
    n = config.getoption("--fuzz-examples")
    return default if n is None else n


# ---------------------------------------------------------------------------
# strategies


shapes = st.one_of(
    st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple),
    st.sampled_from([(0,), (2, 0), (4096,), (64, 64)]),  # zero-size and large
)


@st.composite
def boxes(draw: Any) -> spaces.Box:
    dtype = np.dtype(draw(st.sampled_from(BOX_DTYPES)))
    shape = draw(shapes)
    if dtype == np.bool_:
        return spaces.Box(0, 1, shape, dtype)
    if dtype.kind == "f":
        low = draw(st.sampled_from([-2.0, 0.0, -1000.0]))
        return spaces.Box(low, low + draw(st.sampled_from([1.0, 4.0])), shape, dtype)
    lo = 0 if dtype.kind == "u" else int(draw(st.integers(-100, 0)))
    return spaces.Box(lo, lo + int(draw(st.integers(0, 100))), shape, dtype)


leaves = st.one_of(
    boxes(),
    st.builds(lambda n, s: spaces.Discrete(n, start=s), st.integers(1, 10**6),
              st.integers(-50, 50)),
    st.builds(lambda nvec, s: spaces.MultiDiscrete(np.array(nvec), start=np.full(
        np.shape(nvec), s)),
              st.lists(st.integers(1, 7), min_size=1, max_size=4), st.integers(-3, 3)),
    st.builds(lambda nvec: spaces.MultiDiscrete(np.array(nvec)),
              st.lists(st.lists(st.integers(1, 5), min_size=2, max_size=2), min_size=1,
                       max_size=3)),
    st.builds(spaces.MultiBinary, st.one_of(st.integers(1, 6),
                                            st.lists(st.integers(1, 3), min_size=2,
                                                     max_size=3))),
)

obs_spaces = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.dictionaries(st.sampled_from(list("abcdefgh")), children, min_size=1, max_size=4)
        .map(spaces.Dict),
        st.lists(children, min_size=1, max_size=4).map(lambda xs: spaces.Tuple(tuple(xs))),
    ),
    max_leaves=8,
)

action_spaces = st.one_of(
    st.builds(lambda n, s: spaces.Discrete(n, start=s), st.integers(1, 9), st.integers(-3, 3)),
    st.builds(lambda nvec: spaces.MultiDiscrete(np.array(nvec)),
              st.lists(st.integers(1, 5), min_size=1, max_size=3)),
    st.just(spaces.Box(-1.0, 1.0, (2,), np.float32)),
    st.just(spaces.MultiBinary(3)),
    st.just(spaces.Dict({"move": spaces.Discrete(3), "aim": spaces.Box(-1, 1, (2,))})),
)

info_kinds = st.lists(st.sampled_from(INFO_KINDS), min_size=0, max_size=6)


def leaf_paths(space: spaces.Space, path: tuple = ()) -> list[tuple]:
    if isinstance(space, spaces.Dict):
        return [p for k, s in space.spaces.items() for p in leaf_paths(s, (*path, k))]
    if isinstance(space, spaces.Tuple):
        return [p for k, s in enumerate(space.spaces) for p in leaf_paths(s, (*path, k))]
    return [path]


def path_name(path: tuple) -> str:
    return "obs" + "".join(f'["{k}"]' if isinstance(k, str) else f"[{k}]" for k in path)


def fns(space: spaces.Space, action: spaces.Space, kinds: list[str], n: int,
        **kwargs: Any) -> list:
    return [functools.partial(FuzzEnv, space, action, kinds, env_id=i, **kwargs)
            for i in range(n)]


def make(backend: str, env_fns: list, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ObjectSpaceWarning)
        if backend == "sync":
            return fastvec.SyncVecEnv(env_fns, **kwargs)
        local = backend == "subproc-local"
        return fastvec.SubprocVecEnv(env_fns, context="fork", num_workers=2,
                                     local_block=local, **kwargs)


# ---------------------------------------------------------------------------
# generated spaces and infos: equal to Gymnasium


def check_parity(backend: str, space: spaces.Space, action: spaces.Space, kinds: list[str],
                 num_envs: int, mode: AutoresetMode, steps: int) -> None:
    env_fns = fns(space, action, kinds, num_envs, shape_clock=mode is AutoresetMode.NEXT_STEP)
    vec = make(backend, env_fns, autoreset_mode=mode)
    ref = gym.vector.SyncVectorEnv(env_fns, autoreset_mode=mode)
    try:
        run_parity(vec, ref, mode=mode, copy=True, steps=steps)
    finally:
        vec.close()
        ref.close()


@pytest.mark.parametrize("backend", ["sync"])
def test_generated_spaces_and_infos_equal_gymnasium_sync(backend, pytestconfig):
    @settings(max_examples=examples(pytestconfig, 150), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(space=obs_spaces, action=action_spaces, kinds=info_kinds,
           num_envs=st.integers(1, 4), mode=st.sampled_from(list(AutoresetMode)))
    def run(space, action, kinds, num_envs, mode):
        check_parity(backend, space, action, kinds, num_envs, mode, steps=14)

    run()


@pytest.mark.subprocess
@pytest.mark.parametrize("backend", ["subproc", "subproc-local"])
def test_generated_spaces_and_infos_equal_gymnasium_subproc(backend, pytestconfig):
    @settings(max_examples=examples(pytestconfig, 12), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(space=obs_spaces, action=action_spaces, kinds=info_kinds,
           mode=st.sampled_from(list(AutoresetMode)))
    def run(space, action, kinds, mode):
        check_parity(backend, space, action, kinds, 4, mode, steps=10)

    run()


# ---------------------------------------------------------------------------
# bad actions: always a ValueError, nothing stepped


@st.composite
def bad_action_batches(draw: Any, space: spaces.Space, n: int) -> tuple[Any, str]:
    batch = gym.vector.utils.batch_space(space, n)
    good = batch.sample()
    kinds = ["length", "scalar"]
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        kinds += ["too high", "too low", "fraction"]
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        kinds += ["shape"]
    kind = draw(st.sampled_from(kinds))
    if isinstance(space, spaces.Dict):
        inner = dict(good)
        key = draw(st.sampled_from(list(inner)))
        inner[key] = np.concatenate([inner[key], inner[key][:1]]) if kind == "length" else \
            inner[key][0]
        return inner, kind
    arr = np.asarray(good)
    if kind == "length":
        return np.concatenate([arr, arr[:1]]), kind
    if kind == "scalar":
        return arr.reshape(-1)[0], kind
    if kind == "shape":
        return np.stack([arr, arr], axis=-1), kind
    env = draw(st.integers(0, n - 1))
    arr = arr.astype(np.float64 if kind == "fraction" else np.int64).copy()
    high = space.start + space.n if isinstance(space, spaces.Discrete) else \
        space.start + space.nvec
    low = space.start
    flat = arr.reshape(n, -1)
    if kind == "too high":
        flat[env, 0] = np.asarray(high).reshape(-1)[0]
    elif kind == "too low":
        flat[env, 0] = np.asarray(low).reshape(-1)[0] - 1
    else:
        flat[env, 0] = flat[env, 0] + 0.5
    return flat.reshape(arr.shape), f"{kind} env {env}"


@pytest.mark.parametrize("backend", ["sync", pytest.param("subproc", marks=pytest.mark.subprocess)])
def test_generated_bad_actions_are_value_errors_and_nothing_steps(backend, pytestconfig):
    @settings(max_examples=examples(pytestconfig, 100 if backend == "sync" else 25),
              deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(action=action_spaces, data=st.data())
    def run(action, data):
        n = 3
        vec = make(backend, fns(spaces.Box(0, 1, (2,), np.float32), action, [], n))
        try:
            vec.reset(seed=0)
            bad, kind = data.draw(bad_action_batches(action, n))
            with pytest.raises(ValueError) as info:
                vec.step(bad)
            message = str(info.value)
            assert not isinstance(info.value, WorkerError), message  # refused before sending
            if kind.startswith("too"):  # out of range: the env is named
                assert kind[kind.index("env"):] in message, (kind, message)
            elif kind.startswith("fraction"):  # a float batch: its dtype is refused
                assert "dtype" in message or kind[kind.index("env"):] in message, message
            vec.step(vec.action_space.sample())  # usable: nothing was left pending
            counts = vec.get_attr("count")  # one reset, one step
            assert list(counts) == [2] * n, f"a bad batch reached the envs: {counts}"
        finally:
            vec.close()

    run()


# ---------------------------------------------------------------------------
# bad observations: ObservationError naming env and path


@pytest.mark.parametrize("backend", ["sync", pytest.param("subproc", marks=pytest.mark.subprocess)])
def test_generated_bad_observations_name_env_and_path(backend, pytestconfig):
    @settings(max_examples=examples(pytestconfig, 100 if backend == "sync" else 25),
              deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(space=obs_spaces, data=st.data())
    def run(space, data):
        n = 3
        path = data.draw(st.sampled_from(leaf_paths(space)))
        bad_env = data.draw(st.integers(0, n - 1))
        fault = data.draw(st.sampled_from(["shape", "dtype"]))
        bad_at = data.draw(st.integers(0, 2))
        vec = make(backend, fns(space, spaces.Discrete(2), [], n, max_len=50, bad_path=path,
                                bad_env=bad_env, bad_at=bad_at, fault=fault))
        try:
            with pytest.raises(ObservationError) as info:
                vec.reset(seed=0)
                for _ in range(3):
                    vec.step(np.zeros(n, np.int64))
            message = str(info.value)
            assert isinstance(info.value, ValueError)
            assert f"env {bad_env}" in message, message
            assert path_name(path) in message, (path_name(path), message)
        finally:
            vec.close()

    run()


# ---------------------------------------------------------------------------
# the old Gym API


class OldStepEnv(gym.Env):
    """``step`` returns the old 4-tuple ``(obs, reward, done, info)``."""

    observation_space = spaces.Box(0, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, {}


class OldResetEnv(OldStepEnv):
    """``reset`` returns the observation alone."""

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32)

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {}


class OldResetDictEnv(OldResetEnv):
    observation_space = spaces.Dict({"a": spaces.Box(0, 1, (2,), np.float32),
                                     "b": spaces.Discrete(3)})

    def reset(self, *, seed=None, options=None):
        return {"a": np.zeros(2, np.float32), "b": 1}


class ListStepEnv(OldStepEnv):
    """Returns Gymnasium's five values as a list: accepted, as before."""

    def step(self, action):
        return [np.zeros(2, np.float32), 1.0, False, False, {}]


@pytest.mark.parametrize("backend", ["sync", pytest.param("subproc", marks=pytest.mark.subprocess),
                                     pytest.param("subproc-local",
                                                  marks=pytest.mark.subprocess)])
@pytest.mark.parametrize("env_cls, what", [(OldStepEnv, "step() returned 4 values"),
                                           (OldResetEnv, "reset() returned the observation"),
                                           (OldResetDictEnv, "reset() returned the observation")])
def test_old_gym_api_envs_get_an_error_saying_so_and_how_to_wrap(backend, env_cls, what):
    vec = make(backend, [env_cls] * 3)
    try:
        with pytest.raises((ValueError, WorkerError)) as info:  # WorkerError: in a worker
            vec.reset(seed=0)
            vec.step(np.zeros(3, np.int64))
        message = str(info.value)
        assert what in message and "old Gym API" in message, message
        assert "GymV21CompatibilityV0" in message and "env 0" in message, message
    finally:
        vec.close()


def test_a_step_result_as_a_list_is_still_accepted():
    vec = make("sync", [ListStepEnv] * 2)
    vec.reset(seed=0)
    _, rewards, *_ = vec.step(np.zeros(2, np.int64))
    assert rewards.tolist() == [1.0, 1.0]
    vec.close()
