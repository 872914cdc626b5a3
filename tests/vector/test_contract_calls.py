"""The per-env calls every backend keeps: call, get_attr, set_attr, call_each, render.

Every test runs on each backend of ``tests/support/backends.py``; 6 envs make uneven
worker blocks (2, 2, 1, 1) for ``SubprocVecEnv``, so values are split across
blocks.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.support.backends import LOCAL, SUBPROCESS_BACKENDS, SYNC
from tests.support.compare import assert_tree_equal, check_tiling
from tests.support.envs import CountingEnv, ProbeEnv, RenderEnv, gym_fns, make_fns, render_frame

N = 6


def zeros(n: int = N) -> np.ndarray:
    return np.zeros(n, dtype=np.int64)


def labels(n: int = N) -> tuple[str, ...]:
    return tuple(f"counting-{i}" for i in range(n))


# ---------------------------------------------------------------------------
# call / get_attr / set_attr / call_each, values split across uneven blocks


def test_call_a_method_with_args_and_kwargs(make_envs):
    vec = make_envs(make_fns(CountingEnv, N, episode_len=10))
    vec.reset(seed=0)
    vec.step(zeros())
    vec.step(zeros())
    result = vec.call("scaled_count", 3, offset=1)
    assert result == (7, 107, 207, 307, 407, 507)
    assert isinstance(result, tuple)


def test_call_an_attribute_returns_its_values(make_envs):
    vec = make_envs(make_fns(CountingEnv, N))
    assert vec.call("label") == labels()


def test_get_attr(make_envs):
    vec = make_envs(make_fns(CountingEnv, N, per_env={"episode_len": [4, 5, 6, 7, 8, 9]}))
    result = vec.get_attr("episode_len")
    assert result == (4, 5, 6, 7, 8, 9)
    assert isinstance(result, tuple)


def test_get_attr_through_gymnasium_wrappers(make_envs):
    vec = make_envs(gym_fns("Pendulum-v1", 4, g=1.62))
    assert vec.get_attr("g") == (1.62,) * 4


def test_get_attr_of_a_missing_attribute_raises(backend, make_envs):
    vec = make_envs(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    with pytest.raises(Exception) as info:
        vec.get_attr("no_such_attribute")
    # SyncVecEnv lets the AttributeError through; SubprocVecEnv raises a WorkerError
    # naming it, with the remote traceback as its cause
    assert backend != SYNC or isinstance(info.value, AttributeError), repr(info.value)
    assert "no_such_attribute" in str(info.value) + str(info.value.__cause__)


@pytest.mark.parametrize(
    "values, expected",
    [
        ("same", ("same",) * N),
        (["a", "b", "c", "d", "e", "f"], ("a", "b", "c", "d", "e", "f")),
        (("u", "v", "w", "x", "y", "z"), ("u", "v", "w", "x", "y", "z")),
    ],
    ids=["one_value", "list", "tuple"],
)
def test_set_attr(values, expected, make_envs):
    vec = make_envs(make_fns(CountingEnv, N))
    vec.set_attr("label", values)
    assert vec.get_attr("label") == expected


def test_set_attr_with_the_wrong_number_of_values_changes_nothing(make_envs):
    vec = make_envs(make_fns(CountingEnv, N))
    with pytest.raises(ValueError):
        vec.set_attr("label", ["a", "b", "c", "d"])
    assert vec.get_attr("label") == labels()


def test_set_attr_changes_behaviour(make_envs):
    vec = make_envs(make_fns(CountingEnv, N, episode_len=100))
    vec.reset(seed=0)
    vec.set_attr("episode_len", [1, 100, 100, 1, 100, 1])
    _, _, terminations, _, _ = vec.step(zeros())
    assert_tree_equal(terminations, np.array([True, False, False, True, False, True]),
                      "terminations")


@pytest.mark.fastvec_only
def test_call_each_runs_a_function_on_chosen_envs(backend, impl, make_envs):
    vec = make_envs(make_fns(ProbeEnv, N))
    assert vec.call_each(lambda env: env.env_id) == tuple(range(N))
    assert vec.call_each(lambda env: env.env_id * 10, indices=[5, 0, 2]) == (50, 0, 20)
    assert vec.call_each(lambda env: env.env_id, indices=3) == (3,)
    pids = vec.call_each(lambda env: os.getpid())
    assert (os.getpid() in pids) == (backend in (SYNC, LOCAL))  # envs in this process
    for bad in ([N], [-1], [1, 1], ["0"]):
        with pytest.raises(ValueError, match="env indices"):
            vec.call_each(len, indices=bad)
    error = impl.errors.WorkerError if backend in SUBPROCESS_BACKENDS else ZeroDivisionError
    with pytest.raises(error):
        vec.call_each(lambda env: 1 / 0, indices=[3])
    assert vec.call_each(lambda env: env.env_id, indices=[1]) == (1,)  # still usable


# ---------------------------------------------------------------------------
# render and tile_images


def test_render_returns_one_frame_per_env_in_order(make_envs):
    vec = make_envs(make_fns(RenderEnv, N, height=4, width=6))
    assert vec.render_mode == "rgb_array"
    vec.reset(seed=0)
    vec.step(zeros())
    vec.step(zeros())
    frames = vec.render()
    assert isinstance(frames, tuple) and len(frames) == N
    for i, frame in enumerate(frames):
        assert_tree_equal(frame, render_frame(i, 2, 4, 6), f"frame {i}")


def test_render_mode_none(make_envs):
    vec = make_envs(make_fns(CountingEnv, 2))
    assert vec.render_mode is None


@pytest.mark.fastvec_only
def test_tile_images_of_frames_from_render(impl, make_envs):
    vec = make_envs(make_fns(RenderEnv, N, height=3, width=4))
    vec.reset(seed=0)
    frames = vec.render()
    check_tiling(list(frames), impl.tile_images(frames))
