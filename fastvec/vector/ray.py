"""RayVecEnv: the same vector env over Ray actors, one actor per block of envs.

The vector env's API over a ``RayPool`` (:mod:`fastvec.pool.ray`); each actor
hosts its block in a pool of its own (a local pool, or a process pool on its
node).  Async batches come from :mod:`fastvec.vector.async_batches`, as in
``SubprocVecEnv``.  See ``docs/distributed.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from fastvec.pool.env_fns import env_functions
from fastvec.pool.restarts import DEFAULT_MAX_RESTARTS, RestartBudget
from fastvec.spaces.frame_stack import FrameStack, parse_frame_stack
from fastvec.vector.arguments import mode_code, parse_autoreset_mode
from fastvec.vector.async_batches import RemoteVecEnv, check_batch_size, check_positive

__all__ = ["RayVecEnv"]


class RayVecEnv(RemoteVecEnv):
    """Runs envs in Ray actors, a contiguous block of envs per actor, one call per step.

    Needs Ray (``pip install -e ".[ray]"``).  If Ray is not initialized, a local
    Ray is started, bound to 127.0.0.1 only, and ``close()`` shuts it down again;
    a Ray the caller started (``ray.init(address=...)`` to join a cluster) is left
    running.  Env fns are sent with cloudpickle and called only in the actors.

    Args:
        env_fns: callables returning ``gymnasium.Env``.
        num_actors: actors, each stepping a contiguous block of envs (default: one per
            alive Ray node that has the resources ``actor_options`` ask for, at most
            ``num_envs``).
        actor_options: passed to Ray's ``.options()`` for every actor: ``num_cpus``,
            ``resources``, ``scheduling_strategy``, ``runtime_env``...  Defaults:
            ``num_cpus=0``; without a ``scheduling_strategy`` (or placement group)
            actor ``b`` is pinned to the ``b``-th alive node that has those resources,
            round robin (``resources={"envs": 1}`` keeps actors on the nodes that offer
            an ``envs`` resource); a replacement never goes to the node its
            predecessor died or hung on while another node can host it.
        inner: ``"sync"`` (an actor steps its block in its own process) or
            ``"subproc"`` (through worker processes on the actor's node).
        inner_options: options of those worker processes, named as
            ``SubprocVecEnv``'s: ``num_workers``, ``context``, ``daemon``, ``local_block``.
        autoreset_mode: as in :class:`fastvec.SyncVecEnv`.
        copy: as in :class:`fastvec.SyncVecEnv`.
        episode_statistics: as in :class:`fastvec.SyncVecEnv`.
        batch_size: below ``num_envs``, async batches of whole actor blocks
            (``async_reset`` / ``recv`` / ``send``), as in :class:`fastvec.SubprocVecEnv`.
        timeout: seconds a step, reset or call may take before ``WorkerTimeout``
            (with ``on_worker_failure="restart"``, an actor past it is killed and its
            block restarted, as if it had died: a hung env, or a node stopped or cut off).
        on_worker_failure: ``"raise"`` (a ``WorkerError``; ``worker_index`` is the
            actor's index) or ``"restart"`` (a new actor rebuilds and resets the block;
            its envs report ``truncations=True`` and ``infos["worker_restarted"]``; each
            restart is logged and counted, as in :class:`fastvec.SubprocVecEnv`).
        max_restarts: as in :class:`fastvec.SubprocVecEnv` (default 1000; a
            :class:`fastvec.RestartBudget`'s ``per_block`` counts per actor).
        frame_stack: as in :class:`fastvec.SyncVecEnv` (frames stacked in the actors).

    Raises:
        ImportError: Ray is not installed.
        ValueError: an argument is out of range (the message says what would work).
        EnvFnError: an env function cannot be pickled or returns no env, as for
            ``SubprocVecEnv``.
        WorkerError: an env could not be built in its actor.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_actors: int | None = None,
        actor_options: dict[str, Any] | None = None,
        inner: str = "sync",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        batch_size: int | None = None,
        timeout: float | None = None,
        on_worker_failure: str = "raise",
        episode_statistics: bool = False,
        inner_options: dict[str, Any] | None = None,
        max_restarts: int | RestartBudget | None = DEFAULT_MAX_RESTARTS,
        *,
        frame_stack: int | FrameStack | None = None,
    ) -> None:
        try:
            import ray  # noqa: F401  (here, to say which extra installs it)
        except ImportError as exc:
            raise ImportError("RayVecEnv needs Ray: pip install -e '.[ray]' "
                              f"(or pip install 'ray>=2.9'); {exc}") from exc

        from fastvec.pool.ray.build import ray_pool

        env_fns = env_functions(env_fns)
        mode = parse_autoreset_mode(autoreset_mode)
        self.frame_stack = parse_frame_stack(frame_stack)
        check_positive(batch_size)  # the rest once the rows are known (games fill several)
        pool = ray_pool(env_fns, mode=mode_code(mode), copy=bool(copy), num_actors=num_actors,
                        inner=inner, inner_options=inner_options, actor_options=actor_options,
                        timeout=timeout, on_failure=on_worker_failure,
                        max_restarts=max_restarts, frame_stack=self.frame_stack)
        self.num_actors = pool.num_blocks
        self.inner = inner
        self.timeout = timeout
        self.on_worker_failure = on_worker_failure
        self.max_restarts = max_restarts
        try:
            self.batch_size = check_batch_size(batch_size, pool.num_rows, self.num_actors,
                                               host="actor", seats=pool.seats)
            self._setup(pool, mode, copy, episode_statistics)
        except BaseException:
            pool.close(terminate=True)
            raise
        self._start_batches()

    @property
    def num_workers(self) -> int:
        """The number of actors (the name ``SubprocVecEnv`` gives its blocks)."""
        return self.num_actors

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            try:
                self.close(terminate=True)
            except Exception:  # noqa: S110 - interpreter shutdown
                pass
