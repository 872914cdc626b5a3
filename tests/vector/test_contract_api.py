"""The vector-env API every backend keeps: attributes, reset and seeding, step
results, split calls, close (the per-env calls: ``test_contract_calls.py``).

Every test runs on each backend of ``tests/support/backends.py`` (``SyncVecEnv``,
``SubprocVecEnv``, and ``SubprocVecEnv`` with async batches driven as full
batches).  Most tests use 6 envs: uneven worker blocks (2, 2, 1, 1) for
``SubprocVecEnv``, two batches of 3 in async mode.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.vector import AutoresetMode, VectorEnv

from tests.support.backends import ASYNC, SYNC, is_gymnasium, skip_async
from tests.support.compare import assert_obs_equal, assert_tree_equal, check_attributes
from tests.support.envs import (
    ActionEchoEnv,
    CountingEnv,
    DictCountingEnv,
    PaddedObsEnv,
    ProbeEnv,
    RenderEnv,
    SyntheticEnv,
    gym_fns,
    make_fns,
)

N = 6
MODES = list(AutoresetMode)


def zeros(n: int = N) -> np.ndarray:
    return np.zeros(n, dtype=np.int64)


def labels(n: int = N) -> tuple[str, ...]:
    return tuple(f"counting-{i}" for i in range(n))


def skip_without_step_async(backend: str, impl) -> None:
    skip_async(backend, "step_async/step_wait give way to send/recv (see test_async.py)")
    if is_gymnasium(impl) and backend == SYNC:
        pytest.skip("Gymnasium's SyncVectorEnv has no step_async; --impl gymnasium")


# ---------------------------------------------------------------------------
# attributes


@pytest.mark.parametrize(
    "fns",
    [
        pytest.param(lambda: make_fns(CountingEnv, N), id="counting"),
        pytest.param(lambda: make_fns(SyntheticEnv, 4, layout="dict"), id="synthetic_dict"),
        pytest.param(lambda: make_fns(RenderEnv, 4), id="render"),
        pytest.param(lambda: gym_fns("Blackjack-v1", 2), id="blackjack"),
    ],
)
def test_attributes_match_gymnasium(fns, make_envs, make_ref):
    vec, ref = make_envs(fns()), make_ref(fns())
    assert isinstance(vec, VectorEnv)
    check_attributes(vec, ref, AutoresetMode.NEXT_STEP)
    assert vec.metadata == ref.metadata
    assert vec.unwrapped is vec
    assert isinstance(repr(vec), str)


def test_metadata_is_a_copy(make_envs):
    vec = make_envs(make_fns(CountingEnv, 2), autoreset_mode=AutoresetMode.SAME_STEP)
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert vec.metadata["render_fps"] == CountingEnv.metadata["render_fps"]
    assert "autoreset_mode" not in CountingEnv.metadata, "the env class's metadata was changed"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("spelling", [
    "enum", "value",  # Gymnasium takes these two only
    pytest.param("name", marks=pytest.mark.fastvec_only),
    pytest.param("lower_name", marks=pytest.mark.fastvec_only),
])
def test_autoreset_mode_metadata(mode, spelling, make_envs):
    given = {"enum": mode, "value": mode.value, "name": mode.name,
             "lower_name": mode.name.lower()}[spelling]
    vec = make_envs(make_fns(CountingEnv, 2), autoreset_mode=given)
    assert vec.metadata["autoreset_mode"] is mode


# ---------------------------------------------------------------------------
# reset: seeds, options, reset_mask


def test_int_seed_seeds_env_i_with_seed_plus_i(make_envs):
    vec = make_envs(make_fns(CountingEnv, N))
    vec.reset(seed=42)
    assert vec.get_attr("np_random_seed") == tuple(range(42, 42 + N))


def test_np_random_seed_and_np_random_are_per_env_as_gymnasiums(make_envs, make_ref):
    vec, ref = make_envs(make_fns(CountingEnv, N)), make_ref(make_fns(CountingEnv, N))
    vec.reset(seed=7)
    ref.reset(seed=7)
    assert vec.np_random_seed == ref.np_random_seed == tuple(range(7, 7 + N))
    draws = [g.integers(1 << 30) for g in vec.np_random]
    assert draws == [g.integers(1 << 30) for g in ref.np_random]


def test_list_of_seeds(make_envs, make_ref):
    fns = make_fns(SyntheticEnv, N, layout="tuple")
    vec, ref = make_envs(fns), make_ref(fns)
    seeds = [9, 2, 30, 2, 7, 11]
    obs, infos = vec.reset(seed=seeds)
    assert vec.get_attr("np_random_seed") == tuple(seeds)
    exp_obs, exp_infos = ref.reset(seed=seeds)
    assert_obs_equal(obs, exp_obs)
    assert_tree_equal(infos, exp_infos, "infos")


def test_seed_list_of_wrong_length_is_a_value_error(make_envs):
    vec = make_envs(make_fns(CountingEnv, N))
    with pytest.raises(ValueError):
        vec.reset(seed=[1, 2, 3])
    vec.reset(seed=[1, 2, 3, 4, 5, 6])
    assert vec.get_attr("np_random_seed") == (1, 2, 3, 4, 5, 6)


def test_reset_infos_are_batched(make_envs):
    vec = make_envs(make_fns(DictCountingEnv, N))
    _, infos = vec.reset(seed=0)
    assert_tree_equal(infos["env_id"], np.arange(N), 'infos["env_id"]')
    assert_tree_equal(infos["_env_id"], np.ones(N, dtype=bool), 'infos["_env_id"]')


def test_reset_options_reach_every_env(make_envs):
    vec = make_envs(make_fns(CountingEnv, N))
    vec.reset(seed=0, options={"level": 2})
    assert vec.get_attr("last_options") == ({"level": 2},) * N


@pytest.mark.parametrize(
    "mask",
    [[True, False, False, False, False, True], [False, False, False, False, True, False],
     [False, True, True, False, False, False]],
    ids=["first_and_last", "one_of_the_second_half", "two_of_the_first_half"],
)
def test_partial_reset_resets_only_the_masked_envs(mask, make_envs):
    mask = np.array(mask)
    vec = make_envs(make_fns(DictCountingEnv, N, episode_len=10), autoreset_mode="Disabled")
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
    "mask, error",
    [
        ([True, False, True, False, True, False], (TypeError, ValueError)),  # not an array
        (np.array([True, False]), ValueError),  # wrong length
        (np.array([1, 0, 1, 0, 1, 0]), (TypeError, ValueError)),  # not bool
        (np.zeros(N, dtype=bool), ValueError),  # nothing to reset
    ],
    ids=["list", "wrong_length", "int_dtype", "all_false"],
)
def test_bad_reset_mask_is_rejected_and_the_env_stays_usable(mask, error, make_envs):
    vec = make_envs(make_fns(CountingEnv, N), autoreset_mode=AutoresetMode.DISABLED)
    vec.reset(seed=0)
    with pytest.raises(error):
        vec.reset(options={"reset_mask": mask})
    assert vec.get_attr("reset_count") == (1,) * N
    obs, *_ = vec.step(zeros())
    assert_obs_equal(obs, np.ones(N, dtype=np.int64))


# ---------------------------------------------------------------------------
# step results


def test_step_result_types(make_envs):
    vec = make_envs(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    obs, rewards, terminations, truncations, infos = vec.step(np.array([1, 2, 3, 0, 1, 2]))
    assert_obs_equal(obs, np.ones(N, dtype=np.int64))
    assert_tree_equal(rewards, np.array([1.0, 2.0, 3.0, 0.0, 1.0, 2.0]), "rewards")
    assert_tree_equal(terminations, np.zeros(N, dtype=bool), "terminations")
    assert_tree_equal(truncations, np.zeros(N, dtype=bool), "truncations")
    assert infos == {}


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.int16])
def test_integer_actions_of_any_int_dtype(dtype, make_envs):
    vec = make_envs(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    _, rewards, *_ = vec.step(np.array([3, 0, 2, 1, 0, 3], dtype=dtype))
    assert_tree_equal(rewards, np.array([3.0, 0.0, 2.0, 1.0, 0.0, 3.0]), "rewards")


def test_actions_as_a_list(make_envs):
    vec = make_envs(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    _, rewards, *_ = vec.step([1, 0, 3, 2, 2, 1])
    assert_tree_equal(rewards, np.array([1.0, 0.0, 3.0, 2.0, 2.0, 1.0]), "rewards")


@pytest.mark.fastvec_only
def test_float64_actions_for_a_float32_box_are_converted(make_envs):
    space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
    vec = make_envs(make_fns(ActionEchoEnv, 4, action_space=space))
    vec.reset(seed=0)
    actions = np.array([[0.1, -0.2], [0.3, 0.7], [1 / 3, -1 / 7], [0.9, -0.5]],
                       dtype=np.float64)
    vec.step(actions)
    received = vec.get_attr("last_action")
    for i, action in enumerate(received):
        assert_tree_equal(np.asarray(action), actions[i].astype(np.float32), f"action of env {i}")


def test_box_actions_out_of_bounds_are_passed_through(make_envs):
    space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
    vec = make_envs(make_fns(ActionEchoEnv, 4, action_space=space))
    vec.reset(seed=0)
    actions = np.array([[5.0, -7.5], [1.5, 0.0], [-1.0, 2.0], [0.5, 0.5]], dtype=np.float32)
    obs, *_ = vec.step(actions)
    assert_tree_equal(obs, actions.astype(np.float64), "obs (the actions the envs got)")


def test_copy_true_returns_fresh_observations(make_envs):
    vec = make_envs(make_fns(DictCountingEnv, N, episode_len=10), copy=True)
    first, _ = vec.reset(seed=0)
    second, *_ = vec.step(zeros())
    third, *_ = vec.step(zeros())
    for key in first:
        assert not np.shares_memory(second[key], third[key]), f'obs["{key}"] shares memory'
    assert_tree_equal(first["count"], np.zeros(N, dtype=np.int64), 'reset obs["count"]')
    assert_tree_equal(second["count"], np.ones(N, dtype=np.int64), 'step 1 obs["count"]')


@pytest.mark.fastvec_only
def test_copy_false_returns_views_that_the_next_step_overwrites(backend, make_envs):
    skip_async(backend, "recv's views are checked in test_async.py")
    vec = make_envs(make_fns(DictCountingEnv, N, episode_len=10), copy=False)
    vec.reset(seed=0)
    obs, *_ = vec.step(zeros())
    assert_tree_equal(obs["count"], np.ones(N, dtype=np.int64), 'obs["count"]')
    vec.step(zeros())
    assert_tree_equal(obs["count"], np.full(N, 2, dtype=np.int64), 'the earlier obs["count"]')


def test_copied_observations_are_c_contiguous(make_envs):
    # 4 envs: async batches are two blocks of one env, neighbours (sliced) or not (gathered)
    vec = make_envs(make_fns(PaddedObsEnv, 4))
    obs, _ = vec.reset(seed=0)
    assert obs.flags.c_contiguous
    for t in range(1, 5):
        obs = vec.step(np.ones(4, np.int64))[0]
        assert obs.flags.c_contiguous and obs.tolist() == [[float(t)] * 3] * 4
        for batch_obs, *_ in getattr(vec, "batches", []):  # async: what recv returned
            assert batch_obs.flags.c_contiguous and batch_obs.shape == (2, 3)


# ---------------------------------------------------------------------------
# step_async / step_wait


@pytest.mark.parametrize("mode", MODES)
def test_step_async_then_step_wait_matches_gymnasium(mode, backend, impl, make_envs, make_ref):
    skip_without_step_async(backend, impl)
    fns = make_fns(SyntheticEnv, N, layout="dict")
    vec, ref = make_envs(fns, autoreset_mode=mode), make_ref(fns, autoreset_mode=mode)
    assert_tree_equal(vec.reset(seed=3), ref.reset(seed=3), "reset")
    rng = np.random.default_rng(0)
    for t in range(40):
        actions = rng.integers(0, 3, size=N)
        vec.step_async(actions)
        out = vec.step_wait()
        assert_tree_equal(out, ref.step(actions), f"step {t}")
        done = out[2] | out[3]
        if mode is AutoresetMode.DISABLED and done.any():
            assert_tree_equal(vec.reset(options={"reset_mask": done.copy()}),
                              ref.reset(options={"reset_mask": done.copy()}), f"reset {t}")


def test_step_wait_without_step_async(backend, impl, make_envs):
    skip_without_step_async(backend, impl)
    vec = make_envs(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    with pytest.raises(NoAsyncCallError):
        vec.step_wait()
    vec.step_async(np.ones(N, dtype=np.int64))
    vec.step_wait()
    with pytest.raises(NoAsyncCallError):
        vec.step_wait()


def test_second_step_async_is_refused_and_the_first_kept(backend, impl, make_envs):
    skip_without_step_async(backend, impl)
    vec = make_envs(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    vec.step_async(np.array([1, 2, 3, 0, 1, 2]))
    with pytest.raises(AlreadyPendingCallError):
        vec.step_async(np.array([3, 3, 3, 3, 3, 3]))
    obs, rewards, *_ = vec.step_wait()
    assert_tree_equal(rewards, np.array([1.0, 2.0, 3.0, 0.0, 1.0, 2.0]), "rewards of the first")
    assert_obs_equal(obs, np.ones(N, dtype=np.int64))


@pytest.mark.parametrize(
    "use",
    [lambda v: v.reset(seed=1), lambda v: v.call("label"), lambda v: v.get_attr("t"),
     lambda v: v.set_attr("label", "x"), lambda v: v.render()],
    ids=["reset", "call", "get_attr", "set_attr", "render"],
)
def test_other_calls_while_a_step_is_pending_are_refused(use, backend, impl, make_envs):
    skip_without_step_async(backend, impl)  # async: test_async.py, envs in flight
    vec = make_envs(make_fns(RenderEnv, N))
    vec.reset(seed=0)
    vec.step_async(np.full(N, 2))
    with pytest.raises(Exception) as info:  # Gymnasium: AlreadyPendingCallError
        use(vec)
    assert "pending" in str(info.value).lower() or isinstance(
        info.value, AlreadyPendingCallError), repr(info.value)
    obs, rewards, *_ = vec.step_wait()
    assert_tree_equal(rewards, np.full(N, 2.0), "rewards of the pending step")
    assert vec.get_attr("label") == labels()
    assert vec.get_attr("t") == (1,) * N


# ---------------------------------------------------------------------------
# close


def closed_envs(log) -> list[int]:
    return sorted(int(x) for x in log.read_text().split())


def test_close_is_idempotent_and_closes_each_env_once(backend, impl, make_envs, tmp_path):
    if is_gymnasium(impl) and backend != SYNC:
        pytest.skip("Gymnasium's AsyncVectorEnv closes each env twice; --impl gymnasium")
    log = tmp_path / "closed"
    vec = make_envs(make_fns(ProbeEnv, N, close_log=str(log)))
    vec.reset(seed=0)
    vec.close()
    vec.close()
    assert vec.closed
    assert closed_envs(log) == list(range(N))


@pytest.mark.fastvec_only  # Gymnasium's vector envs are not context managers
def test_context_manager_closes(make_envs, tmp_path):
    log = tmp_path / "closed"
    with make_envs(make_fns(ProbeEnv, N, close_log=str(log))) as vec:
        vec.reset(seed=0)
        vec.step(zeros())
    assert vec.closed
    assert closed_envs(log) == list(range(N))


@pytest.mark.fastvec_only
def test_context_manager_closes_when_the_body_raises(make_envs, tmp_path):
    log = tmp_path / "closed"
    with pytest.raises(KeyError):
        with make_envs(make_fns(ProbeEnv, N, close_log=str(log))) as vec:
            vec.reset(seed=0)
            raise KeyError("in the body")
    assert vec.closed
    assert closed_envs(log) == list(range(N))


USES = {
    "reset": lambda v: v.reset(seed=0),
    "step": lambda v: v.step(zeros(2)),
    "step_async": lambda v: v.step_async(zeros(2)),
    "step_wait": lambda v: v.step_wait(),
    "call": lambda v: v.call("scaled_count", 1),
    "get_attr": lambda v: v.get_attr("label"),
    "set_attr": lambda v: v.set_attr("label", "x"),
    "render": lambda v: v.render(),
    "call_each": lambda v: v.call_each(len),
    "async_reset": lambda v: v.async_reset(seed=0),
    "recv": lambda v: v.recv(),
    "send": lambda v: v.send(zeros(1), np.array([0])),
}
ASYNC_USES = ("async_reset", "recv", "send")


@pytest.mark.fastvec_only
@pytest.mark.parametrize("use", list(USES))
def test_use_after_close_raises_closed_env_error(use, backend, impl, make_envs):
    if use in ASYNC_USES and backend != ASYNC:
        pytest.skip(f"{use}: the async-batch API")
    vec = make_envs(make_fns(RenderEnv, 2))
    vec.reset(seed=0)
    vec.close()
    with pytest.raises(impl.errors.ClosedEnvError) as info:
        USES[use](vec)
    assert isinstance(info.value, ClosedEnvironmentError)


@pytest.mark.fastvec_only
def test_close_with_a_step_in_flight(backend, impl, make_envs):
    vec = make_envs(make_fns(CountingEnv, N))
    vec.reset(seed=0)
    if backend == ASYNC:  # one batch sent, the other held
        ids = vec.batches[0][-1]
        vec.send(zeros(len(ids)), ids)
    else:
        vec.step_async(zeros())
    start = time.monotonic()
    vec.close()
    assert time.monotonic() - start < 3.0
    assert vec.closed
    with pytest.raises(impl.errors.ClosedEnvError):
        vec.recv() if backend == ASYNC else vec.step_wait()
