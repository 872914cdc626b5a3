"""ProcessPool: one worker process per block, stepping through shared memory.

The parent's side of ``fastvec._worker``: start-up (build the envs, check their
spaces, lay out the shared block, attach), posting commands through the barrier,
waiting for them in short slices that check liveness and the deadline, decoding
the workers' replies (``fastvec._protocol``), restarting a worker, and shutdown.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait as wait_for
from typing import Any

import cloudpickle
import numpy as np

from fastvec._actions import ActionChecker
from fastvec._buffers import Buffers
from fastvec._failure_policy import DEFAULT_MAX_RESTARTS, Restarts
from fastvec._games import check_blocks
from fastvec._kernels.barrier import Barrier, barrier_nbytes
from fastvec._layout import batch_views, copy_into, layout_of
from fastvec._obs_store import make_obs_store
from fastvec._observation_mode import ObservationMode, observation_spaces, same_space_hint
from fastvec._pool import Entries, Pool
from fastvec._procs import SLICE_SECONDS, WorkerProcess, send_all
from fastvec._protocol import (
    Attach,
    BlockReply,
    Command,
    ControlRequest,
    ErrorReport,
    Hello,
    Region,
    RemoteTraceback,
    ResendInfos,
    ResetRequest,
    Status,
    StepActions,
    rebuild_mistake,
    spin_budget_us,
)
from fastvec._shared_infos import INFO_BYTES, InfoReader
from fastvec._shm import SharedBlock, plan_block
from fastvec.errors import WorkerError, WorkerTimeout

__all__ = ["ProcessPool"]

STARTUP_SECONDS = 300.0  # building envs may be slow (asset loading), but not forever
CLOSE_GRACE_SECONDS = 1.0


class ProcessPool(Pool):
    """Worker processes, one per block of ``bounds``, started and checked at once.

    ``bounds`` count env functions; for games, which fill one row per seat, the
    pool's ``bounds`` count rows once the workers have said what they built
    (``unit_bounds`` keeps the env functions' blocks).  After construction
    ``hello`` holds the envs' spaces, metadata and render mode; :meth:`attach`
    then lays out the shared block and hands it to the workers.
    """

    owner = "SubprocVecEnv"
    observation_spaces: tuple[Any, Any]  # (single, batched or None): _observation_mode

    def __init__(self, env_fns: Sequence[Callable], bounds: list[tuple[int, int]], ctx: Any,
                 timeout: float | None, on_failure: str,
                 observation_mode: ObservationMode = "same",
                 max_restarts: int | None = DEFAULT_MAX_RESTARTS) -> None:
        self.bounds = self.unit_bounds = bounds
        self.observation_mode = observation_mode
        self.timeout = timeout
        self.wait_timeout: float | None = None  # one wait's own limit (step_wait(timeout=))
        self._wait_deadline = float("inf")
        self.on_failure = on_failure
        self.restarts = Restarts(len(env_fns), max_restarts)
        self._ctx = ctx
        self._workers: list[WorkerProcess] = []
        self._shared: SharedBlock | None = None
        self._posted_at = np.zeros(len(bounds))  # monotonic time of each worker's command
        self._next_check = 0.0  # monotonic time of the next liveness/deadline check
        self._cpus = len(os.sched_getaffinity(0))  # the cores this process may use
        self._env_fns_bytes = [cloudpickle.dumps(list(env_fns[a:b])) for a, b in bounds]
        try:
            for w, fns in enumerate(self._env_fns_bytes):
                self._workers.append(WorkerProcess(ctx, w, bounds[w][0], fns))
            self._check_spaces()
        except BaseException:
            self.close()
            raise

    def _check_spaces(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        self.hellos = hellos = [self._hello(w, deadline) for w in range(self.num_blocks)]
        self.hello = hellos[0]
        spaces = [triple for hello in hellos for triple in hello.env_spaces]
        first = self.bounds[0][0]
        check_blocks(hellos, first, self.observation_mode == "same", same_space_hint)
        if first == 0:  # else env 0 is in a local block: TrainerBlockPool decides
            self.observation_spaces = observation_spaces(
                self.observation_mode, [triple[0] for triple in spaces],
                games=self.hello.agents is not None)
        self.count_rows(self.hello)

    @property
    def pids(self) -> list[int | None]:
        """Each worker's process id."""
        return [worker.process.pid for worker in self._workers]

    @property
    def exitcodes(self) -> list[int | None]:
        """Each worker's exit code (None while it runs)."""
        return [worker.process.exitcode for worker in self._workers]

    @property
    def infos_raw_only(self) -> bool:
        """Whether workers were told to send raw infos only (their blocks disagreed)."""
        return bool(self.infos.raw_only[0])

    # -- start-up --------------------------------------------------------------------

    def attach(self, mode: int, copy: bool) -> Buffers:
        """Lay out the shared block, hand it to every worker; the batch buffers in it."""
        n = self.bounds[-1][1]
        obs_space = self.observation_spaces[0]
        obs_layout = layout_of(obs_space)
        act_layout = layout_of(self.hello.action_space)
        self._plan = plan_block([
            (Region.BARRIER, (barrier_nbytes(self.num_blocks),), "u1"),
            (Region.OBS, (n, obs_layout.record_size if obs_layout else 0), "u1"),
            (Region.ACTIONS, (n, act_layout.record_size if act_layout else 0), "u1"),
            (Region.REWARDS, (n,), "f8"),
            (Region.TERMINATIONS, (n,), "?"),
            (Region.TRUNCATIONS, (n,), "?"),
            (Region.NEEDS_RESET, (n,), "?"),
            (Region.ALIVE, (n,), "?"),
            (Region.ACTIVE, (n,), "?"),
            (Region.INFOS, (self.num_blocks, INFO_BYTES), "u1"),
            (Region.INFOS_RAW_ONLY, (1,), "u1"),
        ])
        self._shared = SharedBlock.create(self._plan)
        arrays = self._shared.arrays
        self._mode = mode
        self._barrier = Barrier(arrays[Region.BARRIER], self.num_blocks, spin_budget_us())
        self.infos = InfoReader(arrays[Region.INFOS], arrays[Region.INFOS_RAW_ONLY],
                                self._last_infos)
        self._action_views = None if act_layout is None else batch_views(
            act_layout, arrays[Region.ACTIONS])
        store = make_obs_store(obs_space, n, copy, arrays[Region.OBS])
        self.buffers = Buffers(store, *(arrays[region] for region in Region.RESULTS))
        deadline = time.monotonic() + STARTUP_SECONDS
        for w in range(self.num_blocks):
            self._attach(w, deadline)
        return self.buffers

    def _hello(self, w: int, deadline: float) -> Hello:
        message = self._workers[w].recv(deadline, "start-up")
        if isinstance(message, ErrorReport):  # the user's mistake is raised as it is
            raise rebuild_mistake(message) or self._error(w, message, "building its envs")
        return message

    def _attach(self, w: int, deadline: float) -> None:
        assert self._shared is not None
        worker = self._workers[w]
        worker.send(Attach(self._plan, self.bounds[w][0], self.num_blocks, self._mode))
        worker.send_fd(self._shared.fd)
        message = worker.recv(deadline, "start-up")
        if isinstance(message, ErrorReport):
            raise self._error(w, message, "attaching shared memory")
        worker.attached = True

    # -- commands --------------------------------------------------------------------

    def post_step(self, blocks: Sequence[int], actions: Any, checker: ActionChecker,
                  env_ids: np.ndarray | None = None) -> None:
        if self._action_views is not None:
            copy_into(self._action_views, actions, env_ids)
        else:
            per_env = checker.split(actions)
            by_env: Any = per_env if env_ids is None else dict(zip(env_ids.tolist(), per_env))
            send_all([self._workers[w] for w in blocks],
                     [StepActions([by_env[i] for i in range(*self.bounds[w])]) for w in blocks])
        self._post(blocks, Command.STEP)

    def post_reset(self, blocks: Sequence[int], seeds: list, options: dict | None,
                   mask: np.ndarray | None) -> None:
        send_all([self._workers[w] for w in blocks],
                 [ResetRequest(seeds[a:b], options, None if mask is None else mask[a:b])
                  for a, b in (self.bounds[w] for w in blocks)])
        self._post(blocks, Command.RESET)

    def collect(self, blocks: Sequence[int], what: str, want: int | None = None,
                restart_truncates: bool = True) -> tuple[list[int], Entries]:
        return self.settle(self.collect_entries(blocks, what, want), restart_truncates)

    def collect_entries(self, blocks: Sequence[int], what: str, want: int | None = None
                        ) -> dict[int, Entries | BaseException]:
        """``collect`` before the failure policy: each block's entries, or its exception."""
        replies = self._collect(blocks, what, want)
        for w, reply in replies.items():
            if reply is None:
                replies[w] = []
            elif not isinstance(reply, BaseException):
                replies[w] = self._entries(w, reply)
        return replies

    def drain(self, blocks: Sequence[int], what: str) -> None:
        for w, reply in self._collect(blocks, what).items():
            if not isinstance(reply, BaseException):
                self._entries(w, reply)  # keeps what the reply teaches (info layout)

    def control(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None,
                what: str) -> list:
        fn_bytes = cloudpickle.dumps(fn)
        requests = []
        for a, b in self.unit_bounds:
            local = [k for k, i in enumerate(targets) if a <= i < b]
            requests.append(ControlRequest(
                fn_bytes, [targets[k] - a for k in local],
                None if args_per_env is None else [args_per_env[k] for k in local]))
        blocks = range(self.num_blocks)
        send_all(self._workers, requests)
        self._post(blocks, Command.CONTROL)
        replies = self._collect(blocks, what)
        failures = [replies[w] for w in sorted(replies) if isinstance(replies[w], BaseException)]
        if failures:  # the lowest env's first, whichever finished first
            self.note_dead(failures)
            raise failures[0]
        return [value for w in blocks for value in replies[w].results]

    def batch_infos(self, entries: Entries, num_envs: int,
                    position: dict[int, int] | None = None) -> dict:
        return self.infos.batch(entries, num_envs, position)

    def _last_infos(self, w: int) -> list:
        """Worker ``w``'s raw infos of its last step (it is idle: its reply was read)."""
        self._workers[w].send(ResendInfos())
        self._post([w], Command.CONTROL)
        reply = self._collect([w], "a resend of infos")[w]
        if isinstance(reply, BaseException):
            raise reply
        return reply.results

    def ready(self, workers: Sequence[int]) -> list[int]:
        """Those of ``workers`` whose command has finished, earliest first (no waiting)."""
        return self._barrier.done_in_order(list(workers))

    def let_run(self, workers: Sequence[int]) -> None:
        """Give this process's core up once for each of ``workers`` still busy, when the
        workers and this process are more than the cores they may use.

        Async batches: a block is mostly done already when the trainer asks for a
        batch, so the trainer never waits and never gives its core up; a worker the
        scheduler queued on its core would run only when its time slice ends, and
        its block would come back a few times in a thousand batches (while idle
        workers elsewhere spin on their cores).  Each yield lets one of them run.
        """
        if len(self._workers) + 1 > self._cpus:
            for _ in range(len(workers) - len(self._barrier.done_in_order(workers))):
                os.sched_yield()

    def ticket(self, w: int) -> int:
        """Worker ``w``'s place in the order of completion (its last finished command)."""
        return self._barrier.ticket(w)

    def take_ticket(self) -> int:
        """A place in the order of completion, as if a block finished now."""
        return self._barrier.take_ticket()

    def _post(self, workers: Sequence[int], command: Command) -> None:
        """Post ``command`` to ``workers``, noting when (for the timeout)."""
        self._posted_at[list(workers)] = time.monotonic()
        self._barrier.post(workers, command)

    # -- waiting ---------------------------------------------------------------------

    def _collect(self, workers: Sequence[int], what: str, want: int | None = None
                 ) -> dict[int, Any]:
        """Raw replies of ``want`` (default: all) of ``workers``, earliest first.

        A reply is None, ``Status.INFOS``, a message, or an exception (the worker
        raised or died).  Anything else that interrupts the wait (a timeout,
        Ctrl-C) leaves the pool unusable, since replies may be left unread.
        """
        try:
            return self._gather(list(workers), what, len(workers) if want is None else want)
        except BaseException as exc:
            if self.broken is None:
                self.broken = f"{type(exc).__name__} while waiting for {what}"
            raise

    def _gather(self, waiting: list[int], what: str, want: int) -> dict[int, Any]:
        if want < len(waiting) and len(waiting) >= want + 2:  # others keep us from waiting
            self.let_run(waiting)
        now = time.monotonic()
        deadline = now + (self.timeout if self.timeout else float("inf"))
        if self.wait_timeout is not None:
            self._wait_deadline = now + self.wait_timeout
            deadline = min(deadline, self._wait_deadline)
        else:
            self._wait_deadline = float("inf")
        replies: dict[int, Any] = {}
        while len(replies) < want:
            self._barrier.wait(waiting, want - len(replies), SLICE_SECONDS)
            for w in self._barrier.done_in_order(waiting)[: want - len(replies)]:
                waiting.remove(w)
                replies[w] = self._reply(w, deadline, what)
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
        for w in self._dead(waiting):
            if not self._barrier.is_done(w) and (
                    len(replies) < want or self.on_failure == "raise"):
                waiting.remove(w)
                replies[w] = self._workers[w].died(what)
                if self.on_failure == "raise":
                    self.broken = str(replies[w])
                    raise replies[w]
        # Late: a command older than the timeout, whether or not the trainer needs
        # that worker for this batch (async batches would silently drop it).
        if self.timeout:
            late = [w for w in waiting if now - self._posted_at[w] > self.timeout
                    and not self._barrier.is_done(w)]
            if late:
                self.broken = f"a worker exceeded the {self.timeout} s timeout"
                raise WorkerTimeout(f"workers {late} did not finish {what} within "
                                    f"timeout={self.timeout} s")
        if now > self._wait_deadline:
            late = [w for w in waiting if not self._barrier.is_done(w)]
            if late:
                self.broken = f"a wait exceeded its {self.wait_timeout} s timeout"
                raise WorkerTimeout(f"workers {late} did not finish {what} within the "
                                    f"wait's timeout={self.wait_timeout} s")

    def _dead(self, workers: list[int]) -> list[int]:
        """The workers among ``workers`` whose process has exited (one poll for all)."""
        if not workers:
            return []
        ready = set(wait_for([self._workers[w].sentinel for w in workers], timeout=0))
        return [w for w in workers if self._workers[w].sentinel in ready]

    def _reply(self, w: int, deadline: float, what: str) -> Any:
        status = self._barrier.status(w)
        if status == Status.OK:
            return None
        if status == Status.INFOS:
            return Status.INFOS
        try:
            if status == Status.MESSAGE_SENT:  # whole on the pipe: no need to wait
                message = self._workers[w].recv_now(what)
            else:
                message = self._workers[w].recv(deadline, what)
        except WorkerError as exc:
            return exc
        return self._error(w, message, what) if status == Status.ERROR else message

    def _entries(self, w: int, reply: Any) -> Entries:
        """The info entries of a step or reset reply (object observations stored)."""
        if reply is None:
            return []
        a, b = self.bounds[w]
        if reply is Status.INFOS:
            return [self.infos.read(w, a, b - a)]
        assert isinstance(reply, BlockReply)
        self.buffers.obs.receive(a, reply.obs_objects)
        if reply.info_schema is not None:  # its infos come through its info area from now
            self.infos.learn(w, reply.info_schema)
        return list(reply.entries)

    def _error(self, w: int, report: ErrorReport, what: str) -> BaseException:
        env_index = report.env_index
        if env_index is not None:  # the worker counts the envs (games) of its block from 0
            env_index += self.unit_bounds[w][0]
        name = getattr(self, "unit_name", "env")
        where = f"{name} {env_index} (worker {w})" if env_index is not None else f"worker {w}"
        mistake = rebuild_mistake(report)
        if mistake is not None:
            return mistake
        exc = WorkerError(f"{where} raised {report.type_name} during {what}: "
                          f"{report.message}", env_index=env_index, worker_index=w)
        exc.__cause__ = RemoteTraceback(report.traceback)
        return exc

    # -- restart and shutdown --------------------------------------------------------

    def rebuild(self, w: int) -> Entries:
        self._workers[w].kill()
        self._barrier.settle(w)
        self.infos.forget(w)
        self._workers[w] = WorkerProcess(self._ctx, w, self.unit_bounds[w][0],
                                         self._env_fns_bytes[w])
        deadline = time.monotonic() + STARTUP_SECONDS
        self._hello(w, deadline)
        self._attach(w, deadline)
        a, b = self.bounds[w]
        self._workers[w].send(ResetRequest([None] * (b - a), None, None))
        self._post([w], Command.RESET)
        reply = self._gather([w], "a reset after restart", 1)[w]
        if isinstance(reply, BaseException):
            self.broken = f"worker {w} failed again right after a restart"
            raise reply
        return self._entries(w, reply)

    def close(self, timeout: float | None = None, terminate: bool = False,
              pending: Sequence[int] = ()) -> None:
        start = time.monotonic()
        workers, self._workers = self._workers, []
        if terminate:
            for worker in workers:
                worker.kill()
        else:
            if pending and timeout is not None and self.broken is None:
                self._drain(workers, pending, start + timeout)
            self._stop(workers, start, timeout)
        # Views of the shared block keep its mapping (and a descriptor) alive: drop
        # ours, so it is unmapped now rather than when the garbage collector runs.
        for name in ("buffers", "infos", "_action_views", "_barrier"):
            self.__dict__.pop(name, None)
        if self._shared is not None:
            self._shared.close()
            self._shared = None

    def _drain(self, workers: list[WorkerProcess], pending: Sequence[int],
               deadline: float) -> None:
        """Give the commands in flight until ``deadline`` to finish (results dropped)."""
        busy = [w for w in pending if workers[w].alive]
        while busy and time.monotonic() < deadline:
            self._barrier.wait(busy, len(busy), min(SLICE_SECONDS, deadline - time.monotonic()))
            busy = [w for w in busy if not self._barrier.is_done(w) and workers[w].alive]

    def _stop(self, workers: list[WorkerProcess], start: float, timeout: float | None) -> None:
        """Ask every worker to close its envs and exit; terminate those still up at the end."""
        live = [w for w in workers if w.alive]
        if self._shared is not None and hasattr(self, "_barrier"):
            self._barrier.post([worker.index for worker in live], Command.CLOSE)
        for worker in live:
            if not worker.attached:  # still starting up, it listens on its pipe
                worker.tell_to_stop()
        grace = CLOSE_GRACE_SECONDS if timeout is None else max(
            timeout - (time.monotonic() - start), 0.0)
        deadline = time.monotonic() + grace
        for worker in workers:
            worker.stop(deadline - time.monotonic())
