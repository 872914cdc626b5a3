"""The Ray actor's side of ``RayVecEnv``: one block of envs in a pool of its own.

``EnvActor`` is a plain class; :mod:`fastvec.pool.ray.pool` makes it a Ray actor
with ``ray.remote`` (so this module does not import Ray).  It builds its block's
envs from cloudpickled env fns and hosts them in a pool made by
:mod:`fastvec.pool.build`: a ``LocalPool`` (``inner="sync"``: stepped in the
actor's process) or a ``ProcessPool`` (``inner="subproc"``: worker processes on
the actor's node), with the vector env's autoreset mode.  Every host runs the
bottom unit, never a vector env: the envs' raw infos come back (the trainer
batches every block's infos in env order, as Gymnasium does), and episode
statistics stay in the trainer.

One remote call per step: ``step`` returns the block's results packed in one
uint8 array (:func:`pack`: rewards, observation records, terminations,
truncations, needs-reset, alive, active), or a tuple ``(packed, entries,
objects)`` when the envs returned infos or the observations have no record
layout.  Errors come back as ``ErrorReport`` values (``fastvec.pool.reports``)
with the env's index in the whole vector env, never as exceptions, so the
trainer can tell an env that raised (a value) from an actor that died (Ray's
``RayActorError``).
"""

from __future__ import annotations

import os
import re
from typing import Any

import cloudpickle
import numpy as np
from gymnasium.vector.utils import batch_space

from fastvec.errors import EnvFnError, ObservationError, SpacesMismatchError, WorkerError
from fastvec.pool.about import About
from fastvec.pool.base import Pool
from fastvec.pool.buffers import RESULT_FIELDS
from fastvec.pool.build import local_pool, process_pool
from fastvec.pool.env_fns import checked, close_quietly
from fastvec.pool.local import LocalPool
from fastvec.pool.reports import ErrorReport, report_error
from fastvec.spaces.actions import ActionChecker, CheckersBySize

__all__ = ["EnvActor", "pack", "packed_size", "unpack"]

Reply = Any  # np.ndarray | tuple[np.ndarray, list | None, list | None] | ErrorReport


def packed_size(count: int, record_size: int) -> int:
    """Bytes of a block's packed results: each result field's rows, then the records."""
    return count * (sum(f.dtype.itemsize for f in RESULT_FIELDS) + record_size)


def unpack(packed: np.ndarray, count: int, record_size: int
           ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Views of a packed block: ``({field name: its rows}, records)``."""
    fields, offset = {}, 0
    for field in RESULT_FIELDS:
        size = count * field.dtype.itemsize
        fields[field.name] = packed[offset:offset + size].view(field.dtype)
        offset += size
    return fields, packed[offset:offset + count * record_size].reshape(count, record_size)


def pack(out: np.ndarray, buffers: Any, records: np.ndarray | None) -> np.ndarray:
    """The block's results from ``buffers`` (and observation ``records``) into ``out``."""
    count = len(buffers.rewards)
    fields, rows = unpack(out, count, 0 if records is None else records.shape[1])
    for name, view in fields.items():
        view[:] = getattr(buffers, name)
    if records is not None:
        rows[:] = records
    return out


class EnvActor:
    """Envs (or games) ``first:first + count`` of a vector env, in a pool of their own.

    ``first`` counts env functions; the block's rows start at ``first * seats``
    (a game fills one row per seat).  ``mode``: the kernels' autoreset code.
    """

    def __init__(self, env_fns_bytes: bytes, first: int, inner: str, mode: int,
                 inner_options: dict | None = None, frame_stack: Any = None) -> None:
        self.first = first
        self.first_row = first
        self.inner = inner
        self.mode = mode
        self.inner_options = dict(inner_options or {})
        self.frame_stack = frame_stack  # a FrameStack, or None
        self.env_fns_bytes = env_fns_bytes
        self.pool: Pool | None = None

    # -- start-up --------------------------------------------------------------------

    def about(self) -> About | ErrorReport:
        """Build the envs and the pool that hosts them; what they are, or why not."""
        building = None
        envs: list = []
        try:
            env_fns = cloudpickle.loads(self.env_fns_bytes)
            pool: Pool
            if self.inner == "subproc":
                processes = process_pool(env_fns, self.mode, False, **self.inner_options,
                                         frame_stack=self.frame_stack)
                processes.send_raw_infos()  # the trainer batches every block's infos
                pool = processes
            else:
                for building, env_fn in enumerate(env_fns):
                    envs.append(checked(env_fn(), building))
                building = None
                pool = local_pool(envs, self.mode, False, frame_stack=self.frame_stack)
            self.pool = pool
        except BaseException as exc:  # noqa: B036 - reported to the trainer
            close_quietly(envs)
            return self._report(exc, building)
        self.blocks = list(range(pool.num_blocks))
        self.buffers = pool.buffers
        self.records = getattr(self.buffers.obs, "rows", None)
        self.objects = getattr(self.buffers.obs, "objects", None)
        count = pool.num_rows
        self.first_row = self.first * pool.seats
        action_space = pool.about.action_space
        self.checker = ActionChecker(action_space, batch_space(action_space, count), count)
        self.checkers = CheckersBySize(action_space)  # for steps of some rows
        record_size = 0 if self.records is None else self.records.shape[1]
        self.out = np.zeros(packed_size(count, record_size), dtype=np.uint8)
        return pool.about

    def pid(self) -> int:
        """The actor's process id."""
        return os.getpid()

    # -- commands --------------------------------------------------------------------

    def step(self, actions: Any, rows: np.ndarray | None = None) -> Reply:
        """Step the block with its actions (a checked batch for its envs, in order), or
        only its ``rows`` (ascending, counted from the block's first) with theirs.
        """
        pool = self.pool
        assert pool is not None
        try:
            if rows is None:
                pool.post_step(self.blocks, actions, self.checker)
                _, entries = pool.collect_entries(self.blocks, "a step")
            else:
                blocks = [b for b, (a, z) in enumerate(pool.bounds)
                          if ((rows >= a) & (rows < z)).any()]
                pool.post_step(blocks, actions, self.checkers(len(rows)), rows)
                _, entries = pool.collect_entries(blocks, "a step")
        except BaseException as exc:  # noqa: B036 - reported to the trainer
            return self._report(exc, self._current())
        return self._reply(entries)

    def reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> Reply:
        """Reset the block's envs (those in ``mask``) with per-env seeds."""
        pool = self.pool
        assert pool is not None
        blocks = [b for b, (a, z) in enumerate(pool.bounds) if mask is None or mask[a:z].any()]
        try:
            pool.post_reset(blocks, seeds, options, mask)
            _, entries = pool.collect_entries(blocks, "a reset", restart_truncates=False)
        except BaseException as exc:  # noqa: B036 - reported to the trainer
            return self._report(exc, self._current())
        self.buffers.clear(slice(None) if mask is None else mask)
        return self._reply(entries)

    def control(self, fn_bytes: bytes, targets: list[int], args_per_env: list | None
                ) -> list | ErrorReport:
        """``fn(env, *args)`` for the block's envs ``targets`` (counted from its first)."""
        assert self.pool is not None
        try:
            return self.pool.control(cloudpickle.loads(fn_bytes), targets, args_per_env,
                                     "a call")
        except BaseException as exc:  # noqa: B036 - reported to the trainer
            return self._report(exc, self._current(control=True))

    def close(self) -> None:
        """Close the hosted pool (and its envs)."""
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.close()

    # -- replies ---------------------------------------------------------------------

    def _reply(self, entries: list) -> Reply:
        packed = pack(self.out, self.buffers, self.records)
        if not entries and self.objects is None:
            return packed
        entries = [(i + self.first_row, info) for i, info in entries]
        return packed, entries or None, self.objects

    def _current(self, control: bool = False) -> int | None:
        """The env (in the block) that was running, for a block stepped in this process
        (a process pool's errors name their env themselves).
        """
        if not isinstance(self.pool, LocalPool):
            return None
        block = self.pool.block
        return block.control_index if control else block.current

    def _report(self, exc: BaseException, env_index: int | None) -> ErrorReport:
        """``exc`` as an ``ErrorReport`` naming the env by its index in the whole vector env."""
        if isinstance(exc, WorkerError) and exc.env_index is not None:
            env_index = exc.env_index  # from the inner process pool
        index = None if env_index is None else env_index + self.first
        if isinstance(exc, WorkerError) and exc.raised is not None:
            # the env's own exception: the trainer says where it happened, in its words
            report = report_error(exc, index, exc.raised[1])
            return report._replace(type_name=exc.raised[0])
        message = str(exc)
        if isinstance(exc, (EnvFnError, ObservationError, SpacesMismatchError, WorkerError)):
            # fastvec's own messages: name envs by their index in the whole vector env
            message = re.sub(r"\b(env|game) (\d+)|\b(env_fns)\[(\d+)\]",
                             lambda m: f"{m[1]} {int(m[2]) + self.first}" if m[1] else
                             f"env_fns[{int(m[4]) + self.first}]", message)
        return report_error(exc, index, message)
