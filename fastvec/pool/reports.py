"""What failed where the envs run, as a value that crosses to the trainer.

A worker process or a Ray actor that catches an exception sends an
:class:`ErrorReport` (type name, message, traceback text) instead of raising it
(CPython's ``concurrent.futures`` does the same), so the trainer tells an env
that raised (a report) from a worker that died.  The trainer raises a
``WorkerError`` with the remote traceback as ``__cause__``, or, for a mistake in
what the user handed over (``EnvFnError``, ``ObservationError``,
``SpacesMismatchError``), that error itself (:func:`rebuild_mistake`).
"""

from __future__ import annotations

import traceback
from typing import NamedTuple

from fastvec.errors import EnvFnError, ObservationError, SpacesMismatchError, WorkerError

__all__ = ["ErrorReport", "RemoteTraceback", "env_failure", "rebuild_mistake", "report_error"]


class ErrorReport(NamedTuple):
    """An exception where the envs run; ``env_index`` counts from the block's first env.

    ``mistake``: the name of the fastvec error to raise as it is in the trainer (a
    mistake in what the user handed over: an env function that returned no env, an
    observation that does not fit, spaces or agents fastvec cannot batch), or None
    for an env that failed (a ``WorkerError`` in the trainer).
    """

    env_index: int | None
    type_name: str
    message: str
    traceback: str
    mistake: str | None


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker (attached as ``__cause__``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


_MISTAKES = {cls.__name__: cls for cls in (EnvFnError, ObservationError, SpacesMismatchError)}


def report_error(exc: BaseException, env_index: int | None,
                 message: str | None = None) -> ErrorReport:
    """``exc`` as an :class:`ErrorReport` (``message``: its text, if not ``str(exc)``)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    name = type(exc).__name__
    return ErrorReport(env_index, name, str(exc) if message is None else message, text,
                       name if _MISTAKES.get(name) is type(exc) else None)


def rebuild_mistake(report: ErrorReport) -> BaseException | None:
    """The user's mistake ``report`` stands for, as its own class with the remote traceback
    as ``__cause__``; None if the report is of an env that failed.
    """
    if report.mistake is None:
        return None
    exc = _MISTAKES[report.mistake](report.message)
    exc.__cause__ = RemoteTraceback(report.traceback)
    return exc


def env_failure(where: str, type_name: str, message: str, what: str, *,
                env_index: int | None, worker_index: int | None,
                cause: BaseException) -> WorkerError:
    """The ``WorkerError`` for an env that raised: ``"<where> raised <type_name> during
    <what>: <message>"``, every backend's words in one place (``where``: ``"env 3 (worker
    1)"``, ``"game 2 (actor 0)"``, ``"the local block"``...), with ``cause`` (the remote
    traceback, or the exception itself) as ``__cause__``; ``raised`` keeps the env's own
    type name and message, so a host that passes the error on re-words only its own part.
    """
    error = WorkerError(f"{where} raised {type_name} during {what}: {message}",
                        env_index=env_index, worker_index=worker_index,
                        raised=(type_name, message))
    error.__cause__ = cause
    return error
