"""ProcessPool: a worker process per block, stepping through shared memory.

actions -> shared action rows -> the barrier posts STEP -> workers step their envs
and write obs / reward / flags into their rows (block 0 of ``local_block``: this
process, meanwhile) -> done words + one bell -> ``collect`` waits in short slices
(liveness, deadlines), reads the replies, batches infos -> views of the rows.

Block ``b`` holds rows ``bounds[b]``; its worker is ``workers[b]`` (``worker k`` in
messages: the workers are numbered from 0, after the trainer's own block when
there is one).  The processes and the barrier are :mod:`fastvec.pool.process.workers`,
the worker's side :mod:`fastvec.pool.process.worker`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle
import numpy as np

from fastvec._kernels.barrier import Barrier
from fastvec.errors import ObservationError
from fastvec.pool.about import About, check_blocks, describe, stacked
from fastvec.pool.base import STARTUP_SECONDS, Entries, Pool
from fastvec.pool.buffers import Buffers
from fastvec.pool.env_fns import close_quietly, pickle_blocks
from fastvec.pool.local import LocalBlock
from fastvec.pool.notes import relay
from fastvec.pool.obs_store import make_obs_store
from fastvec.pool.process.protocol import (
    Attach,
    BlockReply,
    Command,
    ControlRequest,
    RegionName,
    ResendInfos,
    ResetRequest,
    Status,
    StepActions,
    Stepping,
    spin_budget_us,
)
from fastvec.pool.process.shared_infos import BlockInfos, InfoReader
from fastvec.pool.process.shm import SharedSegment
from fastvec.pool.process.start import build_local_envs, local_error, plan_shared_block
from fastvec.pool.process.workers import Workers
from fastvec.pool.reports import ErrorReport, RemoteTraceback, env_failure, rebuild_mistake
from fastvec.pool.restarts import Restarts
from fastvec.spaces.actions import ActionChecker
from fastvec.spaces.layout import batch_views, copy_into, layout_of
from fastvec.spaces.observation_mode import ObservationMode, observation_spaces, same_space_hint

__all__ = ["ProcessPool"]


class ProcessPool(Pool):
    """Worker processes, one per block of ``bounds`` (env functions), and with ``local``
    block 0 stepped in this process; started, checked and attached at once.

    ``observation_spaces``: ``(single, batched or None)`` as ``observation_mode``
    made them from every env's space.
    """

    owner, block_word = "SubprocVecEnv", "worker"
    observation_spaces: tuple[Any, Any]
    num_workers: int  # set by fastvec.pool.build
    context: str

    def __init__(self, env_fns: Sequence[Callable], bounds: list[tuple[int, int]], ctx: Any,
                 mode: int, copy: bool, timeout: float | None = None,
                 on_failure: str = "raise", observation_mode: ObservationMode = "same",
                 restarts: Restarts | None = None, local: bool = False,
                 daemon: bool = True, frame_stack: Any = None) -> None:
        self.bounds = self.unit_bounds = bounds
        self.on_failure = on_failure
        self.restarts = restarts
        self._stepping = Stepping(mode, frame_stack)
        self.workers = Workers(ctx, len(bounds), timeout, on_failure == "restart", daemon)
        self._local: LocalBlock | None = None
        self._local_fns = list(env_fns[:bounds[0][1]]) if local else []
        self.first_remote = 1 if local else 0  # worker k steps block first_remote + k
        self._local_envs: list = []
        self._local_ticket: int | None = None  # block 0's place in the order of completion
        self._shared: SharedSegment | None = None
        remote = range(self.first_remote, len(bounds))
        self._payloads = pickle_blocks(env_fns, bounds, remote, "SubprocVecEnv's workers")
        try:
            for k, b in enumerate(remote):
                self.workers.start(b, k, bounds[b][0], self._payloads[b])
            if local:
                self._local_envs = build_local_envs(self._local_fns)
            self._start(observation_mode, copy)
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int | None]:
        """Each worker's process id."""
        return self.workers.pids

    @property
    def exitcodes(self) -> list[int | None]:
        """Each worker's exit code (None while it runs)."""
        return self.workers.exitcodes

    @property
    def wait_timeout(self) -> float | None:  # type: ignore[override]
        return self.workers.wait_timeout

    @wait_timeout.setter
    def wait_timeout(self, seconds: float | None) -> None:
        self.workers.wait_timeout = seconds

    @property
    def infos_raw_only(self) -> bool:
        """Whether workers send raw infos only (their blocks disagreed, or as asked)."""
        return bool(self.infos.raw_only[0])

    def send_raw_infos(self) -> None:
        """Have the workers send their envs' infos as they are, not batched (the Ray
        actor sends them on, and the trainer batches every block's).
        """
        self.infos.raw_only[0] = 1

    # -- start-up --------------------------------------------------------------------

    def _start(self, observation_mode: ObservationMode, copy: bool) -> None:
        """Read what every block built, check it, lay out and attach the shared block."""
        deadline = time.monotonic() + STARTUP_SECONDS
        abouts = [stacked(self._about(b, deadline) if self.workers.procs[b] else
                          describe(self._local_envs), self._stepping.frame_stack)
                  for b in range(self.num_blocks)]
        check_blocks(abouts, 0, observation_mode == "same", same_space_hint)
        self.observation_spaces = observation_spaces(
            observation_mode, [triple[0] for about in abouts for triple in about.env_spaces],
            games=abouts[0].agents is not None)
        self.count_rows(abouts[0]._replace(env_spaces=[  # every block's envs
            triple for about in abouts for triple in about.env_spaces]))
        obs_space = self.observation_spaces[0]
        action_layout = layout_of(abouts[0].action_space)
        self._plan = plan_shared_block(self.num_rows, self.num_blocks, layout_of(obs_space),
                                       action_layout)
        self._shared = SharedSegment.create(self._plan)
        arrays = self._shared.arrays
        self.workers.barrier = Barrier(arrays[RegionName.BARRIER], self.num_blocks,
                                       spin_budget_us())
        self.infos = InfoReader(arrays[RegionName.INFOS], arrays[RegionName.INFOS_RAW_ONLY],
                                self._last_infos)
        self._action_views = None if action_layout is None else batch_views(
            action_layout, arrays[RegionName.ACTIONS])
        store = make_obs_store(obs_space, self.num_rows, copy, arrays[RegionName.OBS])
        self.buffers = Buffers.over(store, arrays)
        for b in self.workers.blocks:
            self._attach(b, deadline)
        if self._local_envs:
            self._local = LocalBlock(self._local_envs, 0, self.buffers, self._stepping.mode,
                                     self._stepping.frame_stack)

    def _about(self, b: int, deadline: float) -> About:
        message = self.workers[b].recv(deadline, "start-up")
        if isinstance(message, ErrorReport):  # the user's mistake is raised as it is
            raise rebuild_mistake(message) or self._error(b, message, "building its envs")
        return message

    def _attach(self, b: int, deadline: float) -> None:
        assert self._shared is not None
        worker = self.workers[b]
        worker.send(Attach(self._plan, self.bounds[b][0], b, self.num_blocks,
                           self._stepping.mode, self._stepping.frame_stack))
        worker.send_fd(self._shared.fd)
        message = worker.recv(deadline, "start-up")
        if isinstance(message, ErrorReport):
            raise self._error(b, message, "attaching shared memory")
        worker.attached = True

    # -- commands --------------------------------------------------------------------

    def post_step(self, blocks: Sequence[int], actions: Any, checker: ActionChecker,
                  env_ids: np.ndarray | None = None) -> None:
        remote = self.workers.blocks if len(blocks) == self.num_blocks else [
            b for b in blocks if self.workers.procs[b]]
        per_env = None
        if remote:  # the workers first, so they step while this process steps block 0
            views = self._action_views
            if type(views) is np.ndarray and env_ids is None:
                np.copyto(views, actions)
            elif views is not None:
                copy_into(views, actions, env_ids)
            else:
                per_env = checker.split(actions)
                by_env: Any = per_env if env_ids is None else dict(zip(env_ids.tolist(),
                                                                       per_env, strict=True))
                self.workers.send(remote, [StepActions([by_env[i] for i in range(
                    *self.bounds[b])]) for b in remote])
            self.workers.post(remote, Command.STEP)
        if self._local is not None and len(remote) < len(blocks):
            stop = self.bounds[0][1]
            if env_ids is None and type(actions) is np.ndarray:  # block 0: its rows only
                per_env = list(actions[:stop])
            else:
                per_env = checker.split(actions) if per_env is None else per_env
                if env_ids is not None:
                    by_row = dict(zip(env_ids.tolist(), per_env, strict=True))
                    per_env = [by_row[i] for i in range(stop)]
            self._local.post_step(per_env[:stop])
            self._local_ticket = None

    def post_reset(self, blocks: Sequence[int], seeds: list, options: dict | None,
                   mask: np.ndarray | None) -> None:
        remote = [b for b in blocks if self.workers.procs[b]]
        if remote:
            self.workers.send(remote, [
                ResetRequest(seeds[a:z], options, None if mask is None else mask[a:z])
                for a, z in (self.bounds[b] for b in remote)])
            self.workers.post(remote, Command.RESET)
        if self._local is not None and len(remote) < len(blocks):
            stop = self.bounds[0][1]
            self._local.post_reset(seeds[:stop], options, None if mask is None else mask[:stop])
            self._local_ticket = None

    def control(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None,
                what: str) -> list:
        fn_bytes = cloudpickle.dumps(fn)
        parts = []
        for a, z in self.unit_bounds:
            local = [k for k, i in enumerate(targets) if a <= i < z]
            parts.append(([targets[k] - a for k in local],
                          None if args_per_env is None else [args_per_env[k] for k in local]))
        remote = self.workers.blocks  # every worker runs its part
        self.workers.send(remote, [ControlRequest(fn_bytes, *parts[b]) for b in remote])
        self.workers.post(remote, Command.CONTROL)
        replies: dict[int, Any] = {}
        if self._local is not None:
            try:
                replies[0] = self._local.control(fn, *parts[0])
            except Exception as exc:
                replies[0] = local_error(exc, self._local.control_index, what, self.unit_name)
        replies.update(self._wait_remote(list(remote), what, len(remote)))
        failures = [replies[b] for b in sorted(replies) if isinstance(replies[b], BaseException)]
        if failures:  # the lowest env's first, whichever finished first
            self.note_dead(failures)
            raise failures[0]
        return [value for b in range(self.num_blocks) for value in
                (replies[b].results if self.workers.procs[b] else replies[b])]

    def _last_infos(self, b: int) -> list:
        """Block ``b``'s raw infos of its last step (it is idle: its reply was read)."""
        self.workers[b].send(ResendInfos())
        self.workers.post([b], Command.CONTROL)
        reply = self._wait_remote([b], "a resend of infos", 1)[b]
        if isinstance(reply, BaseException):
            raise reply
        return reply.results

    # -- collecting ------------------------------------------------------------------

    def _wait(self, blocks: list[int], what: str, want: int) -> dict[int, Any]:
        if len(blocks) == self.num_blocks:  # every block: the common case
            remote = list(self.workers.blocks)
        else:
            remote = [b for b in blocks if self.workers.procs[b]]
        local = len(remote) < len(blocks)
        if want < len(blocks):
            if local or len(blocks) >= want + 2:  # this process would never wait
                self.workers.let_run(remote)
            if local:  # block 0 takes its turn in the order of completion
                if self._local_ticket is None:  # ready from the first wait after its post
                    self._local_ticket = self.workers.barrier.take_ticket()
                chosen = self.workers.first_done(remote, self._local_ticket, want)
                local = 0 in chosen
                if not local:
                    remote = chosen
        replies: dict[int, Any] = {}
        if local:
            replies[0] = self._run_local(what)
        if remote and want > len(replies):
            replies.update(self._wait_remote(remote, what, want - len(replies)))
        return replies

    def _run_local(self, what: str) -> Entries | BaseException:
        """Block 0's command, run; its infos batched already where they batch exactly
        (while the workers still step, rather than after them).
        """
        assert self._local is not None
        try:
            entries = self._local.run()
        except ObservationError as exc:
            return exc
        except Exception as exc:
            return local_error(exc, self._local.current, what, self.unit_name)
        if entries and not self.infos.raw_only[0]:
            block = BlockInfos.local(entries, self._local.stop)
            if block is not None:
                return [(0, block)]
        return entries

    def _wait_remote(self, waiting: list[int], what: str, want: int) -> dict[int, Any]:
        """Raw replies of ``want`` of the workers' ``waiting`` blocks (``Workers.wait``).

        Anything that interrupts the wait (a timeout, a worker that died and is not
        to be restarted, Ctrl-C) leaves the pool unusable, since replies may be left
        unread.
        """
        try:
            return self.workers.wait(waiting, what, want, self._error)
        except BaseException as exc:
            if self.broken is None:
                self.broken = f"{type(exc).__name__} while waiting for {what}: {exc}"
            raise

    def _receive(self, b: int, reply: Any) -> Entries:
        """The info entries of a step or reset reply (object observations stored)."""
        if reply is None:
            return []
        if not self.workers.procs[b]:
            return reply
        a, z = self.bounds[b]
        if reply is Status.INFOS:
            return [self.infos.read(b, a, z - a)]
        assert isinstance(reply, BlockReply)
        if reply.notes:
            relay(reply.notes)
        self.buffers.obs.receive(a, reply.obs_objects)
        if reply.info_schema is not None:  # its infos come through its info area from now
            self.infos.learn(b, reply.info_schema)
        return list(reply.entries)

    def batch_infos(self, entries: Entries, num_rows: int,
                    position: dict[int, int] | None = None) -> dict:
        return self.infos.batch(entries, num_rows, position)

    def _error(self, b: int, report: ErrorReport, what: str) -> BaseException:
        mistake = rebuild_mistake(report)
        if mistake is not None:
            return mistake
        env_index = report.env_index
        if env_index is not None:  # the worker counts the envs (games) of its block from 0
            env_index += self.unit_bounds[b][0]
        worker = self.workers[b].index
        where = f"{self.unit_name} {env_index} (worker {worker})" if env_index is not None \
            else f"worker {worker}"
        return env_failure(where, report.type_name, report.message, what, env_index=env_index,
                           worker_index=worker, cause=RemoteTraceback(report.traceback))

    # -- restart and shutdown --------------------------------------------------------

    def rebuild(self, b: int) -> Entries:
        a, z = self.bounds[b]
        if self.workers.procs[b]:
            self.infos.forget(b)
            old = self.workers.kill(b)
            self.workers.start(b, old.index, self.unit_bounds[b][0], self._payloads[b])
            deadline = time.monotonic() + STARTUP_SECONDS
            self._about(b, deadline)
            self._attach(b, deadline)
            self.workers[b].send(ResetRequest([None] * (z - a), None, None))
            self.workers.post([b], Command.RESET)
            reply = self._wait_remote([b], "a reset after restart", 1)[b]
        else:
            assert self._local is not None
            try:
                self._local.close()
            except Exception:  # noqa: S110 - the envs are being replaced
                pass
            self._local_envs = build_local_envs(self._local_fns)
            self._local = LocalBlock(self._local_envs, 0, self.buffers, self._stepping.mode,
                                     self._stepping.frame_stack)
            self._local.post_reset([None] * z, None, None)
            reply = self._run_local("a reset after restart")
        if isinstance(reply, BaseException):
            self.broken = f"{self.block_name(b)} failed again right after a restart"
            raise reply
        return self._receive(b, reply)

    def close(self, timeout: float | None = None, terminate: bool = False,
              pending: Sequence[int] = ()) -> None:
        self.workers.close(pending if self.broken is None else (), timeout, terminate)
        local, self._local = self._local, None
        if local is not None:
            local.close(terminate)
        elif self._local_envs and not terminate:  # built, never attached
            close_quietly(self._local_envs)  # never hiding the error that stopped start-up
        self._local_envs = []
        # Views of the shared block keep its mapping (and a descriptor) alive: drop
        # ours, so it is unmapped now rather than when the garbage collector runs.
        for name in ("buffers", "infos", "_action_views"):
            self.__dict__.pop(name, None)
        if self._shared is not None:
            self._shared.close()
            self._shared = None
