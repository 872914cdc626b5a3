"""SyncVecEnv's API around stepping: attributes, seeding, split calls, call /
get_attr / set_attr, render, tile_images, close, errors, bad actions, bad
observations, the object path and make."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.vector import AutoresetMode, VectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.compare import assert_obs_equal, assert_tree_equal, check_attributes, run_parity
from tests.envs import (
    BAD_OBS_PATH,
    ActionEchoEnv,
    BadObsEnv,
    CountingEnv,
    DictCountingEnv,
    EnvBoom,
    RaisingEnv,
    RenderEnv,
    SyntheticEnv,
    gym_fns,
    make_fns,
    render_frame,
)

REPO_ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------------------
# attributes


@pytest.mark.parametrize(
    "fns",
    [
        pytest.param(lambda: make_fns(CountingEnv, 3), id="counting"),
        pytest.param(lambda: make_fns(SyntheticEnv, 2, layout="dict"), id="synthetic_dict"),
        pytest.param(lambda: make_fns(RenderEnv, 2), id="render"),
        pytest.param(lambda: gym_fns("Blackjack-v1", 2), id="blackjack"),
    ],
)
def test_attributes_match_gymnasium(fns, make_vec, make_ref):
    vec, ref = make_vec(fns()), make_ref(fns())
    assert isinstance(vec, VectorEnv)
    check_attributes(vec, ref, AutoresetMode.NEXT_STEP)
    assert vec.metadata == ref.metadata
    assert len(vec.envs) == vec.num_envs
    assert all(type(e) is type(r) for e, r in zip(vec.envs, ref.envs, strict=True))
    assert vec.unwrapped is vec
    assert isinstance(repr(vec), str)


def test_envs_are_the_sub_envs_in_order(make_vec):
    vec = make_vec(make_fns(CountingEnv, 4))
    assert [env.env_id for env in vec.envs] == [0, 1, 2, 3]


def test_metadata_is_a_copy(make_vec):
    vec = make_vec(make_fns(CountingEnv, 2), autoreset_mode=AutoresetMode.SAME_STEP)
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert vec.metadata["render_fps"] == CountingEnv.metadata["render_fps"]
    assert "autoreset_mode" not in CountingEnv.metadata, "the env class's metadata was changed"


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("spelling", ["enum", "value", "name", "lower_name"])
def test_autoreset_mode_metadata(mode, spelling, make_vec):
    given = {"enum": mode, "value": mode.value, "name": mode.name,
             "lower_name": mode.name.lower()}[spelling]
    vec = make_vec(make_fns(CountingEnv, 2), autoreset_mode=given)
    assert vec.metadata["autoreset_mode"] is mode


def test_unknown_autoreset_mode_is_a_value_error(make_vec):
    with pytest.raises(ValueError, match="'NextStep', 'SameStep', 'Disabled'"):
        make_vec(make_fns(CountingEnv, 2), autoreset_mode="EveryOtherStep")
    with pytest.raises(ValueError, match="got 3"):
        make_vec(make_fns(CountingEnv, 2), autoreset_mode=3)


# ---------------------------------------------------------------------------
# reset and seeding


def test_int_seed_seeds_env_i_with_seed_plus_i(make_vec):
    vec = make_vec(make_fns(CountingEnv, 3))
    vec.reset(seed=42)
    assert vec.get_attr("np_random_seed") == (42, 43, 44)


def test_list_of_seeds(make_vec, make_ref):
    fns = make_fns(SyntheticEnv, 3, layout="tuple")
    vec, ref = make_vec(fns), make_ref(fns)
    obs, infos = vec.reset(seed=[9, 2, 30])
    assert vec.get_attr("np_random_seed") == (9, 2, 30)
    exp_obs, exp_infos = ref.reset(seed=[9, 2, 30])
    assert_obs_equal(obs, exp_obs)
    assert_tree_equal(infos, exp_infos, "infos")


def test_seed_list_of_wrong_length_is_a_value_error(make_vec):
    vec = make_vec(make_fns(CountingEnv, 3))
    with pytest.raises(ValueError):
        vec.reset(seed=[1, 2])


def test_reset_infos_are_batched(make_vec):
    vec = make_vec(make_fns(DictCountingEnv, 3))
    _, infos = vec.reset(seed=0)
    assert_tree_equal(infos["env_id"], np.array([0, 1, 2]), 'infos["env_id"]')
    assert_tree_equal(infos["_env_id"], np.ones(3, dtype=bool), 'infos["_env_id"]')


def test_reset_options_reach_the_envs(make_vec):
    vec = make_vec(make_fns(CountingEnv, 3))
    vec.reset(seed=0, options={"level": 2})
    assert vec.get_attr("last_options") == ({"level": 2},) * 3


def test_partial_reset_resets_only_the_masked_envs_with_the_options(make_vec):
    vec = make_vec(make_fns(CountingEnv, 3), autoreset_mode=AutoresetMode.DISABLED)
    vec.reset(seed=0)
    vec.reset(options={"reset_mask": np.array([True, False, True]), "level": 5})
    assert vec.get_attr("reset_count") == (2, 1, 2)
    options = vec.get_attr("last_options")
    assert options[1] is None
    assert options[0]["level"] == 5 and options[2]["level"] == 5


@pytest.mark.parametrize("raise_at", [0, 3], ids=["in_reset", "in_step"])
def test_an_env_exception_reaches_the_caller(raise_at, make_vec):
    fns = make_fns(RaisingEnv, 3, per_env={"faulty": [False, True, False]}, raise_at=raise_at)
    vec = make_vec(fns)
    with pytest.raises(Exception) as info:
        vec.reset(seed=0)
        for _ in range(raise_at):
            vec.step(np.zeros(3, dtype=np.int64))
    error = info.value
    assert isinstance(error, EnvBoom) or isinstance(error.__cause__, EnvBoom), repr(error)
    assert "env 1 raised on purpose" in str(error) + str(error.__cause__)


@pytest.mark.parametrize(
    "mask, error",
    [
        ([True, False, True], (TypeError, ValueError)),  # a list, not an array
        (np.array([True, False]), ValueError),  # wrong length
        (np.array([1, 0, 1]), (TypeError, ValueError)),  # not bool
        (np.zeros(3, dtype=bool), ValueError),  # nothing to reset
    ],
    ids=["list", "wrong_length", "int_dtype", "all_false"],
)
def test_bad_reset_mask_is_rejected(mask, error, make_vec):
    vec = make_vec(make_fns(CountingEnv, 3), autoreset_mode=AutoresetMode.DISABLED)
    vec.reset(seed=0)
    with pytest.raises(error):
        vec.reset(options={"reset_mask": mask})


# ---------------------------------------------------------------------------
# step results


def test_step_result_types(make_vec):
    vec = make_vec(make_fns(CountingEnv, 3))
    vec.reset(seed=0)
    obs, rewards, terminations, truncations, infos = vec.step(np.array([1, 2, 3]))
    assert_obs_equal(obs, np.ones(3, dtype=np.int64))
    assert_tree_equal(rewards, np.array([1.0, 2.0, 3.0]), "rewards")
    assert_tree_equal(terminations, np.zeros(3, dtype=bool), "terminations")
    assert_tree_equal(truncations, np.zeros(3, dtype=bool), "truncations")
    assert infos == {}


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.int16])
def test_integer_actions_of_any_int_dtype(dtype, make_vec):
    vec = make_vec(make_fns(CountingEnv, 3))
    vec.reset(seed=0)
    _, rewards, *_ = vec.step(np.array([3, 0, 2], dtype=dtype))
    assert_tree_equal(rewards, np.array([3.0, 0.0, 2.0]), "rewards")


def test_actions_as_a_list(make_vec):
    vec = make_vec(make_fns(CountingEnv, 3))
    vec.reset(seed=0)
    _, rewards, *_ = vec.step([1, 0, 3])
    assert_tree_equal(rewards, np.array([1.0, 0.0, 3.0]), "rewards")


def test_copy_true_returns_fresh_observations(make_vec):
    vec = make_vec(make_fns(DictCountingEnv, 2, episode_len=10), copy=True)
    first, _ = vec.reset(seed=0)
    second, *_ = vec.step(np.array([0, 0]))
    third, *_ = vec.step(np.array([0, 0]))
    for key in first:
        assert not np.shares_memory(second[key], third[key]), f'obs["{key}"] shares memory'
    assert_tree_equal(first["count"], np.array([0, 0]), 'reset obs["count"]')
    assert_tree_equal(second["count"], np.array([1, 1]), 'first step obs["count"]')


@pytest.mark.fastvec_only
def test_float64_actions_for_a_float32_box_are_converted(make_vec):
    space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
    vec = make_vec(make_fns(ActionEchoEnv, 3, action_space=space))
    vec.reset(seed=0)
    actions = np.array([[0.1, -0.2], [0.3, 0.7], [1 / 3, -1 / 7]], dtype=np.float64)
    vec.step(actions)
    received = vec.get_attr("last_action")
    for i, action in enumerate(received):
        assert_tree_equal(np.asarray(action), actions[i].astype(np.float32), f"action of env {i}")


def test_box_actions_out_of_bounds_are_passed_through(make_vec):
    space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
    vec = make_vec(make_fns(ActionEchoEnv, 2, action_space=space))
    vec.reset(seed=0)
    actions = np.array([[5.0, -7.5], [1.5, 0.0]], dtype=np.float32)
    obs, *_ = vec.step(actions)
    assert_tree_equal(obs, actions.astype(np.float64), "obs (the actions the envs got)")


# ---------------------------------------------------------------------------
# step_async / step_wait


@pytest.mark.fastvec_only
@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_step_async_then_wait_equals_step(mode, make_vec):
    fns = make_fns(SyntheticEnv, 3, layout="dict")
    split, whole = make_vec(fns, autoreset_mode=mode), make_vec(fns, autoreset_mode=mode)
    assert_tree_equal(split.reset(seed=3), whole.reset(seed=3), "reset")
    rng = np.random.default_rng(0)
    for t in range(40):
        actions = rng.integers(0, 3, size=3)
        split.step_async(actions)
        out = split.step_wait()
        assert_tree_equal(out, whole.step(actions), f"step {t}")
        done = out[2] | out[3]
        if mode is AutoresetMode.DISABLED and done.any():
            split.reset(options={"reset_mask": done.copy()})
            whole.reset(options={"reset_mask": done.copy()})


@pytest.mark.fastvec_only
def test_step_wait_without_step_async(make_vec):
    vec = make_vec(make_fns(CountingEnv, 2))
    vec.reset(seed=0)
    with pytest.raises(NoAsyncCallError):
        vec.step_wait()
    vec.step_async(np.array([1, 1]))
    vec.step_wait()
    with pytest.raises(NoAsyncCallError):
        vec.step_wait()


@pytest.mark.fastvec_only
def test_second_step_async_is_refused_and_the_first_kept(make_vec):
    vec = make_vec(make_fns(CountingEnv, 2))
    vec.reset(seed=0)
    vec.step_async(np.array([1, 2]))
    with pytest.raises(AlreadyPendingCallError):
        vec.step_async(np.array([3, 3]))
    obs, rewards, *_ = vec.step_wait()
    assert_tree_equal(rewards, np.array([1.0, 2.0]), "rewards of the first step_async")
    assert_obs_equal(obs, np.array([1, 1], dtype=np.int64))


@pytest.mark.fastvec_only
def test_error_classes_are_gymnasiums(impl):
    errors = impl.errors
    assert errors.NoAsyncCallError is NoAsyncCallError
    assert errors.AlreadyPendingCallError is AlreadyPendingCallError
    assert issubclass(errors.ClosedEnvError, ClosedEnvironmentError)
    assert issubclass(errors.ClosedEnvError, errors.FastVecError)
    assert issubclass(errors.ObjectSpaceWarning, Warning)


# ---------------------------------------------------------------------------
# call / get_attr / set_attr


def test_call_a_method_with_args_and_kwargs(make_vec):
    vec = make_vec(make_fns(CountingEnv, 3, episode_len=10))
    vec.reset(seed=0)
    vec.step(np.zeros(3, dtype=np.int64))
    vec.step(np.zeros(3, dtype=np.int64))
    result = vec.call("scaled_count", 3, offset=1)
    assert result == (7, 107, 207)
    assert isinstance(result, tuple)


def test_call_an_attribute_returns_its_values(make_vec):
    vec = make_vec(make_fns(CountingEnv, 2))
    assert vec.call("label") == ("counting-0", "counting-1")


def test_get_attr(make_vec):
    vec = make_vec(make_fns(CountingEnv, 3, per_env={"episode_len": [4, 5, 6]}))
    result = vec.get_attr("episode_len")
    assert result == (4, 5, 6)
    assert isinstance(result, tuple)


def test_get_attr_through_gymnasium_wrappers(make_vec):
    vec = make_vec(gym_fns("Pendulum-v1", 2, g=1.62))
    assert vec.get_attr("g") == (1.62, 1.62)


def test_get_attr_of_a_missing_attribute(make_vec):
    vec = make_vec(make_fns(CountingEnv, 2))
    with pytest.raises(AttributeError):
        vec.get_attr("no_such_attribute")


@pytest.mark.parametrize(
    "values, expected",
    [
        ("same", ("same", "same", "same")),
        (["a", "b", "c"], ("a", "b", "c")),
        (("x", "y", "z"), ("x", "y", "z")),
    ],
    ids=["one_value", "list", "tuple"],
)
def test_set_attr(values, expected, make_vec):
    vec = make_vec(make_fns(CountingEnv, 3))
    vec.set_attr("label", values)
    assert vec.get_attr("label") == expected
    assert tuple(env.label for env in vec.envs) == expected


def test_set_attr_with_the_wrong_number_of_values(make_vec):
    vec = make_vec(make_fns(CountingEnv, 3))
    with pytest.raises(ValueError):
        vec.set_attr("label", ["a", "b"])


def test_set_attr_changes_behaviour(make_vec):
    vec = make_vec(make_fns(CountingEnv, 2, episode_len=100))
    vec.reset(seed=0)
    vec.set_attr("episode_len", [1, 100])
    _, _, terminations, _, _ = vec.step(np.array([0, 0]))
    assert_tree_equal(terminations, np.array([True, False]), "terminations")


# ---------------------------------------------------------------------------
# render and tile_images


def test_render_returns_one_frame_per_env(make_vec):
    vec = make_vec(make_fns(RenderEnv, 3, height=4, width=6))
    assert vec.render_mode == "rgb_array"
    vec.reset(seed=0)
    vec.step(np.zeros(3, dtype=np.int64))
    vec.step(np.zeros(3, dtype=np.int64))
    frames = vec.render()
    assert isinstance(frames, tuple) and len(frames) == 3
    for i, frame in enumerate(frames):
        assert_tree_equal(frame, render_frame(i, 2, 4, 6), f"frame {i}")


def test_render_mode_none(make_vec):
    vec = make_vec(make_fns(CountingEnv, 2))
    assert vec.render_mode is None


def check_tiling(frames: list[np.ndarray], grid: np.ndarray) -> None:
    """``grid`` holds ``frames`` row-major in a roughly square grid, zeros elsewhere."""
    n = len(frames)
    h, w, c = frames[0].shape
    assert isinstance(grid, np.ndarray) and grid.dtype == frames[0].dtype
    assert grid.ndim == 3 and grid.shape[2] == c, f"grid shape {grid.shape}"
    assert grid.shape[0] % h == 0 and grid.shape[1] % w == 0, f"grid shape {grid.shape}"
    rows, cols = grid.shape[0] // h, grid.shape[1] // w
    assert rows * cols >= n, f"{rows}x{cols} grid for {n} frames"
    assert abs(rows - cols) <= 1, f"{rows}x{cols} grid for {n} frames is not roughly square"
    assert min(rows, cols) <= math.ceil(math.sqrt(n)), f"{rows}x{cols} grid for {n} frames"
    assert (rows - 1) * cols < n and (cols - 1) * rows < n, f"{rows}x{cols}: an empty row/col"
    for k in range(rows * cols):
        r, col = divmod(k, cols)
        cell = grid[r * h:(r + 1) * h, col * w:(col + 1) * w]
        expected = frames[k] if k < n else np.zeros_like(frames[0])
        assert_tree_equal(cell, expected, f"cell ({r}, {col}) of a {rows}x{cols} grid")


def random_frames(n: int, shape: tuple[int, int, int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    # 1..255 so that no frame can be mistaken for a zero pad cell
    return [rng.integers(1, 256, size=shape, dtype=np.uint8) for _ in range(n)]


@pytest.mark.fastvec_only
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 16, 17])
@pytest.mark.parametrize("shape", [(4, 6, 3), (5, 3, 1), (2, 2, 4)])
def test_tile_images(n, shape, impl):
    frames = random_frames(n, shape, seed=n)
    check_tiling(frames, impl.tile_images(frames))


@pytest.mark.fastvec_only
def test_tile_images_of_a_tuple_from_render(impl, make_vec):
    vec = make_vec(make_fns(RenderEnv, 5, height=3, width=4))
    vec.reset(seed=0)
    frames = vec.render()
    check_tiling(list(frames), impl.tile_images(frames))


@pytest.mark.fastvec_only
@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 30),
    h=st.integers(1, 5),
    w=st.integers(1, 5),
    c=st.sampled_from([1, 3, 4]),
    seed=st.integers(0, 2**16),
)
def test_tile_images_property(impl, n, h, w, c, seed):
    frames = random_frames(n, (h, w, c), seed)
    check_tiling(frames, impl.tile_images(frames))


# ---------------------------------------------------------------------------
# close


def test_close_is_idempotent_and_closes_each_env_once(make_vec):
    vec = make_vec(make_fns(CountingEnv, 3))
    envs = list(vec.envs)
    vec.reset(seed=0)
    vec.close()
    vec.close()
    assert vec.closed
    assert [env.close_count for env in envs] == [1, 1, 1]


@pytest.mark.fastvec_only  # Gymnasium's vector envs are not context managers
def test_context_manager_closes(make_vec):
    with make_vec(make_fns(CountingEnv, 2)) as vec:
        envs = list(vec.envs)
        vec.reset(seed=0)
        vec.step(np.array([0, 1]))
    assert vec.closed
    assert [env.close_count for env in envs] == [1, 1]


@pytest.mark.fastvec_only
def test_context_manager_closes_when_the_body_raises(make_vec):
    with pytest.raises(KeyError):
        with make_vec(make_fns(CountingEnv, 2)) as vec:
            envs = list(vec.envs)
            raise KeyError("in the body")
    assert vec.closed
    assert [env.close_count for env in envs] == [1, 1]


USES = {
    "reset": lambda v: v.reset(seed=0),
    "step": lambda v: v.step(np.array([0, 0])),
    "step_async": lambda v: v.step_async(np.array([0, 0])),
    "step_wait": lambda v: v.step_wait(),
    "call": lambda v: v.call("scaled_count", 1),
    "get_attr": lambda v: v.get_attr("label"),
    "set_attr": lambda v: v.set_attr("label", "x"),
    "render": lambda v: v.render(),
}


@pytest.mark.fastvec_only
@pytest.mark.parametrize("use", list(USES))
def test_use_after_close_raises_closed_env_error(use, impl, make_vec):
    vec = make_vec(make_fns(RenderEnv, 2))
    vec.reset(seed=0)
    vec.close()
    with pytest.raises(impl.errors.ClosedEnvError) as info:
        USES[use](vec)
    assert isinstance(info.value, ClosedEnvironmentError)


@pytest.mark.fastvec_only
def test_close_with_a_pending_step(impl, make_vec):
    vec = make_vec(make_fns(CountingEnv, 2))
    vec.reset(seed=0)
    vec.step_async(np.array([1, 1]))
    vec.close()
    assert vec.closed
    with pytest.raises(impl.errors.ClosedEnvError):
        vec.step_wait()


# ---------------------------------------------------------------------------
# bad actions: ValueError naming what was expected; the env stays usable.

DISCRETE4 = gym.spaces.Discrete(4)
BOX2 = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
MULTIDISCRETE = gym.spaces.MultiDiscrete([3, 5])

# id -> (action space, num_envs, bad actions, regexes the message must match)
BAD_ACTIONS = {
    "discrete_too_few": (DISCRETE4, 5, np.array([0, 1]), [r"\b5\b"]),
    "discrete_too_many": (DISCRETE4, 5, np.zeros(7, dtype=np.int64), [r"\b5\b"]),
    "discrete_2d": (DISCRETE4, 5, np.zeros((5, 1), dtype=np.int64), [r"\(5,\)|\b5\b"]),
    "discrete_scalar": (DISCRETE4, 5, 1, [r"\b5\b"]),
    "discrete_scalar_one_env": (DISCRETE4, 1, 1, [r"\(1,\)|batch|array|scalar"]),
    "discrete_out_of_range": (
        DISCRETE4, 5, np.array([0, 1, 9, 0, 1]), [r"\b2\b", r"\b4\b|Discrete"]
    ),
    "discrete_negative": (
        DISCRETE4, 7, np.array([0, 0, 0, 0, 0, 0, -1]), [r"\b6\b", r"\b4\b|Discrete"]
    ),
    "discrete_fractional": (DISCRETE4, 5, np.array([0.5, 1.0, 2.0, 0.0, 1.0]), [r"(?i)int"]),
    "box_per_env_shape": (BOX2, 3, np.zeros((3, 3), dtype=np.float32), [r"\(2,\)|\(3, 2\)"]),
    "box_too_few": (BOX2, 3, np.zeros((2, 2), dtype=np.float32), [r"\b3\b"]),
    "box_scalar": (BOX2, 3, 0.5, [r"\(3, 2\)|\(2,\)|\b3\b"]),
    "box_flat": (BOX2, 3, np.zeros(6, dtype=np.float32), [r"\(3, 2\)|\(2,\)"]),
    "multidiscrete_out_of_range": (
        MULTIDISCRETE, 7, np.array([[0, 0]] * 6 + [[1, 9]]), [r"\b6\b", r"\b5\b|MultiDiscrete"]
    ),
    "multidiscrete_shape": (
        MULTIDISCRETE, 3, np.zeros((3, 3), dtype=np.int64), [r"\(2,\)|\(3, 2\)"]
    ),
}


def good_actions(space: gym.spaces.Space, num_envs: int) -> np.ndarray:
    return np.stack([np.zeros(space.shape, dtype=space.dtype)] * num_envs)


@pytest.mark.fastvec_only
@pytest.mark.parametrize("split", [False, True], ids=["step", "step_async"])
@pytest.mark.parametrize("case", list(BAD_ACTIONS))
def test_bad_actions_are_value_errors_and_the_env_stays_usable(case, split, make_vec):
    check_bad_actions(case, split, make_vec)


def check_bad_actions(case: str, split: bool, make: Callable) -> None:
    """A bad batch raises a ValueError matching the case; no env steps; a good step works.

    The good step also shows nothing of the bad batch was left behind (obs are zeros).
    """
    space, num_envs, actions, patterns = BAD_ACTIONS[case]
    vec = make(make_fns(ActionEchoEnv, num_envs, action_space=space))
    vec.reset(seed=0)
    with pytest.raises(ValueError) as info:
        if split:
            vec.step_async(actions)
        else:
            vec.step(actions)
    message = str(info.value)
    for pattern in patterns:
        assert re.search(pattern, message), f"message {message!r} does not match {pattern!r}"
    assert vec.get_attr("step_count") == (0,) * num_envs, "an env was stepped"
    obs, *_ = vec.step(good_actions(space, num_envs))  # no pending call left behind
    assert vec.get_attr("step_count") == (1,) * num_envs
    assert_obs_equal(obs, np.zeros((num_envs, *space.shape)), "obs after a good step")


# ---------------------------------------------------------------------------
# observations that do not fit the space: ValueError naming env index and key path

BAD_ENV = 4  # of 6; no shape or dtype in these spaces contains a 4
BAD_OBS_PARAMS = [
    pytest.param(kind, fault, at_step, id=f"{kind}-{fault}-{'reset' if at_step == 0 else 'step'}")
    for kind in ("box", "dict", "tuple")
    for fault in ("shape", "dtype")
    for at_step in (0, 2)
]


def bad_obs_fns(kind: str, fault: str, at_step: int, faulty_env: int | None) -> list:
    faulty = [i == faulty_env for i in range(6)]
    return make_fns(
        BadObsEnv, 6, per_env={"faulty": faulty}, kind=kind, fault=fault, at_step=at_step
    )


@pytest.mark.parametrize("kind", ["box", "dict", "tuple"])
def test_bad_obs_env_is_fine_when_not_faulty(kind, make_vec):
    vec = make_vec(bad_obs_fns(kind, "shape", 0, faulty_env=None))
    obs, _ = vec.reset(seed=0)
    for _ in range(3):
        obs, *_ = vec.step(np.zeros(6, dtype=np.int64))
    assert vec.observation_space.contains(obs)


@pytest.mark.fastvec_only
@pytest.mark.parametrize("kind, fault, at_step", BAD_OBS_PARAMS)
def test_bad_observation_is_a_value_error_naming_env_and_path(kind, fault, at_step, make_vec):
    vec = make_vec(bad_obs_fns(kind, fault, at_step, faulty_env=BAD_ENV))
    with pytest.raises(ValueError) as info:
        vec.reset(seed=0)
        for _ in range(at_step):
            vec.step(np.zeros(6, dtype=np.int64))
    message = str(info.value)
    assert re.search(rf"\b{BAD_ENV}\b", message), f"env index not named: {message!r}"
    path = BAD_OBS_PATH[kind]
    if kind == "box":
        assert re.search(r"\bobs", message), f"path not named: {message!r}"
    else:
        assert path in message or path.replace('"', "'") in message, (
            f"path {path} not named: {message!r}"
        )


# ---------------------------------------------------------------------------
# the object path warning, once per process


WARNING_SCRIPT = """
import json, warnings
import numpy as np
import {impl} as fv
from tests.envs import CountingEnv, DictCountingEnv, ObjectSpaceEnv, make_fns

counts = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for cls, kind in [(CountingEnv, None), (DictCountingEnv, None), (ObjectSpaceEnv, "text"),
                      (ObjectSpaceEnv, "graph"), (ObjectSpaceEnv, "text")]:
        fns = make_fns(cls, 2) if kind is None else make_fns(cls, 2, kind=kind)
        env = fv.SyncVecEnv(fns)
        try:
            env.reset(seed=0)
            for _ in range(3):
                env.step(np.zeros(2, dtype=np.int64))
        finally:
            env.close()
        counts.append(sum(issubclass(w.category, fv.errors.ObjectSpaceWarning) for w in caught))
print(json.dumps(counts))
"""


@pytest.mark.fastvec_only
def test_object_space_warning_is_issued_once_per_process(impl):
    script = WARNING_SCRIPT.format(impl=impl.__name__)
    path = os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    # no warning for Box / Dict spaces; one at the first Text space; no more after it
    assert counts == [0, 0, 1, 1, 1], f"ObjectSpaceWarnings seen after each env: {counts}"


# ---------------------------------------------------------------------------
# make


@pytest.mark.fastvec_only
def test_make_defaults_to_sync(impl, vec_envs):
    vec = vec_envs.track(impl.make("CartPole-v1", 3))
    assert isinstance(vec, impl.SyncVecEnv)
    assert vec.num_envs == 3
    assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP


def test_make_gives_the_same_results_as_gymnasium(impl, vec_envs):
    vec = vec_envs.track(impl.make("CartPole-v1", 3))
    ref = vec_envs.track(gym.make_vec("CartPole-v1", 3, vectorization_mode="sync"))
    run_parity(vec, ref, mode=AutoresetMode.NEXT_STEP, copy=True, steps=120)


def test_make_passes_keyword_arguments_to_the_env(impl, vec_envs):
    vec = vec_envs.track(impl.make("Pendulum-v1", 2, g=1.62))
    assert vec.get_attr("g") == (1.62, 1.62)


def test_make_vector_kwargs(impl, vec_envs):
    vec = vec_envs.track(
        impl.make("CartPole-v1", 2, vector_kwargs={"autoreset_mode": "SameStep", "copy": False})
    )
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP


def test_make_wrappers(impl, vec_envs):
    wrappers = [functools.partial(gym.wrappers.TimeLimit, max_episode_steps=5)]
    vec = vec_envs.track(impl.make("Pendulum-v1", 2, wrappers=wrappers))
    vec.reset(seed=0)
    for _ in range(4):
        _, _, _, truncations, _ = vec.step(np.zeros((2, 1), dtype=np.float32))
        assert not truncations.any()
    _, _, _, truncations, _ = vec.step(np.zeros((2, 1), dtype=np.float32))
    assert_tree_equal(truncations, np.array([True, True]), "truncations at step 5")


def test_make_unknown_backend(impl):
    with pytest.raises(ValueError):
        impl.make("CartPole-v1", 2, backend="carrier-pigeon")
