"""SubprocVecEnv gives bit-identical results to Gymnasium's SyncVectorEnv.

Same env factories, seeds and actions through a ``SubprocVecEnv`` and through
``gymnasium.vector.SyncVectorEnv``; every step's observations, rewards, flags
and infos are compared (see ``tests/compare.py``).

Starting workers costs up to a second (spawn, forkserver), so the axes are
paired rather than crossed:

- every env case x every autoreset mode, with the default context (forkserver)
  and 2 workers; ``copy`` alternates so that each case and each mode sees both;
- every (context, num_workers) pair, each with two env cases, modes and copy
  values taken in rotation (``ROTATION``, whose coverage has its own test);
- uneven worker blocks, a single env, episode statistics and Gymnasium's
  wrappers on top, each with a few such pairings.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as vw

from tests.compare import assert_tree_equal, check_attributes, run_parity
from tests.envs import (
    CountingEnv,
    DictCountingEnv,
    ObjectSpaceEnv,
    SyntheticEnv,
    gym_fns,
    make_fns,
)
from tests.test_sync_parity import counting_model, drop_episode_time

pytestmark = pytest.mark.subprocess

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
CONTEXTS = ["fork", "spawn", "forkserver"]
WORKER_COUNTS = [1, 2, 3]
NUM_ENVS = 6
PAIRS = list(itertools.product(CONTEXTS, WORKER_COUNTS))  # every (context, num_workers)

EPISODE_LENS = [1, 2, 3, 5, 7, 4, 6, 2]  # enough for 7 envs, from either end
TRUNCATE = [False, True, False, True, False, True, False]


def counting(n: int) -> list:
    return make_fns(CountingEnv, n, per_env={"episode_len": EPISODE_LENS[:n],
                                             "truncate": TRUNCATE[:n]})


# name -> (factories for n envs, steps).  Steps are enough for episodes to end
# before the full reset halfway (Pendulum truncates at 200).
ENV_CASES: dict[str, tuple[Callable[[int], list], int]] = {
    "cartpole": (lambda n: gym_fns("CartPole-v1", n), 160),
    "pendulum": (lambda n: gym_fns("Pendulum-v1", n), 410),
    "frozenlake": (lambda n: gym_fns("FrozenLake-v1", n), 120),
    "blackjack": (lambda n: gym_fns("Blackjack-v1", n), 80),
    "counting": (counting, 60),
    "dict_counting": (
        lambda n: make_fns(DictCountingEnv, n, per_env={"episode_len": EPISODE_LENS[1:n + 1]}),
        50,
    ),
    "synthetic_dict": (lambda n: make_fns(SyntheticEnv, n, layout="dict", action_kind="box"), 60),
    "synthetic_dict_reversed_keys": (
        lambda n: make_fns(SyntheticEnv, n, layout="dict", action_kind="multidiscrete",
                           reverse_keys=True),
        50,
    ),
    "synthetic_tuple": (
        lambda n: make_fns(SyntheticEnv, n, layout="tuple", action_kind="multibinary"), 60
    ),
    "synthetic_odd_leaves": (
        lambda n: make_fns(SyntheticEnv, n, layout="odd", action_kind="box"), 50
    ),
    "synthetic_image_no_infos": (
        lambda n: make_fns(SyntheticEnv, n, layout="image", info_kind="none"), 50
    ),
    "synthetic_mixed_info_types": (
        lambda n: make_fns(SyntheticEnv, n, layout="tuple", info_kind="mixed"), 50
    ),
    "object_text": (lambda n: make_fns(ObjectSpaceEnv, n, kind="text", info_kind="rich"), 50),
    "object_sequence": (lambda n: make_fns(ObjectSpaceEnv, n, kind="sequence"), 50),
    "object_graph": (lambda n: make_fns(ObjectSpaceEnv, n, kind="graph"), 50),
    "object_dict_text": (lambda n: make_fns(ObjectSpaceEnv, n, kind="dict_text"), 50),
}
CASE_NAMES = list(ENV_CASES)


def check_parity(make_subproc, make_ref, case: str, mode: AutoresetMode, copy: bool,
                 num_envs: int = NUM_ENVS, **subproc_kwargs: Any) -> None:
    fns, steps = ENV_CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the object-path warning is tested elsewhere
        vec = make_subproc(fns(num_envs), copy=copy, autoreset_mode=mode, **subproc_kwargs)
    ref = make_ref(fns(num_envs), copy=copy, autoreset_mode=mode)
    check_attributes(vec, ref, mode)
    episode_ends = run_parity(vec, ref, mode=mode, copy=copy, steps=steps)
    assert episode_ends > 0, "the run never reached an episode end: it tests too little"


# ---------------------------------------------------------------------------
# every env case x every mode: default context, 2 workers


MAIN_PARAMS = [
    pytest.param(case, mode, (c + m) % 2 == 0,
                 id=f"{case}-{mode.value}-{'copy' if (c + m) % 2 == 0 else 'nocopy'}")
    for c, case in enumerate(CASE_NAMES)
    for m, mode in enumerate(MODES)
]


@pytest.mark.parametrize("case, mode, copy", MAIN_PARAMS)
def test_parity_forkserver_two_workers(case, mode, copy, make_subproc, make_ref):
    check_parity(make_subproc, make_ref, case, mode, copy,
                 context="forkserver", num_workers=2)


# ---------------------------------------------------------------------------
# every (context, num_workers) pair, with env cases, modes and copy in rotation


def rotation(per_pair: int = 3) -> list[tuple[str, int, str, AutoresetMode, bool]]:
    """(context, num_workers, case, mode, copy): ``per_pair`` runs for each pair.

    Cases advance by a step coprime to their count, so the runs spread over the
    whole env set; the mode shifts with the context, the worker count and the run,
    and copy alternates every two runs, so that each context and each worker count
    sees every mode and both copy values.
    """
    runs = []
    for k in range(per_pair * len(PAIRS)):
        context, workers = PAIRS[k // per_pair]
        case = CASE_NAMES[(5 * k + 1) % len(CASE_NAMES)]
        shift = CONTEXTS.index(context) + WORKER_COUNTS.index(workers) + k % per_pair
        runs.append((context, workers, case, MODES[shift % len(MODES)], k % 4 < 2))
    return runs


ROTATION = rotation()


@pytest.mark.parametrize(
    "context, num_workers, case, mode, copy",
    [pytest.param(*run, id=f"{run[0]}-{run[1]}w-{run[2]}-{run[3].value}-"
                  f"{'copy' if run[4] else 'nocopy'}") for run in ROTATION],
)
def test_parity_every_context_and_worker_count(context, num_workers, case, mode, copy,
                                               make_subproc, make_ref):
    check_parity(make_subproc, make_ref, case, mode, copy,
                 context=context, num_workers=num_workers)


def test_the_rotation_covers_every_axis_value():
    assert set(PAIRS) <= {r[:2] for r in ROTATION}
    for axis, values in [(0, CONTEXTS), (1, WORKER_COUNTS)]:
        for value in values:
            runs = [r for r in ROTATION if r[axis] == value]
            assert {r[3] for r in runs} == set(MODES), f"{value}: modes {runs}"
            assert {r[4] for r in runs} == {True, False}, f"{value}: copy {runs}"
    assert {m.values[1] for m in MAIN_PARAMS} == set(MODES)
    assert {m.values[0] for m in MAIN_PARAMS} == set(ENV_CASES)
    for case in ENV_CASES:
        assert {m.values[2] for m in MAIN_PARAMS if m.values[0] == case} == {True, False}


# ---------------------------------------------------------------------------
# uneven blocks and a single env


@pytest.mark.parametrize(
    "num_envs, num_workers, case, mode, context, options",
    [
        (5, 2, "counting", AutoresetMode.DISABLED, "forkserver", {}),
        (5, 2, "synthetic_dict", AutoresetMode.SAME_STEP, "fork", {"timeout": 60.0}),
        (7, 3, "dict_counting", AutoresetMode.NEXT_STEP, "spawn", {}),
        (7, 3, "object_text", AutoresetMode.DISABLED, "forkserver",
         {"on_worker_failure": "restart"}),
        (4, 3, "synthetic_tuple", AutoresetMode.NEXT_STEP, "forkserver", {"timeout": 60.0}),
        (7, 2, "cartpole", AutoresetMode.SAME_STEP, "fork", {"on_worker_failure": "restart"}),
    ],
    ids=lambda v: v.value if isinstance(v, AutoresetMode) else (
        "-".join(f"{k}={x}" for k, x in v.items()) or "defaults") if isinstance(v, dict)
    else str(v),
)
def test_parity_with_uneven_worker_blocks(num_envs, num_workers, case, mode, context, options,
                                          make_subproc, make_ref):
    # With a timeout or restarts on, but nothing failing, results are the same.
    check_parity(make_subproc, make_ref, case, mode, True, num_envs=num_envs,
                 num_workers=num_workers, context=context, **options)


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "nocopy"])
def test_parity_with_large_observations(copy, make_subproc, make_ref):
    # Records of several pages each, and an odd size, so rows straddle pages.
    space = spaces.Dict({"image": spaces.Box(0, 255, shape=(64, 64, 3), dtype=np.uint8),
                         "extra": spaces.Box(-1.0, 1.0, shape=(7,), dtype=np.float32)})
    fns = make_fns(SyntheticEnv, 5, space=space, info_kind="none", max_len=8)
    vec = make_subproc(fns, copy=copy, num_workers=3)
    ref = make_ref(fns, copy=copy)
    assert run_parity(vec, ref, mode=AutoresetMode.NEXT_STEP, copy=copy, steps=40) > 0


@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_parity_with_a_single_env(mode, make_subproc, make_ref):
    check_parity(make_subproc, make_ref, "dict_counting", mode, False, num_envs=1)


# ---------------------------------------------------------------------------
# episode_statistics=True against Gymnasium's RecordEpisodeStatistics


EPISODE_STAT_CASES = ["counting", "synthetic_dict", "synthetic_tuple", "cartpole", "pendulum"]
EPISODE_STAT_PARAMS = [
    pytest.param(case, mode, context, workers, id=f"{case}-{mode.value}-{context}-{workers}w")
    for k, (case, mode) in enumerate(itertools.product(EPISODE_STAT_CASES, MODES))
    for context, workers in [PAIRS[k % len(PAIRS)]]
]


@pytest.mark.fastvec_only
@pytest.mark.parametrize("case, mode, context, num_workers", EPISODE_STAT_PARAMS)
def test_episode_statistics_match_record_episode_statistics(
    case, mode, context, num_workers, make_subproc, make_ref, vec_envs
):
    # All envs are reset together in DISABLED mode: Gymnasium's wrapper zeroes
    # every env's statistics on a partial reset (see test_sync_parity).
    fns, steps = ENV_CASES[case]
    vec = make_subproc(fns(NUM_ENVS), autoreset_mode=mode, episode_statistics=True,
                       context=context, num_workers=num_workers)
    ref = vec_envs.track(vw.RecordEpisodeStatistics(make_ref(fns(NUM_ENVS),
                                                             autoreset_mode=mode)))
    ends = run_parity(vec, ref, mode=mode, copy=True, steps=steps,
                      infos_filter=drop_episode_time, partial_resets=False)
    assert ends > 0


@pytest.mark.fastvec_only
def test_episode_statistics_with_partial_resets_by_hand(make_subproc):
    # DISABLED with partial resets over uneven blocks (3 + 2 envs): each env's
    # statistics run on by themselves, as the counting model computes them.
    lens, truncate = [2, 5, 3, 1, 4], [False, True, False, True, False]
    vec = make_subproc(
        make_fns(CountingEnv, 5, per_env={"episode_len": lens, "truncate": truncate}),
        autoreset_mode=AutoresetMode.DISABLED, episode_statistics=True, num_workers=2,
    )
    vec.reset(seed=0)
    actions = np.random.default_rng(2).integers(0, 4, size=(30, 5))
    model = counting_model(lens, truncate, actions, AutoresetMode.DISABLED)
    ends = 0
    for step, (step_actions, exp) in enumerate(zip(actions, model, strict=True)):
        _, _, term, trunc, infos = vec.step(step_actions)
        done = term | trunc
        where = f"step {step}"
        assert_tree_equal(done, exp["terminations"] | exp["truncations"], f"{where}: dones")
        if done.any():
            vec.reset(options={"reset_mask": done.copy()})
        if not done.any():
            assert "episode" not in infos, f"{where}: statistics without an episode end"
            continue
        ends += int(done.sum())
        assert_tree_equal(infos["_episode"], done, f"{where}: infos['_episode']")
        assert_tree_equal(infos["episode"]["r"][done], exp["r"][done], f"{where}: episode r")
        assert_tree_equal(infos["episode"]["l"][done], exp["l"][done], f"{where}: episode l")
    assert ends >= 20


# ---------------------------------------------------------------------------
# Gymnasium's vector wrappers on top


def record_then_normalize(env: Any) -> Any:
    return vw.NormalizeObservation(vw.RecordEpisodeStatistics(env))


WRAPPER_PARAMS = [
    # (wrapper name, wrapper, case, mode, context)
    ("RecordEpisodeStatistics", vw.RecordEpisodeStatistics, "counting",
     AutoresetMode.NEXT_STEP, "forkserver"),
    ("RecordEpisodeStatistics", vw.RecordEpisodeStatistics, "counting",
     AutoresetMode.SAME_STEP, "fork"),
    ("RecordEpisodeStatistics", vw.RecordEpisodeStatistics, "synthetic_dict",
     AutoresetMode.DISABLED, "spawn"),
    ("RecordEpisodeStatistics", vw.RecordEpisodeStatistics, "cartpole",
     AutoresetMode.NEXT_STEP, "forkserver"),
    ("NormalizeObservation", vw.NormalizeObservation, "cartpole",
     AutoresetMode.NEXT_STEP, "forkserver"),
    ("NormalizeObservation", vw.NormalizeObservation, "pendulum",
     AutoresetMode.NEXT_STEP, "fork"),
    ("RecordEpisodeStatistics+NormalizeObservation", record_then_normalize, "cartpole",
     AutoresetMode.NEXT_STEP, "spawn"),
]


@pytest.mark.parametrize(
    "wrap, case, mode, context",
    [pytest.param(*p[1:], id=f"{p[0]}-{p[2]}-{p[3].value}-{p[4]}") for p in WRAPPER_PARAMS],
)
def test_gymnasium_wrappers_give_the_same_results(wrap, case, mode, context, make_subproc,
                                                  make_ref, vec_envs):
    fns, steps = ENV_CASES[case]
    vec = vec_envs.track(wrap(make_subproc(fns(NUM_ENVS), autoreset_mode=mode,
                                           context=context, num_workers=2)))
    ref = vec_envs.track(wrap(make_ref(fns(NUM_ENVS), autoreset_mode=mode)))
    ends = run_parity(vec, ref, mode=mode, copy=True, steps=steps,
                      infos_filter=drop_episode_time, partial_resets=False)
    assert ends > 0
    stats, ref_stats = vec, ref
    while not isinstance(ref_stats, (vw.RecordEpisodeStatistics, type(None))):
        stats, ref_stats = getattr(stats, "env", None), getattr(ref_stats, "env", None)
    if ref_stats is not None:
        assert ref_stats.episode_count > 0
        assert stats.episode_count == ref_stats.episode_count
        assert list(stats.return_queue) == list(ref_stats.return_queue)
        assert list(stats.length_queue) == list(ref_stats.length_queue)
