"""The batch a step writes: observations (an ``ObsStore``), rewards and flags."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fastvec._games import adapt, is_game, unit_spaces, zero_observation
from fastvec._kernels.games import GameBlock
from fastvec._kernels.stepping import EnvBlock
from fastvec._obs_store import ObsStore

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

    def env_block(self, envs: list, start: int, mode: int
                  ) -> tuple[EnvBlock | GameBlock, list | None]:
        """An ``EnvBlock`` (or a ``GameBlock``, for games) of ``envs`` from row ``start``.

        Also returns the block's observation-object list (None with records).
        """
        stop = start + rows_of(envs)
        table, rows, objects = self.obs.target(start, stop)
        results = (self.rewards[start:stop], self.terminations[start:stop],
                   self.truncations[start:stop], self.needs_reset[start:stop])
        if envs and is_game(envs[0]):
            obs_space, _, agents = unit_spaces(envs[0])
            block: EnvBlock | GameBlock = GameBlock(
                envs, [adapt(game) for game in envs], agents, mode, table, rows, objects,
                zero_observation(obs_space), *results, self.alive[start:stop],
                self.active[start:stop], start)
        else:
            block = EnvBlock(envs, mode, table, rows, objects, *results, start)
        return block, objects

    def clear(self, where: Where, truncate: bool = False) -> None:
        """Rows ``where`` start afresh: reward 0, flags False (``truncations=truncate``)."""
        self.rewards[where] = 0.0
        self.terminations[where] = False
        self.truncations[where] = truncate
        self.needs_reset[where] = False
