"""SyncVecEnv gives bit-identical results to Gymnasium's SyncVectorEnv.

Every test runs the same env factories, seeds and actions through the vector env
under test and through ``gymnasium.vector.SyncVectorEnv`` and compares everything
each step: observations (every leaf, dtype too), rewards, terminations,
truncations and infos.  A few tests check autoreset against hand-computed
counting-env trajectories instead, so that a shared mistake cannot hide.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as vw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.compare import assert_obs_equal, assert_tree_equal, check_attributes, run_parity
from tests.envs import (
    CountingEnv,
    DictCountingEnv,
    ObjectSpaceEnv,
    SyntheticEnv,
    gym_fns,
    make_fns,
)

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]

# name -> (factories builder, steps)
ENV_CASES: dict[str, tuple[Callable[[], list], int]] = {
    "cartpole": (lambda: gym_fns("CartPole-v1", 4), 300),
    "pendulum": (lambda: gym_fns("Pendulum-v1", 3), 420),
    "frozenlake": (lambda: gym_fns("FrozenLake-v1", 4), 300),
    "blackjack": (lambda: gym_fns("Blackjack-v1", 4), 300),
    "counting": (
        lambda: make_fns(
            CountingEnv, 5,
            per_env={"episode_len": [1, 2, 3, 5, 7], "truncate": [False, True, False, True, False]},
        ),
        200,
    ),
    "counting_single": (lambda: make_fns(CountingEnv, 1, episode_len=3), 50),
    "dict_counting": (
        lambda: make_fns(DictCountingEnv, 3, per_env={"episode_len": [2, 3, 4]}), 100
    ),
    "synthetic_dict": (
        lambda: make_fns(SyntheticEnv, 4, layout="dict", action_kind="box"), 150
    ),
    "synthetic_dict_reversed_keys": (
        lambda: make_fns(
            SyntheticEnv, 3, layout="dict", action_kind="multidiscrete", reverse_keys=True
        ),
        100,
    ),
    "synthetic_tuple": (
        lambda: make_fns(SyntheticEnv, 5, layout="tuple", action_kind="multibinary"), 150
    ),
    "synthetic_odd_leaves": (
        lambda: make_fns(SyntheticEnv, 3, layout="odd", action_kind="box"), 100
    ),
    "synthetic_image_no_infos": (
        lambda: make_fns(SyntheticEnv, 3, layout="image", info_kind="none"), 100
    ),
    "synthetic_mixed_info_types": (
        lambda: make_fns(SyntheticEnv, 4, layout="tuple", info_kind="mixed"), 100
    ),
    "object_text": (lambda: make_fns(ObjectSpaceEnv, 3, kind="text", info_kind="rich"), 100),
    "object_sequence": (lambda: make_fns(ObjectSpaceEnv, 3, kind="sequence"), 100),
    "object_graph": (lambda: make_fns(ObjectSpaceEnv, 3, kind="graph"), 100),
    "object_dict_text": (lambda: make_fns(ObjectSpaceEnv, 3, kind="dict_text"), 100),
}


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "nocopy"])
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
@pytest.mark.parametrize("case", list(ENV_CASES))
def test_parity_with_gymnasium(case, mode, copy, make_vec, make_ref):
    fns, steps = ENV_CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the object-path warning has its own test
        vec = make_vec(fns(), copy=copy, autoreset_mode=mode)
    ref = make_ref(fns(), copy=copy, autoreset_mode=mode)
    check_attributes(vec, ref, mode)
    episode_ends = run_parity(vec, ref, mode=mode, copy=copy, steps=steps)
    assert episode_ends > 0, "the run never reached an episode end: it tests too little"


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_string_autoreset_mode_gives_the_same_results(mode, make_vec, make_ref):
    fns = make_fns(DictCountingEnv, 3, per_env={"episode_len": [1, 2, 4]})
    vec = make_vec(fns, autoreset_mode=mode)
    ref = make_ref(fns, autoreset_mode=mode)
    check_attributes(vec, ref, AutoresetMode(mode))
    run_parity(vec, ref, mode=AutoresetMode(mode), copy=True, steps=30)


# ---------------------------------------------------------------------------
# autoreset arithmetic with counting envs, against a hand-written model


def counting_model(lens, truncate, actions, mode):
    """What counting envs (observation: steps since reset; reward: the action) give
    each step: a dict of obs, rewards, terminations, truncations, final_obs (env
    index -> value) and the episode statistics r and l (0 where no episode ended).
    In DISABLED mode the caller resets done envs right after the step."""
    n = len(lens)
    t = np.zeros(n, dtype=np.int64)
    ret, length = np.zeros(n), np.zeros(n, dtype=np.int64)
    pending = np.zeros(n, dtype=bool)
    for step_actions in actions:
        out = {
            "rewards": np.zeros(n),
            "terminations": np.zeros(n, dtype=bool),
            "truncations": np.zeros(n, dtype=bool),
            "final_obs": {},
            "r": np.zeros(n),
            "l": np.zeros(n, dtype=np.int64),
        }
        for i in range(n):
            if mode is AutoresetMode.NEXT_STEP and pending[i]:
                t[i], pending[i] = 0, False
                continue
            t[i] += 1
            out["rewards"][i] = float(step_actions[i])
            ret[i] += float(step_actions[i])
            length[i] += 1
            done = t[i] >= lens[i]
            out["terminations"][i] = done and not truncate[i]
            out["truncations"][i] = done and truncate[i]
            if not done:
                continue
            out["r"][i], out["l"][i], ret[i], length[i] = ret[i], length[i], 0.0, 0
            if mode is AutoresetMode.NEXT_STEP:
                pending[i] = True
            else:  # SAME_STEP resets now; in DISABLED mode the caller does
                out["final_obs"][i], t[i] = t[i], 0
        out["obs"] = t.copy()
        yield out


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "nocopy"])
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_counting_envs_follow_autoreset_arithmetic(mode, copy, make_vec):
    lens, truncate = [1, 2, 3, 5], [False, True, False, True]
    vec = make_vec(
        make_fns(CountingEnv, 4, per_env={"episode_len": lens, "truncate": truncate}),
        copy=copy, autoreset_mode=mode,
    )
    actions = np.random.default_rng(5).integers(0, 4, size=(40, 4))
    obs, _ = vec.reset(seed=0)
    assert_obs_equal(obs, np.zeros(4, dtype=np.int64))
    model = counting_model(lens, truncate, actions, mode)
    for step, (step_actions, exp) in enumerate(zip(actions, model, strict=True)):
        obs, rewards, term, trunc, infos = vec.step(step_actions)
        done = term | trunc
        if mode is AutoresetMode.DISABLED and done.any():
            obs, _ = vec.reset(options={"reset_mask": done})
        where = f"step {step}"
        assert_obs_equal(obs, exp["obs"], f"{where}: obs")
        assert_tree_equal(rewards, exp["rewards"], f"{where}: rewards")
        assert_tree_equal(term, exp["terminations"], f"{where}: terminations")
        assert_tree_equal(trunc, exp["truncations"], f"{where}: truncations")
        if mode is AutoresetMode.SAME_STEP and exp["final_obs"]:
            mask = np.isin(np.arange(4), list(exp["final_obs"]))
            assert_tree_equal(infos["_final_obs"], mask, f"{where}: infos['_final_obs']")
            for i, final_obs in exp["final_obs"].items():
                assert_tree_equal(
                    infos["final_obs"][i], np.int64(final_obs), f"{where}: final_obs[{i}]"
                )
        else:
            assert "final_obs" not in infos, f"{where}: unexpected final_obs"


@pytest.mark.parametrize(
    "mode", [AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED], ids=["NextStep", "Disabled"]
)
def test_full_reset_cancels_a_pending_autoreset(mode, make_vec):
    vec = make_vec(make_fns(CountingEnv, 2, episode_len=2), autoreset_mode=mode)
    vec.reset(seed=0)
    vec.step(np.array([1, 1]))
    _, _, term, _, _ = vec.step(np.array([1, 1]))
    assert term.all()
    vec.reset(seed=1)
    obs, rewards, term, trunc, _ = vec.step(np.array([2, 3]))
    assert_obs_equal(obs, np.array([1, 1], dtype=np.int64), "obs after reset and one step")
    assert_tree_equal(rewards, np.array([2.0, 3.0]), "rewards")


def test_partial_reset_leaves_other_envs_alone(make_vec):
    vec = make_vec(make_fns(DictCountingEnv, 3, episode_len=10), autoreset_mode="Disabled")
    vec.reset(seed=0)
    for _ in range(3):
        vec.step(np.array([1, 1, 1]))
    mask = np.array([False, True, False])
    obs, infos = vec.reset(options={"reset_mask": mask})
    assert_tree_equal(obs["count"], np.array([3, 0, 3], dtype=np.int64), 'obs["count"]')
    assert_tree_equal(obs["env_id"], np.array([0, 1, 2], dtype=np.int64), 'obs["env_id"]')
    assert_tree_equal(infos["_env_id"], mask, 'infos["_env_id"]')
    obs, *_ = vec.step(np.array([1, 1, 1]))
    expected = np.array([4, 1, 4], dtype=np.int64)
    assert_tree_equal(obs["count"], expected, 'obs["count"] after a step')


# ---------------------------------------------------------------------------
# Gymnasium's vector wrappers on top


def drop_episode_time(infos: dict, where: str) -> dict:
    """``infos`` without ``episode["t"]`` (wall-clock time), after checking it."""
    if not isinstance(infos, dict) or "episode" not in infos:
        return infos
    episode = dict(infos["episode"])
    assert "t" in episode, f"{where}: infos['episode'] has no 't'"
    t = episode.pop("t")
    assert isinstance(t, np.ndarray) and t.dtype == np.float64, (
        f"{where}: infos['episode']['t'] should be a float64 array, got {t!r}"
    )
    assert t.shape == infos["_episode"].shape, f"{where}: episode t shape {t.shape}"
    assert np.all(t >= 0) and np.all(np.isfinite(t)), f"{where}: episode t {t}"
    return {**infos, "episode": episode}


WRAPPER_CASES: dict[str, tuple[Callable[[], list], Callable[[Any], Any], int]] = {
    "RecordEpisodeStatistics-counting": (
        ENV_CASES["counting"][0], vw.RecordEpisodeStatistics, 120
    ),
    "RecordEpisodeStatistics-synthetic": (
        ENV_CASES["synthetic_dict"][0], vw.RecordEpisodeStatistics, 100
    ),
    "RecordEpisodeStatistics-cartpole": (
        ENV_CASES["cartpole"][0], vw.RecordEpisodeStatistics, 200
    ),
    "NormalizeObservation-cartpole": (ENV_CASES["cartpole"][0], vw.NormalizeObservation, 200),
    "NormalizeObservation-pendulum": (ENV_CASES["pendulum"][0], vw.NormalizeObservation, 220),
    "NormalizeReward-pendulum": (ENV_CASES["pendulum"][0], vw.NormalizeReward, 220),
    "NormalizeReward-synthetic": (ENV_CASES["synthetic_tuple"][0], vw.NormalizeReward, 100),
    "DictInfoToList-synthetic": (ENV_CASES["synthetic_dict"][0], vw.DictInfoToList, 100),
    "FlattenObservation-synthetic_dict": (
        ENV_CASES["synthetic_dict"][0], vw.FlattenObservation, 100
    ),
    "FlattenObservation-synthetic_tuple": (
        ENV_CASES["synthetic_tuple"][0], vw.FlattenObservation, 100
    ),
    "RescaleAction-pendulum": (
        ENV_CASES["pendulum"][0],
        lambda env: vw.RescaleAction(env, np.float32(-1.0), np.float32(1.0)),
        220,
    ),
    "RecordEpisodeStatistics+NormalizeObservation-cartpole": (
        ENV_CASES["cartpole"][0],
        lambda env: vw.NormalizeObservation(vw.RecordEpisodeStatistics(env)),
        200,
    ),
}




def wrapper_modes(case: str) -> list[AutoresetMode]:
    """The autoreset modes Gymnasium's wrappers in ``case`` accept."""
    if "NormalizeObservation" in case:
        return [AutoresetMode.NEXT_STEP]
    if "FlattenObservation" in case:  # observation wrappers refuse SAME_STEP
        return [AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED]
    return MODES


WRAPPER_PARAMS = [
    pytest.param(case, mode, id=f"{case}-{mode.value}")
    for case in WRAPPER_CASES
    for mode in wrapper_modes(case)
]


@pytest.mark.parametrize("case, mode", WRAPPER_PARAMS)
def test_gymnasium_wrappers_give_the_same_results(case, mode, make_vec, make_ref, vec_envs):
    # DISABLED: all envs are reset together when one is done, as Gymnasium's
    # wrappers do not all handle partial resets (see the episode statistics tests).
    fns, wrap, steps = WRAPPER_CASES[case]
    vec = vec_envs.track(wrap(make_vec(fns(), autoreset_mode=mode)))
    ref = vec_envs.track(wrap(make_ref(fns(), autoreset_mode=mode)))
    run_parity(
        vec, ref, mode=mode, copy=True, steps=steps, infos_filter=drop_episode_time,
        partial_resets=False,
    )
    if "RecordEpisodeStatistics" in case:
        stats, ref_stats = vec, ref
        while not isinstance(stats, vw.RecordEpisodeStatistics):
            stats, ref_stats = stats.env, ref_stats.env
        assert ref_stats.episode_count > 0
        assert stats.episode_count == ref_stats.episode_count
        assert list(stats.return_queue) == list(ref_stats.return_queue)
        assert list(stats.length_queue) == list(ref_stats.length_queue)


# ---------------------------------------------------------------------------
# episode_statistics=True


EPISODE_STAT_CASES = ["counting", "synthetic_dict", "synthetic_tuple", "cartpole", "pendulum"]


@pytest.mark.fastvec_only
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
@pytest.mark.parametrize("case", EPISODE_STAT_CASES)
def test_episode_statistics_match_record_episode_statistics(
    case, mode, make_vec, make_ref, vec_envs
):
    # Gymnasium's wrapper zeroes every env's statistics on a partial reset (the
    # vector env pops "reset_mask" from the options before the wrapper looks),
    # so in DISABLED mode all envs are reset together here; partial resets are
    # checked against hand-computed statistics below.
    fns, steps = ENV_CASES[case]
    vec = make_vec(fns(), autoreset_mode=mode, episode_statistics=True)
    ref = vec_envs.track(vw.RecordEpisodeStatistics(make_ref(fns(), autoreset_mode=mode)))
    ends = run_parity(
        vec, ref, mode=mode, copy=True, steps=steps, infos_filter=drop_episode_time,
        partial_resets=False,
    )
    assert ends > 0


@pytest.mark.fastvec_only
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_episode_statistics_by_hand(mode, make_vec):
    # DISABLED with partial resets: each env's statistics run on by themselves.
    lens, truncate = [2, 5, 3], [False, True, False]
    vec = make_vec(
        make_fns(CountingEnv, 3, per_env={"episode_len": lens, "truncate": truncate}),
        autoreset_mode=mode, episode_statistics=True,
    )
    vec.reset(seed=0)
    actions = np.random.default_rng(1).integers(0, 4, size=(30, 3))
    ends = 0
    for step, (step_actions, exp) in enumerate(
        zip(actions, counting_model(lens, truncate, actions, mode), strict=True)
    ):
        _, _, term, trunc, infos = vec.step(step_actions)
        done = term | trunc
        where = f"step {step}"
        assert_tree_equal(done, exp["terminations"] | exp["truncations"], f"{where}: dones")
        if mode is AutoresetMode.DISABLED and done.any():
            vec.reset(options={"reset_mask": done})
        if not done.any():
            assert "episode" not in infos, f"{where}: episode statistics without an episode end"
            continue
        ends += int(done.sum())
        assert_tree_equal(infos["_episode"], done, f"{where}: infos['_episode']")
        episode = infos["episode"]
        assert set(episode) == {"r", "l", "t"}, f"{where}: episode keys {sorted(episode)}"
        assert episode["r"].dtype == np.float64, f"{where}: episode r dtype {episode['r'].dtype}"
        assert episode["l"].dtype == np.int64, f"{where}: episode l dtype {episode['l'].dtype}"
        assert_tree_equal(episode["r"][done], exp["r"][done], f"{where}: episode r")
        assert_tree_equal(episode["l"][done], exp["l"][done], f"{where}: episode l")
        t = episode["t"]
        assert t.dtype == np.float64 and np.all(t >= 0), f"{where}: episode t {t!r}"
    assert ends >= 8


# ---------------------------------------------------------------------------
# random nested spaces

LEAF_DTYPES = [
    np.bool_, np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32, np.int64,
    np.float16, np.float32, np.float64,
]


@st.composite
def box_spaces(draw):
    shape = tuple(draw(st.lists(st.sampled_from([1, 1, 2, 3, 5, 0]), max_size=3)))
    dtype = draw(st.sampled_from(LEAF_DTYPES))
    if dtype is np.bool_:
        return spaces.Box(0, 1, shape=shape, dtype=dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return spaces.Box(max(info.min, -1000), min(info.max, 1000), shape=shape, dtype=dtype)
    return spaces.Box(-2.0, 2.0, shape=shape, dtype=dtype)


leaf_spaces = st.one_of(
    box_spaces(),
    st.builds(spaces.Discrete, st.integers(1, 300), start=st.integers(-5, 5)),
    st.builds(
        lambda nvec: spaces.MultiDiscrete(np.array(nvec)),
        st.lists(st.integers(1, 9), min_size=1, max_size=4),
    ),
    st.builds(spaces.MultiBinary, st.one_of(st.integers(1, 9), st.just([2, 3]))),
)
nested_spaces = st.recursive(
    leaf_spaces,
    lambda children: st.one_of(
        st.builds(spaces.Tuple, st.lists(children, min_size=1, max_size=4).map(tuple)),
        st.builds(
            spaces.Dict,
            st.dictionaries(st.text("abcxyz_", min_size=1, max_size=4), children, min_size=1,
                            max_size=4),
        ),
    ),
    max_leaves=8,
)


# vec_envs is function-scoped; each example closes what it made.
@settings(
    max_examples=40, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(space=nested_spaces, mode=st.sampled_from(MODES), copy=st.booleans())
def test_parity_over_random_nested_spaces(space, mode, copy, vec_envs):
    fns = make_fns(SyntheticEnv, 3, space=space, info_kind="none", max_len=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vec = vec_envs.make(fns, copy=copy, autoreset_mode=mode)
    ref = vec_envs.make_ref(fns, copy=copy, autoreset_mode=mode)
    try:
        check_attributes(vec, ref, mode)
        run_parity(vec, ref, mode=mode, copy=copy, steps=16)
    finally:
        vec_envs.close_all()
