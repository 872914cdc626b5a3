"""What a pool does when a block fails: raise, or restart it, within a budget and never silently.

``on_worker_failure="restart"`` rebuilds a failed block and resets its envs.  Each
restart logs a WARNING on the ``fastvec`` logger, in the trainer's process, naming
the envs, where they ran and the exception (its traceback at DEBUG), and is
counted per env (game) and in total.

``max_restarts`` is the budget: an int (or None) caps the restarts in all over the
vector env's life; a :class:`RestartBudget` also caps the restarts of any one block
(worker, actor, the local block) and of all blocks together within a sliding
window of seconds.  Past any of them the next failure raises the error it would
have been without restarts (a ``WorkerError``; a ``WorkerTimeout`` for a block past
its timeout), its message naming the budget it hit.
"""

from __future__ import annotations

import logging
import math
import numbers
import time
from collections import deque
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from fastvec.errors import FastVecError, WorkerError

__all__ = ["DEFAULT_MAX_RESTARTS", "FAILURE_POLICIES", "RestartBudget", "Restarts",
           "check_failure_policy", "past_budget", "restart_budget"]

FAILURE_POLICIES = ("raise", "restart")
DEFAULT_MAX_RESTARTS = 1000  # as RLlib's limit on restarting its env runners
log = logging.getLogger("fastvec")
clock = time.monotonic  # when restarts happen (tests may replace it)


def _check_limit_field(value: Any, name: str, least: int) -> int | None:
    """``value`` as an int ``>= least``, or None; else a ValueError naming the field."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        hint = " (to never restart, use total=0)" if least and value == 0 else ""
        raise ValueError(f"expected RestartBudget's {name} to be an int >= {least} or None "
                         f"(no limit), got {value!r}{hint}")
    return int(value)


@dataclass(frozen=True, repr=False)
class RestartBudget:
    """How many restarts ``on_worker_failure="restart"`` may make (``max_restarts=``).

    ``total``: restarts in all over the vector env's life (None: no limit; an int
    ``max_restarts=N`` is ``RestartBudget(total=N)``).  ``per_block``: restarts of
    any one block (a worker, an actor, the local block) within any ``window``
    seconds; ``in_all``: restarts of all blocks together within any ``window``
    seconds (None: no limit).  ``window``: the sliding window, in seconds (None:
    the whole run, so ``per_block`` caps each block's lifetime restarts).  Past any
    of them the failure raises as the ``WorkerError`` it would have been.

    Example:
        >>> import fastvec
        >>> fastvec.RestartBudget(per_block=3)
        RestartBudget(per_block=3, window=60.0)
    """

    total: int | None = DEFAULT_MAX_RESTARTS
    per_block: int | None = None
    in_all: int | None = None
    window: float | None = 60.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", _check_limit_field(self.total, "total", 0))
        object.__setattr__(self, "per_block", _check_limit_field(self.per_block, "per_block", 1))
        object.__setattr__(self, "in_all", _check_limit_field(self.in_all, "in_all", 1))
        window = self.window
        if window is not None:
            if isinstance(window, bool) or not isinstance(window, numbers.Real) or not (
                    0 < window < math.inf):
                raise ValueError("expected RestartBudget's window to be a positive, finite "
                                 "number of seconds or None (the whole run), got "
                                 f"{window!r}")
            object.__setattr__(self, "window", float(window))

    @property
    def rate_limited(self) -> bool:
        """Whether ``per_block`` or ``in_all`` is set (the window then applies)."""
        return self.per_block is not None or self.in_all is not None

    def __repr__(self) -> str:
        """The call that makes it: fields not at their default (a rate limit's window too)."""
        shown = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                 if getattr(self, f.name) != f.default
                 or (f.name == "window" and self.rate_limited)]
        return f"RestartBudget({', '.join(shown)})"


def restart_budget(max_restarts: int | RestartBudget | None) -> RestartBudget:
    """``max_restarts`` as a :class:`RestartBudget` (an int or None is its ``total``).

    Raises:
        ValueError: neither an int >= 0, None nor a ``RestartBudget``.
    """
    if isinstance(max_restarts, RestartBudget):
        return max_restarts
    if max_restarts is not None and (isinstance(max_restarts, bool) or not isinstance(
            max_restarts, (int, np.integer)) or max_restarts < 0):
        raise ValueError("expected max_restarts to be an int >= 0, None (no limit) or a "
                         f"fastvec.RestartBudget, got {max_restarts!r}")
    return RestartBudget(total=max_restarts)


def check_failure_policy(on_failure: str, max_restarts: int | RestartBudget | None) -> None:
    """ValueError unless the policy is one of :data:`FAILURE_POLICIES` and the budget valid.

    The budget: an int >= 0, None or a :class:`RestartBudget`.
    """
    if on_failure not in FAILURE_POLICIES:
        raise ValueError(f"expected on_worker_failure 'raise' or 'restart', got {on_failure!r}")
    restart_budget(max_restarts)


def past_budget(exc: BaseException, reason: str) -> BaseException:
    """``exc`` as the error it is, its message ending ``(not restarted: <reason>)``.

    A ``WorkerError`` keeps its fields and cause, a ``WorkerTimeout`` stays one; other
    exceptions are raised as they are, with the reason as a note (3.11+).
    """
    note = f"(not restarted: {reason})"
    error: BaseException
    if isinstance(exc, WorkerError):
        error = WorkerError(f"{exc} {note}", env_index=exc.env_index,
                            worker_index=exc.worker_index, exitcode=exc.exitcode,
                            raised=exc.raised)
    elif isinstance(exc, FastVecError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        error = type(exc)(f"{exc} {note}")
    else:
        if hasattr(exc, "add_note"):
            exc.add_note(note)
        return exc
    error.__cause__ = exc.__cause__
    return error


def _times(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class Restarts:
    """How many times each env (game) was restarted, the total, and the budget.

    ``recent`` holds the times of the latest restarts in all, ``recent_of[b]`` those
    of block ``b``: as many as the budget's ``in_all`` / ``per_block``, enough to
    tell whether that many happened within its window.
    """

    def __init__(self, num_units: int,
                 max_restarts: int | RestartBudget | None = DEFAULT_MAX_RESTARTS) -> None:
        self.counts = np.zeros(num_units, dtype=np.int64)
        self.total = 0
        self.budget = restart_budget(max_restarts)
        self.label = repr(max_restarts) if isinstance(max_restarts, RestartBudget) else (
            "no limit" if max_restarts is None else f"max_restarts={max_restarts}")
        self.recent: deque[float] = deque(maxlen=self.budget.in_all or 0)
        self.recent_of: dict[int, deque[float]] = {}

    @property
    def limit(self) -> int | None:
        """The most restarts in all (the budget's ``total``)."""
        return self.budget.total

    def _full(self, times: deque[float], most: int | None, now: float) -> bool:
        """Whether ``most`` restarts (the last of ``times``) fall within the window."""
        window = self.budget.window
        return most is not None and len(times) == most and (
            window is None or now - times[0] < window)

    def over_budget(self, block: int, block_name: str) -> str | None:
        """Which budget a restart of ``block`` now would exceed, in words; None if none."""
        budget, now = self.budget, clock()
        within = "already" if budget.window is None else f"in the last {budget.window:g} s"
        if budget.total is not None and self.total >= budget.total:
            return f"{_times(self.total, 'restart')} happened already, {self.label}"
        mine = self.recent_of.get(block, deque())
        if self._full(mine, budget.per_block, now):
            return f"{block_name} restarted {_times(len(mine), 'time')} {within}, {self.label}"
        if self._full(self.recent, budget.in_all, now):
            return f"{_times(len(self.recent), 'restart')} {within}, {self.label}"
        return None

    def check_limit(self, exc: BaseException, block: int = 0,
                    block_name: str = "block 0") -> None:
        """Raise ``exc`` as :func:`past_budget` words it if a restart would exceed the budget.

        ``block``: the failed block; ``block_name``: how messages name its host.
        """
        reason = self.over_budget(block, block_name)
        if reason is not None:
            raise past_budget(exc, reason)

    def record(self, units: tuple[int, int], unit_name: str, exc: BaseException,
               block: int = 0) -> None:
        """Count a restart of ``block``, whose envs (games) are ``units``, and log it.

        ``units = (start, stop)``.
        """
        start, stop = units
        self.counts[start:stop] += 1
        self.total += 1
        now = clock()
        if self.budget.in_all is not None:
            self.recent.append(now)
        if self.budget.per_block is not None:
            self.recent_of.setdefault(block, deque(maxlen=self.budget.per_block)).append(now)
        which = f"{unit_name} {start}" if stop - start == 1 else \
            f"{unit_name}s {start}..{stop - 1}"
        log.warning("restarting %s (restart %d, %s) after %s: %s", which, self.total,
                    self.label, type(exc).__name__, exc)
        log.debug("the failure that restarted %s", which, exc_info=exc)
