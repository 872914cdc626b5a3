"""SubprocVecEnv's API around stepping: worker blocks, call / get_attr / set_attr,
render, seeding, partial resets, split calls, close, bad actions and observations,
make, constructor arguments, and what a worker's process looks like (MPI
variables, SIGINT).

Most tests use 5 envs on 2 workers, so that per-env values are split across
uneven blocks (envs 0-2 and 3-4).
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
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.vector import AutoresetMode, VectorEnv

from fastvec.errors import WorkerError
from tests import leaks
from tests.compare import assert_obs_equal, assert_tree_equal, check_attributes, run_parity
from tests.envs import (
    BAD_OBS_PATH,
    AnyActionEnv,
    CountingEnv,
    DictCountingEnv,
    ProbeEnv,
    RaisingEnv,
    RenderEnv,
    SyntheticEnv,
    gym_fns,
    make_fns,
    render_frame,
)
from tests.test_sync_api import (
    BAD_ACTIONS,
    BAD_ENV,
    BAD_OBS_PARAMS,
    bad_obs_fns,
    check_bad_actions,
    check_tiling,
)

pytestmark = pytest.mark.subprocess

REPO_ROOT = Path(__file__).resolve().parents[1]
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
# attributes and worker blocks


@pytest.mark.parametrize(
    "fns",
    [
        pytest.param(lambda: make_fns(CountingEnv, N), id="counting"),
        pytest.param(lambda: make_fns(SyntheticEnv, 3, layout="dict"), id="synthetic_dict"),
        pytest.param(lambda: make_fns(RenderEnv, 3), id="render"),
    ],
)
def test_attributes_match_gymnasium(fns, make, make_ref):
    vec, ref = make(fns()), make_ref(fns())
    assert isinstance(vec, VectorEnv)
    check_attributes(vec, ref, AutoresetMode.NEXT_STEP)
    assert vec.metadata == ref.metadata
    assert vec.unwrapped is vec
    assert isinstance(repr(vec), str)


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
# call / get_attr / set_attr, values split across uneven blocks


def test_call_a_method_with_args_and_kwargs(make):
    vec = make(make_fns(CountingEnv, N, episode_len=10))
    vec.reset(seed=0)
    vec.step(zeros())
    vec.step(zeros())
    result = vec.call("scaled_count", 3, offset=1)
    assert result == (7, 107, 207, 307, 407)
    assert isinstance(result, tuple)


def test_call_an_attribute_returns_its_values(make):
    vec = make(make_fns(CountingEnv, N))
    assert vec.call("label") == tuple(f"counting-{i}" for i in range(N))


def test_get_attr(make):
    vec = make(make_fns(CountingEnv, N, per_env={"episode_len": [4, 5, 6, 7, 8]}))
    result = vec.get_attr("episode_len")
    assert result == (4, 5, 6, 7, 8)
    assert isinstance(result, tuple)


def test_get_attr_through_gymnasium_wrappers(make):
    vec = make(gym_fns("Pendulum-v1", 3, g=1.62))
    assert vec.get_attr("g") == (1.62, 1.62, 1.62)


@pytest.mark.parametrize(
    "values, expected",
    [
        ("same", ("same",) * N),
        (["a", "b", "c", "d", "e"], ("a", "b", "c", "d", "e")),
        (("v", "w", "x", "y", "z"), ("v", "w", "x", "y", "z")),
    ],
    ids=["one_value", "list", "tuple"],
)
def test_set_attr(values, expected, make):
    vec = make(make_fns(CountingEnv, N))
    vec.set_attr("label", values)
    assert vec.get_attr("label") == expected


def test_set_attr_with_the_wrong_number_of_values_changes_nothing(make):
    vec = make(make_fns(CountingEnv, N))
    with pytest.raises(ValueError):
        vec.set_attr("label", ["a", "b", "c", "d"])
    assert vec.get_attr("label") == tuple(f"counting-{i}" for i in range(N))


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


def test_set_attr_changes_behaviour(make):
    vec = make(make_fns(CountingEnv, N, episode_len=100))
    vec.reset(seed=0)
    vec.set_attr("episode_len", [1, 100, 100, 1, 100])
    _, _, terminations, _, _ = vec.step(zeros())
    assert_tree_equal(terminations, np.array([True, False, False, True, False]), "terminations")


def test_get_attr_of_a_missing_attribute_raises(make):
    vec = make(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    with pytest.raises(Exception) as info:
        vec.get_attr("no_such_attribute")
    assert "no_such_attribute" in str(info.value) + str(info.value.__cause__)


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
# render and tile_images


def test_render_returns_one_frame_per_env_in_order(make):
    vec = make(make_fns(RenderEnv, N, height=4, width=6))
    assert vec.render_mode == "rgb_array"
    vec.reset(seed=0)
    vec.step(zeros())
    vec.step(zeros())
    frames = vec.render()
    assert isinstance(frames, tuple) and len(frames) == N
    for i, frame in enumerate(frames):
        assert_tree_equal(frame, render_frame(i, 2, 4, 6), f"frame {i}")


@pytest.mark.fastvec_only
def test_tile_images_of_frames_from_render(impl, make):
    vec = make(make_fns(RenderEnv, N, height=3, width=4))
    vec.reset(seed=0)
    frames = vec.render()
    check_tiling(list(frames), impl.tile_images(frames))


# ---------------------------------------------------------------------------
# reset: seeds, options, reset_mask


def test_int_seed_seeds_env_i_with_seed_plus_i(make):
    vec = make(make_fns(CountingEnv, N))
    vec.reset(seed=42)
    assert vec.get_attr("np_random_seed") == (42, 43, 44, 45, 46)


def test_list_of_seeds(make, make_ref):
    fns = make_fns(SyntheticEnv, N, layout="tuple")
    vec, ref = make(fns), make_ref(fns)
    seeds = [9, 2, 30, 2, 7]
    obs, infos = vec.reset(seed=seeds)
    assert vec.get_attr("np_random_seed") == tuple(seeds)
    exp_obs, exp_infos = ref.reset(seed=seeds)
    assert_obs_equal(obs, exp_obs)
    assert_tree_equal(infos, exp_infos, "infos")


def test_seed_list_of_wrong_length_is_a_value_error(make):
    vec = make(make_fns(CountingEnv, N))
    with pytest.raises(ValueError):
        vec.reset(seed=[1, 2, 3])
    vec.reset(seed=[1, 2, 3, 4, 5])
    assert vec.get_attr("np_random_seed") == (1, 2, 3, 4, 5)


def test_reset_options_reach_every_env(make):
    vec = make(make_fns(CountingEnv, N))
    vec.reset(seed=0, options={"level": 2})
    assert vec.get_attr("last_options") == ({"level": 2},) * N


@pytest.mark.parametrize(
    "mask",
    [[True, False, False, False, True], [False, False, False, True, False],
     [False, True, True, False, False]],
    ids=["both_workers", "second_worker_only", "first_worker_only"],
)
def test_partial_reset_resets_only_the_masked_envs(mask, make):
    mask = np.array(mask)
    vec = make(make_fns(DictCountingEnv, N, episode_len=10), autoreset_mode="Disabled")
    vec.reset(seed=0)
    for _ in range(3):
        vec.step(zeros())
    obs, infos = vec.reset(seed=100, options={"reset_mask": mask, "level": 5})
    assert vec.get_attr("reset_count") == tuple(1 + mask.astype(int))
    options = vec.get_attr("last_options")
    for i in range(N):
        assert options[i] == ({"level": 5} if mask[i] else None), f"env {i}: {options[i]}"
    seeds = vec.get_attr("np_random_seed")
    for i in range(N):
        assert seeds[i] == (100 + i if mask[i] else 0 + i), f"env {i} seed {seeds[i]}"
    assert_tree_equal(obs["count"], np.where(mask, 0, 3), 'obs["count"]')
    assert_tree_equal(obs["env_id"], np.arange(N), 'obs["env_id"]')
    assert_tree_equal(infos["_env_id"], mask, 'infos["_env_id"]')
    obs, *_ = vec.step(zeros())
    assert_tree_equal(obs["count"], np.where(mask, 1, 4), 'obs["count"] after a step')


@pytest.mark.parametrize(
    "mask",
    [
        [True, False, True, False, True],  # a list, not an array
        np.array([True, False]),  # wrong length
        np.array([1, 0, 1, 0, 1]),  # not bool
        np.zeros(N, dtype=bool),  # nothing to reset
    ],
    ids=["list", "wrong_length", "int_dtype", "all_false"],
)
def test_bad_reset_mask_is_rejected_and_the_env_stays_usable(mask, make):
    vec = make(make_fns(CountingEnv, N), autoreset_mode=AutoresetMode.DISABLED)
    vec.reset(seed=0)
    with pytest.raises((TypeError, ValueError)):
        vec.reset(options={"reset_mask": mask})
    assert vec.get_attr("reset_count") == (1,) * N
    obs, *_ = vec.step(zeros())
    assert_obs_equal(obs, np.ones(N, dtype=np.int64))


def test_copy_true_returns_fresh_observations(make):
    vec = make(make_fns(DictCountingEnv, N, episode_len=10), copy=True)
    first, _ = vec.reset(seed=0)
    second, *_ = vec.step(zeros())
    third, *_ = vec.step(zeros())
    for key in first:
        assert not np.shares_memory(second[key], third[key]), f'obs["{key}"] shares memory'
    assert_tree_equal(first["count"], np.zeros(N, dtype=np.int64), 'reset obs["count"]')
    assert_tree_equal(second["count"], np.ones(N, dtype=np.int64), 'step 1 obs["count"]')


@pytest.mark.fastvec_only
def test_copy_false_returns_views_that_the_next_step_overwrites(make):
    vec = make(make_fns(DictCountingEnv, N, episode_len=10), copy=False)
    vec.reset(seed=0)
    obs, *_ = vec.step(zeros())
    assert_tree_equal(obs["count"], np.ones(N, dtype=np.int64), 'obs["count"]')
    vec.step(zeros())
    assert_tree_equal(obs["count"], np.full(N, 2, dtype=np.int64), 'the earlier obs["count"]')


# ---------------------------------------------------------------------------
# step_async / step_wait


def test_step_async_then_step_wait_matches_gymnasium(make, make_ref):
    fns = make_fns(SyntheticEnv, N, layout="dict")
    vec, ref = make(fns), make_ref(fns)
    assert_tree_equal(vec.reset(seed=3), ref.reset(seed=3), "reset")
    rng = np.random.default_rng(0)
    for t in range(30):
        actions = rng.integers(0, 3, size=N)
        vec.step_async(actions)
        assert_tree_equal(vec.step_wait(), ref.step(actions), f"step {t}")


def test_step_wait_without_step_async(make):
    vec = make(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    with pytest.raises(NoAsyncCallError):
        vec.step_wait()
    vec.step_async(np.ones(N, dtype=np.int64))
    vec.step_wait()
    with pytest.raises(NoAsyncCallError):
        vec.step_wait()


def test_second_step_async_is_refused_and_the_first_kept(make):
    vec = make(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    vec.step_async(np.array([1, 2, 3, 0, 1]))
    with pytest.raises(AlreadyPendingCallError):
        vec.step_async(np.array([3, 3, 3, 3, 3]))
    obs, rewards, *_ = vec.step_wait()
    assert_tree_equal(rewards, np.array([1.0, 2.0, 3.0, 0.0, 1.0]), "rewards of the first")
    assert_obs_equal(obs, np.ones(N, dtype=np.int64))


@pytest.mark.parametrize(
    "use",
    [lambda v: v.reset(seed=1), lambda v: v.call("label"), lambda v: v.get_attr("t"),
     lambda v: v.set_attr("label", "x"), lambda v: v.render()],
    ids=["reset", "call", "get_attr", "set_attr", "render"],
)
def test_other_calls_while_a_step_is_pending_are_refused(use, make):
    vec = make(make_fns(RenderEnv, N))
    vec.reset(seed=0)
    vec.step_async(np.full(N, 2))
    with pytest.raises(Exception) as info:  # Gymnasium: AlreadyPendingCallError
        use(vec)
    assert "pending" in str(info.value).lower() or isinstance(
        info.value, AlreadyPendingCallError), repr(info.value)
    obs, rewards, *_ = vec.step_wait()
    assert_tree_equal(rewards, np.full(N, 2.0), "rewards of the pending step")
    assert vec.get_attr("label") == tuple(f"counting-{i}" for i in range(N))
    assert vec.get_attr("t") == (1,) * N


# ---------------------------------------------------------------------------
# close


@pytest.mark.fastvec_only  # Gymnasium's AsyncVectorEnv closes each env twice
def test_close_is_idempotent_and_closes_each_env_once(make, tmp_path):
    log = tmp_path / "closed"
    vec = make(make_fns(ProbeEnv, N, close_log=str(log)))
    pids = {p["pid"] for p in vec.call("process")}
    vec.reset(seed=0)
    vec.close()
    vec.close()
    assert vec.closed
    assert sorted(int(x) for x in log.read_text().split()) == list(range(N))
    assert not pids & set(leaks.wait_no_children(2.0)), "workers outlived close()"


@pytest.mark.fastvec_only  # Gymnasium's vector envs are not context managers
def test_context_manager_closes(make, tmp_path):
    log = tmp_path / "closed"
    with make(make_fns(ProbeEnv, N, close_log=str(log))) as vec:
        vec.reset(seed=0)
        vec.step(zeros())
    assert vec.closed
    assert sorted(int(x) for x in log.read_text().split()) == list(range(N))


@pytest.mark.fastvec_only
def test_context_manager_closes_when_the_body_raises(make, tmp_path):
    log = tmp_path / "closed"
    with pytest.raises(KeyError):
        with make(make_fns(ProbeEnv, N, close_log=str(log))) as vec:
            vec.reset(seed=0)
            raise KeyError("in the body")
    assert vec.closed
    assert sorted(int(x) for x in log.read_text().split()) == list(range(N))


@pytest.mark.fastvec_only
def test_an_unclosed_env_that_is_dropped_stops_its_workers(impl):
    vec = impl.SubprocVecEnv(make_fns(ProbeEnv, N), num_workers=2)
    pids = {p["pid"] for p in vec.call("process")}
    assert pids <= set(leaks.live_children())
    del vec
    gc.collect()
    assert not pids & set(leaks.wait_no_children(2.0)), "workers outlived their env"


USES = {
    "reset": lambda v: v.reset(seed=0),
    "step": lambda v: v.step(zeros()),
    "step_async": lambda v: v.step_async(zeros()),
    "step_wait": lambda v: v.step_wait(),
    "call": lambda v: v.call("scaled_count", 1),
    "get_attr": lambda v: v.get_attr("label"),
    "set_attr": lambda v: v.set_attr("label", "x"),
    "render": lambda v: v.render(),
}


@pytest.mark.fastvec_only
def test_use_after_close_raises_closed_env_error(impl, make):
    vec = make(make_fns(RenderEnv, N))
    vec.reset(seed=0)
    vec.close()
    for name, use in USES.items():
        with pytest.raises(impl.errors.ClosedEnvError) as info:
            use(vec)
        assert isinstance(info.value, ClosedEnvironmentError), name


@pytest.mark.fastvec_only
def test_close_with_a_pending_step(impl, make):
    vec = make(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    vec.step_async(zeros())
    start = time.monotonic()
    vec.close()
    assert time.monotonic() - start < 3.0
    assert vec.closed
    with pytest.raises(impl.errors.ClosedEnvError):
        vec.step_wait()


# ---------------------------------------------------------------------------
# bad actions: ValueError naming what was expected, before anything reaches a
# worker; the env stays usable.


def good_actions(space: gym.spaces.Space, num_envs: int) -> np.ndarray:
    return np.stack([np.zeros(space.shape, dtype=space.dtype)] * num_envs)


BAD_ACTION_PARAMS = [
    pytest.param(case, split, id=f"{case}-{'step_async' if split else 'step'}")
    for k, case in enumerate(BAD_ACTIONS)
    for split in [bool(k % 2)]  # step and step_async take turns; the check is shared
]


@pytest.mark.fastvec_only
@pytest.mark.parametrize("case, split", BAD_ACTION_PARAMS)
def test_bad_actions_are_value_errors_and_the_env_stays_usable(case, split, make):
    check_bad_actions(case, split, make)


WORD = gym.spaces.Text(max_length=4, charset="abcdefgh")
DICT_ACTIONS = {
    # shared action rows
    "dict": gym.spaces.Dict({"move": gym.spaces.Discrete(3),
                             "aim": gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)}),
    # by the pipe, per env (a Text leaf has no fixed-size record)
    "dict_with_text": gym.spaces.Dict({"move": gym.spaces.Discrete(3), "word": WORD}),
}


def dict_actions(kind: str, moves: list[int]) -> dict:
    other = {"aim": np.linspace(-1, 1, 2 * N, dtype=np.float32).reshape(N, 2)} \
        if kind == "dict" else {"word": ("a", "bb", "ccc", "dddd", "h")}
    return {"move": np.array(moves), **other}


@pytest.mark.fastvec_only
@pytest.mark.parametrize("kind", list(DICT_ACTIONS))
def test_a_bad_dict_action_is_refused_before_any_worker_sees_it(kind, make, make_ref):
    # The whole batch is checked before any env's share goes out.
    fns = make_fns(AnyActionEnv, N, action_space=DICT_ACTIONS[kind])
    vec, ref = make(fns), make_ref(fns)
    vec.reset(seed=0)
    ref.reset(seed=0)
    with pytest.raises(ValueError, match=r"\b4\b"):
        vec.step(dict_actions(kind, [0, 1, 2, 0, 7]))
    assert vec.get_attr("step_count") == (0,) * N
    good = dict_actions(kind, [2, 1, 0, 1, 2])
    vec.step(good)
    ref.step(good)
    assert vec.get_attr("step_count") == (1,) * N
    assert_tree_equal(vec.get_attr("last_action"), ref.get_attr("last_action"),
                      "the actions the envs got")


@pytest.mark.fastvec_only
def test_text_actions_reach_their_envs_in_order(make, make_ref):
    fns = make_fns(AnyActionEnv, N, action_space=WORD)
    vec, ref = make(fns), make_ref(fns)
    vec.reset(seed=0)
    ref.reset(seed=0)
    for t in range(3):
        actions = tuple("abcdefgh"[(i + t) % 8] * (1 + (i + t) % 4) for i in range(N))
        vec.step(actions)
        ref.step(actions)
        assert vec.get_attr("last_action") == ref.get_attr("last_action") == actions
    with pytest.raises(ValueError, match=r"\b5\b"):
        vec.step(("a", "b"))
    assert vec.get_attr("step_count") == (3,) * N


# ---------------------------------------------------------------------------
# observations that do not fit the space: ObservationError (a ValueError) naming
# the env index (global, not within its worker's block) and the key path


@pytest.mark.fastvec_only
@pytest.mark.parametrize("kind, fault, at_step", BAD_OBS_PARAMS)
def test_bad_observation_is_an_observation_error_naming_env_and_path(kind, fault, at_step,
                                                                      impl, make):
    vec = make(bad_obs_fns(kind, fault, at_step, faulty_env=BAD_ENV))  # env 4 of 6, worker 1
    with pytest.raises(impl.errors.ObservationError) as info:
        vec.reset(seed=0)
        for _ in range(at_step):
            vec.step(np.zeros(6, dtype=np.int64))
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert re.search(rf"\benv {BAD_ENV}\b|\b{BAD_ENV}\b", message), f"env not named: {message!r}"
    assert not re.search(rf"\benv {BAD_ENV - 3}\b", message), f"local index: {message!r}"
    path = BAD_OBS_PATH[kind]
    if kind == "box":
        assert re.search(r"\bobs", message), f"path not named: {message!r}"
    else:
        assert path in message or path.replace('"', "'") in message, (
            f"path {path} not named: {message!r}"
        )


# ---------------------------------------------------------------------------
# make


@pytest.mark.fastvec_only
def test_make_with_the_subproc_backend(impl, vec_envs):
    vec = vec_envs.track(impl.make("CartPole-v1", 4, backend="subproc",
                                   vector_kwargs={"num_workers": 2}))
    assert isinstance(vec, impl.SubprocVecEnv)
    assert vec.num_workers == 2 and vec.num_envs == 4
    assert vec.spec is not None and vec.spec.id == "CartPole-v1"
    ref = vec_envs.track(gym.make_vec("CartPole-v1", 4, vectorization_mode="sync"))
    run_parity(vec, ref, mode=AutoresetMode.NEXT_STEP, copy=True, steps=100)


@pytest.mark.fastvec_only
def test_make_subproc_passes_env_kwargs_wrappers_and_vector_kwargs(impl, vec_envs):
    wrappers = [functools.partial(gym.wrappers.TimeLimit, max_episode_steps=3)]
    vec = vec_envs.track(impl.make(
        "Pendulum-v1", 3, backend="subproc", wrappers=wrappers, g=1.62,
        vector_kwargs={"num_workers": 2, "autoreset_mode": "SameStep", "context": "fork"}))
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert vec.context == "fork"
    assert vec.get_attr("g") == (1.62,) * 3
    vec.reset(seed=0)
    for _ in range(2):
        _, _, _, truncations, _ = vec.step(np.zeros((3, 1), dtype=np.float32))
        assert not truncations.any()
    _, _, _, truncations, infos = vec.step(np.zeros((3, 1), dtype=np.float32))
    assert_tree_equal(truncations, np.ones(3, dtype=bool), "truncations at step 3")
    assert "final_obs" in infos


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


@pytest.mark.fastvec_only
def test_no_env_functions_is_a_value_error(impl):
    with pytest.raises(ValueError):
        impl.SubprocVecEnv([])


@pytest.mark.fastvec_only
def test_envs_with_different_spaces_are_a_value_error_naming_the_env(impl):
    fns = make_fns(SyntheticEnv, N, per_env={"layout": ["dict"] * 4 + ["tuple"]})
    with pytest.raises(ValueError, match=r"\benv 4\b"):
        impl.SubprocVecEnv(fns, num_workers=2)
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
from tests.envs import ProbeEnv, make_fns

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
# the leak check itself sees what it is meant to see


@pytest.mark.fastvec_only
@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_leak_check_sees_live_workers(context, make):
    vec = make(make_fns(ProbeEnv, 3), context=context)
    procs = vec.call("process")
    pids = {p["pid"] for p in procs}
    assert pids <= set(leaks.live_children()), f"workers {pids} not seen"
    everything = set(leaks.live_children(exclude_forkserver=False))
    assert pids <= everything
    if context == "forkserver":  # the workers' parent is the forkserver, left out
        parents = {p["ppid"] for p in procs}
        assert parents != {os.getpid()} and parents <= everything
        assert not parents & set(leaks.live_children())
    vec.close()
    assert leaks.wait_no_children(2.0) == []


@pytest.mark.skipif(not os.path.isdir(leaks.SHM_DIR), reason="no /dev/shm")
def test_leak_check_sees_new_shared_memory_entries():
    before = leaks.shm_entries()
    name = f"fastvec-leak-check-{os.getpid()}"
    fd = os.open(os.path.join(leaks.SHM_DIR, name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        assert leaks.shm_entries() - before == {name}
        assert leaks.wait_shm_released(before, 0.05) == {name}
    finally:
        os.close(fd)
        os.unlink(os.path.join(leaks.SHM_DIR, name))
    assert leaks.wait_shm_released(before, 0.05) == set()


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


# ---------------------------------------------------------------------------
# call_each: any function on chosen envs, in their processes


@pytest.mark.parametrize("backend", ["sync", "subproc"])
def test_call_each_runs_a_function_on_chosen_envs(backend, make, make_vec):
    fns = make_fns(ProbeEnv, 5)
    vec = make(fns, num_workers=2) if backend == "subproc" else make_vec(fns)
    assert vec.call_each(lambda env: env.env_id) == (0, 1, 2, 3, 4)
    assert vec.call_each(lambda env: env.env_id * 10, indices=[4, 0, 2]) == (40, 0, 20)
    assert vec.call_each(lambda env: env.env_id, indices=3) == (3,)
    pids = vec.call_each(lambda env: os.getpid())
    assert (os.getpid() in pids) == (backend == "sync")
    for bad in ([5], [-1], [1, 1], ["0"]):
        with pytest.raises(ValueError, match="env indices"):
            vec.call_each(len, indices=bad)
    error = WorkerError if backend == "subproc" else ZeroDivisionError
    with pytest.raises(error):
        vec.call_each(lambda env: 1 / 0, indices=[3])
    assert vec.call_each(lambda env: env.env_id, indices=[1]) == (1,)  # still usable
