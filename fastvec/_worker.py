"""The worker process: builds its block of envs, then serves commands until told to stop.

Start-up talks over the control pipe: the worker sends its spaces, receives the
shared block's plan and file descriptor, attaches, and says ready.  After that
every command arrives through the barrier (``Barrier.wait_command``); requests
that carry Python objects (reset seeds, ``call``...) come with a message on the
pipe.  A reply that carries Python objects (infos, errors, results) is flagged
in the status word and sent on the pipe (a small one just before the worker
reports done, a big one just after).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import traceback
from enum import IntEnum
from multiprocessing.reduction import ForkingPickler, recv_handle
from typing import Any

import cloudpickle
import numpy as np
from gymnasium.vector.utils import batch_space, iterate

from fastvec import _info_slab as slab
from fastvec._kernels.barrier import Barrier, set_parent_death_signal
from fastvec._kernels.infos import batch_block_infos
from fastvec._kernels.stepping import EnvBlock
from fastvec._layout import batch_views, copy_tree, layout_of
from fastvec._shm import SharedBlock
from fastvec.errors import ObservationError

__all__ = ["Command", "Status", "run"]

POLL_SECONDS = 0.1  # how often an idle worker checks that its parent lives
SMALL_REPLY_BYTES = 32 * 1024  # fits in an empty pipe (Linux: 64 KiB) without blocking


class Command(IntEnum):
    STEP = 1
    RESET = 2
    CONTROL = 3
    CLOSE = 4


class Status(IntEnum):
    OK = 0
    ERROR = 1  # an error report follows on the pipe
    MESSAGE = 2  # a reply follows on the pipe
    MESSAGE_SENT = 3  # a reply is on the pipe already
    INFOS = 4  # the step's infos are in the worker's info area (fastvec._info_slab)


def run(worker_index: int, env_fns_bytes: bytes, conn: Any, death_signal: bool = True) -> None:
    """Entry point of a worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent coordinates shutdown
    if death_signal:  # else the orphan check in serve() notices a dead trainer
        set_parent_death_signal(signal.SIGKILL)
    parent = os.getppid()
    for key in [k for k in os.environ if k.startswith(("OMPI_", "PMI_"))]:
        del os.environ[key]  # env fns must not join the trainer's MPI job
    envs = _build_envs(env_fns_bytes, conn)
    if envs is None:
        return
    try:
        first = envs[0]
        conn.send(("spaces", first.observation_space, first.action_space,
                   dict(first.metadata), first.render_mode,
                   [(env.observation_space, env.action_space) for env in envs]))
        setup = conn.recv()
        if setup[0] != "attach":
            return
        block = SharedBlock(setup[1], recv_handle(conn))
    except (EOFError, OSError, KeyboardInterrupt):
        return
    except BaseException as exc:  # noqa: B036 - reported to the parent
        _send_error(conn, exc, None)
        return
    server = _Server(worker_index, envs, block, conn, *setup[2:])
    conn.send(("ready",))
    server.serve(parent)


def _build_envs(env_fns_bytes: bytes, conn: Any) -> list | None:
    """The worker's envs, or None once the reason they could not be built is reported.

    An env that fails is named by its index in this worker's block (the parent
    knows where the block starts).
    """
    try:
        env_fns = cloudpickle.loads(env_fns_bytes)
    except BaseException as exc:  # noqa: B036 - reported to the parent
        _send_error(conn, exc, None)
        return None
    envs = []
    for k, env_fn in enumerate(env_fns):
        try:
            envs.append(env_fn())
        except SystemExit:
            raise  # as in a step: the process ends with that exit code
        except BaseException as exc:  # noqa: B036 - reported to the parent
            _send_error(conn, exc, k)
            return None
    return envs


class _Server:
    """The worker's state after attaching: its envs, block views and barrier."""

    def __init__(self, index: int, envs: list, block: SharedBlock, conn: Any,
                 first: int, n_workers: int, mode: int) -> None:
        self.index, self.envs, self.block, self.conn = index, envs, block, conn
        self.first, self.count = first, len(envs)
        arrays = block.arrays
        end = first + self.count
        space = envs[0].observation_space
        layout = layout_of(space)
        rows = None if layout is None else arrays["obs"][first:end]
        self.obs_objects = [None] * self.count if layout is None else None
        self.env_block = EnvBlock(
            envs, mode, None if layout is None else layout.table, rows, self.obs_objects,
            arrays["rewards"][first:end], arrays["terminations"][first:end],
            arrays["truncations"][first:end], arrays["needs_reset"][first:end], first)
        self.action_layout = layout_of(envs[0].action_space)
        self.action_views = None if self.action_layout is None else batch_views(
            self.action_layout, arrays["actions"][first:end])
        self.block_action_space = batch_space(envs[0].action_space, self.count)
        self.barrier = Barrier(arrays["barrier"], n_workers)
        self.barrier.start_worker(index)
        self.control_index: int | None = None  # in the block: the env a control runs on
        self.info_area = arrays["infos"][index]
        self.infos_raw_only = arrays["infos_raw_only"]  # set by the parent: no info area
        self.info_schema: slab.Schema | None = None  # the layout the parent knows
        self.info_views: list[np.ndarray] = []
        self.last_entries: list = []  # the last step's infos, for the parent to ask again

    def serve(self, parent: int) -> None:
        handlers = {Command.STEP: self.step, Command.RESET: self.reset,
                    Command.CONTROL: self.control}
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
                reply = handlers[Command(command)]()
            except SystemExit:
                raise  # an env ended the process: the parent reports the exit code
            except BaseException as exc:  # noqa: B036 - reported to the parent
                self.barrier.finish(self.index, Status.ERROR)
                _send_error(self.conn, exc, self._failed_env(command))
                continue
            if reply is None:
                self.barrier.finish(self.index, Status.OK)
            elif isinstance(reply, tuple):
                self._reply(reply)
            else:  # Status.INFOS: the infos are in the info area already
                self.barrier.finish(self.index, Status.INFOS)

    def _reply(self, reply: tuple) -> None:
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
        """The env (index in the whole vector env) that was running when ``command`` failed."""
        if command == Command.CONTROL:
            return None if self.control_index is None else self.first + self.control_index
        return self.first + self.env_block.current

    def _actions(self) -> list:
        if self.action_layout is None:
            return self.conn.recv()
        batch = copy_tree(self.action_views)
        if isinstance(batch, np.ndarray):
            return list(batch)
        return list(iterate(self.block_action_space, batch))

    def step(self) -> tuple | int | None:
        entries = self.env_block.step(self._actions())
        if self.obs_objects is not None:
            return ("step", entries, self.obs_objects)
        if not entries:
            return None
        return self._infos_reply(entries)

    def _infos_reply(self, entries: list) -> tuple | int:
        """Status.INFOS with the infos in the info area, else the raw infos to send."""
        self.last_entries = entries
        if self.infos_raw_only[0]:
            return ("step", entries, None)
        batched, exact = batch_block_infos([(i - self.first, info) for i, info in entries],
                                           self.count)
        leaves = slab.leaves_of(batched) if exact else None
        if leaves is None:
            return ("step", entries, None)
        schema = slab.schema_of(leaves)
        if schema == self.info_schema:
            slab.write_leaves(self.info_views, leaves)
            return Status.INFOS
        views = slab.area_views(schema, self.info_area)
        if views is None:
            return ("step", entries, None)
        self.info_schema, self.info_views = schema, views
        return ("step", entries, None, schema)  # the parent learns the new layout

    def reset(self) -> tuple | None:
        seeds, options, mask = self.conn.recv()
        entries = self.env_block.reset(seeds, options, mask)
        if entries or self.obs_objects is not None:
            return ("reset", entries, self.obs_objects)
        return None

    def control(self) -> tuple:
        self.control_index = None
        name, args = self.conn.recv()
        return ("result", getattr(self, f"_do_{name}")(*args))

    def _each_env(self) -> Any:
        """The block's envs, noting which one runs (for error reports)."""
        for k, env in enumerate(self.envs):
            self.control_index = k
            yield env

    def _do_call(self, name: str, args: tuple, kwargs: dict) -> list:
        results = []
        for env in self._each_env():
            target = env.get_wrapper_attr(name)
            results.append(target(*args, **kwargs) if callable(target) else target)
        return results

    def _do_call_each(self, fn_bytes: bytes, local: list[int]) -> list:
        fn = cloudpickle.loads(fn_bytes)
        results = []
        for k in local:
            self.control_index = k
            results.append(fn(self.envs[k]))
        return results

    def _do_set_attr(self, name: str, values: list) -> None:
        for env, value in zip(self._each_env(), values, strict=True):
            env.set_wrapper_attr(name, value)

    def _do_last_infos(self) -> list:
        return self.last_entries

    def _do_render(self) -> list:
        return [env.render() for env in self._each_env()]

    def close(self) -> None:
        try:
            for env in self.envs:
                env.close()
        finally:
            self.barrier.finish(self.index, Status.OK)
            self.block.close()


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
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        conn.send(("error", env_index, type(exc).__name__, str(exc), text,
                   isinstance(exc, ObservationError)))
    except (OSError, EOFError):
        pass
