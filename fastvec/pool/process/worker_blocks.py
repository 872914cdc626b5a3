"""The worker processes' blocks, driven by a process pool: one kind of ``Driven``.

Each remote block's envs live in a worker process (:mod:`fastvec.pool.process.worker`);
commands go through the barrier (:class:`fastvec.pool.process.workers.Workers`),
actions with a record layout through the shared segment, anything else as a
message on the worker's pipe.  Replies are read here: a worker's report becomes
the error it stands for, a reply's observation objects and info layout are taken in.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from fastvec.pool.about import About
from fastvec.pool.base import STARTUP_SECONDS, Entries
from fastvec.pool.block_map import BlockMap
from fastvec.pool.notes import relay
from fastvec.pool.process.driven import Batch, LaidOut, StepBatch
from fastvec.pool.process.protocol import (
    Attach,
    BlockReply,
    Command,
    ResendInfos,
    ResetRequest,
    Status,
)
from fastvec.pool.process.workers import Workers
from fastvec.pool.reports import ErrorReport, RemoteTraceback, env_failure, rebuild_mistake
from fastvec.spaces.layout import copy_into

__all__ = ["WorkerBlocks"]

INFOS = Status.INFOS  # looked up once, not on every step


class WorkerBlocks:
    """The blocks of ``workers`` (block ``b``'s env functions pickled in ``payloads[b]``).

    ``block_map``: the pool's blocks, until the shared segment brings the one that
    counts rows; ``action_views`` (the shared action records, or None for spaces
    without a record layout) are set by the pool.
    """

    def __init__(self, block_map: BlockMap, workers: Workers, payloads: dict[int, bytes]
                 ) -> None:
        self.block_map = block_map
        self.workers = workers
        self.payloads = payloads
        self.action_views: Any = None
        self.shared: LaidOut | None = None

    @property
    def blocks(self) -> list[int]:
        return self.workers.blocks

    def start(self, blocks: range) -> None:
        """Start a worker for each of ``blocks`` (worker k for the k-th)."""
        for k, b in enumerate(blocks):
            self.workers.start(b, k, self.block_map.unit_bounds[b][0], self.payloads[b])

    # -- start-up ------------------------------------------------------------------------

    def about(self, b: int, deadline: float) -> About:
        message = self.workers[b].recv(deadline, "start-up")
        if isinstance(message, ErrorReport):  # the user's mistake is raised as it is
            raise rebuild_mistake(message) or self.error(b, message, "building its envs")
        return message

    def attach(self, b: int, shared: LaidOut, deadline: float) -> None:
        self.shared = shared
        self.block_map = shared.block_map
        worker = self.workers[b]
        worker.send(Attach(shared.plan, self.block_map.bounds[b][0], b, self.block_map.num_blocks,
                           shared.stepping.mode, shared.obs_layout, shared.action_layout,
                           shared.stepping.frame_stack))
        worker.send_fd(shared.fd)
        message = worker.recv(deadline, "start-up")
        if isinstance(message, ErrorReport):
            raise self.error(b, message, "attaching shared memory")
        worker.attached = True

    # -- commands ------------------------------------------------------------------------

    def post(self, blocks: Sequence[int], command: Command, batch: Batch) -> None:
        views = self.action_views
        if type(batch) is StepBatch and views is not None:  # actions through shared records
            if type(views) is np.ndarray and batch.env_ids is None:
                np.copyto(views, batch.actions)
            else:
                copy_into(views, batch.actions, batch.env_ids)
                if batch.partial:
                    self._post_some(blocks, batch)
                    return
        else:
            self.workers.send(blocks, [batch.message(b) for b in blocks])
        self.workers.post(blocks, command)

    def _post_some(self, blocks: Sequence[int], batch: StepBatch) -> None:
        """Post a step that names some rows only of some of ``blocks``: those blocks
        step the rows the shared step mask selects, the others step whole.
        """
        masks = [batch.mask(b) for b in blocks]
        assert self.shared is not None
        step_mask = self.shared.step_mask
        whole, some = [], []
        for b, mask in zip(blocks, masks, strict=True):
            if mask is None:
                whole.append(b)
            else:
                a, z = self.block_map.bounds[b]
                step_mask[a:z] = mask
                some.append(b)
        if whole:
            self.workers.post(whole, Command.STEP)
        self.workers.post(some, Command.STEP_SOME)

    def done(self, blocks: Sequence[int]) -> list[tuple[int, int]]:
        """``(ticket, b)`` of the ``blocks`` done, after letting the busy ones run."""
        self.workers.let_run(blocks)
        barrier = self.workers.barrier
        return [(barrier.ticket(b), b) for b in barrier.done_in_order(blocks)]

    def replies(self, blocks: Sequence[int], what: str, want: int) -> dict[int, Any]:
        """``Workers.wait``; for a few of many, the busy workers are let run first."""
        if len(blocks) >= want + 2:  # this process would never wait
            self.workers.let_run(blocks)
        return self.workers.wait(list(blocks), what, want, self.error)  # it takes from it

    def receive(self, b: int, reply: Any) -> Entries:
        if reply is None:
            return []
        assert self.shared is not None
        a, z = self.block_map.bounds[b]
        if reply is INFOS:  # the common reply of a step with infos: first, and short
            return [self.shared.infos.read(b, a, z - a)]
        assert isinstance(reply, BlockReply)
        if reply.notes:
            relay(reply.notes)
        self.shared.buffers.obs.receive(a, reply.obs_objects)
        if reply.info_schema is not None:  # its infos come through its info area from now
            self.shared.infos.learn(b, reply.info_schema)
        return list(reply.entries)

    def resend_infos(self, b: int) -> None:
        """Ask block ``b`` (idle: its reply was read) for the raw infos of its last step."""
        self.workers[b].send(ResendInfos())
        self.workers.post([b], Command.CONTROL)

    def error(self, b: int, report: ErrorReport, what: str) -> BaseException:
        """The error worker ``b``'s ``report`` stands for (the user's mistake as it was)."""
        mistake = rebuild_mistake(report)
        if mistake is not None:
            return mistake
        env_index = report.env_index
        if env_index is not None:  # the worker counts the envs (games) of its block from 0
            env_index += self.block_map.unit_bounds[b][0]
        return env_failure(self.block_map.where(b, env_index), report.type_name,
                           report.message, what, env_index=env_index,
                           worker_index=self.workers[b].index,
                           cause=RemoteTraceback(report.traceback))

    # -- restart and shutdown ------------------------------------------------------------

    def rebuild(self, b: int) -> Any:
        assert self.shared is not None
        self.shared.infos.forget(b)
        old = self.workers.kill(b)
        self.workers.start(b, old.index, self.block_map.unit_bounds[b][0], self.payloads[b])
        deadline = time.monotonic() + STARTUP_SECONDS
        self.about(b, deadline)
        self.attach(b, self.shared, deadline)
        a, z = self.block_map.bounds[b]
        self.workers[b].send(ResetRequest([None] * (z - a), None, None))
        self.workers.post([b], Command.RESET)
        return self.replies([b], "a reset after restart", 1)[b]

    def close(self, pending: list[int], timeout: float | None, terminate: bool) -> None:
        self.workers.close(pending, timeout, terminate)
        self.action_views = self.shared = None
