"""SubprocVecEnv: envs step in worker processes, several per worker, through shared memory.

The vector env's API over a ``ProcessPool`` (``fastvec._process_pool``); the data
flow of a step is written at the top of ``fastvec._pool``.  Async batches
(``async_reset`` / ``recv`` / ``send``) are kept by an ``AsyncBatches``
(``fastvec._async``).
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing as mp
import os
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from fastvec._async import AsyncBatches, check_batch_size, check_positive
from fastvec._base import BatchedVecEnv
from fastvec._call_state import CallState
from fastvec._observation_mode import ObservationMode, check_observation_mode
from fastvec._failure_policy import DEFAULT_MAX_RESTARTS, check_failure_policy
from fastvec._pool import split_blocks
from fastvec._process_pool import ProcessPool
from fastvec._trainer_block_pool import TrainerBlockPool

__all__ = ["SubprocVecEnv"]

_LIVE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for envs in list(_LIVE):
        envs.close()


def default_context() -> str:
    """Forkserver where available (safe with threads in the trainer), else spawn."""
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


class SubprocVecEnv(BatchedVecEnv):
    """Runs envs in worker processes, several per worker, stepping through shared memory.

    Args:
        env_fns: callables returning ``gymnasium.Env``; sent to workers with cloudpickle.
        num_workers: worker processes (default ``min(num_envs, os.cpu_count())``); envs
            are split into contiguous blocks, one per worker.
        context: ``"fork"``, ``"spawn"`` or ``"forkserver"`` (default: forkserver where
            available, else spawn).
        autoreset_mode, copy, episode_statistics: as in :class:`fastvec.SyncVecEnv`.
        batch_size: below ``num_envs``, async batches: ``async_reset`` / ``recv`` / ``send``
            on whole worker blocks (a multiple of ``num_envs // num_workers``).
        timeout: seconds a step, reset or call may take before ``WorkerTimeout``.
        on_worker_failure: ``"raise"`` (a ``WorkerError``) or ``"restart"`` (respawn the
            worker, rebuild and reset its envs; they report ``truncations=True`` and
            ``infos["worker_restarted"]``; each restart logs a WARNING on the ``fastvec``
            logger and is counted in ``restart_counts`` and ``total_restarts``).
        max_restarts: with ``"restart"``, how many restarts in all before the next failure
            raises its ``WorkerError`` instead (default 1000, as RLlib's limit; None: no
            limit).
        episode_statistics: add ``infos["episode"]`` (return, length, time) when an
            episode ends, as Gymnasium's ``RecordEpisodeStatistics`` does.
        local_block: the trainer's process steps the first of ``num_workers + 1``
            blocks itself while the workers step theirs (for few cores and cheap envs;
            a native crash in a local env takes the trainer down). Default
            ``num_workers`` is then ``min(num_envs, os.cpu_count()) - 1`` (at least 1).
        observation_mode: ``"same"``, ``"different"`` or ``(observation_space,
            single_observation_space)``, as in :class:`fastvec.SyncVecEnv` (with
            ``"different"`` every env's space is read once the workers built them).

    Raises:
        ValueError: an argument is out of range (the message says what would work), or
            the envs' spaces differ (``SpacesMismatchError``, naming the env).
        WorkerError: an env could not be built in its worker.

    Example:
        >>> import gymnasium as gym, numpy as np, fastvec
        >>> envs = fastvec.SubprocVecEnv([lambda: gym.make("CartPole-v1")] * 4, num_workers=2)
        >>> obs, infos = envs.reset(seed=0)
        >>> obs.shape
        (4, 4)
        >>> obs, rewards, terminations, truncations, infos = envs.step(np.zeros(4, np.int64))
        >>> rewards.tolist()
        [1.0, 1.0, 1.0, 1.0]
        >>> envs.close()
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_workers: int | None = None,
        context: str | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        batch_size: int | None = None,
        timeout: float | None = None,
        on_worker_failure: str = "raise",
        episode_statistics: bool = False,
        local_block: bool = False,
        observation_mode: ObservationMode = "same",
        max_restarts: int | None = DEFAULT_MAX_RESTARTS,
    ) -> None:
        num_envs = len(env_fns)  # env functions; a game fills several rows, known later
        if num_envs < 1:
            raise ValueError("expected at least one env function, got none")
        local = 1 if local_block else 0
        if num_workers is None:
            num_workers = max(1, min(num_envs, os.cpu_count() or 1) - local)
        if not 1 <= num_workers <= num_envs - local:
            where = " with local_block=True (the first block stays in this process)" \
                if local_block else ""
            raise ValueError(f"expected num_workers in [1, {num_envs - local}]{where}, got "
                             f"{num_workers}")
        check_failure_policy(on_worker_failure, max_restarts)
        check_observation_mode(observation_mode)
        check_positive(batch_size)  # the rest once the rows are known (games fill several)
        if timeout is not None and timeout <= 0:
            raise ValueError(f"expected a positive timeout in seconds or None, got {timeout}")
        self.num_workers = num_workers
        self.local_block = bool(local_block)
        self.timeout = timeout
        self.on_worker_failure = on_worker_failure
        self.max_restarts = max_restarts
        self.observation_mode = observation_mode
        self.context = context or default_context()
        _LIVE.add(self)
        bounds = split_blocks(num_envs, num_workers + local)
        workers = ProcessPool(env_fns, bounds[local:], mp.get_context(self.context), timeout,
                              on_worker_failure, observation_mode, max_restarts)
        pool: ProcessPool | TrainerBlockPool = workers
        try:
            if local_block:
                pool = TrainerBlockPool(env_fns, bounds[0][1], workers)
            hello = pool.hello
            num_rows = pool.bounds[-1][1]
            self.batch_size = check_batch_size(batch_size, num_rows, num_workers, local)
            single, batched = pool.observation_spaces
            self._setup(num_rows, single, hello.action_space, hello.metadata,
                        hello.render_mode, autoreset_mode, copy, episode_statistics,
                        hello.agents, batched)
            pool.attach(self._mode_code, self.copy)
        except BaseException:
            pool.close()
            raise
        self._use_pool(pool)
        self._batches = AsyncBatches(pool, self.batch_size, self._mode_code,
                                     self.single_action_space, self._stats, self._games)

    # -- async batches ---------------------------------------------------------------

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
        self._enter("async_reset")
        try:
            seeds, mask = self._reset_args(seed, options)
            self._batches.reset(seeds, options, mask)
            self._state = CallState.IN_FLIGHT
        except Exception as exc:
            self._failed(exc)
        finally:
            self._leave()

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
        self._enter("recv")
        try:
            batch = self._batches.recv()
            if not self._batches.any_in_flight:
                self._state = CallState.IDLE
            return batch
        except Exception as exc:
            self._failed(exc)
        finally:
            self._leave()

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
        self._enter("send")
        try:
            self._batches.send(actions, env_ids)
            self._state = CallState.IN_FLIGHT
        except Exception as exc:
            self._failed(exc)
        finally:
            self._leave()

    @contextlib.contextmanager
    def _wait_limit(self, timeout: float | None) -> Iterator[None]:
        workers = getattr(self._pool, "workers", self._pool)  # past a local block
        if timeout is None or not isinstance(workers, ProcessPool):
            yield
            return
        workers.wait_timeout = timeout
        try:
            yield
        finally:
            workers.wait_timeout = None

    # -- shutdown --------------------------------------------------------------------

    def _pending_blocks(self) -> list[int]:
        if self._state is CallState.IN_FLIGHT:
            return np.flatnonzero(self._batches.in_flight).tolist()
        return super()._pending_blocks()

    def close_extras(self, timeout: float | None = None, terminate: bool = False,
                     **kwargs: Any) -> None:
        """Stop every worker and release the shared memory (see ``BatchedVecEnv``)."""
        _LIVE.discard(self)
        super().close_extras(timeout, terminate, **kwargs)

    def _forget_buffers(self) -> None:
        super()._forget_buffers()
        self.__dict__.pop("_batches", None)

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            self.close()
