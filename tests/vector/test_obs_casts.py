"""Observations that need a cast: the same leniency as Gymnasium, the same results.

Envs whose observations do not match their space exactly, but which Gymnasium's
``SyncVectorEnv`` batches anyway (float64 for a float32 Box, lists, tuples,
Python and numpy scalars, int64 for an int32 leaf, bools for ints), give
bit-identical batches on ``fastvec.SyncVecEnv`` and ``fastvec.SubprocVecEnv``.
What Gymnasium does not cast (a float into a uint8 image, Python ints into a
uint8 image, a wrong shape) is an ``ObservationError`` (a ``ValueError``) naming
the env and the leaf; from a ``SubprocVecEnv`` it arrives as one in the parent.
The kernel-level property tests are in ``tests/kernels/test_obs_casts.py``.
"""

from __future__ import annotations

import multiprocessing
import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from tests.support.compare import assert_tree_equal, run_parity
from tests.support.envs import make_fns

NUM_ENVS = 4
BAD_ENV = 3  # in the second worker's block with num_workers=2: its local index is 1
# fork starts workers in milliseconds (forkserver and spawn take about a second); the
# casts happen in the workers' kernels whatever the context.
CONTEXT = "fork" if "fork" in multiprocessing.get_all_start_methods() else None

F32 = np.float32
LENIENT_SPACES = {
    "dict": spaces.Dict({
        "f64": spaces.Box(-1e4, 1e4, (3,), F32),
        "list": spaces.Box(-10, 10, (2,), F32),
        "tuple": spaces.Box(-10, 10, (2, 2), F32),
        "py_float": spaces.Box(-10, 10, (), F32),
        "py_int": spaces.Box(-100, 100, (), F32),
        "np_scalar": spaces.Box(-10, 10, (), F32),
        "count": spaces.Box(-(2**31), 2**31 - 1, (2,), np.int32),
        "flags": spaces.Box(0, 1, (3,), np.int16),
        "binary": spaces.MultiBinary(4),
        "id": spaces.Discrete(5),
        "nested": spaces.Tuple((spaces.Box(-10, 10, (), F32), spaces.MultiDiscrete([3, 4]))),
    }),
    "box": spaces.Box(-10, 10, (4,), F32),
    "tuple": spaces.Tuple((spaces.Box(-10, 10, (2,), F32), spaces.Discrete(3))),
}


class LenientEnv(gym.Env):
    """Returns observations Gymnasium's vector envs cast; values from the env's own rng.

    The float64 values carry full mantissas, so rounding to float32 is exercised;
    the int64 counts go past int32 (numpy wraps them, in Gymnasium and here alike).
    """

    metadata: dict[str, Any] = {}

    def __init__(self, kind: str = "dict", episode_len: int = 3, env_id: int = 0):
        self.kind, self.episode_len, self.env_id = kind, episode_len, env_id
        self.observation_space = LENIENT_SPACES[kind]
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _obs(self) -> Any:
        r = self.np_random
        if self.kind == "box":
            return r.normal(size=4) * 3  # float64
        if self.kind == "tuple":
            return [r.normal(size=2).tolist(), np.int16(r.integers(3))]  # a list container
        return {
            "f64": r.normal(size=3) * 1e3,
            "list": r.normal(size=2).tolist(),
            "tuple": tuple(tuple(row) for row in r.normal(size=(2, 2)).tolist()),
            "py_float": float(r.normal()),
            "py_int": int(r.integers(-100, 100)),
            "np_scalar": np.float64(r.normal()),
            "count": r.integers(-(2**40), 2**40, size=2),  # int64
            "flags": r.random(3) < 0.5,  # bool
            "binary": [bool(x) for x in r.random(4) < 0.5],
            "id": np.int32(r.integers(5)),
            "nested": (np.float64(r.normal()), [int(r.integers(3)), int(r.integers(4))]),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        done = self.t >= self.episode_len + self.env_id % 2
        return self._obs(), float(action), done, False, {}


BAD_SPACE = spaces.Dict({"image": spaces.Box(0, 255, (2, 2), np.uint8),
                         "pos": spaces.Box(-1, 1, (2,), F32)})
FAULTS = {  # fault -> (the leaf it breaks, what the message must say)
    "float-image": ('obs["image"]', "float64"),
    "python-ints-image": ('obs["image"]', "int64"),
    "wrong-shape": ('obs["pos"]', "shape"),
}


class BadCastEnv(gym.Env):
    """Fine until step ``at_step`` (0: from reset on), then, if ``faulty``, a ``fault``."""

    metadata: dict[str, Any] = {}
    observation_space = BAD_SPACE
    action_space = spaces.Discrete(2)

    def __init__(self, fault: str = "float-image", at_step: int = 0, faulty: bool = False,
                 env_id: int = 0):
        self.fault, self.at_step, self.faulty, self.env_id = fault, at_step, faulty, env_id
        self.t = 0

    def _obs(self) -> Any:
        obs = {"image": np.full((2, 2), self.t, np.uint8), "pos": [0.5, -0.5]}
        if not (self.faulty and self.t >= self.at_step):
            return obs
        if self.fault == "float-image":
            return {**obs, "image": np.full((2, 2), 1.0)}
        if self.fault == "python-ints-image":
            return {**obs, "image": [[1, 2], [3, 4]]}
        return {**obs, "pos": [0.5, -0.5, 0.0]}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, False, False, {}


def bad_fns(fault: str, at_step: int) -> list:
    return make_fns(BadCastEnv, NUM_ENVS, fault=fault, at_step=at_step,
                    per_env={"faulty": [i == BAD_ENV for i in range(NUM_ENVS)]})


def check_parity(vec: Any, ref: Any) -> None:
    # Observations, rewards, flags and infos of every step, bit for bit.
    ends = run_parity(vec, ref, mode=AutoresetMode.NEXT_STEP, copy=True, steps=6)
    assert ends > 0


def check_observation_error(vec: Any, impl: Any, fault: str, at_step: int) -> None:
    name, detail = FAULTS[fault]
    with pytest.raises(impl.errors.ObservationError) as info:
        vec.reset(seed=0)
        for _ in range(at_step):
            vec.step(np.zeros(NUM_ENVS, dtype=np.int64))
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert re.search(rf"\benv {BAD_ENV}\b", message), f"env not named: {message!r}"
    assert name in message and detail in message and "expected" in message, message


# -- SyncVecEnv ----------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(LENIENT_SPACES))
def test_sync_casts_as_gymnasium_does(kind, make_vec, make_ref):
    fns = make_fns(LenientEnv, NUM_ENVS, kind=kind)
    check_parity(make_vec(fns), make_ref(fns))


def test_sync_first_batch_is_gymnasiums(make_vec, make_ref):
    fns = make_fns(LenientEnv, NUM_ENVS, kind="dict")
    obs, _ = make_vec(fns).reset(seed=3)
    expected, _ = make_ref(fns).reset(seed=3)
    assert obs["count"].dtype == np.int32 and obs["f64"].dtype == np.float32
    assert_tree_equal(obs, expected, "obs")


@pytest.mark.fastvec_only
@pytest.mark.parametrize("fault, at_step", [("float-image", 0), ("python-ints-image", 2),
                                            ("wrong-shape", 1)])
def test_sync_rejects_what_gymnasium_rejects(fault, at_step, impl, make_vec):
    check_observation_error(make_vec(bad_fns(fault, at_step)), impl, fault, at_step)


def test_gymnasium_rejects_them_too(make_ref):
    # The premise of the test above: Gymnasium's SyncVectorEnv raises on each fault.
    for fault, _ in FAULTS.items():
        ref = make_ref(bad_fns(fault, 0))
        with pytest.raises((ValueError, TypeError)):
            ref.reset(seed=0)


# -- SubprocVecEnv -------------------------------------------------------------------

@pytest.mark.subprocess
def test_subproc_casts_as_gymnasium_does(make_subproc, make_ref):
    # One worker pool per kind would cost a second each: the Dict env covers every form.
    fns = make_fns(LenientEnv, NUM_ENVS, kind="dict")
    check_parity(make_subproc(fns, num_workers=2, context=CONTEXT), make_ref(fns))


@pytest.mark.subprocess
def test_subproc_box_casts_as_gymnasium_does(make_subproc, make_ref):
    fns = make_fns(LenientEnv, 2, kind="box")
    vec, ref = make_subproc(fns, num_workers=2, context=CONTEXT), make_ref(fns)
    for seed in (0, 1):
        obs, _ = vec.reset(seed=seed)
        assert_tree_equal(obs, ref.reset(seed=seed)[0], "obs")
        for _ in range(3):
            out, expected = vec.step(np.array([1, 0])), ref.step(np.array([1, 0]))
            assert_tree_equal(out[0], expected[0], "obs")


@pytest.mark.subprocess
@pytest.mark.fastvec_only
@pytest.mark.parametrize("fault, at_step", [("float-image", 2), ("wrong-shape", 0)])
def test_subproc_rejects_in_the_parent(fault, at_step, impl, make_subproc):
    vec = make_subproc(bad_fns(fault, at_step), num_workers=2, context=CONTEXT)
    check_observation_error(vec, impl, fault, at_step)


class Float64Env(gym.Env):
    """A float32 Box leaf, observations in float64: cast every step, noted once."""

    action_space = spaces.Discrete(2)

    def __init__(self, key: str) -> None:
        self.key = key  # a leaf of its own: a note is once per process, leaf and dtype
        self.observation_space = spaces.Dict({key: spaces.Box(-1, 1, (2,), F32)})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return {self.key: np.zeros(2)}, {}

    def step(self, action):
        return {self.key: np.full(2, 0.5)}, 0.0, False, False, {}


@pytest.mark.fastvec_only
def test_a_cast_is_noted_once_on_the_trainers_logger(backend, make_envs, caplog):
    """The note reaches the trainer's ``fastvec`` logger as a WARNING, once per leaf
    and dtype (not once per worker), from whichever process stepped the env."""
    if backend == "ray":
        pytest.skip("an actor's note is printed by the actor; Ray shows it in the "
                    "trainer's output (docs/api.md)")
    import functools
    import logging

    key = f"noted_{backend.replace('-', '_')}"
    with caplog.at_level(logging.INFO, logger="fastvec"):
        envs = make_envs([functools.partial(Float64Env, key)] * 4)
        envs.reset(seed=0)
        for _ in range(3):
            envs.step(np.zeros(4, np.int64))
    notes = [r for r in caplog.records if r.name == "fastvec" and "casts it" in r.getMessage()]
    assert len(notes) == 1, [r.getMessage() for r in notes]
    assert notes[0].levelno == logging.WARNING
    message = notes[0].getMessage()
    assert f'obs["{key}"]' in message and "float64" in message and "float32" in message
