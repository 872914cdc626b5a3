"""The batch a step writes: observations (an ``ObsStore``), rewards and flags."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fastvec._kernels.stepping import EnvBlock
from fastvec._obs_store import ObsStore

__all__ = ["Buffers"]

Where = slice | np.ndarray


@dataclass
class Buffers:
    """One entry per env; in shared memory under ``SubprocVecEnv``.

    ``needs_reset[i]``: env i's episode ended on its last step (``NEXT_STEP``
    resets it on the next one; ``DISABLED`` refuses to step it).
    """

    obs: ObsStore
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    needs_reset: np.ndarray

    @classmethod
    def allocate(cls, obs: ObsStore, num_envs: int) -> Buffers:
        """Buffers in this process's memory."""
        return cls(obs, np.zeros(num_envs, dtype=np.float64), np.zeros(num_envs, np.bool_),
                   np.zeros(num_envs, np.bool_), np.zeros(num_envs, np.bool_))

    def env_block(self, envs: list, start: int, mode: int) -> tuple[EnvBlock, list | None]:
        """An ``EnvBlock`` of ``envs`` (from env ``start``) writing into these buffers.

        Also returns the block's observation-object list (None with records).
        """
        stop = start + len(envs)
        table, rows, objects = self.obs.target(start, stop)
        block = EnvBlock(envs, mode, table, rows, objects, self.rewards[start:stop],
                         self.terminations[start:stop], self.truncations[start:stop],
                         self.needs_reset[start:stop], start)
        return block, objects

    def clear(self, where: Where, truncate: bool = False) -> None:
        """Envs ``where`` start afresh: reward 0, flags False (``truncations=truncate``)."""
        self.rewards[where] = 0.0
        self.terminations[where] = False
        self.truncations[where] = truncate
        self.needs_reset[where] = False
