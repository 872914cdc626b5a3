"""Every backend gives bit-identical results to Gymnasium's ``SyncVectorEnv``.

The same env factories, seeds and actions go through the vector env under test
and through ``gymnasium.vector.SyncVectorEnv``; every step's observations (every
leaf, dtype too), rewards, terminations, truncations and infos are compared (see
``tests/support/compare.py``).  A few tests check autoreset and episode statistics
against hand-computed counting-env trajectories instead, so that a mistake
shared with Gymnasium cannot hide.

The in-process backend runs every combination of env case, autoreset mode and
``copy``.  Worker processes take longer to start, so the subprocess backends
share the combinations out: ``SubprocVecEnv`` runs every case in every mode
(``copy`` alternating), async batches each case once, modes in turn (with
the other ``copy``).  Start methods and worker counts are ``test_subproc_parity.py``'s.
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

from tests.support import backends
from tests.support.backends import ASYNC, LOCAL, RAY, SUBPROC, SYNC
from tests.support.cases import ENV_CASES, MODES
from tests.support.compare import (
    assert_obs_equal,
    assert_tree_equal,
    check_attributes,
    drop_episode_time,
    run_parity,
)
from tests.support.envs import CountingEnv, DictCountingEnv, SyntheticEnv, counting_model, make_fns

MODE_IDS = [m.value for m in MODES]


def shared_out(cases: list[str], modes: list[AutoresetMode], copies=(True, False)) -> list:
    """``backends.param(backend, case, mode, copy)`` for each combination: all of them
    in process; each case in each mode once for SubprocVecEnv (copy alternating);
    every third of those for async batches (each case once, where they apply)."""
    params = []
    for c, case in enumerate(cases):
        for m, mode in enumerate(modes):
            for copy in copies:
                params.append(backends.param(SYNC, case, mode, copy, id=pid(case, mode, copy)))
            copy = copies[(c + m) % len(copies)]
            params.append(backends.param(SUBPROC, case, mode, copy, id=pid(case, mode, copy)))
            copy = copies[(c + m + 1) % len(copies)]
            if (c + m) % 3 == 0 and ENV_CASES[case].async_batches:
                params.append(backends.param(ASYNC, case, mode, copy, id=pid(case, mode, copy)))
            if (c + m) % 3 == 1:
                params.append(backends.param(LOCAL, case, mode, copy, id=pid(case, mode, copy)))
    return params


def pid(case: str, mode: AutoresetMode, copy: bool) -> str:
    return f"{case}-{mode.value}-{'copy' if copy else 'nocopy'}"


PARITY_PARAMS = shared_out(list(ENV_CASES), MODES)


@pytest.mark.parametrize("backend, case, mode, copy", PARITY_PARAMS)
def test_parity_with_gymnasium(backend, case, mode, copy, make_envs, make_ref):
    env_case = ENV_CASES[case]
    fns = env_case.fns(env_case.num_envs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the object-path warning has its own test
        vec = make_envs(fns, copy=copy, autoreset_mode=mode)
    ref = make_ref(fns, copy=copy, autoreset_mode=mode)
    check_attributes(vec, ref, mode)
    episode_ends = run_parity(vec, ref, mode=mode, copy=copy, steps=env_case.steps_for(backend))
    assert episode_ends > 0, "the run never reached an episode end: it tests too little"


def test_the_subprocess_backends_share_out_every_combination():
    runs = [p.values for p in PARITY_PARAMS]
    subproc = {(case, mode): copy for backend, case, mode, copy in runs if backend == SUBPROC}
    assert set(subproc) == {(case, mode) for case in ENV_CASES for mode in MODES}
    for case in ENV_CASES:
        assert {subproc[case, mode] for mode in MODES} == {True, False}, case
    in_async = [(case, mode, copy) for backend, case, mode, copy in runs if backend == ASYNC]
    assert {r[0] for r in in_async} == {c for c, case in ENV_CASES.items() if case.async_batches}
    assert {r[1] for r in in_async} == set(MODES)
    assert {r[2] for r in in_async} == {True, False}


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_string_autoreset_mode_gives_the_same_results(mode, make_envs, make_ref):
    fns = make_fns(DictCountingEnv, 4, per_env={"episode_len": [1, 2, 4, 3]})
    vec = make_envs(fns, autoreset_mode=mode)
    ref = make_ref(fns, autoreset_mode=mode)
    check_attributes(vec, ref, AutoresetMode(mode))
    run_parity(vec, ref, mode=AutoresetMode(mode), copy=True, steps=30)


# ---------------------------------------------------------------------------
# autoreset arithmetic with counting envs, against a hand-written model


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "nocopy"])
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_counting_envs_follow_autoreset_arithmetic(mode, copy, make_envs):
    lens, truncate = [1, 2, 3, 5], [False, True, False, True]
    vec = make_envs(
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
def test_full_reset_cancels_a_pending_autoreset(mode, make_envs):
    vec = make_envs(make_fns(CountingEnv, 2, episode_len=2), autoreset_mode=mode)
    vec.reset(seed=0)
    vec.step(np.array([1, 1]))
    _, _, term, _, _ = vec.step(np.array([1, 1]))
    assert term.all()
    vec.reset(seed=1)
    obs, rewards, term, trunc, _ = vec.step(np.array([2, 3]))
    assert_obs_equal(obs, np.array([1, 1], dtype=np.int64), "obs after reset and one step")
    assert_tree_equal(rewards, np.array([2.0, 3.0]), "rewards")


# ---------------------------------------------------------------------------
# Gymnasium's vector wrappers on top

WRAPPERS: dict[str, tuple[str, Callable[[Any], Any], int]] = {
    # name -> (env case, wrapper, in-process steps: Pendulum's episodes end at 200,
    # after the full reset halfway)
    "RecordEpisodeStatistics-counting": ("counting", vw.RecordEpisodeStatistics, 120),
    "RecordEpisodeStatistics-synthetic": ("synthetic_dict", vw.RecordEpisodeStatistics, 100),
    "RecordEpisodeStatistics-cartpole": ("cartpole", vw.RecordEpisodeStatistics, 200),
    "NormalizeObservation-cartpole": ("cartpole", vw.NormalizeObservation, 200),
    "NormalizeObservation-pendulum": ("pendulum", vw.NormalizeObservation, 420),
    "NormalizeReward-pendulum": ("pendulum", vw.NormalizeReward, 420),
    "NormalizeReward-synthetic": ("synthetic_tuple", vw.NormalizeReward, 100),
    "DictInfoToList-synthetic": ("synthetic_dict", vw.DictInfoToList, 100),
    "FlattenObservation-synthetic_dict": ("synthetic_dict", vw.FlattenObservation, 100),
    "FlattenObservation-synthetic_tuple": ("synthetic_tuple", vw.FlattenObservation, 100),
    "RescaleAction-pendulum": (
        "pendulum", lambda env: vw.RescaleAction(env, np.float32(-1.0), np.float32(1.0)), 420),
    "RecordEpisodeStatistics+NormalizeObservation-cartpole": (
        "cartpole", lambda env: vw.NormalizeObservation(vw.RecordEpisodeStatistics(env)), 200),
}


def wrapper_modes(name: str) -> list[AutoresetMode]:
    """The autoreset modes Gymnasium's wrappers in ``name`` accept."""
    if "NormalizeObservation" in name:
        return [AutoresetMode.NEXT_STEP]
    if "FlattenObservation" in name:  # observation wrappers refuse SAME_STEP
        return [AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED]
    return MODES


WRAPPER_PARAMS = [
    backends.param(backend, name, mode, id=f"{name}-{mode.value}")
    for k, (name, mode) in enumerate((n, m) for n in WRAPPERS for m in wrapper_modes(n))
    for backend in (SYNC, (SUBPROC, ASYNC, LOCAL)[k % 3])  # the subprocess backends take turns
]


@pytest.mark.parametrize("backend, name, mode", WRAPPER_PARAMS)
def test_gymnasium_wrappers_give_the_same_results(backend, name, mode, make_envs, make_ref,
                                                  vec_envs):
    # DISABLED: all envs are reset together when one is done, as Gymnasium's
    # wrappers do not all handle partial resets (see the episode statistics tests).
    case, wrap, steps = WRAPPERS[name]
    env_case = ENV_CASES[case]
    fns = env_case.fns(env_case.num_envs)
    if backend != SYNC:
        steps = min(steps, env_case.steps_subprocess)
    vec = vec_envs.track(wrap(make_envs(fns, autoreset_mode=mode)))
    ref = vec_envs.track(wrap(make_ref(fns, autoreset_mode=mode)))
    ends = run_parity(vec, ref, mode=mode, copy=True, steps=steps,
                      infos_filter=drop_episode_time, partial_resets=False)
    assert ends > 0
    if "RecordEpisodeStatistics" in name:
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
EPISODE_STAT_PARAMS = [
    backends.param(backend, case, mode, id=f"{case}-{mode.value}")
    for c, case in enumerate(EPISODE_STAT_CASES)
    for m, mode in enumerate(MODES)
    for backend in (SYNC, SUBPROC, ASYNC, LOCAL)
    if (backend != ASYNC or (c + m) % 3 == 0) and (backend != LOCAL or (c + m) % 3 == 1)
]


@pytest.mark.fastvec_only
@pytest.mark.parametrize("backend, case, mode", EPISODE_STAT_PARAMS)
def test_episode_statistics_match_record_episode_statistics(backend, case, mode, make_envs,
                                                            make_ref, vec_envs):
    # Gymnasium's wrapper zeroes every env's statistics on a partial reset (the
    # vector env pops "reset_mask" from the options before the wrapper looks),
    # so in DISABLED mode all envs are reset together here; partial resets are
    # checked against hand-computed statistics below.
    env_case = ENV_CASES[case]
    fns = env_case.fns(env_case.num_envs)
    vec = make_envs(fns, autoreset_mode=mode, episode_statistics=True)
    ref = vec_envs.track(vw.RecordEpisodeStatistics(make_ref(fns, autoreset_mode=mode)))
    ends = run_parity(vec, ref, mode=mode, copy=True, steps=env_case.steps_for(backend),
                      infos_filter=drop_episode_time, partial_resets=False)
    assert ends > 0


@pytest.mark.fastvec_only
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_episode_statistics_by_hand(mode, make_envs):
    # DISABLED with partial resets: each env's statistics run on by themselves.
    lens, truncate = [2, 5, 3, 1, 4, 2], [False, True, False, True, False, False]
    vec = make_envs(
        make_fns(CountingEnv, 6, per_env={"episode_len": lens, "truncate": truncate}),
        autoreset_mode=mode, episode_statistics=True,
    )
    vec.reset(seed=0)
    actions = np.random.default_rng(1).integers(0, 4, size=(30, 6))
    ends = 0
    for step, (step_actions, exp) in enumerate(
        zip(actions, counting_model(lens, truncate, actions, mode), strict=True)
    ):
        _, _, term, trunc, infos = vec.step(step_actions)
        done = term | trunc
        where = f"step {step}"
        assert_tree_equal(done, exp["terminations"] | exp["truncations"], f"{where}: dones")
        if mode is AutoresetMode.DISABLED and done.any():
            vec.reset(options={"reset_mask": done.copy()})
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
    assert ends >= 20


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
EXAMPLES = {SYNC: 40, SUBPROC: 12, ASYNC: 12, LOCAL: 12, RAY: 4}  # workers/actors start for each


def test_parity_over_random_nested_spaces(backend, vec_envs):
    # vec_envs is function-scoped; each example closes what it made.
    @settings(max_examples=EXAMPLES[backend], deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(space=nested_spaces, mode=st.sampled_from(MODES), copy=st.booleans())
    def check(space, mode, copy):
        fns = make_fns(SyntheticEnv, 4, space=space, info_kind="none", max_len=6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            vec = vec_envs.make_backend(backend, fns, copy=copy, autoreset_mode=mode)
        ref = vec_envs.make_ref(fns, copy=copy, autoreset_mode=mode)
        try:
            check_attributes(vec, ref, mode)
            run_parity(vec, ref, mode=mode, copy=copy, steps=16)
        finally:
            vec_envs.close_all()

    check()
