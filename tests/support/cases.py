"""Named env cases for the parity tests: which envs, how many, for how many steps.

Each case is built for any number of envs (``case.fns(n)``) and has its own env
count (even, so that async batches can take half; one case is a single env) and
its own number of steps: enough for episodes to end before the full reset
halfway (Pendulum truncates at 200).  In-process runs are cheap and take more
steps (``steps``) than runs with worker processes (``steps_subprocess``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gymnasium.vector import AutoresetMode

from tests.support.envs import (
    CountingEnv,
    DictCountingEnv,
    ObjectSpaceEnv,
    SyntheticEnv,
    gym_fns,
    make_fns,
)

__all__ = ["ENV_CASES", "EPISODE_LENS", "MODES", "TRUNCATE", "ParityCase", "counting"]

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
EPISODE_LENS = [1, 2, 3, 5, 7, 4, 6, 2]  # enough for 8 envs, from either end
TRUNCATE = [False, True, False, True, False, True, False, True]


def counting(n: int) -> list:
    """Counting envs with episodes of 1, 2, 3, 5, 7 ... steps, every other one truncated."""
    return make_fns(CountingEnv, n, per_env={"episode_len": EPISODE_LENS[:n],
                                             "truncate": TRUNCATE[:n]})


@dataclass(frozen=True)
class ParityCase:
    """Env factories for ``n`` envs, the case's env count and step counts; whether
    async batches (put back together as full batches) can give Gymnasium's results."""

    fns: Callable[[int], list]
    num_envs: int
    steps: int
    steps_subprocess: int
    async_batches: bool = True

    def steps_for(self, backend: str) -> int:
        return self.steps if backend == "sync" else self.steps_subprocess


ENV_CASES: dict[str, ParityCase] = {
    "cartpole": ParityCase(lambda n: gym_fns("CartPole-v1", n), 4, 300, 160),
    "pendulum": ParityCase(lambda n: gym_fns("Pendulum-v1", n), 4, 420, 410),
    # FrozenLake's info "prob" is an int after a reset and a float after a step: a
    # batch takes the type of its first env, so async batches may truncate floats
    # where Gymnasium's full batch does not (see tests.backends.FullBatches)
    "frozenlake": ParityCase(lambda n: gym_fns("FrozenLake-v1", n), 4, 300, 120,
                             async_batches=False),
    "blackjack": ParityCase(lambda n: gym_fns("Blackjack-v1", n), 4, 300, 80),
    "counting": ParityCase(counting, 6, 200, 60),
    "counting_single": ParityCase(  # a single env: no halves for async batches
        lambda n: make_fns(CountingEnv, n, episode_len=3), 1, 50, 50, async_batches=False),
    "dict_counting": ParityCase(
        lambda n: make_fns(DictCountingEnv, n, per_env={"episode_len": EPISODE_LENS[1:n + 1]}),
        4, 100, 50),
    "synthetic_dict": ParityCase(
        lambda n: make_fns(SyntheticEnv, n, layout="dict", action_kind="box"), 4, 150, 60),
    "synthetic_dict_reversed_keys": ParityCase(
        lambda n: make_fns(SyntheticEnv, n, layout="dict", action_kind="multidiscrete",
                           reverse_keys=True), 4, 100, 50),
    "synthetic_tuple": ParityCase(
        lambda n: make_fns(SyntheticEnv, n, layout="tuple", action_kind="multibinary"),
        6, 150, 60),
    "synthetic_odd_leaves": ParityCase(
        lambda n: make_fns(SyntheticEnv, n, layout="odd", action_kind="box"), 4, 100, 50),
    "synthetic_image_no_infos": ParityCase(
        lambda n: make_fns(SyntheticEnv, n, layout="image", info_kind="none"), 4, 100, 50),
    # 6 envs: with async batches of 3 + 3, env 3 starts the second batch and reports
    # the types env 0 does (see tests.backends.FullBatches).
    "synthetic_mixed_info_types": ParityCase(
        lambda n: make_fns(SyntheticEnv, n, layout="tuple", info_kind="mixed"), 6, 100, 50),
    "object_text": ParityCase(
        lambda n: make_fns(ObjectSpaceEnv, n, kind="text", info_kind="rich"), 4, 100, 50),
    "object_sequence": ParityCase(
        lambda n: make_fns(ObjectSpaceEnv, n, kind="sequence"), 4, 100, 50),
    "object_graph": ParityCase(lambda n: make_fns(ObjectSpaceEnv, n, kind="graph"), 4, 100, 50),
    "object_dict_text": ParityCase(
        lambda n: make_fns(ObjectSpaceEnv, n, kind="dict_text"), 4, 100, 50),
}
