"""ProcessPool: a worker process per block, stepping through shared memory.

actions -> shared action rows -> the barrier posts STEP -> workers step their envs
and write obs / reward / flags into their rows (block 0 of ``local_block``: this
process, meanwhile) -> done words + one bell -> ``collect`` waits in short slices
(liveness, deadlines), reads the replies, batches infos -> views of the rows.

Block ``b`` holds rows ``bounds[b]``.  The pool drives two kinds of block, each a
``Driven`` (:mod:`fastvec.pool.process.driven`): the workers' blocks
(:mod:`fastvec.pool.process.worker_blocks`; ``worker k`` in messages, numbered from 0
after the trainer's own block when there is one) and the trainer's own block
(:mod:`fastvec.pool.process.trainer_block`).  A command is one batch posted to
each kind; the pool lays out the shared segment and decides, for async batches,
which blocks come first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fastvec._kernels.barrier import Barrier
from fastvec.pool.about import check_blocks, stacked
from fastvec.pool.base import STARTUP_SECONDS, Entries, Pool, some_rows
from fastvec.pool.buffers import Buffers
from fastvec.pool.env_fns import pickle_blocks
from fastvec.pool.obs_store import make_obs_store
from fastvec.pool.process.driven import (
    Batch,
    ControlBatch,
    Driven,
    LaidOut,
    ResetBatch,
    StepBatch,
)
from fastvec.pool.process.protocol import Command, RegionName, Stepping, spin_budget_us
from fastvec.pool.process.segment import plan_segment
from fastvec.pool.process.shared_infos import InfoReader
from fastvec.pool.process.shm import SharedSegment
from fastvec.pool.process.trainer_block import TrainerBlock
from fastvec.pool.process.worker_blocks import WorkerBlocks
from fastvec.pool.process.workers import Workers
from fastvec.pool.restarts import Restarts
from fastvec.spaces.actions import ActionChecker
from fastvec.spaces.layout import batch_views, layout_of
from fastvec.spaces.observation_mode import ObservationMode, observation_spaces, same_space_hint

__all__ = ["ProcessPool"]

STEP = Command.STEP  # looked up once, not on every step


class ProcessPool(Pool):
    """Worker processes, one per block of ``bounds`` (env functions), and with ``local``
    block 0 stepped in this process; started, checked and attached at once.

    ``observation_spaces``: ``(single, batched or None)`` as ``observation_mode``
    made them from every env's space.
    """

    owner, block_word = "SubprocVecEnv", "worker"
    observation_spaces: tuple[Any, Any]
    num_workers: int  # set by fastvec.pool.build
    context: str

    def __init__(self, env_fns: Sequence[Callable], bounds: list[tuple[int, int]], ctx: Any,
                 mode: int, copy: bool, timeout: float | None = None,
                 on_failure: str = "raise", observation_mode: ObservationMode = "same",
                 restarts: Restarts | None = None, local: bool = False,
                 daemon: bool = True, frame_stack: Any = None) -> None:
        self.bounds = self.unit_bounds = bounds
        self.on_failure = on_failure
        self.restarts = restarts
        self._stepping = Stepping(mode, frame_stack)
        self.workers = Workers(ctx, len(bounds), timeout, on_failure == "restart", daemon)
        self.first_remote = 1 if local else 0  # worker k steps block first_remote + k
        self.trainer: TrainerBlock | None = None
        self._kinds: list[Driven] = []  # the trainer's block first: it runs while workers step
        self._shared: SharedSegment | None = None
        remote = range(self.first_remote, len(bounds))
        self.remote = WorkerBlocks(self, self.workers, pickle_blocks(
            env_fns, bounds, remote, "SubprocVecEnv's workers"))
        self._kinds = [self.remote]
        try:
            self.remote.start(remote)
            if local:
                self.trainer = TrainerBlock(self, env_fns[:bounds[0][1]])
                self._kinds.insert(0, self.trainer)
            self._kind_of: list[Driven] = [self._kinds[0] if b < self.first_remote
                                           else self.remote for b in range(len(bounds))]
            self._start(observation_mode, copy)
        except BaseException:
            self.close()
            raise
        self._block_count = len(bounds)  # num_blocks, without a property on every step
        self._every_block: list[tuple[Driven, Sequence[int]]] = [
            (kind, kind.blocks) for kind in self._kinds]

    @property
    def pids(self) -> list[int | None]:
        """Each worker's process id."""
        return self.workers.pids

    @property
    def exitcodes(self) -> list[int | None]:
        """Each worker's exit code (None while it runs)."""
        return self.workers.exitcodes

    @property
    def wait_timeout(self) -> float | None:  # type: ignore[override]
        return self.workers.wait_timeout

    @wait_timeout.setter
    def wait_timeout(self, seconds: float | None) -> None:
        self.workers.wait_timeout = seconds

    @property
    def infos_raw_only(self) -> bool:
        """Whether workers send raw infos only (their blocks disagreed, or as asked)."""
        return bool(self.infos.raw_only[0])

    def send_raw_infos(self) -> None:
        """Have the workers send their envs' infos as they are, not batched (the Ray
        actor sends them on, and the trainer batches every block's).
        """
        self.infos.raw_only[0] = 1

    # -- start-up --------------------------------------------------------------------

    def _start(self, observation_mode: ObservationMode, copy: bool) -> None:
        """Read what every block built, check it, lay out and attach the shared segment."""
        deadline = time.monotonic() + STARTUP_SECONDS
        abouts = [stacked(self._kind_of[b].about(b, deadline), self._stepping.frame_stack)
                  for b in range(self.num_blocks)]
        check_blocks(abouts, 0, observation_mode == "same", same_space_hint)
        self.observation_spaces = observation_spaces(
            observation_mode, [triple[0] for about in abouts for triple in about.env_spaces],
            games=abouts[0].agents is not None)
        self.count_rows(abouts[0]._replace(env_spaces=[  # every block's envs
            triple for about in abouts for triple in about.env_spaces]))
        obs_space = self.observation_spaces[0]
        # Laid out once, here: the workers write and read records by these layouts.
        obs_layout, action_layout = layout_of(obs_space), layout_of(abouts[0].action_space)
        plan = plan_segment(self.num_rows, self.num_blocks, obs_layout, action_layout)
        self._shared = SharedSegment.create(plan)
        arrays = self._shared.arrays
        self.workers.barrier = Barrier(arrays[RegionName.BARRIER], self.num_blocks,
                                       spin_budget_us())
        self.infos = InfoReader(arrays[RegionName.INFOS], arrays[RegionName.INFOS_RAW_ONLY],
                                self.remote.last_infos)
        self.remote.action_views = None if action_layout is None else batch_views(
            action_layout, arrays[RegionName.ACTIONS])
        store = make_obs_store(obs_space, self.num_rows, copy, arrays[RegionName.OBS],
                               layout=obs_layout)
        self.buffers = Buffers.over(store, arrays)
        shared = LaidOut(plan, self._shared.fd, self.buffers, self.infos, self._stepping,
                         obs_layout, action_layout, arrays[RegionName.STEP_MASK])
        for kind in self._kinds:
            for b in kind.blocks:
                kind.attach(b, shared, deadline)

    # -- commands --------------------------------------------------------------------

    def _involved(self, blocks: Sequence[int]) -> list[tuple[Driven, Sequence[int]]]:
        """Each kind of block with its blocks among ``blocks`` (ascending, as every
        caller of a pool gives them: block 0 first when it is among them).
        """
        if len(blocks) == self.num_blocks:  # every block: the common case
            return self._every_block
        if self.trainer is None or blocks[0]:  # the workers' only
            return [(self.remote, blocks)]
        if len(blocks) == 1:
            return [(self.trainer, blocks)]
        return [(self.trainer, blocks[:1]), (self.remote, blocks[1:])]

    def _post(self, blocks: Sequence[int], command: Command, batch: Batch) -> None:
        # The workers' blocks first, so that they start while this process posts (and
        # later runs) its own.
        for kind, mine in reversed(self._involved(blocks)):
            kind.post(mine, command, batch)

    def post_step(self, blocks: Sequence[int], actions: Any, checker: ActionChecker,
                  env_ids: np.ndarray | None = None) -> None:
        batch = StepBatch(actions, checker, env_ids, self.bounds,
                          some_rows(env_ids, blocks, self.bounds))
        # _post written out: the step's path, where each call shows
        if len(blocks) == self._block_count:
            involved = self._every_block
        elif self.trainer is None or blocks[0]:  # the workers' only (_involved's case)
            involved = [(self.remote, blocks)]
        else:
            involved = self._involved(blocks)
        for kind, mine in reversed(involved):  # the workers first, as in _post
            kind.post(mine, STEP, batch)

    def post_reset(self, blocks: Sequence[int], seeds: list, options: dict | None,
                   mask: np.ndarray | None) -> None:
        self._post(blocks, Command.RESET, ResetBatch(seeds, options, mask, self.bounds))

    def control(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None,
                what: str) -> list:
        every = range(self.num_blocks)  # every block runs its part, maybe none
        self._post(every, Command.CONTROL, ControlBatch(fn, targets, args_per_env,
                                                        self.unit_bounds))
        replies = self._wait(list(every), what, self.num_blocks)
        failures = [replies[b] for b in every if isinstance(replies[b], BaseException)]
        if failures:  # the lowest env's first, whichever finished first
            self.note_dead(failures)
            raise failures[0]
        return [value for b in every for value in replies[b].results]

    # -- collecting ------------------------------------------------------------------

    def _wait(self, blocks: list[int], what: str, want: int) -> dict[int, Any]:
        trainer = self.trainer
        if want == len(blocks):
            involved = self._every_block if want == self._block_count else \
                self._involved(blocks)
        elif trainer is None or blocks[0]:  # an async batch of the workers' blocks
            if len(blocks) >= want + 2:  # this process would never wait
                self.workers.let_run(blocks)
            involved = [(self.remote, blocks)]
        else:  # the trainer's block is ready whenever this process runs it
            remote = blocks[1:]
            self.workers.let_run(remote)
            if trainer.ticket is None:  # it takes its turn from the first wait after its post
                trainer.ticket = self.workers.barrier.take_ticket()
            chosen = self.workers.first_done(remote, trainer.ticket, want)
            if 0 not in chosen:  # enough workers were done before it
                return self.remote.replies(chosen, what, want)
            ready = trainer.replies(blocks[:1], what, 1)
            if want > 1:
                ready.update(self.remote.replies(remote, what, want - 1))
            return ready
        replies: dict[int, Any] | None = None
        for kind, mine in involved:  # the trainer's first: it runs while the workers step
            if replies is None:
                replies = kind.replies(mine, what, want)
            elif want > len(replies):
                replies.update(kind.replies(mine, what, want - len(replies)))
        assert replies is not None
        return replies

    def _receive(self, b: int, reply: Any) -> Entries:
        """The info entries of a step or reset reply (object observations stored)."""
        return [] if reply is None else self._kind_of[b].receive(b, reply)

    def batch_infos(self, entries: Entries, num_rows: int,
                    position: dict[int, int] | None = None) -> dict:
        return self.infos.batch(entries, num_rows, position)

    # -- restart and shutdown --------------------------------------------------------

    def rebuild(self, b: int) -> Entries:
        reply = self._kind_of[b].rebuild(b)
        if isinstance(reply, BaseException):
            self.broken = f"{self.block_name(b)} failed again right after a restart"
            raise reply
        return self._receive(b, reply)

    def close(self, timeout: float | None = None, terminate: bool = False,
              pending: Sequence[int] = ()) -> None:
        pending = list(pending) if self.broken is None else []
        for kind in (self.remote, self.trainer):  # the workers first: they may be busy
            if kind is not None:
                kind.close(pending, timeout, terminate)
        # Views of the shared segment keep its mapping (and a descriptor) alive: drop
        # ours, so it is unmapped now rather than when the garbage collector runs.
        for name in ("buffers", "infos"):
            self.__dict__.pop(name, None)
        if self._shared is not None:
            self._shared.close()
            self._shared = None
