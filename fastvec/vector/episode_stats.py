"""Episode statistics (``episode_statistics=True``): return, length and time per episode.

Reported as ``infos["episode"] = {"r", "l", "t"}`` with ``infos["_episode"]`` on the
step an episode ends, by the rules of Gymnasium's ``RecordEpisodeStatistics``.
"""

from __future__ import annotations

import time

import numpy as np

from fastvec._kernels.autoreset import update_episode_stats
from fastvec.pool.buffers import Buffers

__all__ = ["EpisodeStats"]


class EpisodeStats:
    """Per-env episode return/length/time, reported as ``infos["episode"]``."""

    def __init__(self, num_envs: int, games: bool = False) -> None:
        self.games = games  # rows of games: a row whose agent is not in its game pauses
        self.returns = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self.starts = np.full(num_envs, time.perf_counter())
        self.prev_dones = np.zeros(num_envs, dtype=np.bool_)
        self._out = (np.zeros(num_envs), np.zeros(num_envs, np.int64), np.zeros(num_envs))

    def reset(self, mask: np.ndarray | None) -> None:
        where = slice(None) if mask is None else mask
        self.returns[where] = 0.0
        self.lengths[where] = 0
        self.starts[where] = time.perf_counter()
        self.prev_dones[where] = False

    def record(self, buffers: Buffers, same_step: bool, infos: dict,
               index: np.ndarray | None = None, skip: np.ndarray | None = None) -> None:
        """Advance the envs of this step (all, or those in ``index``); add finished episodes.

        With ``index``, the batch (and ``infos``) hold exactly those envs, in that
        order; ``skip`` marks batch entries that were resets, not steps (async).
        """
        if skip is not None and skip.any():
            assert index is not None  # skips come with async batches
            batch = len(skip)
            index = index[~skip]
        where = slice(None) if index is None else index
        state = [self.prev_dones[where], self.returns[where], self.lengths[where],
                 self.starts[where]]
        if index is not None:  # fancy indexing copied: work on the copies, write back below
            state = [np.ascontiguousarray(part) for part in state]
        n = len(state[0])
        out_r, out_l, out_t = (self._out[0][:n], self._out[1][:n], self._out[2][:n])
        prev_dones, returns, lengths, starts = state
        now = time.perf_counter()
        finished = update_episode_stats(
            np.ascontiguousarray(buffers.terminations[where]),
            np.ascontiguousarray(buffers.truncations[where]),
            np.ascontiguousarray(buffers.rewards[where]), prev_dones, returns, lengths, starts,
            now, same_step, out_r, out_l, out_t)
        if self.games:  # an agent's episode starts when it (re)joins its game
            dead = ~buffers.alive[where]
            prev_dones[dead], returns[dead], lengths[dead], starts[dead] = True, 0.0, 0, now
        if index is not None:
            self.prev_dones[index], self.returns[index], self.lengths[index], \
                self.starts[index] = state
        if not finished:
            return
        if "episode" in infos or "_episode" in infos:
            raise ValueError("an env's info already has the key 'episode' or '_episode'; "
                             "turn episode_statistics off or rename that key")
        episode = {"r": out_r.copy(), "l": out_l.copy(), "t": out_t.copy()}
        dones = state[0].copy()
        if skip is not None and skip.any():  # spread over the whole batch, zeros at resets
            for key, values in episode.items():
                episode[key] = np.zeros(batch, values.dtype)
                episode[key][~skip] = values
            dones = np.zeros(batch, np.bool_)
            dones[~skip] = state[0]
        infos["episode"] = episode
        infos["_episode"] = dones
