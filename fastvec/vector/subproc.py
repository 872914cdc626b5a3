"""SubprocVecEnv: envs step in worker processes, several per worker, through shared memory.

The vector env's API over a ``ProcessPool`` (:mod:`fastvec.pool.process`, whose
module docstring gives the data flow of a step); async batches from
:mod:`fastvec.vector.async_batches`.
"""

from __future__ import annotations

import atexit
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from fastvec.pool.build import default_num_workers, process_pool
from fastvec.pool.env_fns import env_functions
from fastvec.pool.restarts import DEFAULT_MAX_RESTARTS, RestartBudget
from fastvec.spaces.frame_stack import FrameStack, parse_frame_stack
from fastvec.spaces.observation_mode import ObservationMode
from fastvec.vector.arguments import async_vector_env_options, mode_code, parse_autoreset_mode
from fastvec.vector.async_batches import RemoteVecEnv, check_batch_size, check_positive

__all__ = ["SubprocVecEnv"]

_LIVE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for envs in list(_LIVE):
        envs.close()


class SubprocVecEnv(RemoteVecEnv):
    """Runs envs in worker processes, several per worker, stepping through shared memory.

    Args:
        env_fns: callables returning ``gymnasium.Env``; sent to workers with cloudpickle.
        num_workers: worker processes (default ``min(num_envs, CPUs this process may use)``,
            its affinity: ``taskset``, cgroups, Slurm); envs
            are split into contiguous blocks, one per worker.
        context: ``"fork"``, ``"spawn"`` or ``"forkserver"`` (default: forkserver where
            available, else spawn).
        autoreset_mode: as in :class:`fastvec.SyncVecEnv`.
        copy: as in :class:`fastvec.SyncVecEnv`.
        batch_size: below ``num_envs``, async batches: ``async_reset`` / ``recv`` / ``send``
            on whole worker blocks (a multiple of ``num_envs // num_workers``).
        timeout: seconds a step, reset or call may take before ``WorkerTimeout`` (with
            ``on_worker_failure="restart"``, a worker past it is killed and its block
            restarted, as if it had died).
        on_worker_failure: ``"raise"`` (a ``WorkerError``) or ``"restart"`` (respawn the
            worker, rebuild and reset its envs; they report ``truncations=True`` and
            ``infos["worker_restarted"]``; each restart logs a WARNING on the ``fastvec``
            logger and is counted in ``restart_counts`` and ``total_restarts``).
        max_restarts: with ``"restart"``, how many restarts in all before the next failure
            raises its ``WorkerError`` instead (default 1000, as RLlib's limit; None: no
            limit), or a :class:`fastvec.RestartBudget` that also limits the restarts
            per worker and in all within a window of seconds.  The attribute keeps
            what was passed.
        episode_statistics: add ``infos["episode"]`` (return, length, time) when an
            episode ends, as Gymnasium's ``RecordEpisodeStatistics`` does.
        local_block: the trainer's process steps the first of ``num_workers + 1``
            blocks itself while the workers step theirs (it pays where a step has real
            work; the cheapest envs stay fastest in one process, ``SyncVecEnv``; a
            native crash in a local env takes the trainer down). Default
            ``num_workers`` is then one less than the default (at least 1).
        observation_mode: ``"same"``, ``"different"`` or ``(observation_space,
            single_observation_space)``, as in :class:`fastvec.SyncVecEnv` (with
            ``"different"`` every env's space is read once the workers built them).
        daemon: the workers' ``daemon`` flag, as in Gymnasium's ``AsyncVectorEnv``:
            ``False`` lets an env start processes of its own (a daemonic process may
            not); either way the workers end with the trainer.
        max_concurrency: at most this many envs step at once (``AsyncVectorEnv``'s):
            caps ``num_workers``, since a worker steps its envs one after another; with
            ``local_block`` the trainer's block is one of them (``num_workers`` at most
            ``max_concurrency - 1``).
        shared_memory: accepted so that ``AsyncVectorEnv``'s arguments carry over;
            fastvec always steps through shared memory, so ``False`` cannot apply
            and a ``UserWarning`` says so.
        worker: accepted for the same reason; fastvec's own workers step the envs,
            so a custom worker function is ignored and a ``UserWarning`` says so.
        frame_stack: as in :class:`fastvec.SyncVecEnv` (frames stacked in the workers).

    Raises:
        ValueError: an argument is out of range (the message says what would work), or
            the envs' spaces differ (``SpacesMismatchError``, naming the env).
        EnvFnError: an env function cannot be pickled (the message names it, the
            object in it that fails and the fixes) or returns no env.
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
        max_restarts: int | RestartBudget | None = DEFAULT_MAX_RESTARTS,
        *,
        daemon: bool = True,
        max_concurrency: int | None = None,
        shared_memory: bool = True,
        worker: Callable | None = None,
        frame_stack: int | FrameStack | None = None,
    ) -> None:
        env_fns = env_functions(env_fns)
        mode = parse_autoreset_mode(autoreset_mode)
        self.frame_stack = parse_frame_stack(frame_stack)
        check_positive(batch_size)  # the rest once the rows are known (games fill several)
        num_workers = async_vector_env_options(
            num_workers, lambda: default_num_workers(len(env_fns), bool(local_block)),
            shared_memory, worker, max_concurrency, bool(local_block))
        pool = process_pool(env_fns, mode_code(mode), bool(copy), num_workers, context,
                            timeout, on_worker_failure, observation_mode, max_restarts,
                            bool(local_block), bool(daemon), self.frame_stack)
        try:
            self.batch_size = check_batch_size(batch_size, pool.num_rows, pool.num_workers,
                                               int(bool(local_block)), seats=pool.seats)
        except BaseException:
            pool.close()
            raise
        self.num_workers = pool.num_workers
        self.context = pool.context
        self.local_block = bool(local_block)
        self.timeout = timeout
        self.on_worker_failure = on_worker_failure
        self.max_restarts = max_restarts
        self.observation_mode = observation_mode
        _LIVE.add(self)
        self._setup(pool, mode, copy, episode_statistics)
        self._start_batches()

    def close_extras(self, timeout: float | None = None, terminate: bool = False,
                     **kwargs: Any) -> None:
        """Stop every worker and release the shared memory (see ``BatchedVecEnv``)."""
        _LIVE.discard(self)
        super().close_extras(timeout, terminate, **kwargs)

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            self.close()
