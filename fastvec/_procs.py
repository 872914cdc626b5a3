"""The parent's handle on one worker process: start, talk over the pipe, stop."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Sequence
from multiprocessing.reduction import ForkingPickler, send_handle
from typing import Any

from fastvec import _worker
from fastvec._protocol import Stop
from fastvec.errors import WorkerError, WorkerTimeout

__all__ = ["RemoteTraceback", "WorkerProcess", "describe_exit", "send_all"]

SLICE_SECONDS = 0.02  # how often waits return to check liveness and deadlines


def describe_exit(exitcode: int | None) -> str:
    """``-9`` -> ``"was killed by SIGKILL"``; ``1`` -> ``"exited with code 1"``."""
    if exitcode is None:
        return "is not responding"
    if exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker (attached as ``__cause__``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


class WorkerProcess:
    """One worker process and the parent's end of its control pipe."""

    def __init__(self, ctx: Any, index: int, env_fns_bytes: bytes) -> None:
        self.index = index
        self.attached = False  # True once it serves commands through the barrier
        self.conn, child_conn = ctx.Pipe()
        # Linux sends the parent-death signal when the *thread* that started a process
        # ends, not the process: ask for it only where that thread lives as long as
        # the trainer (its main thread, or the forkserver, which is single-threaded).
        death_signal = (threading.current_thread() is threading.main_thread()
                        or ctx.get_start_method() == "forkserver")
        self.process = ctx.Process(
            target=_worker.run, args=(index, env_fns_bytes, child_conn, death_signal),
            name=f"fastvec-worker-{index}", daemon=True)
        self.process.start()
        child_conn.close()

    @property
    def sentinel(self) -> int:
        """A descriptor that becomes readable when the process exits."""
        return self.process.sentinel

    @property
    def alive(self) -> bool:
        return self.process.exitcode is None

    def died(self, what: str, env_index: int | None = None) -> WorkerError:
        """The error for this worker having died while doing ``what``."""
        self.process.join(0.1)
        code = self.process.exitcode
        return WorkerError(f"worker {self.index} {describe_exit(code)} during {what}",
                           env_index=env_index, worker_index=self.index, exitcode=code)

    def send(self, message: Any) -> None:
        try:
            self.conn.send(message)
        except (OSError, EOFError):
            raise self.died("a send") from None

    def send_bytes(self, payload: Any) -> None:
        """Send a message pickled already (see :func:`send_all`)."""
        try:
            self.conn.send_bytes(payload)
        except (OSError, EOFError):
            raise self.died("a send") from None

    def send_fd(self, fd: int) -> None:
        try:
            send_handle(self.conn, fd, self.process.pid)
        except (OSError, EOFError):
            raise self.died("start-up") from None

    def recv(self, deadline: float, what: str) -> Any:
        """The next message, raising WorkerError if the worker dies, WorkerTimeout at deadline."""
        while not self.conn.poll(SLICE_SECONDS):
            if not self.alive:
                if self.conn.poll(0):
                    break  # it sent its last words before exiting
                raise self.died(what)
            if time.monotonic() > deadline:
                raise WorkerTimeout(f"worker {self.index} did not answer {what} in time")
        try:
            return self.conn.recv()
        except (OSError, EOFError):
            raise self.died(what) from None

    def recv_now(self, what: str) -> Any:
        """A message known to be whole on the pipe already."""
        try:
            return self.conn.recv()
        except (OSError, EOFError):
            raise self.died(what) from None

    def tell_to_stop(self) -> None:
        """Ask a worker that has not attached yet to exit (it reads its pipe until then)."""
        try:
            self.conn.send(Stop())
        except (OSError, EOFError):
            pass  # gone already

    def stop(self, grace: float) -> None:
        """Wait ``grace`` seconds for the worker to exit, then terminate, then kill."""
        self.process.join(max(grace, 0.0))
        if self.process.exitcode is None:
            self.process.terminate()
            self.process.join(0.5)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join(2.0)
        self.conn.close()

    def kill(self) -> None:
        """Kill the worker at once and reap it."""
        if self.process.exitcode is None:
            self.process.kill()
        self.process.join(2.0)
        self.conn.close()


def send_all(workers: Sequence[WorkerProcess], messages: Sequence[Any]) -> None:
    """Send ``messages[k]`` to ``workers[k]``, every message pickled before any is sent.

    A message that cannot be pickled then raises with no pipe written to: a worker
    given its message while a later one failed would take it for the next request's.
    """
    payloads = [ForkingPickler.dumps(message) for message in messages]
    for worker, payload in zip(workers, payloads, strict=True):
        worker.send_bytes(payload)
