"""The worker processes of a process pool and the barrier to them: post, wait, respawn, stop.

``Workers`` knows processes, pipes and the barrier, not envs: it posts commands
to blocks, waits for replies in short slices that check liveness and deadlines
(the waiting itself is compiled: ``fastvec._kernels.barrier``), reads each
reply's status and message, and starts, replaces and stops the processes.
Block ``b``'s worker is ``procs[b]`` (None for a block stepped in the trainer).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait as wait_for
from typing import Any

from fastvec._kernels.barrier import Barrier
from fastvec.errors import WorkerError, WorkerTimeout
from fastvec.pool.base import CLOSE_GRACE_SECONDS, SLICE_SECONDS
from fastvec.pool.process.procs import WorkerProcess, send_all
from fastvec.pool.process.protocol import Command, Status
from fastvec.pool.reports import ErrorReport

__all__ = ["Workers", "since", "usable_cpus"]

ErrorOf = Callable[[int, ErrorReport, str], BaseException]  # (block, report, what) -> error


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: taskset, cgroups, Slurm)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def since(ticket: int, base: int) -> int:
    """How many completions after ``base`` ``ticket`` came (negative: before); tickets wrap."""
    return (ticket - base + 2**31) % 2**32 - 2**31


class Workers:
    """Worker processes, one per remote block; ``barrier`` is set once the block is laid out.

    ``restart_dead``: a dead worker, or one past the timeout, is reported as a reply (to
    be restarted) rather than raised, unless fewer replies than wanted would be left
    to wait for.
    """

    barrier: Barrier

    def __init__(self, ctx: Any, num_blocks: int, timeout: float | None,
                 restart_dead: bool, daemon: bool = True) -> None:
        self.ctx = ctx
        self.daemon = daemon  # False: envs may start processes of their own
        self.procs: list[WorkerProcess | None] = [None] * num_blocks
        self.blocks: list[int] = []  # the remote blocks, ascending
        self.timeout = timeout
        self.restart_dead = restart_dead
        self.wait_timeout: float | None = None  # one wait's own limit (step_wait(timeout=))
        self.cpus = usable_cpus()
        self.posted_at = [0.0] * num_blocks  # monotonic time of each block's command
        self._next_check = 0.0  # monotonic time of the next liveness/deadline check
        self._wait_deadline = float("inf")

    def start(self, b: int, index: int, first: int, payload: bytes) -> WorkerProcess:
        """Start worker ``index`` for block ``b`` (``first``: its first env, for messages)."""
        proc = WorkerProcess(self.ctx, index, b, first, payload, self.daemon)
        self.procs[b] = proc
        if b not in self.blocks:
            self.blocks = sorted([*self.blocks, b])
        return proc

    def __getitem__(self, b: int) -> WorkerProcess:
        proc = self.procs[b]
        assert proc is not None, f"block {b} has no worker"
        return proc

    @property
    def pids(self) -> list[int | None]:
        return [self[b].process.pid for b in self.blocks]

    @property
    def exitcodes(self) -> list[int | None]:
        return [self[b].process.exitcode for b in self.blocks]

    # -- commands --------------------------------------------------------------------

    def send(self, blocks: Sequence[int], messages: Sequence[Any]) -> None:
        """One message to each block's worker (see :func:`send_all`)."""
        send_all([self[b] for b in blocks], messages)

    def post(self, blocks: Sequence[int], command: Command) -> None:
        """Post ``command`` to ``blocks``, noting when (for the timeout)."""
        now = time.monotonic()
        posted_at = self.posted_at
        for b in blocks:
            posted_at[b] = now
        self.barrier.post(blocks, command)

    def let_run(self, blocks: Sequence[int]) -> None:
        """Give this process's core up once for each of ``blocks`` still busy, when the
        workers and this process are more than the cores they may use.

        Async batches: a block is mostly done already when the trainer asks for a
        batch, so the trainer never waits and never gives its core up; a worker the
        scheduler queued on its core would run only when its time slice ends, and
        its block would come back a few times in a thousand batches (while idle
        workers elsewhere spin on their cores).  Each yield lets one of them run.
        """
        if len(self.blocks) + 1 > self.cpus:
            for _ in range(len(blocks) - len(self.barrier.done_in_order(blocks))):
                os.sched_yield()

    # -- waiting ---------------------------------------------------------------------

    def wait(self, waiting: list[int], what: str, want: int, error_of: ErrorOf
             ) -> dict[int, Any]:
        """Raw replies of ``want`` of ``waiting``, earliest done first.

        A reply is None, ``Status.INFOS``, a message, or an exception (the worker
        raised, ``error_of`` made it from its report, or it died).
        """
        now = time.monotonic()
        deadline = now + (self.timeout if self.timeout else float("inf"))
        self._wait_deadline = float("inf")
        if self.wait_timeout is not None:
            self._wait_deadline = now + self.wait_timeout
            deadline = min(deadline, self._wait_deadline)
        replies: dict[int, Any] = {}
        barrier = self.barrier
        if self.restart_dead and self.timeout:  # a hung worker takes its place first
            self._report_late(waiting, replies, want, what, now)
        while len(replies) < want:
            done = barrier.wait(waiting, want - len(replies), SLICE_SECONDS)
            if done == len(waiting) == want - len(replies):
                for b in waiting:  # every one wanted and done: no order to keep
                    replies[b] = self._reply(b, deadline, what, error_of)
                return replies
            for b in barrier.done_in_order(waiting)[: want - len(replies)]:
                waiting.remove(b)
                replies[b] = self._reply(b, deadline, what, error_of)
            # Liveness and deadlines are checked whenever a wait comes back short, and
            # at least every SLICE_SECONDS while batches keep coming, so a dead or hung
            # worker is noticed even when others are always ready first (async batches).
            now = time.monotonic()
            if waiting and (len(replies) < want or now >= self._next_check):
                self._next_check = now + SLICE_SECONDS
                self._check_waiting(waiting, replies, want, what, now)
        return replies

    def _check_waiting(self, waiting: list[int], replies: dict[int, Any], want: int,
                       what: str, now: float) -> None:
        """Report dead workers among ``waiting`` (into ``replies``); raise on a late one."""
        # A worker that died with a command pending is reported now, even when
        # enough others are ready (unless it would be restarted into a bigger batch),
        # and without waiting for the others when it is not to be restarted.
        for b in self._dead(waiting):
            if not self.barrier.is_done(b) and (len(replies) < want or not self.restart_dead):
                waiting.remove(b)
                replies[b] = self[b].died(what)
                if not self.restart_dead:
                    raise replies[b]
        # Late: a command older than the timeout, whether or not the trainer needs
        # that worker for this batch (async batches would silently drop it).  To be
        # restarted, it is a failure in its own place, as a dead worker is.
        if self.timeout:
            if self.restart_dead:
                self._report_late(waiting, replies, want, what, now)
            else:
                late = [self[b].index for b in self._late(waiting, now)]
                if late:
                    raise WorkerTimeout(f"workers {late} did not finish {what} within "
                                        f"timeout={self.timeout} s")
        if now > self._wait_deadline:
            late = [self[b].index for b in waiting if not self.barrier.is_done(b)]
            if late:
                raise WorkerTimeout(f"workers {late} did not finish {what} within the "
                                    f"wait's timeout={self.wait_timeout} s")

    def _late(self, blocks: list[int], now: float) -> list[int]:
        """The blocks among ``blocks`` whose command is older than the timeout, unfinished."""
        assert self.timeout
        return [b for b in blocks if now - self.posted_at[b] > self.timeout
                and not self.barrier.is_done(b)]

    def _report_late(self, waiting: list[int], replies: dict[int, Any], want: int,
                     what: str, now: float) -> None:
        """Late workers among ``waiting`` as ``WorkerTimeout`` replies (to be restarted),
        as many as the wait still wants.
        """
        for b in self._late(waiting, now)[:max(want - len(replies), 0)]:
            waiting.remove(b)
            replies[b] = WorkerTimeout(f"worker {self[b].index} did not finish {what} "
                                       f"within timeout={self.timeout} s")

    def _dead(self, blocks: list[int]) -> list[int]:
        """The blocks among ``blocks`` whose worker has exited (one poll for all)."""
        if not blocks:
            return []
        ready = set(wait_for([self[b].sentinel for b in blocks], timeout=0))
        return [b for b in blocks if self[b].sentinel in ready]

    def _reply(self, b: int, deadline: float, what: str, error_of: ErrorOf) -> Any:
        status = self.barrier.status(b)
        if status == Status.OK:
            return None
        if status == Status.INFOS:
            return Status.INFOS
        try:
            if status == Status.MESSAGE_SENT:  # whole on the pipe: no need to wait
                message = self[b].recv_now(what)
            else:
                message = self[b].recv(deadline, what)
        except WorkerError as exc:
            return exc
        return error_of(b, message, what) if status == Status.ERROR else message

    # -- replacing and stopping ------------------------------------------------------

    def kill(self, b: int) -> WorkerProcess:
        """Kill block ``b``'s worker at once; its command counts as done."""
        proc = self[b]
        proc.kill()
        self.barrier.settle(b)
        return proc

    def close(self, pending: Sequence[int], timeout: float | None, terminate: bool) -> None:
        """Stop every worker: at once with ``terminate``, else after ``pending`` blocks'
        commands had until ``timeout`` to finish and the envs were asked to close.
        """
        start = time.monotonic()
        procs = [p for p in self.procs if p is not None]
        self.procs = [None] * len(self.procs)
        if terminate:
            for proc in procs:
                proc.kill()
            return
        barrier = getattr(self, "barrier", None)
        busy = [p.block for p in procs if p.block in pending and p.alive]
        if barrier is not None and busy and timeout is not None:
            deadline = start + timeout
            while busy and time.monotonic() < deadline:
                barrier.wait(busy, len(busy), min(SLICE_SECONDS, deadline - time.monotonic()))
                busy = [p.block for p in procs if p.block in busy and p.alive
                        and not barrier.is_done(p.block)]
        live = [p for p in procs if p.alive]
        if barrier is not None:
            barrier.post([p.block for p in live], Command.CLOSE)
        for proc in live:
            if not proc.attached:  # still starting up, it listens on its pipe
                proc.tell_to_stop()
        grace = CLOSE_GRACE_SECONDS if timeout is None else max(
            timeout - (time.monotonic() - start), 0.0)
        deadline = time.monotonic() + grace
        for proc in procs:
            proc.stop(deadline - time.monotonic())
        self.__dict__.pop("barrier", None)
