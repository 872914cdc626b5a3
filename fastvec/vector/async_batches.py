"""Async batches (EnvPool style): ``recv`` the first blocks done, ``send`` to exactly those.

Written once, for ``SubprocVecEnv`` and ``RayVecEnv``: :class:`RemoteVecEnv` is
their common base, and :class:`AsyncBatches` keeps the blocks' state.

A batch is made of whole worker blocks.  Each worker is *in flight* (a command
posted, result not yet received), *held* (result received, waiting for ``send``),
or neither (never reset).  ``recv`` waits for the first ``batch_size`` envs'
workers to finish, earliest first, and returns their results with ``env_ids``;
contiguous blocks come back as views of the shared rows, others are gathered into
one batch buffer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from fastvec._kernels.stepping import Autoreset
from fastvec.errors import NoAsyncCallError
from fastvec.pool.base import Pool
from fastvec.spaces.actions import CheckersBySize
from fastvec.vector.arguments import refuse_ended
from fastvec.vector.base import BatchedVecEnv
from fastvec.vector.call_state import CallState, guarded
from fastvec.vector.episode_stats import EpisodeStats
from fastvec.vector.game_infos import add_game_infos

__all__ = ["AsyncBatches", "RemoteVecEnv", "check_batch_size", "check_positive"]


def check_positive(batch_size: int | None) -> None:
    """ValueError unless ``batch_size`` is None or a positive int (checkable before
    the rows are known).
    """
    if batch_size is not None and (not isinstance(batch_size, (int, np.integer))
                                   or isinstance(batch_size, bool) or batch_size < 1):
        raise ValueError(f"expected batch_size to be a positive int, got {batch_size!r}")


def check_batch_size(batch_size: int | None, num_envs: int, num_workers: int,
                     local: int = 0, host: str = "worker", seats: int = 1) -> int:
    """The batch size to use; ValueError saying which values work when it cannot be.

    ``local``: 1 when a block steps in the trainer's process besides the workers'.
    ``host``: what the blocks' hosts are called (``"actor"``: ``num_actors``).
    ``seats``: rows per game (1: no games); blocks hold whole games, so it is the
    games that must split evenly.
    """
    if batch_size is None or batch_size == num_envs:
        return num_envs
    check_positive(batch_size)
    if batch_size > num_envs:
        raise ValueError(f"expected batch_size <= num_envs = {num_envs}, got {batch_size}")
    blocks, arg = num_workers + local, f"num_{host}s"
    name = f"{arg} + 1 = {blocks}" if local else f"{arg} = {blocks}"
    units, unit = num_envs // seats, "num_games" if seats > 1 else "num_envs"
    if units % blocks:
        workers = [w - local for w in range(1 + local, units + 1) if units % w == 0]
        raise ValueError(f"async batches need equal {host} blocks: {unit} = {units} is "
                         f"not divisible by {name} (try {arg} in {workers})")
    block = num_envs // blocks
    if batch_size % block:
        sizes = list(range(block, num_envs + 1, block))
        divisor = f"num_envs // ({arg} + 1)" if local else f"num_envs // {arg}"
        raise ValueError(f"batch_size must be a multiple of {divisor} = {block} "
                         f"(batches are whole {host} blocks): one of {sizes}, got {batch_size}")
    return int(batch_size)


class AsyncBatches:
    """Which worker blocks are in flight or held, and the batches ``recv`` hands out.

    Owned by a :class:`RemoteVecEnv`, which checks the call state and parses seeds
    and masks; this object talks to the pool and reads the batch buffers.
    """

    def __init__(self, pool: Pool, batch_size: int, mode_code: int,
                 single_action_space: gym.Space, stats: EpisodeStats | None,
                 games: bool = False) -> None:
        self.pool = pool
        self.buffers = pool.buffers
        self.bounds = pool.bounds
        self.num_envs = pool.bounds[-1][1]
        self.batch_size = batch_size
        self.mode_code = mode_code
        self.single_action_space = single_action_space
        self.stats = stats
        self.games = games  # rows of multi-agent games: infos["alive"] / ["active"]
        n = pool.num_blocks
        self.in_flight = np.zeros(n, dtype=np.bool_)
        self.held = np.zeros(n, dtype=np.bool_)
        self.resetting = np.zeros(n, dtype=np.bool_)  # in flight: a reset
        self.any_in_flight = False  # after the last recv()
        self.block_size = self.num_envs // n
        self.checkers = CheckersBySize(single_action_space, pool.about.agents)
        self.sent_ids: np.ndarray | None = None  # the last batch recv() returned ...
        self.sent_blocks: list[int] = []  # ... and its blocks
        self.sent_bytes = b""

    def reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> None:
        """Start resetting every env (or those in ``mask``); see ``RemoteVecEnv.async_reset``."""
        blocks = [w for w, (a, b) in enumerate(self.bounds) if mask is None or mask[a:b].any()]
        if mask is None:
            self._drain()
        elif self.in_flight[blocks].any():
            busy = ", ".join(self.pool.block_name(w) for w in blocks if self.in_flight[w])
            raise ValueError(f"reset_mask selects envs of {busy}, in flight; recv() them "
                             "before resetting")
        # The reset envs start afresh; the other envs of their workers' blocks come back
        # in the next batch again with their last results (flags included, so a trainer
        # still sees that an unmasked env ended).
        for w in blocks:
            a, b = self.bounds[w]
            reset = slice(a, b) if mask is None else np.flatnonzero(mask[a:b]) + a
            self.buffers.clear(reset)
        self.pool.post_reset(blocks, seeds, options, mask)
        if self.stats is not None:
            self.stats.reset(mask)
        self.in_flight[blocks] = True
        self.resetting[blocks] = True
        self.held[blocks] = False

    def _drain(self) -> None:
        flying = np.flatnonzero(self.in_flight).tolist()
        if flying:
            self.pool.drain(flying, "a batch being dropped by async_reset()")
            self.in_flight[:] = False

    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict, np.ndarray]:
        """The first ready batch; see ``RemoteVecEnv.recv``."""
        flying = np.flatnonzero(self.in_flight).tolist()
        if not flying:
            raise NoAsyncCallError("recv() called with no envs in flight; call async_reset() "
                                   "or send() first", "recv")
        want = min(self.batch_size // self.block_size, len(flying))
        chosen, infos = self.pool.collect(flying, "a batch", want, compact=True)
        self.in_flight[chosen] = False
        self.any_in_flight = len(chosen) < len(flying)
        self.held[chosen] = True
        if chosen[-1] - chosen[0] == len(chosen) - 1:  # neighbouring blocks: one slice
            start, stop = self.bounds[chosen[0]][0], self.bounds[chosen[-1]][1]
            rows: slice | np.ndarray = slice(start, stop)
            env_ids = np.arange(start, stop)
        else:
            env_ids = np.concatenate([np.arange(*self.bounds[w]) for w in chosen])
            rows = env_ids
        if self.games:
            add_game_infos(infos, self.buffers, rows)
        if self.stats is not None:
            resets = np.repeat(self.resetting[chosen], self.block_size)
            self.stats.record(self.buffers, self.mode_code == Autoreset.SAME_STEP, infos,
                              env_ids, skip=resets)
        self.sent_ids, self.sent_blocks = env_ids.copy(), chosen
        self.sent_bytes = env_ids.tobytes()
        buffers = self.buffers
        return (buffers.obs.batch(rows, env_ids), buffers.rewards[rows].copy(),
                buffers.terminations[rows].copy(), buffers.truncations[rows].copy(), infos,
                env_ids)

    def send(self, actions: Any, env_ids: Any) -> None:
        """Step exactly the envs ``env_ids``; see ``RemoteVecEnv.send``."""
        ids, blocks = self._check_env_ids(env_ids)
        checker = self.checkers(len(ids))
        checked = checker.check(actions, env_ids=ids)  # messages name envs by their env_ids
        if self.mode_code == Autoreset.DISABLED:
            refuse_ended(self.buffers.needs_reset, ids,
                         "async_reset(options={'reset_mask': mask}) before sending actions")
        self.pool.post_step(blocks, checked, checker, ids)
        self.held[blocks] = False
        self.in_flight[blocks] = True
        self.resetting[blocks] = False

    def _check_env_ids(self, env_ids: Any) -> tuple[np.ndarray, list[int]]:
        """``env_ids`` as int64 and the blocks they name; ValueError if they cannot be sent."""
        last = self.sent_ids
        if (type(env_ids) is np.ndarray and last is not None and env_ids.dtype == last.dtype
                and env_ids.tobytes() == self.sent_bytes
                and self.held[self.sent_blocks].all()):
            return last, self.sent_blocks  # the batch recv() just returned: checked there
        ids = np.asarray(env_ids)
        if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu":
            raise ValueError(f"expected env_ids as a non-empty 1-D integer array, got {env_ids!r}")
        if ids.min() < 0 or ids.max() >= self.num_envs:
            raise ValueError(f"env_ids out of range [0, {self.num_envs}): {ids.tolist()}")
        if len(np.unique(ids)) != len(ids):
            raise ValueError(f"env_ids repeat an env: {ids.tolist()}")
        blocks = sorted({int(i) // self.block_size for i in ids})
        for w in blocks:
            a, b = self.bounds[w]
            host = self.pool.block_name(w)  # worker k, actor k or the local block
            if self.in_flight[w]:
                raise ValueError(f"envs {a}..{b - 1} ({host}) are already in flight; "
                                 "recv() them before sending to them again")
            if not self.held[w]:
                raise ValueError(f"envs {a}..{b - 1} ({host}) have not been received; "
                                 "send() only to env_ids that recv() returned")
            if np.count_nonzero((ids >= a) & (ids < b)) != b - a:
                word = self.pool.block_map.host_word
                raise ValueError(f"env_ids must name whole {word} blocks of "
                                 f"{self.block_size} envs: {host} holds envs {a}..{b - 1}, "
                                 f"got {ids.tolist()}")
        return ids.astype(np.int64), blocks


class RemoteVecEnv(BatchedVecEnv):
    """Base of the vector envs whose envs run in other processes (``SubprocVecEnv``,
    ``RayVecEnv``): async batches, and waits with their own time limit.

    Async batches (``async_reset`` / ``recv`` / ``send``) are written once here, over
    an :class:`AsyncBatches` of the pool's blocks.
    """

    def _start_batches(self) -> None:
        """Async batches over the pool's blocks (call once the pool is set up)."""
        self._batches = AsyncBatches(self._open_pool, self.batch_size, self._mode_code,
                                     self.single_action_space, self._stats, self._games)

    @guarded("async_reset")
    def async_reset(self, seed: int | list | None = None, options: dict | None = None) -> None:
        """Start resetting every env (or those in ``options["reset_mask"]``); ``recv`` the result.

        Envs still in flight are waited for and their results dropped (without a
        mask); with a mask, the masked envs' workers must not be in flight.

        Args:
            seed: an int (env ``i`` gets ``seed + i``), a list of per-env seeds, or None.
            options: passed to every env's ``reset``; ``"reset_mask"`` (a bool array of
                ``num_envs``) resets only those envs (``autoreset_mode="Disabled"``).

        Raises:
            AlreadyPendingCallError: a ``step_async`` is pending.
            ValueError: the mask selects envs that are in flight.
        """
        seeds, mask = self._reset_args(seed, options)
        self._batches.reset(seeds, options, mask)
        self._state = CallState.IN_FLIGHT

    @guarded("recv")
    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict, np.ndarray]:
        """The first ready batch: ``(obs, rewards, terminations, truncations, infos, env_ids)``.

        Waits until blocks holding ``batch_size`` envs have finished and takes them in
        the order they finished (a finished block is never passed over by one that
        finished after it).  A second ``recv`` without ``send`` returns the next ready
        batch.

        Returns:
            The batch's arrays, each of length ``batch_size`` (fewer when fewer envs
            are in flight), infos in Gymnasium's
            dict-of-arrays form for those envs, and ``env_ids`` (int64, ascending):
            which envs the batch holds, in its order.

        Raises:
            NoAsyncCallError: no envs are in flight (call ``async_reset`` or ``send``).
            WorkerError, WorkerTimeout: as for ``step``.
        """
        batch = self._batches.recv()
        if not self._batches.any_in_flight:
            self._state = CallState.IDLE
        return batch

    @guarded("send")
    def send(self, actions: Any, env_ids: Any) -> None:
        """Step exactly the envs ``env_ids`` (whole worker blocks returned by ``recv``).

        Args:
            actions: one action per env of ``env_ids``, in that order (a batch of the
                action space for ``len(env_ids)`` envs).
            env_ids: the ids ``recv`` returned (or whole worker blocks of them).

        Raises:
            ValueError: bad actions, or ids out of range, repeated, not whole worker
                blocks, not received yet, or already in flight; nothing is sent.
        """
        self._batches.send(actions, env_ids)
        self._state = CallState.IN_FLIGHT

    @contextlib.contextmanager
    def _wait_limit(self, timeout: float | None) -> Iterator[None]:
        pool = self._pool
        if timeout is None or pool is None:
            yield
            return
        pool.wait_timeout = timeout
        try:
            yield
        finally:
            pool.wait_timeout = None

    def _pending_blocks(self) -> list[int]:
        if self._state is CallState.IN_FLIGHT:
            return np.flatnonzero(self._batches.in_flight).tolist()
        return super()._pending_blocks()

    def _forget_buffers(self) -> None:
        super()._forget_buffers()
        self.__dict__.pop("_batches", None)
