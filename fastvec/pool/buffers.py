"""The batch a step writes: observations (an ``ObsStore``), rewards and flags, one per row.

Steppers write into them (``fastvec.pool.local.make_stepper``); under a process
pool the arrays are views of the shared block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fastvec.pool.games import is_game
from fastvec.pool.obs_store import ObsStore

__all__ = ["Buffers", "rows_of"]

Where = slice | np.ndarray


def rows_of(envs: list) -> int:
    """How many batch rows ``envs`` fill: one per env, one per seat of a game."""
    if envs and is_game(envs[0]):
        return len(envs) * len(envs[0].possible_agents)
    return len(envs)


@dataclass
class Buffers:
    """One entry per row (env, or seat of a game); in shared memory under ``SubprocVecEnv``.

    ``needs_reset[i]``: row i's episode (its game, for games) ended on its last
    step (``NEXT_STEP`` resets it on the next one; ``DISABLED`` refuses to step
    it).  ``alive`` / ``active``: for games, whether the row's agent is in the
    game and whether it acts next (unused for single-agent envs).
    """

    obs: ObsStore
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    needs_reset: np.ndarray
    alive: np.ndarray
    active: np.ndarray

    @classmethod
    def allocate(cls, obs: ObsStore, num_envs: int) -> Buffers:
        """Buffers in this process's memory."""
        return cls(obs, np.zeros(num_envs, dtype=np.float64),
                   *(np.zeros(num_envs, np.bool_) for _ in range(5)))

    def clear(self, where: Where, truncate: bool = False) -> None:
        """Rows ``where`` start afresh: reward 0, flags False (``truncations=truncate``)."""
        self.rewards[where] = 0.0
        self.terminations[where] = False
        self.truncations[where] = truncate
        self.needs_reset[where] = False
