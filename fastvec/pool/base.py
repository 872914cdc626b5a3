"""The pool of blocks: the one interface beneath every vector env, and its failure policy.

The envs are split into contiguous blocks (``bounds[b] = (start, stop)`` rows).  A
vector env posts a command to some blocks and collects their replies; where a
block runs is the member's business:

- :class:`fastvec.pool.local.LocalPool` (``SyncVecEnv``): one block in this process.
- ``fastvec.pool.process.ProcessPool`` (``SubprocVecEnv``): a worker process per
  block, through shared memory and the barrier; with ``local_block`` block 0 is
  stepped in this process.
- ``fastvec.pool.ray.RayPool`` (``RayVecEnv``): a Ray actor per block.

A member implements posting (:meth:`Pool.post_step`, :meth:`Pool.post_reset`),
waiting for replies (:meth:`Pool._wait`) and taking one in (:meth:`Pool._receive`),
control calls, restart and close; :meth:`Pool.collect` is written once here.

Failure policy lives here, once: a block whose env raised or whose host died
is reported (``on_failure="raise"``) or rebuilt and reset (``"restart"``: its
envs report ``truncations`` on a failed step and ``infos["worker_restarted"]``;
each restart is logged and counted up to ``max_restarts``, see
:mod:`fastvec.pool.restarts`); an observation that does not fit its space is
always raised; a block past the vector env's ``timeout`` is a failure like a dead
one (``WorkerTimeout``: raised, or with ``"restart"`` its host is killed and the
block rebuilt); a wait cut short otherwise (the wait's own deadline, Ctrl-C), or a
dead or hung block not restarted, leaves the pool ``broken`` and every later call
refuses with the reason.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fastvec._kernels.infos import batch_infos
from fastvec.errors import FastVecError, ObservationError, WorkerError, WorkerTimeout
from fastvec.pool.about import About
from fastvec.pool.block_map import BlockMap, Bounds
from fastvec.pool.buffers import Buffers
from fastvec.pool.restarts import Restarts
from fastvec.spaces.actions import ActionChecker

__all__ = ["CLOSE_GRACE_SECONDS", "SLICE_SECONDS", "STARTUP_SECONDS", "Entries", "Pool",
           "block_mask", "some_rows", "split_blocks"]

SLICE_SECONDS = 0.02  # waits return this often to check liveness and deadlines
STARTUP_SECONDS = 300.0  # building envs may be slow (asset loading), but not forever
CLOSE_GRACE_SECONDS = 1.0  # for envs to close before their worker or actor is stopped
Entries = list  # [(row, info dict), ...] in row order (a process pool's blocks: see its infos)


def some_rows(env_ids: np.ndarray | None, blocks: Sequence[int],
              bounds: list[tuple[int, int]]) -> bool:
    """Whether ``env_ids`` (distinct rows of ``blocks``) leave out a row of one of them.

    A count, so that a step of whole blocks (an async batch's ``send``) pays nothing more.
    """
    return env_ids is not None and len(env_ids) != sum(bounds[b][1] - bounds[b][0]
                                                       for b in blocks)


def block_mask(env_ids: np.ndarray | None, start: int, stop: int) -> np.ndarray | None:
    """Which rows ``start:stop`` of a block ``env_ids`` names (a bool array), or None when
    it names every one of them (or ``env_ids`` is None: every row).
    """
    if env_ids is None:
        return None
    mine = env_ids[(env_ids >= start) & (env_ids < stop)]
    if len(mine) == stop - start:
        return None
    mask = np.zeros(stop - start, dtype=np.bool_)
    mask[mine - start] = True
    return mask


def split_blocks(num_envs: int, num_blocks: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, end)`` env blocks, the first ``num_envs % num_blocks`` one larger."""
    size, extra = divmod(num_envs, num_blocks)
    bounds, start = [], 0
    for b in range(num_blocks):
        end = start + size + (b < extra)
        bounds.append((start, end))
        start = end
    return bounds


class Pool(ABC):
    """Blocks of envs somewhere: post commands, collect replies, restart, close.

    ``block_map`` says which rows and env functions each block holds and how messages
    name it (:class:`fastvec.pool.block_map.BlockMap`); ``bounds`` count batch rows
    (one per env, one per seat of a game), ``unit_bounds`` envs or games, what control
    calls and errors name.
    """

    block_map: BlockMap
    owner = "vector env"  # how messages name the vector env
    about: About  # what the blocks built (env 0's spaces, metadata...)
    observation_spaces: tuple[Any, Any]  # (single, batched or None), see observation_mode
    buffers: Buffers
    on_failure: str = "raise"
    restarts: Restarts | None = None  # counts and limit (pools that restart)
    broken: str | None = None  # why the pool cannot be used any more
    wait_timeout: float | None = None  # one wait's own limit (step_wait(timeout=))

    # Read through the block map, its one source.
    @property
    def bounds(self) -> Bounds:
        return self.block_map.bounds

    @property
    def unit_bounds(self) -> Bounds:
        return self.block_map.unit_bounds

    @property
    def unit_name(self) -> str:
        return self.block_map.unit_name

    @property
    def seats(self) -> int:
        return self.block_map.seats

    @property
    def first_remote(self) -> int:
        """Blocks before it step in this process (a process pool's local block)."""
        return self.block_map.first_remote

    @property
    def num_blocks(self) -> int:
        return self.block_map.num_blocks

    @property
    def num_rows(self) -> int:
        return self.block_map.num_rows

    def block_name(self, b: int) -> str:
        """How messages name block ``b``'s host: ``worker 0`` (numbered after the trainer's
        own block, if any), ``actor 2``, or ``the local block``.
        """
        return self.block_map.block_name(b)

    # -- what a member implements -----------------------------------------------------

    @abstractmethod
    def post_step(self, blocks: Sequence[int], actions: Any, checker: ActionChecker,
                  env_ids: np.ndarray | None = None) -> None:
        """Hand a checked action batch (for all rows, or for ``env_ids``) to ``blocks``.

        ``env_ids`` (distinct rows, any order, the batch's order) may name some rows of
        a block only: that block steps those rows and leaves the others as they are.
        ``blocks`` are the blocks that hold them, ascending.
        """

    @abstractmethod
    def post_reset(self, blocks: Sequence[int], seeds: list, options: dict | None,
                   mask: np.ndarray | None) -> None:
        """Start resetting ``blocks`` (the rows in ``mask``, if given) with per-row seeds."""

    @abstractmethod
    def _wait(self, blocks: list[int], what: str, want: int) -> dict[int, Any]:
        """Raw replies of ``want`` of ``blocks``, first finished first served.

        A reply is whatever :meth:`_receive` takes, or the exception a block's
        failure stands for.  Anything else it raises cuts the wait short (see
        :meth:`wait`).
        """

    @abstractmethod
    def _receive(self, b: int, reply: Any) -> Entries:
        """Take block ``b``'s reply into the buffers; its info entries."""

    @abstractmethod
    def control(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None,
                what: str) -> list:
        """``fn(env, *args)`` for each env (game) index in ``targets`` (ascending), in order."""

    @abstractmethod
    def close(self, timeout: float | None = None, terminate: bool = False,
              pending: Sequence[int] = ()) -> None:
        """Close every env and release what the pool holds (idempotent).

        ``pending``: blocks with a command in flight, waited for up to ``timeout``
        seconds first; ``terminate``: stop at once, without closing the envs.
        """

    def rebuild(self, b: int) -> Any:
        """Replace block ``b``'s envs with fresh ones and reset them: the reset's raw reply
        (as :meth:`_wait` gives it).
        """
        raise FastVecError(f"{type(self).__name__} cannot restart a block")

    def host_lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` says a block's host is gone or hung (its worker died, or it ran
        past the timeout), rather than that an env raised.
        """
        return isinstance(exc, WorkerTimeout) or (isinstance(exc, WorkerError)
                                                  and exc.exitcode is not None)

    def batch_infos(self, entries: Entries, num_rows: int,
                    position: dict[int, int] | None = None) -> dict:
        """Gymnasium's dict-of-arrays infos of ``entries`` (``position``: env -> batch row,
        where entries were shifted to a batch of some blocks).
        """
        return batch_infos(entries, num_rows)

    # -- written once --------------------------------------------------------------------

    def collect(self, blocks: Sequence[int], what: str, want: int | None = None,
                restart_truncates: bool = True, compact: bool = False
                ) -> tuple[list[int], dict]:
        """Wait for ``want`` (default: all) of ``blocks``, first finished first served.

        Returns the blocks collected (ascending) and their infos, batched as
        Gymnasium does: over every row of the pool, or with ``compact`` over the
        rows of the collected blocks only, in order (an async batch).  Failures are
        handled by the policy (see the module docstring); a restarted block's envs
        report ``truncations=restart_truncates``.
        """
        chosen, entries = self.collect_entries(blocks, what, want, restart_truncates)
        if not entries:
            return chosen, {}
        if not compact:
            return chosen, self.batch_infos(entries, self.num_rows)
        position: dict[int, int] = {}
        offset = 0
        for b in chosen:
            start, stop = self.bounds[b]
            position.update((i, i - start + offset) for i in range(start, stop))
            offset += stop - start
        return chosen, self.batch_infos([(position[i], info) for i, info in entries], offset,
                                        position)

    def collect_entries(self, blocks: Sequence[int], what: str, want: int | None = None,
                        restart_truncates: bool = True) -> tuple[list[int], Entries]:
        """:meth:`collect` with the infos as they came: ``(row, info)`` entries."""
        replies = self.wait(list(blocks), what, len(blocks) if want is None else want)
        for b, reply in replies.items():
            if not isinstance(reply, BaseException):
                replies[b] = self._receive(b, reply)
        return self.settle(replies, restart_truncates)

    def drain(self, blocks: Sequence[int], what: str) -> None:
        """Wait for ``blocks`` and drop their results, errors included (each reply is
        still taken in, so that what a block teaches the pool is kept).
        """
        for b, reply in self.wait(list(blocks), what, len(blocks)).items():
            if not isinstance(reply, BaseException):
                self._receive(b, reply)

    def wait(self, blocks: list[int], what: str, want: int) -> dict[int, Any]:
        """:meth:`_wait`; anything that cuts it short (a timeout, a host lost and not to
        be restarted, Ctrl-C) leaves the pool ``broken``, since replies may be left unread.
        """
        try:
            return self._wait(blocks, what, want)
        except BaseException as exc:
            if self.broken is None:
                self.broken = f"{type(exc).__name__} while waiting for {what}: {exc}"
            raise

    def control_replies(self, blocks: list[int], what: str) -> list:
        """Wait for a control call on ``blocks``: their replies in order, or the error of
        the lowest env that failed (whichever finished first).
        """
        replies = self.wait(blocks, what, len(blocks))
        failures = [replies[b] for b in blocks if isinstance(replies[b], BaseException)]
        if failures:
            self.note_dead(failures)
            raise failures[0]
        return [replies[b] for b in blocks]

    def check_usable(self) -> None:
        """Raise if an earlier failure left the pool unusable."""
        if self.broken is not None:
            hint = "" if self.on_failure == "restart" else (
                ", or use on_worker_failure='restart' (it covers steps and resets)")
            raise FastVecError(f"this {self.owner} is unusable ({self.broken}); close it "
                               f"and make a new one{hint}")

    def count_rows(self, about: About) -> None:
        """The blocks hold what ``about`` describes: from now on ``bounds`` count rows."""
        self.about = about
        self.block_map = self.block_map.counting_rows(
            len(about.env_spaces[0][2]), "env" if about.agents is None else "game")

    def settle(self, replies: dict[int, Any], restart_truncates: bool
               ) -> tuple[list[int], Entries]:
        """Apply the failure policy to replies that are exceptions; ``collect``'s result."""
        blocks = sorted(replies)
        entries: Entries = []
        for b in blocks:  # the common case: no failure, and mostly no infos
            reply = replies[b]
            if isinstance(reply, BaseException):
                break
            if reply:
                entries += reply
        else:
            return blocks, entries
        failures = {b: r for b, r in sorted(replies.items()) if isinstance(r, BaseException)}
        restarts = self.restarts if self.on_failure == "restart" else None
        for exc in failures.values():  # the lowest env's first, whichever finished first
            if isinstance(exc, ObservationError) or restarts is None:
                self.note_dead(failures.values())
                raise exc
        assert restarts is not None
        for b, exc in failures.items():
            try:
                restarts.check_limit(exc, b, self.block_name(b))
            except BaseException:
                self.note_dead(failures.values())
                raise
            restarts.record(self.unit_bounds[b], self.unit_name, exc, b)
            replies[b] = self.restart(b, restart_truncates)
        return blocks, [entry for b in blocks for entry in replies[b]]

    def restart(self, b: int, truncate: bool) -> Entries:
        """Rebuild block ``b`` and reset its envs; they report reward 0 and ``truncate``.

        A block that fails again right away (its rebuild or its reset) leaves the pool
        ``broken``.
        """
        try:
            reply = self.rebuild(b)
            if isinstance(reply, BaseException):
                raise reply
        except BaseException:
            self.broken = f"{self.block_name(b)} failed again right after a restart"
            raise
        entries = self._receive(b, reply)
        start, stop = self.bounds[b]
        self.buffers.clear(slice(start, stop), truncate)
        return entries + [(i, {"worker_restarted": True}) for i in range(start, stop)]

    def note_dead(self, failures: Any) -> None:
        """Mark the pool unusable if any of ``failures`` is a host lost (see
        :meth:`host_lost`).
        """
        for exc in failures:
            if self.host_lost(exc):
                self.broken = str(exc)
                return
