"""The errors fastvec raises; all derive from :class:`FastVecError`.

``NoAsyncCallError`` and ``AlreadyPendingCallError`` are Gymnasium's own classes
(``gymnasium.error``), re-exported so that code written against Gymnasium keeps
catching them.  ``ObjectSpaceWarning`` is a warning, not an error.

Example:
    >>> from fastvec import errors
    >>> issubclass(errors.WorkerTimeout, TimeoutError)
    True
    >>> issubclass(errors.ObservationError, ValueError)
    True
    >>> import gymnasium as gym
    >>> errors.NoAsyncCallError is gym.error.NoAsyncCallError
    True
"""

from __future__ import annotations

import multiprocessing

from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError

__all__ = [
    "AlreadyPendingCallError",
    "ClosedEnvError",
    "EnvFnError",
    "FastVecError",
    "NoAsyncCallError",
    "ObjectSpaceWarning",
    "ObservationError",
    "SpacesMismatchError",
    "WorkerError",
    "WorkerTimeout",
]


class FastVecError(Exception):
    """Root of every error fastvec defines.

    Raised as such when a ``SubprocVecEnv`` is used in a way it cannot serve: after
    a worker died or a wait was interrupted (it is then unusable until closed), or
    ``step``/``reset`` in async-batch mode, or ``call`` while envs are in flight.

    Example:
        >>> from fastvec.errors import FastVecError, WorkerError
        >>> try:
        ...     raise WorkerError("worker 1 was killed by SIGKILL", worker_index=1, exitcode=-9)
        ... except FastVecError as exc:
        ...     print(exc)
        worker 1 was killed by SIGKILL
    """


class ClosedEnvError(FastVecError, ClosedEnvironmentError):
    """The vector env was used after ``close()``.

    Also a ``gymnasium.error.ClosedEnvironmentError``, so Gymnasium code catching
    that keeps working.  ``close()`` itself may be called again: it does nothing.

    Example:
        >>> import gymnasium as gym
        >>> import fastvec
        >>> envs = fastvec.SyncVecEnv([lambda: gym.make("CartPole-v1")])
        >>> envs.close()
        >>> try:
        ...     envs.reset()
        ... except gym.error.ClosedEnvironmentError as exc:
        ...     print(type(exc).__name__)
        ClosedEnvError
    """


class WorkerError(FastVecError):
    """A worker failed: its env raised, or the worker process died; or a game misbehaved.

    The message names the env (when known), the worker, and either the exception
    type and message or how the worker ended (``"was killed by SIGKILL"``,
    ``"exited with code 3"``).  A game that reports an agent outside its
    ``possible_agents`` is a ``WorkerError`` on every backend, ``SyncVecEnv``
    included (``worker_index`` None there).

    Args:
        message: The error message.
        env_index: Index of the sub-env that failed, or ``None`` when unknown.
        worker_index: Index of the worker that held it.
        exitcode: The worker's exit code, or ``None`` when the worker is alive.
        raised: What the env raised, ``(type name, message)``, when it raised.

    Attributes:
        env_index: Index of the sub-env that failed (in the whole vector env), or
            ``None`` when unknown (a worker that died between commands).
        worker_index: Index of the worker that held it.
        exitcode: The worker's exit code (negative: killed by that signal), or
            ``None`` when the worker is alive and the env raised; the remote
            traceback is then attached as ``__cause__``.
        raised: ``(type name, message)`` of the exception the env raised, or ``None``
            (a worker that died).

    Example:
        >>> error = WorkerError("worker 1 was killed by SIGKILL", worker_index=1, exitcode=-9)
        >>> error.env_index, error.worker_index, error.exitcode
        (None, 1, -9)
    """

    def __init__(
        self,
        message: str,
        *,
        env_index: int | None = None,
        worker_index: int | None = None,
        exitcode: int | None = None,
        raised: tuple[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.env_index = env_index
        self.worker_index = worker_index
        self.exitcode = exitcode
        self.raised = raised

    def __reduce__(self):  # keep the attributes across pickling
        return (
            _rebuild_worker_error,
            (self.args[0], self.env_index, self.worker_index, self.exitcode, self.raised),
        )


def _rebuild_worker_error(message, env_index, worker_index, exitcode, raised=None
                          ) -> WorkerError:
    return WorkerError(
        message, env_index=env_index, worker_index=worker_index, exitcode=exitcode,
        raised=raised,
    )


class WorkerTimeout(FastVecError, TimeoutError, multiprocessing.TimeoutError):
    """A step, reset or call took longer than the ``timeout`` the vector env was given
    (or a ``step_wait``/``reset_wait`` longer than its own ``timeout``).

    Also a ``TimeoutError``, and a ``multiprocessing.TimeoutError`` (what Gymnasium's
    ``AsyncVectorEnv`` raises).  The message lists the late workers.  The vector env is
    unusable afterwards, but ``close()`` still returns promptly.
    """


class ObjectSpaceWarning(UserWarning):
    """An observation space has leaves the flat-record path cannot hold.

    Any nesting of ``Box``, ``Discrete``, ``MultiDiscrete`` and ``MultiBinary`` in
    ``Dict``/``Tuple`` is held in flat records; other spaces (``Text``, ``Graph``,
    ``Sequence``, custom) travel by a slower object path.  Issued once per process,
    in the trainer's process.  Silence it with
    ``warnings.simplefilter("ignore", ObjectSpaceWarning)``.
    """


class ObservationError(FastVecError, ValueError):
    """An env returned an observation that does not fit its observation space.

    Also a ``ValueError``.  The message names the env index and the leaf
    (``obs["image"]``), with the shape or dtype found and expected.  What Gymnasium's
    own batching accepts is accepted (same-kind casts, array-likes).
    """


class EnvFnError(FastVecError, TypeError, ValueError):
    """An env function cannot be used: it is not a function (an env already made, a
    module...), it returned something that is not an env (a ``gymnasium.Env``, or a
    PettingZoo game), or it cannot be pickled to go to the worker processes or Ray
    actors that call it.

    Raised in the trainer on every backend, before any step; the message names the
    env function by its index in ``env_fns``, says what it returned (or which
    object could not be pickled) and what was expected; the pickling error is the
    ``__cause__``.  A ``TypeError`` (the wrong kind of object) and a ``ValueError``
    (fastvec's rule for a mistake in what the user handed over), so code catching
    either keeps working.

    Example:
        >>> import fastvec
        >>> try:
        ...     fastvec.SyncVecEnv([lambda: None])
        ... except TypeError as exc:
        ...     print(type(exc).__name__, "-", str(exc).split(";")[0])
        EnvFnError - env_fns[0] returned None (NoneType)
    """


class SpacesMismatchError(FastVecError, ValueError, RuntimeError):
    """The envs' spaces or agents cannot be batched; the message names the env or game.

    Envs whose observation or action spaces differ, a game whose agents have
    different spaces or none, games mixed with envs.  Raised in the trainer on
    every backend, with the worker's or actor's traceback as ``__cause__`` where
    the check ran there.  A ``ValueError`` (fastvec's rule for a wrong argument)
    and a ``RuntimeError`` (what Gymnasium's vector envs raise here), so code
    written for either catches it.
    """
