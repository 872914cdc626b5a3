"""What a pool does when a block fails: raise, or restart it, up to a limit and never silently.

``on_worker_failure="restart"`` rebuilds a failed block and resets its envs.  Each
restart logs a WARNING on the ``fastvec`` logger, in the trainer's process, naming
the envs, where they ran and the exception (its traceback at DEBUG), and is
counted per env (game) and in total.  Past ``max_restarts`` restarts, the next
failure raises the ``WorkerError`` it would have been without restarts.
"""

from __future__ import annotations

import logging

import numpy as np

from fastvec.errors import WorkerError

__all__ = ["DEFAULT_MAX_RESTARTS", "FAILURE_POLICIES", "Restarts", "check_failure_policy"]

FAILURE_POLICIES = ("raise", "restart")
DEFAULT_MAX_RESTARTS = 1000  # as RLlib's limit on restarting its env runners
log = logging.getLogger("fastvec")


def check_failure_policy(on_failure: str, max_restarts: int | None) -> None:
    """ValueError unless the policy is one of :data:`FAILURE_POLICIES` and the limit a
    non-negative int or None.
    """
    if on_failure not in FAILURE_POLICIES:
        raise ValueError(f"expected on_worker_failure 'raise' or 'restart', got {on_failure!r}")
    if max_restarts is not None and (isinstance(max_restarts, bool) or not isinstance(
            max_restarts, (int, np.integer)) or max_restarts < 0):
        raise ValueError("expected max_restarts to be an int >= 0 or None (no limit), "
                         f"got {max_restarts!r}")


class Restarts:
    """How many times each env (game) was restarted, the total, and the limit."""

    def __init__(self, num_units: int, limit: int | None = DEFAULT_MAX_RESTARTS) -> None:
        self.counts = np.zeros(num_units, dtype=np.int64)
        self.total = 0
        self.limit = limit

    def check_limit(self, exc: BaseException) -> None:
        """Raise ``exc`` as the error it is (a ``WorkerError``) once the limit is reached."""
        if self.limit is None or self.total < self.limit:
            return
        if isinstance(exc, WorkerError):
            error = WorkerError(f"{exc} (not restarted: max_restarts={self.limit} restarts "
                                "happened already)", env_index=exc.env_index,
                                worker_index=exc.worker_index, exitcode=exc.exitcode)
            error.__cause__ = exc.__cause__
            raise error
        raise exc

    def record(self, units: tuple[int, int], unit_name: str, exc: BaseException) -> None:
        """Count a restart of the envs (games) ``units = (start, stop)`` and log it."""
        start, stop = units
        self.counts[start:stop] += 1
        self.total += 1
        which = f"{unit_name} {start}" if stop - start == 1 else \
            f"{unit_name}s {start}..{stop - 1}"
        limit = "no limit" if self.limit is None else f"max_restarts={self.limit}"
        log.warning("restarting %s (restart %d, %s) after %s: %s", which, self.total, limit,
                    type(exc).__name__, exc)
        log.debug("the failure that restarted %s", which, exc_info=exc)
