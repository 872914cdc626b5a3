"""The Ray actor's side of ``RayVecEnv``: one block of envs behind a fastvec vector env.

``BlockHost`` is a plain class; ``fastvec._ray_pool`` makes it a Ray actor with
``ray.remote`` (so this module does not import Ray).  It builds its block's envs
from cloudpickled env fns and hosts them in a ``SyncVecEnv`` (``inner="sync"``:
stepped in the actor's process) or a ``SubprocVecEnv`` (``inner="subproc"``:
worker processes on the actor's node), created with the outer autoreset mode.
The actor steps that vector env's pool directly, so that the envs' raw infos
come back (the trainer batches the infos of all blocks in env order, as
Gymnasium does) and episode statistics stay in the trainer.

One remote call per step: ``step`` returns the block's results packed in one
uint8 array (:func:`pack`: rewards, observation records, terminations,
truncations, needs-reset), or a tuple ``(packed, entries, objects)`` when the
envs returned infos or the observations have no record layout.  Errors come
back as ``ErrorReport`` values (``fastvec._protocol``) with the env's index in
the whole vector env, never as exceptions, so the trainer can tell an env that
raised (a value) from an actor that died (Ray's ``RayActorError``).
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

import cloudpickle
import numpy as np

from fastvec._games import SINGLE_AGENT, describe
from fastvec._protocol import ErrorReport, Hello, report_error
from fastvec.errors import ObservationError, SpacesMismatchError, WorkerError

__all__ = ["BlockHost", "pack", "packed_size", "unpack"]

Reply = Any  # np.ndarray | tuple[np.ndarray, list | None, list | None] | ErrorReport


FLAGS = ("terminations", "truncations", "needs_reset", "alive", "active")


def packed_size(count: int, record_size: int) -> int:
    """Bytes of a block's packed results: rewards, records, five flags per row."""
    return count * (8 + record_size + len(FLAGS))


def unpack(packed: np.ndarray, count: int, record_size: int) -> tuple[np.ndarray, ...]:
    """Views of a packed block: ``(rewards, records, *flags)``, the flags in ``FLAGS`` order."""
    rewards = packed[:8 * count].view(np.float64)
    end = 8 * count + count * record_size
    records = packed[8 * count:end].reshape(count, record_size)
    flags = packed[end:end + len(FLAGS) * count].view(np.bool_)
    return (rewards, records, *(flags[k * count:(k + 1) * count] for k in range(len(FLAGS))))


def pack(out: np.ndarray, buffers: Any, records: np.ndarray | None) -> np.ndarray:
    """The block's results from ``buffers`` (and observation ``records``) into ``out``."""
    count = len(buffers.rewards)
    rewards, rows, *flags = unpack(out, count, 0 if records is None else records.shape[1])
    rewards[:] = buffers.rewards
    if records is not None:
        rows[:] = records
    for name, flag in zip(FLAGS, flags, strict=True):
        flag[:] = getattr(buffers, name)
    return out


def _built(env: Any) -> Any:
    return env


class BlockHost:
    """Envs (or games) ``first:first + count`` of a vector env, in a vector env of their own.

    ``first`` counts env functions; the block's rows start at ``first * seats``
    (a game fills one row per seat).
    """

    def __init__(self, env_fns_bytes: bytes, first: int, inner: str, mode: Any,
                 inner_options: dict | None = None) -> None:
        self.first = first
        self.first_row, self.seats = first, 1
        self.inner = inner
        self.mode = mode
        self.inner_options = dict(inner_options or {})
        self.env_fns_bytes = env_fns_bytes
        self.vec: Any = None
        self.envs: list = []

    # -- start-up --------------------------------------------------------------------

    def hello(self) -> Hello | ErrorReport:
        """Build the envs and the vector env hosting them; their spaces, or why not."""
        building = None
        try:
            env_fns = cloudpickle.loads(self.env_fns_bytes)
            if self.inner == "subproc":
                from fastvec.subproc_env import SubprocVecEnv

                self.vec = SubprocVecEnv(env_fns, autoreset_mode=self.mode, copy=False,
                                         **self.inner_options)
                agents = self.vec.agents if self.vec._games else None
                spaces: list[tuple[Any, Any, tuple[str, ...]]] = [
                    (self.vec.single_observation_space, self.vec.single_action_space,
                     agents or SINGLE_AGENT)] * len(env_fns)
            else:
                for building, env_fn in enumerate(env_fns):
                    self.envs.append(env_fn())
                building = None
                about = describe(self.envs)
                spaces, agents = about.env_spaces, about.agents
                if any(triple != spaces[0] for triple in spaces):
                    return about  # the trainer names the env that differs
                from fastvec.sync_env import SyncVecEnv

                self.vec = SyncVecEnv([functools.partial(_built, env) for env in self.envs],
                                      autoreset_mode=self.mode, copy=False)
        except BaseException as exc:  # noqa: B036 - reported to the trainer
            return self._report(exc, building)
        vec = self.vec
        self.pool = vec._pool
        if self.inner == "subproc":  # raw info entries: the trainer batches all blocks' infos
            workers = getattr(self.pool, "workers", self.pool)  # a local block's workers
            workers.infos.raw_only[0] = 1
        self.blocks = list(range(self.pool.num_blocks))
        self.buffers = self.pool.buffers
        self.records = getattr(self.buffers.obs, "rows", None)
        self.objects = getattr(self.buffers.obs, "objects", None)
        count = vec.num_envs
        self.seats = len(vec.agents)
        self.first_row = self.first * self.seats
        record_size = 0 if self.records is None else self.records.shape[1]
        self.out = np.zeros(packed_size(count, record_size), dtype=np.uint8)
        return Hello(vec.single_observation_space, vec.single_action_space,
                     dict(vec.metadata), vec.render_mode, spaces, agents)

    def pid(self) -> int:
        """The actor's process id."""
        return os.getpid()

    # -- commands --------------------------------------------------------------------

    def step(self, actions: Any) -> Reply:
        """Step the block with its actions (a checked batch for its envs, in order)."""
        try:
            self.pool.post_step(self.blocks, actions, self.vec._actions)
            _, entries = self.pool.collect(self.blocks, "a step")
        except BaseException as exc:  # noqa: B036 - reported to the trainer
            return self._report(exc, self._current())
        return self._reply(entries)

    def reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> Reply:
        """Reset the block's envs (those in ``mask``) with per-env seeds."""
        pool = self.pool
        blocks = [b for b, (a, z) in enumerate(pool.bounds) if mask is None or mask[a:z].any()]
        where = slice(None) if mask is None else mask
        try:
            pool.post_reset(blocks, seeds, options, mask)
            _, entries = pool.collect(blocks, "a reset", restart_truncates=False)
        except BaseException as exc:  # noqa: B036 - reported to the trainer
            return self._report(exc, self._current())
        self.buffers.clear(where)
        return self._reply(entries)

    def control(self, fn_bytes: bytes, targets: list[int], args_per_env: list | None
                ) -> list | ErrorReport:
        """``fn(env, *args)`` for the block's envs ``targets`` (counted from its first)."""
        fn = cloudpickle.loads(fn_bytes)
        if self.inner == "subproc":
            try:
                return self.pool.control(fn, targets, args_per_env, "a call")
            except BaseException as exc:  # noqa: B036 - reported to the trainer
                return self._report(exc, None)
        results = []
        for j, k in enumerate(targets):
            try:
                args = () if args_per_env is None else args_per_env[j]
                results.append(fn(self.envs[k], *args))
            except BaseException as exc:  # noqa: B036 - reported to the trainer
                return self._report(exc, k)
        return results

    def close(self) -> None:
        """Close the hosted vector env (and its envs)."""
        if self.vec is not None:
            self.vec.close()
            self.vec = None
        elif self.envs:
            for env in self.envs:
                env.close()
        self.envs = []

    # -- replies ---------------------------------------------------------------------

    def _reply(self, entries: list) -> Reply:
        packed = pack(self.out, self.buffers, self.records)
        if not entries and self.objects is None:
            return packed
        entries = [(i + self.first_row, info) for i, info in entries]
        return packed, entries or None, self.objects

    def _current(self) -> int | None:
        """The env (in the block) that was running, for an in-process block."""
        if self.inner == "subproc":
            return None
        return self.pool.block.block.current // self.seats

    def _report(self, exc: BaseException, env_index: int | None) -> ErrorReport:
        """``exc`` as an ``ErrorReport`` naming the env by its index in the whole vector env."""
        if isinstance(exc, WorkerError) and exc.env_index is not None:
            env_index = exc.env_index  # from the inner SubprocVecEnv
        index = None if env_index is None else env_index + self.first
        message = str(exc)
        if isinstance(exc, (ObservationError, SpacesMismatchError, WorkerError)):
            # name envs by their index in the whole vector env, not in this block
            message = re.sub(r"\b(env|game) (\d+)",
                             lambda m: f"{m[1]} {int(m[2]) + self.first}", message)
        return report_error(exc, index, message)
