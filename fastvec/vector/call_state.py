"""The call state of a vector env, and the one guard every public method passes.

Like Gymnasium's ``AsyncState``: a vector env is idle, waiting for
``step_wait`` after ``step_async``, has envs in flight (async batches: sent or
reset, not yet received), or closed.  :func:`check_call` says whether a call is
allowed in a state, with the misuse error Gymnasium's vector envs would raise.

Every public call passes one guard, :func:`guarded`.  A vector env is not
thread-safe: each call holds the env's call lock while it runs, so a second
call that starts meanwhile
(from another thread, or from a signal handler on the same thread) raises
:func:`refuse_concurrent_call`'s ``FastVecError`` at once instead of interleaving
with the first one's commands and buffers.  Taking the lock is one non-blocking
acquisition.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

from fastvec.errors import (
    AlreadyPendingCallError,
    ClosedEnvError,
    FastVecError,
    NoAsyncCallError,
)

__all__ = ["CONTROL_CALLS", "CallState", "check_call", "guarded", "refuse_concurrent_call"]

Method = TypeVar("Method", bound=Callable[..., Any])

CONTROL_CALLS = ("call", "call_each", "get_attr", "set_attr", "render")


class CallState(Enum):
    """Where a vector env stands between calls."""

    IDLE = "idle"
    WAITING_STEP = "waiting for step_wait()"
    WAITING_RESET = "waiting for reset_wait()"
    IN_FLIGHT = "envs in flight"  # async batches: sent or reset, not yet received
    CLOSED = "closed"


def check_call(state: CallState, call: str, owner: str, async_only: str | None) -> None:
    """Raise the misuse error for ``call`` (a method name) in ``state``; else nothing.

    ``owner`` names the vector env's class; ``async_only`` is the reason ``step``
    and ``reset`` are refused with async batches on (None when they are allowed).
    ``recv`` and ``send`` check which envs are in flight themselves.
    """
    if state is CallState.CLOSED:
        raise ClosedEnvError(f"{owner} is closed; make a new one")
    if call == "step_wait":
        if state is not CallState.WAITING_STEP:
            raise NoAsyncCallError("step_wait() called without a pending step_async()", "step")
        return
    if call == "reset_wait":
        if state is not CallState.WAITING_RESET:
            raise NoAsyncCallError("reset_wait() called without a pending reset_async()",
                                   "reset")
        return
    if state is CallState.WAITING_RESET:
        if call in CONTROL_CALLS:
            raise FastVecError(f"{call}() called while a reset is pending; call reset_wait()")
        raise AlreadyPendingCallError(
            f"{call}() called while a reset_async() is pending; call reset_wait() first",
            "reset")
    if state is CallState.WAITING_STEP:
        if call == "reset":
            raise AlreadyPendingCallError(
                "reset() called while a step_async() is pending; call step_wait() first", "step")
        if call == "step_async":
            raise AlreadyPendingCallError(
                "step_async() called while a step is already pending; call step_wait() first",
                "step")
        if call in ("async_reset", "reset_async"):
            raise AlreadyPendingCallError(f"{call}() called while a step is pending", "step")
        if call in CONTROL_CALLS:
            raise FastVecError(f"{call}() called while a step is pending; call step_wait()")
    if call in ("reset", "reset_async", "step_async"):
        what = "step" if call == "step_async" else call
        if async_only is not None:
            raise FastVecError(f"{what}() is not available with {async_only}: use "
                               "async_reset(), recv() and send()")
        if state is CallState.IN_FLIGHT:
            raise FastVecError(f"{what}() called while envs are in flight from send() or "
                               "async_reset(); recv() them first")
    if call in CONTROL_CALLS and state is CallState.IN_FLIGHT:
        raise FastVecError(f"{call}() called while envs are in flight; recv() them first")



def refuse_concurrent_call(owner: str, call: str, holder_thread: int, holder_call: str) -> None:
    """Raise the error for ``call`` starting while ``holder_call`` is in progress."""
    me = threading.current_thread()
    if holder_thread == me.ident:
        where = f"on the same thread ({me.name}; from a signal handler?)"
    else:
        other = next((t.name for t in threading.enumerate() if t.ident == holder_thread),
                     f"ident {holder_thread}")
        where = f"from thread {me.name} while thread {other} is"
    raise FastVecError(
        f"{owner}.{call}() called {where} inside {holder_call}(): a vector env is not "
        "thread-safe; use it from one thread at a time, or one vector env per thread "
        "(close() may be called from anywhere)")


def guarded(call: str) -> Callable[[Method], Method]:
    """The guard of a public method: it runs as ``call`` (the name the call state checks)
    with the call lock held, after the state and the pool's health were checked; an
    error it raises after ``close()`` pulled the envs from under it is a
    ``ClosedEnvError``.  The vector env's ``_guarded`` does the work.
    """
    def decorate(method: Method) -> Method:
        @functools.wraps(method)
        def guarded_call(self: Any, *args: Any, **kwargs: Any) -> Any:
            return self._guarded(call, method, self, *args, **kwargs)
        return guarded_call  # type: ignore[return-value]
    return decorate
