"""Async batches for SubprocVecEnv: ``recv`` the first workers done, ``send`` to exactly those.

A batch is made of whole worker blocks.  Each worker is *in flight* (a command
posted, result not yet received), *held* (result received, waiting for ``send``),
or neither (never reset).  ``recv`` waits for the first ``batch_size`` envs'
workers to finish, earliest first, and returns their results with ``env_ids``;
contiguous blocks come back as views of the shared rows, others are gathered into
one batch buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from fastvec._actions import ActionChecker
from fastvec._kernels.rows import gather_rows
from fastvec._kernels.stepping import Autoreset
from fastvec._layout import Layout, batch_views, copy_tree
from fastvec._worker import Command
from fastvec.errors import AlreadyPendingCallError, FastVecError, NoAsyncCallError

__all__ = ["AsyncBatches", "check_batch_size"]


def check_batch_size(batch_size: int | None, num_envs: int, num_workers: int) -> int:
    """The batch size to use; ValueError saying which values work when it cannot be."""
    if batch_size is None or batch_size == num_envs:
        return num_envs
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"expected batch_size to be a positive int, got {batch_size!r}")
    if batch_size > num_envs:
        raise ValueError(f"expected batch_size <= num_envs = {num_envs}, got {batch_size}")
    if num_envs % num_workers:
        workers = [w for w in range(1, num_envs + 1) if num_envs % w == 0]
        raise ValueError(f"async batches need equal worker blocks: num_envs = {num_envs} is "
                         f"not divisible by num_workers = {num_workers} (try num_workers in "
                         f"{workers})")
    block = num_envs // num_workers
    if batch_size % block:
        sizes = list(range(block, num_envs + 1, block))
        raise ValueError(f"batch_size must be a multiple of num_envs // num_workers = {block} "
                         f"(batches are whole worker blocks): one of {sizes}, got {batch_size}")
    return int(batch_size)


class AsyncBatches:
    """``async_reset`` / ``recv`` / ``send``, mixed into ``SubprocVecEnv``."""

    if TYPE_CHECKING:  # what SubprocVecEnv and BatchedVecEnv provide
        num_envs: int
        num_workers: int
        batch_size: int
        copy: bool
        layout: Layout | None
        single_observation_space: gym.Space
        single_action_space: gym.Space
        _bounds: list[tuple[int, int]]
        _rows: np.ndarray | None
        _obs_objects: list[Any] | None
        _rewards: np.ndarray
        _terminations: np.ndarray
        _truncations: np.ndarray
        _needs_reset: np.ndarray
        _stats: Any
        _pending: bool | None
        _mode_code: int

        def _check_open(self) -> None: ...
        def _check_usable(self) -> None: ...
        def _seeds(self, seed: Any) -> list: ...
        def _reset_mask(self, mask: Any) -> np.ndarray: ...
        def _collect(self, workers: Sequence[int], what: str, want: int | None = None
                     ) -> dict[int, Any]: ...
        def _merge(self, replies: dict[int, Any], restart_truncates: bool) -> list: ...
        def _post(self, workers: Sequence[int], command: Command) -> None: ...
        def _post_reset(self, workers: list[int], seeds: list, options: dict | None,
                        mask: np.ndarray | None) -> None: ...
        def _send_actions(self, workers: Sequence[int], checked: Any, checker: Any,
                          env_ids: np.ndarray | None) -> None: ...
        def _batch_infos(self, entries: list, num_envs: int,
                         position: dict[int, int] | None = None) -> dict: ...

    def _init_async(self) -> None:
        self._in_flight = np.zeros(self.num_workers, dtype=np.bool_)
        self._held = np.zeros(self.num_workers, dtype=np.bool_)
        self._resetting = np.zeros(self.num_workers, dtype=np.bool_)  # in flight: a reset
        self._block_size = self.num_envs // self.num_workers
        self._checkers: dict[int, ActionChecker] = {}
        self._sent_ids: np.ndarray | None = None  # the last batch recv() returned ...
        self._sent_workers: list[int] = []  # ... and its workers
        self._sent_bytes = b""
        self._rows_are_leaf = (self.layout is not None and len(self.layout.leaves) == 1
                               and self.layout.leaves[0].nbytes == self.layout.record_size)

    @property
    def _async_mode(self) -> bool:
        return self.batch_size < self.num_envs

    def _check_sync_allowed(self, what: str) -> None:
        if self._async_mode:
            raise FastVecError(f"{what}() is not available with batch_size={self.batch_size} < "
                               f"num_envs={self.num_envs}: use async_reset(), recv() and send()")
        if self._in_flight.any():
            raise FastVecError(f"{what}() called while envs are in flight from send() or "
                               "async_reset(); recv() them first")

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
        self._check_open()
        self._check_usable()
        if self._pending is not None:
            raise AlreadyPendingCallError("async_reset() called while a step is pending", "step")
        seeds = self._seeds(seed)
        mask = None
        if options is not None and "reset_mask" in options:
            mask = self._reset_mask(options.pop("reset_mask"))
        workers = [w for w, (a, b) in enumerate(self._bounds) if mask is None or mask[a:b].any()]
        if mask is None:
            self._drain()
        elif self._in_flight[workers].any():
            busy = [w for w in workers if self._in_flight[w]]
            raise ValueError(f"reset_mask selects envs of workers {busy}, which are in flight; "
                             "recv() them before resetting")
        # The reset envs start afresh; the other envs of their workers' blocks come back
        # in the next batch again with their last results (flags included, so a trainer
        # still sees that an unmasked env ended).
        for w in workers:
            a, b = self._bounds[w]
            reset = slice(a, b) if mask is None else np.flatnonzero(mask[a:b]) + a
            self._rewards[reset] = 0.0
            self._terminations[reset] = False
            self._truncations[reset] = False
        self._post_reset(workers, seeds, options, mask)
        if self._stats is not None:
            self._stats.reset(mask)
        self._in_flight[workers] = True
        self._resetting[workers] = True
        self._held[workers] = False

    def _drain(self) -> None:
        flying = np.flatnonzero(self._in_flight).tolist()
        if flying:
            self._collect(flying, "a batch being dropped by async_reset()")
            self._in_flight[:] = False

    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict, np.ndarray]:
        """The first ready batch: ``(obs, rewards, terminations, truncations, infos, env_ids)``.

        Waits for the first ``batch_size`` envs' workers to finish (earliest first).
        A second ``recv`` without ``send`` returns the next ready batch.

        Returns:
            The batch's arrays, each of length ``batch_size`` (fewer when fewer envs
            are in flight), infos in Gymnasium's
            dict-of-arrays form for those envs, and ``env_ids`` (int64, ascending):
            which envs the batch holds, in its order.

        Raises:
            NoAsyncCallError: no envs are in flight (call ``async_reset`` or ``send``).
            WorkerError, WorkerTimeout: as for ``step``.
        """
        self._check_open()
        self._check_usable()
        flying = np.flatnonzero(self._in_flight).tolist()
        if not flying:
            raise NoAsyncCallError("recv() called with no envs in flight; call async_reset() "
                                   "or send() first", "recv")
        want = min(self.batch_size // self._block_size, len(flying))
        replies = self._collect(flying, "a batch", want)
        chosen = sorted(replies)
        self._in_flight[chosen] = False
        entries = self._merge(replies, restart_truncates=True)
        self._held[chosen] = True
        if chosen[-1] - chosen[0] == len(chosen) - 1:  # neighbouring blocks: one slice
            start, stop = self._bounds[chosen[0]][0], self._bounds[chosen[-1]][1]
            rows: slice | np.ndarray = slice(start, stop)
            env_ids = np.arange(start, stop)
        else:
            env_ids = np.concatenate([np.arange(*self._bounds[w]) for w in chosen])
            rows = env_ids
        infos = {}
        if entries:
            position = {int(e): k for k, e in enumerate(env_ids)}
            infos = self._batch_infos([(position[i], info) for i, info in entries],
                                      len(env_ids), position)
        if self._stats is not None:
            resets = np.repeat(self._resetting[chosen], self._block_size)
            self._stats.record(self, infos, env_ids, skip=resets)
        self._sent_ids, self._sent_workers = env_ids.copy(), chosen
        self._sent_bytes = env_ids.tobytes()
        return (self._batch_obs(rows, env_ids), self._rewards[rows].copy(),
                self._terminations[rows].copy(), self._truncations[rows].copy(), infos,
                env_ids)

    def _batch_obs(self, rows: slice | np.ndarray, env_ids: np.ndarray) -> Any:
        if self.layout is None:
            assert self._obs_objects is not None  # the object path
            objects = [self._obs_objects[i] for i in env_ids]
            out: Any = create_empty_array(self.single_observation_space, len(env_ids))
            return concatenate(self.single_observation_space, objects, out)
        assert self._rows is not None
        if isinstance(rows, slice):
            views = batch_views(self.layout, self._rows[rows])
            return copy_tree(views) if self.copy else views
        gathered = np.empty((len(env_ids), self._rows.shape[1]), dtype=np.uint8)
        gather_rows(self._rows, env_ids, gathered)
        views = batch_views(self.layout, gathered)  # fresh, but padded records are strided
        return copy_tree(views) if self.copy and not self._rows_are_leaf else views

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
        self._check_open()
        self._check_usable()
        ids, workers = self._check_env_ids(env_ids)
        checker = self._checkers.get(len(ids))
        if checker is None:
            checker = ActionChecker(self.single_action_space,
                                    batch_space(self.single_action_space, len(ids)), len(ids))
            self._checkers[len(ids)] = checker
        checked = checker.check(actions)
        if self._mode_code == Autoreset.DISABLED and self._needs_reset[ids].any():
            done = ids[self._needs_reset[ids]].tolist()
            raise RuntimeError(f"envs {done} ended their episodes and autoreset_mode is "
                               "DISABLED: reset them with async_reset(options={'reset_mask': "
                               "mask}) before sending actions")
        self._send_actions(workers, checked, checker, ids)
        self._post(workers, Command.STEP)
        self._held[workers] = False
        self._in_flight[workers] = True
        self._resetting[workers] = False

    def _check_env_ids(self, env_ids: Any) -> tuple[np.ndarray, list[int]]:
        """``env_ids`` as int64 and the workers they name; ValueError if they cannot be sent."""
        last = self._sent_ids
        if (type(env_ids) is np.ndarray and last is not None and env_ids.dtype == last.dtype
                and env_ids.tobytes() == self._sent_bytes
                and self._held[self._sent_workers].all()):
            return last, self._sent_workers  # the batch recv() just returned: checked there
        ids = np.asarray(env_ids)
        if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu":
            raise ValueError(f"expected env_ids as a non-empty 1-D integer array, got {env_ids!r}")
        if ids.min() < 0 or ids.max() >= self.num_envs:
            raise ValueError(f"env_ids out of range [0, {self.num_envs}): {ids.tolist()}")
        if len(np.unique(ids)) != len(ids):
            raise ValueError(f"env_ids repeat an env: {ids.tolist()}")
        workers = sorted({int(i) // self._block_size for i in ids})
        for w in workers:
            a, b = self._bounds[w]
            if self._in_flight[w]:
                raise ValueError(f"envs {a}..{b - 1} (worker {w}) are already in flight; "
                                 "recv() them before sending to them again")
            if not self._held[w]:
                raise ValueError(f"envs {a}..{b - 1} (worker {w}) have not been received; "
                                 "send() only to env_ids that recv() returned")
            if np.count_nonzero((ids >= a) & (ids < b)) != b - a:
                raise ValueError(f"env_ids must name whole worker blocks of {self._block_size} "
                                 f"envs: worker {w} holds envs {a}..{b - 1}, got "
                                 f"{ids.tolist()}")
        return ids.astype(np.int64), workers
