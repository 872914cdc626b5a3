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
from fastvec.pool.block_map import BlockMap
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
from fastvec.pool.process.workers import Workers, since
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

    owner = "SubprocVecEnv"
    observation_spaces: tuple[Any, Any]
    num_workers: int  # set by fastvec.pool.build
    context: str

    def __init__(self, env_fns: Sequence[Callable], bounds: list[tuple[int, int]], ctx: Any,
                 mode: int, copy: bool, timeout: float | None = None,
                 on_failure: str = "raise", observation_mode: ObservationMode = "same",
                 restarts: Restarts | None = None, local: bool = False,
                 daemon: bool = True, frame_stack: Any = None) -> None:
        # worker k steps block first_remote + k
        self.block_map = BlockMap(bounds, bounds, host_word="worker",
                                  first_remote=1 if local else 0)
        self.on_failure = on_failure
        self.restarts = restarts
        self._stepping = Stepping(mode, frame_stack)
        self.workers = Workers(ctx, len(bounds), timeout, on_failure == "restart", daemon)
        self.trainer: TrainerBlock | None = None
        self._kinds: list[Driven] = []  # the trainer's block first: it runs while workers step
        self._shared: SharedSegment | None = None
        remote = range(self.first_remote, len(bounds))
        self.remote = WorkerBlocks(self.block_map, self.workers, pickle_blocks(
            env_fns, bounds, remote, "SubprocVecEnv's workers"))
        self._kinds = [self.remote]
        try:
            self.remote.start(remote)
            if local:
                self.trainer = TrainerBlock(env_fns[:bounds[0][1]])
                self._kinds.insert(0, self.trainer)
            self._kind_of: list[Driven] = [self._kinds[0] if b < self.first_remote
                                           else self.remote for b in range(len(bounds))]
            self._start(observation_mode, copy)
        except BaseException:
            self.close()
            raise
        self._block_count = len(bounds)  # num_blocks, without a property on every step
        self._every_block: list[tuple[Driven, Sequence[int]]] = [
            (kind, list(kind.blocks)) for kind in self._kinds]

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
                                self._last_infos)
        self.remote.action_views = None if action_layout is None else batch_views(
            action_layout, arrays[RegionName.ACTIONS])
        store = make_obs_store(obs_space, self.num_rows, copy, arrays[RegionName.OBS],
                               layout=obs_layout)
        self.buffers = Buffers.over(store, arrays)
        shared = LaidOut(plan, self._shared.fd, self.block_map, self.workers.barrier,
                         self.buffers, self.infos, self._stepping, obs_layout, action_layout,
                         arrays[RegionName.STEP_MASK])
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
        bounds = self.block_map.bounds
        self._post(blocks, STEP, StepBatch(actions, checker, env_ids, bounds,
                                           some_rows(env_ids, blocks, bounds)))

    def post_reset(self, blocks: Sequence[int], seeds: list, options: dict | None,
                   mask: np.ndarray | None) -> None:
        self._post(blocks, Command.RESET, ResetBatch(seeds, options, mask, self.bounds))

    def control(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None,
                what: str) -> list:
        every = list(range(self.num_blocks))  # every block runs its part, maybe none
        self._post(every, Command.CONTROL, ControlBatch(fn, targets, args_per_env,
                                                        self.unit_bounds))
        return [value for reply in self.control_replies(every, what) for value in reply.results]

    # -- collecting ------------------------------------------------------------------

    def _wait(self, blocks: list[int], what: str, want: int) -> dict[int, Any]:
        involved = self._every_block if len(blocks) == self._block_count else \
            self._involved(blocks)
        if want < len(blocks) and len(involved) > 1:  # an async batch of both kinds
            return self._first_done(involved, what, want)
        replies: dict[int, Any] | None = None
        for kind, mine in involved:  # the trainer's first: it runs while the workers step
            if replies is None:
                replies = kind.replies(mine, what, want)
            elif want > len(replies):
                replies.update(kind.replies(mine, what, want - len(replies)))
        assert replies is not None
        return replies

    def _first_done(self, involved: list[tuple[Driven, Sequence[int]]], what: str, want: int
                    ) -> dict[int, Any]:
        """``want`` replies of an async batch over several kinds of block: those done first,
        in the order each kind says its blocks finished (:meth:`Driven.done`), then the
        earliest of the rest.
        """
        done = [entry for kind, mine in involved for entry in kind.done(mine)]
        first = done[0][0] if done else 0
        chosen = {b for _, b in sorted([(since(ticket, first), b) for ticket, b in done])[:want]}
        replies: dict[int, Any] = {}
        for kind, mine in involved:  # the trainer's first: it runs now
            picked = [b for b in mine if b in chosen]
            if picked:
                replies.update(kind.replies(picked, what, len(picked)))
        if len(replies) < want:  # fewer done than wanted: the earliest of the rest
            for kind, mine in involved:
                rest = [b for b in mine if b not in replies]
                if rest and len(replies) < want:
                    replies.update(kind.replies(rest, what, want - len(replies)))
        return replies

    def _receive(self, b: int, reply: Any) -> Entries:
        """The info entries of a step or reset reply (object observations stored)."""
        return [] if reply is None else self._kind_of[b].receive(b, reply)

    def batch_infos(self, entries: Entries, num_rows: int,
                    position: dict[int, int] | None = None) -> dict:
        return self.infos.batch(entries, num_rows, position)

    # -- restart and shutdown --------------------------------------------------------

    def rebuild(self, b: int) -> Any:
        return self._kind_of[b].rebuild(b)

    def _last_infos(self, b: int) -> list:
        """Block ``b``'s raw infos of its last step (it is idle: its reply was read); the
        info reader asks when blocks' infos do not batch alike.
        """
        self.remote.resend_infos(b)
        reply = self.wait([b], "a resend of infos", 1)[b]
        if isinstance(reply, BaseException):
            raise reply
        return reply.results

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
