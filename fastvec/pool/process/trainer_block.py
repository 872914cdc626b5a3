"""The trainer's own block (``local_block=True``): block 0 of a process pool, stepped in
this process while the workers step theirs; one kind of ``Driven``.

Its envs are built here while the workers build theirs; it steps in the same
shared rows with the same compiled stepper (a :class:`fastvec.pool.local.LocalBlock`).
A command is run when the pool waits for it, after the workers were posted
theirs; an env's exception becomes the ``WorkerError`` a worker's would be.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastvec.errors import EnvFnError, ObservationError, WorkerError
from fastvec.pool.about import About, describe
from fastvec.pool.base import Entries
from fastvec.pool.block_map import BlockMap
from fastvec.pool.env_fns import checked, close_quietly
from fastvec.pool.local import LocalBlock
from fastvec.pool.process.driven import Batch, ControlBatch, LaidOut, ResetBatch, StepBatch
from fastvec.pool.process.protocol import Command, ControlReply
from fastvec.pool.process.shared_infos import BlockInfos
from fastvec.pool.reports import env_failure

__all__ = ["TrainerBlock", "build_local_envs", "local_error"]

# How messages name the trainer's block before the pool's map is known (building its envs).
LOCAL_ONLY = BlockMap([(0, 0)], [(0, 0)], first_remote=1)


def local_error(exc: Exception, env_index: int | None, what: str,
                block_map: BlockMap = LOCAL_ONLY) -> WorkerError:
    """The error a worker would report for ``exc`` in env (game) ``env_index`` of the
    trainer's own block, block 0 of ``block_map`` (``worker_index`` None, the exception
    itself as ``__cause__``).
    """
    return env_failure(block_map.where(0, env_index), type(exc).__name__, str(exc), what,
                       env_index=env_index, worker_index=None, cause=exc)


def build_local_envs(env_fns: Sequence[Callable[[], Any]]) -> list:
    """The trainer's block's envs; an env that raises is the ``WorkerError`` a worker's
    would be, one that returns no env an ``EnvFnError`` (the ones built before are closed).
    """
    envs: list = []
    for index, env_fn in enumerate(env_fns):
        try:
            envs.append(checked(env_fn(), index))
        except EnvFnError:
            close_quietly(envs)
            raise
        except Exception as exc:
            close_quietly(envs)
            raise local_error(exc, index, "building its envs") from exc
    return envs


class TrainerBlock:
    """Block 0 of a process pool, its envs built from ``env_fns`` now."""

    def __init__(self, env_fns: Sequence[Callable]) -> None:
        self.blocks = (0,)
        self.env_fns = list(env_fns)
        self.envs = build_local_envs(self.env_fns)
        self.block: LocalBlock | None = None
        self.shared: LaidOut | None = None
        self.control_call: ControlBatch | None = None  # posted, run when waited for
        # Its place in the order of completion: the barrier's ticket taken at the first
        # wait after its post (see done).
        self.ticket: int | None = None

    def about(self, b: int, deadline: float) -> About:
        return describe(self.envs)

    def attach(self, b: int, shared: LaidOut, deadline: float) -> None:
        self.shared = shared
        self.raw_only = shared.infos.raw_only  # set: infos are sent raw, not batched
        self.block = LocalBlock(self.envs, 0, shared.buffers, shared.stepping.mode,
                                shared.stepping.frame_stack)

    # -- commands ------------------------------------------------------------------------

    def done(self, blocks: Sequence[int]) -> list[tuple[int, int]]:
        """Block 0 is ready whenever this process runs it: from the first wait after its
        post it takes its turn in the order of completion (the barrier's next ticket), after
        the workers done before, so it neither always comes first nor last.
        """
        assert self.shared is not None
        if self.ticket is None:
            self.ticket = self.shared.barrier.take_ticket()
        return [(self.ticket, 0)]

    def post(self, blocks: Sequence[int], command: Command, batch: Batch) -> None:
        assert self.block is not None
        self.ticket = None
        if type(batch) is StepBatch:
            self.block.post_step(batch.rows(0), batch.mask(0))
        elif type(batch) is ResetBatch:
            self.block.post_reset(*batch.message(0))
        else:
            assert type(batch) is ControlBatch
            self.control_call = batch

    def replies(self, blocks: Sequence[int], what: str, want: int) -> dict[int, Any]:
        """Block 0's command, run; its infos batched already where they batch exactly
        (while the workers still step, rather than after them).
        """
        block = self.block
        assert block is not None and self.shared is not None
        if self.control_call is not None:
            call, self.control_call = self.control_call, None
            try:
                return {0: ControlReply(block.control(call.fn, *call.select(0)))}
            except Exception as exc:
                return {0: local_error(exc, block.control_index, what, self.shared.block_map)}
        try:
            entries = block.run()
        except ObservationError as exc:
            return {0: exc}
        except Exception as exc:
            return {0: local_error(exc, block.current, what, self.shared.block_map)}
        if entries and not self.raw_only[0]:
            infos = BlockInfos.local(entries, block.stop)
            if infos is not None:
                return {0: [(0, infos)]}
        return {0: entries}

    def receive(self, b: int, reply: Any) -> Entries:
        return reply

    # -- restart and shutdown ------------------------------------------------------------

    def rebuild(self, b: int) -> Any:
        assert self.block is not None and self.shared is not None
        try:
            self.block.close()
        except Exception:  # noqa: S110 - the envs are being replaced
            pass
        self.envs = build_local_envs(self.env_fns)
        self.attach(0, self.shared, 0.0)
        self.block.post_reset([None] * self.block.stop, None, None)
        return self.replies([0], "a reset after restart", 1)[0]

    def close(self, pending: list[int], timeout: float | None, terminate: bool) -> None:
        block, self.block, self.shared = self.block, None, None
        self.__dict__.pop("raw_only", None)  # a view of the shared segment: let it unmap now
        if block is not None:
            block.close(terminate)
        elif self.envs and not terminate:  # built, never attached
            close_quietly(self.envs)  # never hiding the error that stopped start-up
        self.envs = []
