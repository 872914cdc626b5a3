"""A pool of blocks: the one interface beneath every fastvec vector env.

The envs are split into contiguous blocks (``bounds[b] = (start, stop)``).  A
vector env posts a command to some blocks and collects their replies; where a
block runs is the pool's business:

- :class:`LocalPool` (``SyncVecEnv``): one block stepped in this process.
- ``ProcessPool`` (``SubprocVecEnv``, ``fastvec._process_pool``): one worker
  process per block, talking through shared memory and the barrier.

Data flow of a step::

    trainer actions -> vector env checks them (fastvec._actions)
      -> pool.post_step: actions into each block's rows (shared action rows, or
         per-env lists for an in-process block) and the command to the block
      -> each block steps its envs (fastvec._kernels.stepping.EnvBlock) and writes
         observations (fastvec._obs_store), rewards and flags (fastvec._buffers)
         into its rows
      -> pool.collect waits for the blocks in short slices (liveness, deadline),
         applies the failure policy, returns each block's info entries
      -> vector env batches infos (pool.batch_infos) and returns views of the rows.

Failure policy lives here, once: a block whose env raised or whose worker died
is reported (``on_failure="raise"``) or rebuilt and reset
(``on_failure="restart"``: its envs report ``truncations`` on a failed step and
``infos["worker_restarted"]``; each restart is logged and counted, up to
``max_restarts``: see ``fastvec._failure_policy``); an observation that does not fit its space is
always raised; a wait cut short (deadline, Ctrl-C) or a dead worker leaves the
pool ``broken`` and every later call refuses with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fastvec._actions import ActionChecker
from fastvec._buffers import Buffers, rows_of
from fastvec._failure_policy import Restarts
from fastvec._kernels.infos import batch_infos
from fastvec._protocol import Hello
from fastvec.errors import FastVecError, ObservationError, WorkerError

__all__ = ["LocalBlock", "LocalPool", "Pool", "split_blocks"]

Entries = list  # [(env_index, info dict), ...] in env order


def split_blocks(num_envs: int, num_blocks: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, end)`` env blocks, the first ``num_envs % num_blocks`` one larger."""
    size, extra = divmod(num_envs, num_blocks)
    bounds, start = [], 0
    for b in range(num_blocks):
        end = start + size + (b < extra)
        bounds.append((start, end))
        start = end
    return bounds


class Pool:
    """Blocks of envs somewhere: post commands, collect replies, restart, close.

    ``bounds`` count batch rows (one per env, one per seat of a game);
    ``unit_bounds`` count envs or games, what control calls and errors name.
    """

    bounds: list[tuple[int, int]]
    unit_bounds: list[tuple[int, int]]
    unit_name = "env"  # "game" for multi-agent games
    buffers: Buffers
    on_failure: str = "raise"
    restarts: Restarts  # with on_failure="restart": the counts and the limit
    broken: str | None = None  # why the pool cannot be used any more

    @property
    def num_blocks(self) -> int:
        return len(self.bounds)

    # -- what a member implements -----------------------------------------------------

    def post_step(self, blocks: Sequence[int], actions: Any, checker: ActionChecker,
                  env_ids: np.ndarray | None = None) -> None:
        """Hand a checked action batch (for all envs, or for ``env_ids``) to ``blocks``."""
        raise NotImplementedError

    def post_reset(self, blocks: Sequence[int], seeds: list, options: dict | None,
                   mask: np.ndarray | None) -> None:
        """Start resetting ``blocks`` (the envs in ``mask``, if given) with per-env seeds."""
        raise NotImplementedError

    def collect(self, blocks: Sequence[int], what: str, want: int | None = None,
                restart_truncates: bool = True) -> tuple[list[int], Entries]:
        """Wait for ``want`` (default: all) of ``blocks``, earliest first.

        Returns the blocks collected (ascending) and their info entries, in env
        order.  Failures are handled by the policy (see the module docstring); a
        restarted block's envs report ``truncations=restart_truncates``.
        """
        raise NotImplementedError

    def drain(self, blocks: Sequence[int], what: str) -> None:
        """Wait for ``blocks`` and drop their results (errors included)."""
        self.collect(blocks, what)

    def control(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None,
                what: str) -> list:
        """``fn(env, *args)`` for each env (game) index in ``targets`` (ascending), in order."""
        raise NotImplementedError

    def close(self, timeout: float | None = None, terminate: bool = False,
              pending: Sequence[int] = ()) -> None:
        """Close every env and release what the pool holds (idempotent).

        ``pending``: blocks with a command in flight, waited for up to ``timeout``
        seconds first; ``terminate``: stop at once, without closing the envs.
        """
        raise NotImplementedError

    # -- shared by every member --------------------------------------------------------

    def batch_infos(self, entries: Entries, num_envs: int,
                    position: dict[int, int] | None = None) -> dict:
        """Gymnasium's dict-of-arrays infos of ``entries`` (``position``: env -> batch row)."""
        return batch_infos(entries, num_envs)

    def check_usable(self) -> None:
        """Raise if an earlier failure left the pool unusable."""
        if self.broken is not None:
            hint = "" if self.on_failure == "restart" else (
                ", or use on_worker_failure='restart' (it covers steps and resets)")
            raise FastVecError(f"this {self.owner} is unusable ({self.broken}); close it "
                               f"and make a new one{hint}")

    owner = "vector env"  # how messages name the vector env
    seats = 1  # rows per env function: one, or one per seat of a game

    def count_rows(self, hello: Hello) -> None:
        """The blocks hold what ``hello`` describes: from now on ``bounds`` count rows."""
        self.seats = len(hello.env_spaces[0][2])
        self.unit_name = "env" if hello.agents is None else "game"
        self.bounds = [(a * self.seats, b * self.seats) for a, b in self.unit_bounds]

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
        for exc in failures.values():  # the lowest env's first, whichever finished first
            if isinstance(exc, ObservationError) or self.on_failure == "raise":
                self.note_dead(failures.values())
                raise exc
        for b, exc in failures.items():
            try:
                self.restarts.check_limit(exc)
            except BaseException:
                self.note_dead(failures.values())
                raise
            self.restarts.record(self.unit_bounds[b], self.unit_name, exc)
            replies[b] = self.restart(b, restart_truncates)
        return blocks, [entry for b in blocks for entry in replies[b]]

    def restart(self, b: int, truncate: bool) -> Entries:
        """Rebuild block ``b`` and reset its envs; they report reward 0 and ``truncate``."""
        entries = self.rebuild(b)
        start, stop = self.bounds[b]
        self.buffers.clear(slice(start, stop), truncate)
        return entries + [(i, {"worker_restarted": True}) for i in range(start, stop)]

    def rebuild(self, b: int) -> Entries:
        """Replace block ``b``'s envs with fresh ones, reset; the reset's info entries."""
        raise FastVecError(f"{type(self).__name__} cannot restart a block")

    def note_dead(self, failures: Any) -> None:
        """Mark the pool unusable if any of ``failures`` is a worker that died."""
        for exc in failures:
            if isinstance(exc, WorkerError) and exc.exitcode is not None:
                self.broken = str(exc)
                return


class LocalBlock:
    """A block of envs stepped in this process, when its pool collects it."""

    def __init__(self, envs: list, start: int, buffers: Buffers, mode: int) -> None:
        self.envs = envs
        self.start = start
        self.buffers = buffers
        self.block, self.objects = buffers.env_block(envs, start, mode)
        self.stop = start + rows_of(envs)
        self.fresh_rows = getattr(buffers.obs, "fresh_rows", False)
        self.pending: tuple | None = None  # (actions,) or (seeds, options, mask)

    def post_step(self, actions: list) -> None:
        self.pending = (actions,)

    def post_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> None:
        self.pending = (seeds, options, mask)

    def run(self) -> Entries:
        """Run the posted command; its info entries."""
        pending, self.pending = self.pending, None
        if pending is None:
            return []
        stepping = len(pending) == 1
        if self.fresh_rows:  # new rows; a masked reset keeps the other envs' records
            rows = self.buffers.obs.before_write(keep=not stepping and pending[2] is not None)
            assert rows is not None
            if self.start or len(rows) != self.stop:
                rows = rows[self.start:self.stop]
            self.block.set_rows(rows)
        entries = self.block.step(pending[0]) if stepping else self.block.reset(*pending)
        if self.objects is not None:
            self.buffers.obs.receive(self.start, self.objects)
        return entries


class LocalPool(Pool):
    """One block of every env, stepped in this process; env errors pass through as raised."""

    def __init__(self, envs: list, buffers: Buffers, mode: int) -> None:
        self.envs = envs
        self.buffers = buffers
        self.block = LocalBlock(envs, 0, buffers, mode)
        self.bounds = [(0, self.block.stop)]
        self.unit_bounds = [(0, len(envs))]

    def post_step(self, blocks: Sequence[int], actions: Any, checker: ActionChecker,
                  env_ids: np.ndarray | None = None) -> None:
        self.block.post_step(checker.split(actions))

    def post_reset(self, blocks: Sequence[int], seeds: list, options: dict | None,
                   mask: np.ndarray | None) -> None:
        self.block.post_reset(seeds, options, mask)

    def collect(self, blocks: Sequence[int], what: str, want: int | None = None,
                restart_truncates: bool = True) -> tuple[list[int], Entries]:
        return [0], self.block.run()

    def control(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None,
                what: str) -> list:
        if args_per_env is None:
            return [fn(self.envs[i]) for i in targets]
        return [fn(self.envs[i], *args) for i, args in zip(targets, args_per_env, strict=True)]

    def close(self, timeout: float | None = None, terminate: bool = False,
              pending: Sequence[int] = ()) -> None:
        self.block.pending = None
        if not terminate:
            for env in self.envs:
                env.close()
        self.envs = []
