"""The errors fastvec raises; all derive from :class:`FastVecError`.

``NoAsyncCallError`` and ``AlreadyPendingCallError`` are Gymnasium's own classes,
re-exported so that code written against Gymnasium keeps catching them.
"""

from __future__ import annotations

from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError

__all__ = [
    "AlreadyPendingCallError",
    "ClosedEnvError",
    "FastVecError",
    "NoAsyncCallError",
    "ObjectSpaceWarning",
    "ObservationError",
    "WorkerError",
    "WorkerTimeout",
]


class FastVecError(Exception):
    """Root of every error fastvec defines."""


class ClosedEnvError(FastVecError, ClosedEnvironmentError):
    """The vector env was used after ``close()``."""


class WorkerError(FastVecError):
    """A worker failed: its env raised, or the worker process died.

    Attributes:
        env_index: index of the sub-env that failed, or ``None`` when unknown.
        worker_index: index of the worker that held it.
        exitcode: the worker's exit code (negative: killed by that signal), or
            ``None`` when the worker is alive and the env raised; the remote
            traceback is then attached as ``__cause__``.
    """

    def __init__(
        self,
        message: str,
        *,
        env_index: int | None = None,
        worker_index: int | None = None,
        exitcode: int | None = None,
    ) -> None:
        super().__init__(message)
        self.env_index = env_index
        self.worker_index = worker_index
        self.exitcode = exitcode

    def __reduce__(self):  # keep the attributes across pickling
        return (
            _rebuild_worker_error,
            (self.args[0], self.env_index, self.worker_index, self.exitcode),
        )


def _rebuild_worker_error(message, env_index, worker_index, exitcode) -> WorkerError:
    return WorkerError(
        message, env_index=env_index, worker_index=worker_index, exitcode=exitcode
    )


class WorkerTimeout(FastVecError, TimeoutError):
    """A step or reset took longer than the ``timeout`` the vector env was given."""


class ObjectSpaceWarning(UserWarning):
    """An observation space has leaves the flat-record path cannot hold.

    Such observations travel by a slower object path; issued once per process.
    """


class ObservationError(FastVecError, ValueError):
    """An env returned an observation that does not fit its observation space.

    The message names the env index and the leaf (``obs["image"]``).
    """
