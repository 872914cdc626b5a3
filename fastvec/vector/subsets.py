"""Steps and resets of some of the envs: ``step(actions, env_ids=...)``, ``reset(env_ids=...)``.

The envs named step (or reset) and the others do nothing; the results are those
of the envs named, in the order named.  :class:`Subsets` checks the ids, posts
to the blocks that hold them (the pool steps only the rows named, see
``Pool.post_step``, so a block with none of them is not woken) and takes the
results of those rows out of the batch buffers.
"""

from __future__ import annotations

import numbers
from typing import Any

import gymnasium as gym
import numpy as np

from fastvec._kernels.stepping import Autoreset
from fastvec.pool.base import Pool
from fastvec.spaces.actions import CheckersBySize
from fastvec.vector.arguments import refuse_ended
from fastvec.vector.episode_stats import EpisodeStats
from fastvec.vector.game_infos import add_game_infos

__all__ = ["Subsets", "take_info_rows"]


class Subsets:
    """Steps and resets of some rows of a vector env whose blocks are ``bounds``.

    ``agents``: a game's seats (a subset must name whole games), or None for
    single-agent envs; ``mode``: the kernels' autoreset code; ``stats``: the
    vector env's episode statistics, if it keeps them.
    """

    def __init__(self, bounds: list[tuple[int, int]], single_action_space: gym.Space,
                 agents: tuple[str, ...] | None = None, mode: int = Autoreset.NEXT_STEP,
                 stats: EpisodeStats | None = None) -> None:
        self.num_envs = bounds[-1][1]
        self.starts = np.array([start for start, _ in bounds], dtype=np.int64)
        self.space = single_action_space
        self.agents = agents
        self.seats = 1 if agents is None else len(agents)
        self.mode = mode
        self.stats = stats
        self.checker = CheckersBySize(single_action_space, agents)  # by batch size

    def step(self, pool: Pool, actions: Any, env_ids: Any
             ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """``step(actions, env_ids)`` of the vector env over ``pool``."""
        ids = self.check(env_ids)
        checker = self.checker(len(ids))
        checked = checker.check(actions, env_ids=ids)  # messages name envs by their ids
        buffers = pool.buffers
        if self.mode == Autoreset.DISABLED:
            refuse_ended(buffers.needs_reset, ids, "reset(env_ids=...) before stepping")
        blocks = self.blocks(ids)
        pool.post_step(blocks, checked, checker, ids)
        _, infos = pool.collect(blocks, "a step")
        if infos:
            infos = take_info_rows(infos, ids)
        if self.agents is not None:
            add_game_infos(infos, buffers, ids)
        if self.stats is not None:
            self.stats.record(buffers, self.mode == Autoreset.SAME_STEP, infos, ids)
        return (buffers.obs.batch(ids, ids), buffers.rewards[ids], buffers.terminations[ids],
                buffers.truncations[ids], infos)

    def post_reset(self, pool: Pool, seed: Any, options: dict | None, env_ids: Any
                   ) -> tuple[list[int], np.ndarray, np.ndarray]:
        """Start ``reset(seed, options, env_ids)`` on ``pool``: the blocks reset, the mask
        of the rows reset, and their ids (for the vector env to finish the reset).
        """
        ids = self.check(env_ids)
        if options is not None and "reset_mask" in options:
            raise ValueError("expected env_ids or options['reset_mask'], not both")
        seeds = self.seeds(seed, ids)
        mask = np.zeros(self.num_envs, dtype=np.bool_)
        mask[ids] = True
        blocks = self.blocks(ids)
        pool.post_reset(blocks, seeds, options, mask)
        return blocks, mask, ids

    def check(self, env_ids: Any) -> np.ndarray:
        """``env_ids`` as a fresh int64 array; ValueError naming what is wrong with them.

        Example:
            >>> import gymnasium as gym
            >>> subsets = Subsets([(0, 2), (2, 4)], gym.spaces.Discrete(2))
            >>> subsets.check([3, 0])
            array([3, 0])
            >>> subsets.check([1, 1])
            Traceback (most recent call last):
              ...
            ValueError: expected distinct env_ids, got [1, 1] (env 1 twice)
        """
        ids = np.asarray(env_ids)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError(f"expected env_ids as a non-empty 1-D array of env indices, got "
                             f"shape {ids.shape}")
        if ids.dtype.kind not in "iu":
            raise ValueError(f"expected env_ids as integers (a 1-D int array or list), got "
                             f"dtype {ids.dtype} ({env_ids!r})")
        ids = ids.astype(np.int64)  # a copy: the caller's array may change later
        bad = ids[(ids < 0) | (ids >= self.num_envs)]
        if bad.size:
            raise ValueError(f"expected env_ids in [0, {self.num_envs}), got {bad.tolist()} "
                             f"in {ids.tolist()}")
        counts = np.bincount(ids, minlength=self.num_envs)
        if (counts > 1).any():
            twice = int(np.flatnonzero(counts > 1)[0])
            raise ValueError(f"expected distinct env_ids, got {ids.tolist()} (env {twice} twice)")
        if self.seats > 1:
            per_game = counts.reshape(-1, self.seats)
            split = np.flatnonzero(per_game.any(axis=1) & ~per_game.all(axis=1))
            if split.size:
                game = int(split[0])
                rows = list(range(game * self.seats, (game + 1) * self.seats))
                raise ValueError(f"expected env_ids to name every row of a game or none: game "
                                 f"{game} has rows {rows}, got {ids.tolist()}")
        return ids

    def blocks(self, ids: np.ndarray) -> list[int]:
        """The blocks that hold ``ids``, ascending."""
        return np.unique(np.searchsorted(self.starts, ids, side="right") - 1).tolist()

    def seeds(self, seed: Any, ids: np.ndarray) -> list:
        """Per-row seeds (every row; None where not reset) of a reset of ``ids``.

        An int ``seed`` seeds env ``i`` with ``seed + i`` (game ``g`` with ``seed + g``),
        as a reset of every env would; a list has one seed per env named (per game named,
        in the order of their first row), in that order.
        """
        seeds: list = [None] * self.num_envs
        units = ids // self.seats
        if seed is None:
            return seeds
        if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
            for row, unit in zip(ids.tolist(), units.tolist(), strict=True):
                seeds[row] = int(seed) + unit
            return seeds
        order = list(dict.fromkeys(units.tolist()))  # each env (game) once, as named
        given = list(seed)
        if len(given) != len(order):
            what = "game" if self.seats > 1 else "env"
            raise ValueError(f"expected an int seed or a list of {len(order)} seeds (one per "
                             f"{what} of env_ids), got a list of {len(given)}")
        by_unit = dict(zip(order, given, strict=True))
        for row, unit in zip(ids.tolist(), units.tolist(), strict=True):
            seeds[row] = by_unit[unit]
        return seeds


def take_info_rows(infos: dict, ids: np.ndarray) -> dict:
    """Gymnasium's batched ``infos`` (every leaf an array over all rows) for rows ``ids``
    (indices, in that order, or a bool mask).

    Example:
        >>> infos = {"x": np.array([1, 2, 3]), "_x": np.array([True, False, True])}
        >>> take_info_rows(infos, np.array([2, 0]))
        {'x': array([3, 1]), '_x': array([ True,  True])}
    """
    out: dict = {}
    for key, value in infos.items():
        if isinstance(value, dict):
            out[key] = take_info_rows(value, ids)
        elif isinstance(value, np.ndarray):
            out[key] = value[ids]
        else:
            out[key] = value
    return out
