"""The parent's handle on one worker process: start, talk over the pipe, stop."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.reduction import ForkingPickler, send_handle
from typing import Any

from fastvec.errors import WorkerError, WorkerTimeout
from fastvec.pool.base import SLICE_SECONDS
from fastvec.pool.process import worker as _worker
from fastvec.pool.process.protocol import Stop
from fastvec.pool.reports import RemoteTraceback

__all__ = ["WorkerProcess", "describe_exit", "preload_in_forkserver", "send_all"]

def preload_in_forkserver() -> None:
    """Have the forkserver import the workers' module (numpy, Gymnasium, fastvec) once, so
    that each worker forked from it starts without importing them itself.

    Added to what the trainer asked the forkserver to preload; a hint that does nothing
    once the forkserver runs.  Measured: 8 workers start 64 cheap envs in 0.73 s with
    it, 2.92 s without, on 2 cores (``docs/startup.md``).
    """
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    if server is None or getattr(server, "_forkserver_pid", None) is not None:
        return  # running already: its modules are what they are
    modules = list(getattr(server, "_preload_modules", ["__main__"]))
    if _worker.__name__ not in modules:
        forkserver.set_forkserver_preload([*modules, _worker.__name__])


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


class WorkerProcess:
    """One worker process and the parent's end of its control pipe.

    ``index``: the worker's number, as messages name it; ``block``: the pool's block
    it steps (its line in the barrier); ``first``: the index of its first env (game)
    in the vector env, for messages.
    """

    def __init__(self, ctx: Any, index: int, block: int, first: int,
                 env_fns_bytes: bytes, daemon: bool = True) -> None:
        self.index = index
        self.block = block
        self.attached = False  # True once it serves commands through the barrier
        self.conn, child_conn = ctx.Pipe()
        # Linux sends the parent-death signal when the *thread* that started a process
        # ends, not the process: ask for it only where that thread lives as long as
        # the trainer (its main thread, or the forkserver, which is single-threaded).
        death_signal = (threading.current_thread() is threading.main_thread()
                        or ctx.get_start_method() == "forkserver")
        self.process = ctx.Process(
            target=_worker.run, args=(index, first, env_fns_bytes, child_conn, death_signal),
            name=f"fastvec-worker-{index}", daemon=daemon)
        with _main_module_hidden():
            self.process.start()
        child_conn.close()
        # Where the worker's fatal-error handler writes (a native crash's traceback): an
        # anonymous file both hold, so nothing is left behind however either exits.
        self.last_words = _anonymous_file()
        self.send_fd(self.last_words.fileno())

    @property
    def sentinel(self) -> int:
        """A descriptor that becomes readable when the process exits."""
        return self.process.sentinel

    @property
    def alive(self) -> bool:
        return self.process.exitcode is None

    def died(self, what: str, env_index: int | None = None) -> WorkerError:
        """The error for this worker having died while doing ``what``.

        What the worker's fatal-error handler wrote (the Python traceback of a
        native crash) is attached as ``__cause__``.
        """
        self.process.join(0.1)
        code = self.process.exitcode
        words = self.read_last_words()
        hint = ""
        if what == "start-up" and code == 1 and not words:
            hint = (" without reporting an error (had it failed while Python started or "
                    "imported fastvec, its message is on its standard error)")
        error = WorkerError(f"worker {self.index} {describe_exit(code)} during {what}{hint}",
                            env_index=env_index, worker_index=self.index, exitcode=code)
        if words:
            error.__cause__ = RemoteTraceback(words)
        return error

    def read_last_words(self) -> str:
        """What the worker's fatal-error handler wrote, if anything."""
        try:
            self.last_words.seek(0)
            return self.last_words.read().decode(errors="replace")
        except (OSError, ValueError, AttributeError):
            return ""

    def send(self, message: Any) -> None:
        try:
            self.conn.send(message)
            return
        except (OSError, EOFError):
            pass  # reported below, outside the except clause
        raise self.died("a send")

    def send_bytes(self, payload: Any) -> None:
        """Send a message pickled already (see :func:`send_all`)."""
        try:
            self.conn.send_bytes(payload)
            return
        except (OSError, EOFError):
            pass  # reported below, outside the except clause
        raise self.died("a send")

    def send_fd(self, fd: int) -> None:
        try:
            send_handle(self.conn, fd, self.process.pid)
            return
        except (OSError, EOFError):
            pass  # reported below, outside the except clause
        raise self.died("start-up")

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
            pass  # reported below, outside the except clause
        raise self.died(what)

    def recv_now(self, what: str) -> Any:
        """A message known to be whole on the pipe already."""
        try:
            return self.conn.recv()
        except (OSError, EOFError):
            pass  # reported below, outside the except clause
        raise self.died(what)

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
        self._release()

    def kill(self) -> None:
        """Kill the worker at once and reap it."""
        if self.process.exitcode is None:
            self.process.kill()
        self.process.join(2.0)
        self._release()

    def _release(self) -> None:
        self.conn.close()
        if hasattr(self, "last_words"):
            self.last_words.close()


@contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start a process without it re-running the trainer's main module.

    spawn and forkserver children import the parent's ``__main__`` again (by path or
    module name) before anything else: that fails for a script piped to ``python -``
    and re-runs a script without an ``if __name__ == "__main__":`` guard.  Workers need
    nothing from it (env fns travel by value with cloudpickle), so while a worker is
    started ``__main__`` is a bare module that names no file.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _anonymous_file() -> Any:
    """A read-write binary file with no name (memfd on Linux)."""
    if hasattr(os, "memfd_create"):
        return os.fdopen(os.memfd_create("fastvec-worker", os.MFD_CLOEXEC), "w+b")
    return tempfile.TemporaryFile()  # pragma: no cover - non-Linux


def send_all(workers: Sequence[WorkerProcess], messages: Sequence[Any]) -> None:
    """Send ``messages[k]`` to ``workers[k]``, every message pickled before any is sent.

    A message that cannot be pickled then raises with no pipe written to: a worker
    given its message while a later one failed would take it for the next request's.
    A worker found dead is skipped: the command posted next finds it dead and reports
    it (or restarts it) as a death during that command, so a worker killed between
    two calls is restarted before a ``reset`` as it is before a ``step``.
    """
    payloads = [ForkingPickler.dumps(message) for message in messages]
    for worker, payload in zip(workers, payloads, strict=True):
        try:
            worker.send_bytes(payload)
        except WorkerError:
            if worker.alive:
                raise
