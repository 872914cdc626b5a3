"""The worker process: builds its block of envs, then serves commands until told to stop.

Start-up talks over the control pipe: the worker sends an ``About`` (what it
built), receives :class:`Attach` and the shared segment's file descriptor,
attaches, and sends :class:`Ready`.  After that every command arrives through
the barrier (``Barrier.wait_command``); requests that carry Python objects
(reset seeds, control calls) come with a message on the pipe.  A reply that
carries Python objects (infos, errors, results) is flagged in the status word
and sent on the pipe (a small one just before the worker reports done, a big
one just after).  Every message is a type of
:mod:`fastvec.pool.process.protocol`, or a ``fastvec.pool.reports.ErrorReport``.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler, recv_handle
from typing import Any

import cloudpickle
import numpy as np
from gymnasium.vector.utils import batch_space, iterate

from fastvec._kernels.barrier import Barrier, set_parent_death_signal
from fastvec.pool.about import describe
from fastvec.pool.buffers import Buffers, rows_of
from fastvec.pool.env_fns import checked, close_quietly
from fastvec.pool.games import unit_spaces
from fastvec.pool.local import make_stepper
from fastvec.pool.notes import NoteCollector
from fastvec.pool.obs_store import ObjectStore, ObsStore, RecordStore
from fastvec.pool.process.protocol import (
    Attach,
    BlockReply,
    Command,
    ControlReply,
    ControlRequest,
    Ready,
    RegionName,
    ResendInfos,
    ResetRequest,
    Status,
    StepActions,
    spin_budget_us,
)
from fastvec.pool.process.shared_infos import InfoWriter
from fastvec.pool.process.shm import SharedSegment
from fastvec.pool.reports import report_error
from fastvec.spaces.frame_stack import stacked_space
from fastvec.spaces.layout import batch_views, copy_tree

__all__ = ["run"]

POLL_SECONDS = 0.1  # how often an idle worker checks that its parent lives
SMALL_REPLY_BYTES = 32 * 1024  # fits in an empty pipe (Linux: 64 KiB) without blocking


def run(worker_index: int, first: int, env_fns_bytes: bytes, conn: Any,
        death_signal: bool = True) -> None:
    """Entry point of a worker process (``first``: its first env's index in the vector env)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent coordinates shutdown
    if death_signal:  # else the orphan check in serve() notices a dead trainer
        set_parent_death_signal(signal.SIGKILL)
    try:  # a native crash's traceback goes where the parent can read it
        last_words = recv_handle(conn)
    except (EOFError, OSError):
        return
    faulthandler.enable(file=last_words, all_threads=False)
    parent = os.getppid()
    for key in [k for k in os.environ if k.startswith(("OMPI_", "PMI_"))]:
        del os.environ[key]  # env fns must not join the trainer's MPI job
    envs = _build_envs(env_fns_bytes, first, conn)
    if envs is None:
        return
    try:
        conn.send(describe(envs, first))
        setup = conn.recv()
        if not isinstance(setup, Attach):  # start-up failed elsewhere: told to stop
            close_quietly(envs)
            return
        segment = SharedSegment(setup.plan, recv_handle(conn))
    except (EOFError, OSError, KeyboardInterrupt):
        return
    except BaseException as exc:  # noqa: B036 - reported to the parent
        _send_error(conn, exc, None)
        return
    server = _Server(envs, segment, conn, setup)
    conn.send(Ready())
    server.serve(parent)


def _build_envs(env_fns_bytes: bytes, first: int, conn: Any) -> list | None:
    """The worker's envs, or None once the reason they could not be built is reported
    (the envs built before are closed).

    An env that raises is named by its index in this worker's block (the parent
    knows where the block starts); one that returns no env is an ``EnvFnError``
    naming its env function in the vector env's (``first``: the block's first).
    """
    try:
        env_fns = cloudpickle.loads(env_fns_bytes)
    except BaseException as exc:  # noqa: B036 - reported to the parent
        _send_error(conn, exc, None)
        return None
    envs = []
    for k, env_fn in enumerate(env_fns):
        try:
            envs.append(checked(env_fn(), first + k))
        except SystemExit:
            raise  # as in a step: the process ends with that exit code
        except BaseException as exc:  # noqa: B036 - reported to the parent
            close_quietly(envs)
            _send_error(conn, exc, k)
            return None
    return envs


class _Server:
    """The worker's state after attaching: its envs, block views and barrier."""

    def __init__(self, envs: list, segment: SharedSegment, conn: Any, setup: Attach) -> None:
        self.envs, self.segment, self.conn = envs, segment, conn
        self.notes = NoteCollector().install()  # the user's notes go to the trainer
        self.index = setup.block  # this worker's line in the barrier and info area
        self.first, self.count = setup.first_row, rows_of(envs)
        self.seats = self.count // len(envs)
        arrays = segment.arrays
        end = self.first + self.count
        # Buffers over the whole shared batch; this worker's EnvStepper writes its rows.
        space, action_space, _ = unit_spaces(envs[0])
        if setup.obs_layout is not None:  # laid out by the trainer
            store: ObsStore = RecordStore(setup.obs_layout, arrays[RegionName.OBS], copy=False)
        else:
            if setup.frame_stack is not None:
                space = stacked_space(space, setup.frame_stack)
            store = ObjectStore(space, end, copy=False)
        buffers = Buffers.over(store, arrays)
        # obs_objects: the block's observations on the object path, sent in each reply
        self.stepper, self.obs_objects = make_stepper(envs, self.first, buffers,
                                                        setup.mode_code, setup.frame_stack)
        self.action_layout = setup.action_layout
        self.action_views = None if self.action_layout is None else batch_views(
            self.action_layout, arrays[RegionName.ACTIONS][self.first:end])
        self.step_mask = arrays[RegionName.STEP_MASK][self.first:end]
        self.block_action_space = batch_space(action_space, self.count)
        self.barrier = Barrier(arrays[RegionName.BARRIER], setup.num_blocks, spin_budget_us())
        self.barrier.start_worker(self.index)
        self.control_index: int | None = None  # in the block: the env (game) a control runs on
        self.infos = InfoWriter(arrays[RegionName.INFOS][self.index],
                                arrays[RegionName.INFOS_RAW_ONLY], self.first, self.count)

    def serve(self, parent: int) -> None:
        handlers: dict[int, Callable[[], Any]] = {  # by int: no enum per step
            int(Command.STEP): self.step, int(Command.RESET): self.reset,
            int(Command.CONTROL): self.control, int(Command.STEP_SOME): self.step_some}
        ok, infos, error = int(Status.OK), int(Status.INFOS), int(Status.ERROR)
        while True:
            command = self.barrier.wait_command(self.index, POLL_SECONDS)
            if command is None:
                if _orphaned(parent):
                    return  # the trainer is gone
                continue
            if command == Command.CLOSE:
                self.close()
                return
            try:
                reply = handlers[command]()
            except SystemExit:
                raise  # an env ended the process: the parent reports the exit code
            except BaseException as exc:  # noqa: B036 - reported to the parent
                self.barrier.finish(self.index, error)
                _send_error(self.conn, exc, self._failed_env(command))
                continue
            if reply is None:
                self.barrier.finish(self.index, ok)
            elif isinstance(reply, Status):  # INFOS: they are in the info area already
                self.barrier.finish(self.index, infos)
            else:
                self._reply(reply)

    def _reply(self, reply: BlockReply | ControlReply) -> None:
        """Report done with a message; a small one is on the pipe before the parent wakes.

        The pipe is empty at this point (the parent reads every reply before the next
        command), so a message that fits in it is written without blocking, and the
        parent, woken by the barrier, reads it at once instead of sleeping again.  A
        big one is written after the wake-up, since the parent must read to make room.
        """
        payload = ForkingPickler.dumps(reply)
        if len(payload) <= SMALL_REPLY_BYTES:
            self.conn.send_bytes(payload)
            self.barrier.finish(self.index, Status.MESSAGE_SENT)
        else:
            self.barrier.finish(self.index, Status.MESSAGE)
            self.conn.send_bytes(payload)

    def _failed_env(self, command: int) -> int | None:
        """The env (index in this block) that was running when ``command`` failed."""
        if command == Command.CONTROL:
            return self.control_index
        return self.stepper.current // self.seats

    def _actions(self) -> tuple[list, np.ndarray | None]:
        """One action per row, and the rows to step when a message says (None: all)."""
        if self.action_layout is None:
            message: StepActions = self.conn.recv()
            return message.actions, message.mask
        views = self.action_views
        if type(views) is np.ndarray:
            return list(views.copy()), None
        return list(iterate(self.block_action_space, copy_tree(views))), None

    def step_some(self) -> BlockReply | Status | None:
        """A step of the rows the shared step mask selects."""
        return self.step(self.step_mask)

    def step(self, mask: np.ndarray | None = None) -> BlockReply | Status | None:
        actions, sent_mask = self._actions()
        entries = self.stepper.step(actions, sent_mask if mask is None else mask)
        if self.notes.notes:  # rare: a note for the user (a cast), sent with the infos
            return BlockReply(entries, self.obs_objects, notes=self.notes.take())
        if self.obs_objects is not None:
            return BlockReply(entries, self.obs_objects)
        if not entries:
            return None
        return self.infos.encode(entries)

    def reset(self) -> BlockReply | None:
        request: ResetRequest = self.conn.recv()
        entries = self.stepper.reset(request.seeds, request.options, request.mask)
        if entries or self.obs_objects is not None or self.notes.notes:
            return BlockReply(entries, self.obs_objects, notes=self.notes.take() or None)
        return None

    def control(self) -> ControlReply:
        self.control_index = None
        request = self.conn.recv()
        if isinstance(request, ResendInfos):
            return ControlReply(self.infos.last_entries)
        assert isinstance(request, ControlRequest)
        fn = cloudpickle.loads(request.fn)
        results = []
        for j, k in enumerate(request.envs):
            self.control_index = k
            args = () if request.args_per_env is None else request.args_per_env[j]
            results.append(fn(self.envs[k], *args))
        return ControlReply(results)

    def close(self) -> None:
        try:
            for env in self.envs:
                env.close()
        finally:
            self.barrier.finish(self.index, Status.OK)
            self.segment.close()


def _orphaned(parent_pid: int) -> bool:
    """Whether the trainer that started this worker is gone.

    With the forkserver start method our parent is the forkserver, which stays up
    as long as any of its children (this worker included) holds its liveness
    pipe, so it never goes away by itself; the trainer is then watched through
    the sentinel multiprocessing gives every process it starts.
    """
    if os.getppid() != parent_pid:
        return True
    trainer = multiprocessing.parent_process()
    return trainer is not None and not trainer.is_alive()


def _send_error(conn: Any, exc: BaseException, env_index: int | None) -> None:
    try:
        conn.send(report_error(exc, env_index))
    except (OSError, EOFError):
        pass
