"""What a process pool drives: the kinds of block, and a command's batch for them.

A process pool's blocks are of two kinds, each a :class:`Driven` written once:
its worker processes (``fastvec.pool.process.worker_blocks``) and, with
``local_block``, the trainer's own block 0 (``fastvec.pool.process.trainer_block``).
The pool posts a command to the blocks of each kind with one *batch*
(:class:`StepBatch`, :class:`ResetBatch`, :class:`ControlBatch`) that gives each
block its message (``protocol``'s ``StepActions``, ``ResetRequest``,
``ControlRequest``), then waits for replies kind by kind; a new command is a new
batch, served by both kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import cloudpickle
import numpy as np

from fastvec._kernels.barrier import Barrier
from fastvec.pool.about import About
from fastvec.pool.base import Entries, block_mask
from fastvec.pool.block_map import BlockMap, Bounds
from fastvec.pool.buffers import Buffers
from fastvec.pool.process.protocol import (
    Command,
    ControlRequest,
    ResetRequest,
    StepActions,
    Stepping,
)
from fastvec.pool.process.shared_infos import InfoReader
from fastvec.pool.process.shm import SegmentPlan
from fastvec.spaces.actions import ActionChecker
from fastvec.spaces.layout import Layout

__all__ = ["Batch", "ControlBatch", "Driven", "LaidOut", "ResetBatch", "StepBatch"]


class StepBatch:
    """A step's checked actions (for every row, or for ``env_ids``); block ``b``'s rows
    of them on demand, split once.
    """

    # Made on a step's path: plain slots, split on first use (functools.cached_property
    # takes a lock on Python 3.11, a few microseconds a step).
    __slots__ = ("_by_row", "_per_env", "actions", "bounds", "checker", "env_ids", "partial")

    def __init__(self, actions: Any, checker: ActionChecker, env_ids: np.ndarray | None,
                 bounds: Bounds, partial: bool = False) -> None:
        self.actions, self.checker, self.env_ids, self.bounds = actions, checker, env_ids, bounds
        self.partial = partial  # env_ids leave out some rows of the blocks posted to
        self._per_env: list | None = None
        self._by_row: dict | None = None

    @property
    def per_env(self) -> list:
        """One action per row of the batch, split once."""
        if self._per_env is None:
            self._per_env = self.checker.split(self.actions)
        return self._per_env

    def rows(self, b: int) -> list:
        """Block ``b``'s actions, one per row (None for a row ``env_ids`` does not name)."""
        a, z = self.bounds[b]
        if self.env_ids is not None:
            by_row = self._by_row
            if by_row is None:
                ids = self.env_ids.tolist()
                if len(ids) == z - a and ids == list(range(a, z)):  # this block, in order:
                    return self.per_env  # as recv() gave it, the usual send()
                by_row = self._by_row = dict(zip(ids, self.per_env, strict=True))
            return [by_row.get(i) for i in range(a, z)]
        if type(self.actions) is np.ndarray:
            return list(self.actions[a:z])
        return self.per_env[a:z]

    def mask(self, b: int) -> np.ndarray | None:
        """Which of block ``b``'s rows step (None: all of them)."""
        return block_mask(self.env_ids, *self.bounds[b]) if self.partial else None

    def message(self, b: int) -> StepActions:
        return StepActions(self.rows(b), self.mask(b))


class ResetBatch:
    """A reset's per-row seeds, options and mask (None: every row)."""

    __slots__ = ("bounds", "mask", "options", "seeds")

    def __init__(self, seeds: list, options: dict | None, mask: np.ndarray | None,
                 bounds: Bounds) -> None:
        self.seeds, self.options, self.mask, self.bounds = seeds, options, mask, bounds

    def message(self, b: int) -> ResetRequest:
        a, z = self.bounds[b]
        return ResetRequest(self.seeds[a:z], self.options,
                            None if self.mask is None else self.mask[a:z])


class ControlBatch:
    """``fn(env, *args)`` for the envs (games) ``targets``, ascending; ``bounds`` count
    envs (games), as targets do.
    """

    __slots__ = ("_fn_bytes", "args_per_env", "bounds", "fn", "targets")

    def __init__(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None,
                 bounds: Bounds) -> None:
        self.fn, self.targets, self.args_per_env, self.bounds = fn, targets, args_per_env, bounds
        self._fn_bytes: bytes | None = None

    @property
    def fn_bytes(self) -> bytes:
        """``fn`` pickled once, for every worker (the trainer's block calls it as it is)."""
        if self._fn_bytes is None:
            self._fn_bytes = cloudpickle.dumps(self.fn)
        return self._fn_bytes

    def select(self, b: int) -> tuple[list[int], list[tuple] | None]:
        """Block ``b``'s targets, counted from its first env, and their arguments."""
        a, z = self.bounds[b]
        mine = [k for k, i in enumerate(self.targets) if a <= i < z]
        return ([self.targets[k] - a for k in mine],
                None if self.args_per_env is None else [self.args_per_env[k] for k in mine])

    def message(self, b: int) -> ControlRequest:
        return ControlRequest(self.fn_bytes, *self.select(b))


Batch = StepBatch | ResetBatch | ControlBatch


@dataclass(frozen=True)
class LaidOut:
    """The pool's shared segment once laid out, and the blocks' map: what every block
    attaches to (the kinds read it, never the pool).
    """

    plan: SegmentPlan
    fd: int  # the segment's descriptor, sent to each worker
    block_map: BlockMap  # counting rows
    barrier: Barrier
    buffers: Buffers  # over the segment
    infos: InfoReader
    stepping: Stepping
    obs_layout: Layout | None  # of the observation records (None: objects)
    action_layout: Layout | None  # of the action records (None: actions as messages)
    step_mask: np.ndarray  # the rows a STEP_SOME steps: a bool array over every row


class Driven(Protocol):
    """One kind of block a process pool drives (its ``blocks``, ascending).

    Replies are raw: None, an info message, entries, or the exception a block's
    failure stands for; :meth:`receive` takes one in.
    """

    @property
    def blocks(self) -> Sequence[int]:
        """This kind's blocks, ascending."""

    def about(self, b: int, deadline: float) -> About:
        """What block ``b`` built (its envs are built by then)."""

    def attach(self, b: int, shared: LaidOut, deadline: float) -> None:
        """Block ``b`` steps in the pool's laid-out buffers from now on."""

    def post(self, blocks: Sequence[int], command: Command, batch: Batch) -> None:
        """Start ``command`` on ``blocks`` (some of this kind's)."""

    def done(self, blocks: Sequence[int]) -> list[tuple[int, int]]:
        """``(ticket, b)`` for each of ``blocks`` done (or ready to run) now: its place in
        the order of completion, the barrier's tickets (for async batches over kinds).
        """

    def replies(self, blocks: Sequence[int], what: str, want: int) -> dict[int, Any]:
        """``want`` of ``blocks``' raw replies, earliest done first."""

    def receive(self, b: int, reply: Any) -> Entries:
        """Take block ``b``'s reply into the buffers; its info entries."""

    def rebuild(self, b: int) -> Any:
        """Block ``b`` with fresh envs, attached and reset: the reset's raw reply."""

    def close(self, pending: list[int], timeout: float | None, terminate: bool) -> None:
        """Close the blocks' envs (or stop at once with ``terminate``)."""
