"""The batch a step writes: observations (an ``ObsStore``) and one table of per-row results.

:data:`RESULT_FIELDS` declares each per-row result once (name, dtype); the buffers,
the shared segment's regions (``pool/process/segment.py``), Ray's packed replies
(``pool/ray/actor.py``) and the steppers' arguments (``pool/local.py``) are derived
from it, so a new per-row array is one line here.  Steppers write into the buffers;
under a process pool the arrays are views of the shared segment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from fastvec.pool.games import is_game
from fastvec.pool.obs_store import ObsStore

__all__ = ["ENV_RESULTS", "RESULT_FIELDS", "Buffers", "ResultField", "rows_of"]

Where = slice | np.ndarray


@dataclass(frozen=True)
class ResultField:
    """One result per row: its name (a ``Buffers`` attribute, a shared-block region, a
    stepper's keyword) and its dtype.
    """

    name: str
    dtype: np.dtype


RESULT_FIELDS = (
    ResultField("rewards", np.dtype(np.float64)),
    ResultField("terminations", np.dtype(np.bool_)),
    ResultField("truncations", np.dtype(np.bool_)),
    # the row's episode (its game's, for games) ended on its last step: NEXT_STEP
    # resets it on the next one, DISABLED refuses to step it
    ResultField("needs_reset", np.dtype(np.bool_)),
    ResultField("alive", np.dtype(np.bool_)),  # games: the row's agent is in the game
    ResultField("active", np.dtype(np.bool_)),  # games: the row's agent acts next
)
"""Every per-row result of a step, in the order they are packed."""
ENV_RESULTS = ("rewards", "terminations", "truncations", "needs_reset")
"""The fields a single-agent stepper writes (games write all of them)."""


def rows_of(envs: list) -> int:
    """How many batch rows ``envs`` fill: one per env, one per seat of a game."""
    if envs and is_game(envs[0]):
        return len(envs) * len(envs[0].possible_agents)
    return len(envs)


@dataclass
class Buffers:
    """Observations and one array per :data:`RESULT_FIELDS` entry, one entry per row (env,
    or seat of a game); in shared memory under ``SubprocVecEnv``.
    """

    obs: ObsStore
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    needs_reset: np.ndarray
    alive: np.ndarray
    active: np.ndarray

    @classmethod
    def allocate(cls, obs: ObsStore, num_rows: int) -> Buffers:
        """Buffers in this process's memory."""
        return cls(obs, **{f.name: np.zeros(num_rows, f.dtype) for f in RESULT_FIELDS})

    @classmethod
    def over(cls, obs: ObsStore, arrays: Mapping[str, np.ndarray]) -> Buffers:
        """Buffers over ``arrays[name]`` for each result field (the shared segment's regions)."""
        return cls(obs, **{f.name: arrays[f.name] for f in RESULT_FIELDS})

    def results(self, start: int, stop: int, names: tuple[str, ...] | None = None
                ) -> dict[str, np.ndarray]:
        """Views of rows ``start:stop`` of the result arrays ``names`` (default: all)."""
        return {name: getattr(self, name)[start:stop]
                for name in (names or tuple(f.name for f in RESULT_FIELDS))}

    def clear(self, where: Where, truncate: bool = False) -> None:
        """Rows ``where`` start afresh: reward 0, flags False (``truncations=truncate``)."""
        self.rewards[where] = 0.0
        self.terminations[where] = False
        self.truncations[where] = truncate
        self.needs_reset[where] = False
