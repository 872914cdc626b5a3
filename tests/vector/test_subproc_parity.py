"""SubprocVecEnv gives bit-identical results to Gymnasium's SyncVectorEnv, however
its workers start and however many there are.

Same env factories, seeds and actions through a ``SubprocVecEnv`` and through
``gymnasium.vector.SyncVectorEnv``; every step's observations, rewards, flags
and infos are compared (see ``tests/support/compare.py``).  Every env case in every
autoreset mode, episode statistics and Gymnasium's wrappers on top, on every
backend: ``test_contract_results.py``.

Starting workers costs up to a second (spawn, forkserver), so the axes here are
paired rather than crossed:

- every (context, num_workers) pair, each with three env cases, modes and copy
  values taken in rotation (``ROTATION``, whose coverage has its own test);
- uneven worker blocks, large observations and a single env, each with a few
  such pairings.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from tests.support.cases import ENV_CASES, MODES
from tests.support.compare import check_attributes, run_parity
from tests.support.envs import SyntheticEnv, make_fns

pytestmark = pytest.mark.subprocess

CONTEXTS = ["fork", "spawn", "forkserver"]
WORKER_COUNTS = [1, 2, 3]
NUM_ENVS = 6
PAIRS = list(itertools.product(CONTEXTS, WORKER_COUNTS))  # every (context, num_workers)
CASE_NAMES = [name for name, case in ENV_CASES.items() if case.num_envs > 1]


def check_parity(make_subproc, make_ref, case: str, mode: AutoresetMode, copy: bool,
                 num_envs: int = NUM_ENVS, **subproc_kwargs: Any) -> None:
    env_case = ENV_CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the object-path warning is tested elsewhere
        vec = make_subproc(env_case.fns(num_envs), copy=copy, autoreset_mode=mode,
                           **subproc_kwargs)
    ref = make_ref(env_case.fns(num_envs), copy=copy, autoreset_mode=mode)
    check_attributes(vec, ref, mode)
    episode_ends = run_parity(vec, ref, mode=mode, copy=copy, steps=env_case.steps_subprocess)
    assert episode_ends > 0, "the run never reached an episode end: it tests too little"


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
    assert {r[2] for r in ROTATION} == set(CASE_NAMES)


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
