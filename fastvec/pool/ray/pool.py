"""RayPool: one Ray actor per block of envs, one remote call per actor per step.

The trainer's side of :mod:`fastvec.pool.ray.actor`.  Each block's actor hosts
its block in a pool of its own (``inner="sync"`` or ``"subproc"``); a step
posts one ``step`` call per actor with the block's slice of the checked actions
and ``collect`` waits for the replies with ``ray.wait`` (earliest posted first,
so async batches take the first actors ready without starving the others),
then copies each packed reply into the trainer's buffers.  Ray's object store
carries large replies (read in place on the same node).

Failures follow ``fastvec.pool.base``'s policy: an env that raised comes back as an
``ErrorReport`` (a ``WorkerError`` naming the env and the actor, the remote
traceback as ``__cause__``); an actor whose call fails inside Ray (its process
or node died) is a ``WorkerError`` too and leaves the pool unusable, unless
``on_failure="restart"`` replaces the actor; so is an actor past the ``timeout``
(``WorkerTimeout``: a hung env, or a node stopped or cut off).  A replacement goes
to a node :mod:`fastvec.pool.ray.placement` trusts, never the one its
predecessor died or hung on while there is another.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle
import numpy as np

from fastvec.errors import WorkerError, WorkerTimeout
from fastvec.pool.about import About, check_blocks
from fastvec.pool.base import (
    CLOSE_GRACE_SECONDS,
    SLICE_SECONDS,
    STARTUP_SECONDS,
    Entries,
    Pool,
    block_mask,
    some_rows,
)
from fastvec.pool.block_map import BlockMap
from fastvec.pool.buffers import Buffers
from fastvec.pool.env_fns import pickle_blocks
from fastvec.pool.obs_store import make_obs_store
from fastvec.pool.ray.actor import EnvActor, unpack
from fastvec.pool.ray.placement import Placement
from fastvec.pool.ray.rows import rows_of, take_rows
from fastvec.pool.ray.session import stop_local_ray
from fastvec.pool.reports import ErrorReport, RemoteTraceback, env_failure, rebuild_mistake
from fastvec.pool.restarts import Restarts
from fastvec.spaces.actions import ActionChecker

__all__ = ["RayPool"]

DEFAULT_ACTOR_OPTIONS = {"num_cpus": 0, "max_restarts": 0}
REBUILD_ATTEMPTS = 3  # tries to start an actor, each on another trusted node


class RayPool(Pool):
    """Ray actors, one per block of ``bounds``, each hosting its block in a pool of its own.

    ``bounds`` count env functions; for games, which fill one row per seat, the
    pool's ``bounds`` count rows once the actors have said what they built
    (``unit_bounds`` keeps the env functions' blocks).  ``mode`` is the kernels'
    autoreset code.
    """

    owner = "RayVecEnv"

    def __init__(self, env_fns: Sequence[Callable], bounds: list[tuple[int, int]], *,
                 inner: str, mode: int, copy: bool, actor_options: dict | None,
                 inner_options: dict | None, timeout: float | None, on_failure: str,
                 started_ray: bool = False, restarts: Restarts | None = None,
                 frame_stack: Any = None) -> None:
        import ray

        self._ray = ray
        self.block_map = BlockMap(bounds, bounds, host_word="actor")
        self.timeout = timeout
        self.on_failure = on_failure
        self.restarts = restarts
        self._inner, self._mode, self._inner_options = inner, mode, inner_options
        self._frame_stack = frame_stack
        self._options = {**DEFAULT_ACTOR_OPTIONS, **(actor_options or {})}
        self._actor_class = ray.remote(EnvActor)
        payloads = pickle_blocks(env_fns, bounds, range(len(bounds)), "RayVecEnv's actors")
        self._env_fns_bytes = [payloads[b] for b in range(len(bounds))]
        self._actors: list[Any] = [None] * len(bounds)
        self._refs: list[Any] = [None] * len(bounds)
        self._posted_at = np.zeros(len(bounds))
        self._dead: set[int] = set()
        self._pids = [0] * len(bounds)  # each actor's process id (as of its start)
        self._placed: list[str | None] = [None] * len(bounds)  # each actor's node, if pinned
        self.placement = Placement.for_options(ray, self._options)
        self.started_ray = started_ray  # close() shuts that Ray down
        try:
            abouts = self._launch(range(self.num_blocks), time.monotonic() + STARTUP_SECONDS,
                                  "building its envs")
            check_blocks(abouts)
            self.count_rows(abouts[0])
            self.observation_spaces = (self.about.observation_space, None)
            self._setup_buffers(copy)
        except BaseException:
            self.close(terminate=True)
            raise

    @property
    def pids(self) -> list[int]:
        """Each actor's process id (as of its start)."""
        return list(self._pids)

    # -- start-up --------------------------------------------------------------------

    def _start_actor(self, b: int, deadline: float) -> Any:
        """Actor ``b``, pinned to the node :mod:`fastvec.pool.ray.placement` chooses unless
        the options place it (waiting until ``deadline`` for a node that can host it).
        """
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options = self._options
        if "scheduling_strategy" not in options and "placement_group" not in options:
            try:
                node = self.placement.choose(b, deadline)
            except TimeoutError as exc:
                raise WorkerError(f"actor {b} could not be started: {exc}",
                                  worker_index=b) from None
            self._placed[b] = node
            options = {**options,
                       "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}
        return self._actor_class.options(**options).remote(
            self._env_fns_bytes[b], self.unit_bounds[b][0], self._inner, self._mode,
            self._inner_options, self._frame_stack)

    def _launch(self, blocks: Sequence[int], deadline: float, what: str) -> list[About]:
        """Start an actor for each of ``blocks`` and wait until it built its envs; what each
        built.  An actor that dies while building (its node was lost, and Ray does not
        know yet) is started again on another trusted node, ``REBUILD_ATTEMPTS`` tries in
        all; any other failure is raised, the lowest block's first.
        """
        abouts: dict[int, About] = {}
        todo = list(blocks)
        for attempt in range(1, REBUILD_ATTEMPTS + 1):
            for b in todo:
                self._kill(b)
                self._dead.discard(b)
                self._actors[b] = self._start_actor(b, deadline)
                self._refs[b] = self._actors[b].about.remote()
                self._posted_at[b] = time.monotonic()
            replies = self._ray_wait(todo, what, len(todo), STARTUP_SECONDS)
            for b in todo:  # its process id, while it is known to be up
                if not isinstance(replies[b], BaseException):
                    replies[b] = self._pid(b, what) or replies[b]
            retry = []
            for b in todo:
                reply = replies[b]
                if not isinstance(reply, BaseException):
                    abouts[b] = reply
                elif b in self._dead and attempt < REBUILD_ATTEMPTS and \
                        self.placement.trusted_nodes() and time.monotonic() < deadline:
                    retry.append(b)  # its node may be what failed: elsewhere
                else:
                    raise reply
            if not retry:
                break
            todo = retry
        return [abouts[b] for b in blocks]

    def _pid(self, b: int, what: str) -> BaseException | None:
        """Note actor ``b``'s process id; the error it stands for if the actor died."""
        try:
            self._pids[b] = self._ray.get(self._actors[b].pid.remote(), timeout=STARTUP_SECONDS)
        except self._ray.exceptions.RayError as exc:
            return self._died(b, exc, what)
        return None

    def _setup_buffers(self, copy: bool) -> None:
        store = make_obs_store(self.about.observation_space, self.num_rows, copy)
        self._record_size = 0 if store.layout is None else store.layout.record_size
        self._action_space = self.about.action_space
        self.buffers = Buffers.allocate(store, self.num_rows)

    # -- commands --------------------------------------------------------------------

    def post_step(self, blocks: Sequence[int], actions: Any, checker: ActionChecker,
                  env_ids: np.ndarray | None = None) -> None:
        now = time.monotonic()
        partial = some_rows(env_ids, blocks, self.bounds)
        for b in blocks:
            start, stop = self.bounds[b]
            rows = slice(start, stop) if env_ids is None else rows_of(env_ids, start, stop)
            part = take_rows(self._action_space, actions, rows)
            # None: the actor steps its whole block
            mask = block_mask(env_ids, start, stop) if partial else None
            actor = self._actors[b]
            self._refs[b] = actor.step.remote(part) if mask is None else \
                actor.step.remote(part, np.flatnonzero(mask))
            self._posted_at[b] = now

    def post_reset(self, blocks: Sequence[int], seeds: list, options: dict | None,
                   mask: np.ndarray | None) -> None:
        now = time.monotonic()
        for b in blocks:
            start, stop = self.bounds[b]
            self._refs[b] = self._actors[b].reset.remote(
                seeds[start:stop], options, None if mask is None else mask[start:stop])
            self._posted_at[b] = now

    def control(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None,
                what: str) -> list:
        fn_bytes = cloudpickle.dumps(fn)
        blocks = []
        now = time.monotonic()
        for b, (start, stop) in enumerate(self.unit_bounds):
            local = [k for k, i in enumerate(targets) if start <= i < stop]
            if not local:
                continue
            args = None if args_per_env is None else [args_per_env[k] for k in local]
            self._refs[b] = self._actors[b].control.remote(
                fn_bytes, [targets[k] - start for k in local], args)
            self._posted_at[b] = now
            blocks.append(b)
        return [value for reply in self.control_replies(blocks, what) for value in reply]

    def _receive(self, b: int, reply: Any) -> Entries:
        """Copy a step or reset reply into the buffers; its info entries."""
        entries = objects = None
        if type(reply) is tuple:
            reply, entries, objects = reply
        start, stop = self.bounds[b]
        fields, records = unpack(reply, stop - start, self._record_size)
        buffers = self.buffers
        for name, view in fields.items():
            getattr(buffers, name)[start:stop] = view
        if self._record_size:
            buffers.obs.rows[start:stop] = records  # type: ignore[attr-defined]
        if objects is not None:
            buffers.obs.receive(start, objects)
        return entries or []

    # -- waiting ---------------------------------------------------------------------

    def _wait(self, blocks: list[int], what: str, want: int) -> dict[int, Any]:
        return self._ray_wait(blocks, what, want, self.timeout)

    def _ray_wait(self, blocks: list[int], what: str, want: int, limit: float | None
                  ) -> dict[int, Any]:
        """Replies of ``want`` of ``blocks``: among the actors done, the one posted first
        comes first.  ``limit``: seconds a call may take.

        A reply is the actor's return value, or an exception (its env raised, or
        the actor died).
        """
        ray = self._ray
        by_ref = {self._refs[b]: b for b in sorted(blocks, key=self._posted_at.__getitem__)}
        wait_deadline = float("inf") if self.wait_timeout is None else \
            time.monotonic() + self.wait_timeout
        replies: dict[int, Any] = {}
        restart_late = self.on_failure == "restart" and limit == self.timeout
        while len(replies) < want:
            if restart_late:  # a hung actor takes its place first, as a failure
                self._report_late(by_ref, replies, want, what, limit)
                if len(replies) >= want:
                    break
            wanted = want - len(replies)
            ready, _ = ray.wait(list(by_ref), num_returns=wanted, timeout=SLICE_SECONDS)
            if ready and len(by_ref) > wanted:  # Ray's choice among those ready is not
                done = set(ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)[0])
                ready = [ref for ref in by_ref if ref in done][:wanted]  # the earliest posted
            for ref in ready:
                b = by_ref.pop(ref)
                replies[b] = self._value(b, ref, what)
            if len(replies) < want and not restart_late:
                now = time.monotonic()
                late = [b for b in by_ref.values() if limit and now - self._posted_at[b] > limit]
                if late:
                    raise WorkerTimeout(f"actors {sorted(late)} did not finish {what} within "
                                        f"timeout={limit} s")
            if len(replies) < want:
                now = time.monotonic()
                if now > wait_deadline:
                    raise WorkerTimeout(f"actors {sorted(by_ref.values())} did not finish "
                                        f"{what} within the wait's timeout={self.wait_timeout} s")
        return replies

    def _report_late(self, by_ref: dict[Any, int], replies: dict[int, Any], want: int,
                     what: str, limit: float | None) -> None:
        """Actors of ``by_ref`` past ``limit`` as ``WorkerTimeout`` replies (to be killed and
        replaced, their node no longer trusted), as many as the wait still wants.
        """
        if not limit:
            return
        now = time.monotonic()
        late = [ref for ref, b in by_ref.items() if now - self._posted_at[b] > limit]
        if not late:
            return
        ready = set(self._ray.wait(late, num_returns=len(late), timeout=0)[0])
        for ref in late:  # earliest posted first
            b = by_ref[ref]
            if len(replies) >= want:
                return
            if ref not in ready:
                del by_ref[ref]
                self._dead.add(b)
                self.placement.distrust(self._placed[b])
                replies[b] = WorkerTimeout(f"actor {b} did not finish {what} within "
                                           f"timeout={limit} s")

    def _value(self, b: int, ref: Any, what: str) -> Any:
        """Actor ``b``'s reply, or the exception it stands for."""
        try:
            value = self._ray.get(ref)
        except self._ray.exceptions.RayError as exc:
            return self._died(b, exc, what)
        if isinstance(value, ErrorReport):
            return self._error(b, value, what)
        return value

    def _died(self, b: int, exc: BaseException, what: str) -> WorkerError:
        start, stop = self.unit_bounds[b]
        self._dead.add(b)
        self.placement.distrust(self._placed[b])
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        error = WorkerError(f"{self.block_name(b)} ({self.unit_name}s {start}..{stop - 1}) died "
                            f"during {what}: {type(exc).__name__}: {first_line}", worker_index=b)
        error.__cause__ = exc
        return error

    def _error(self, b: int, report: ErrorReport, what: str) -> BaseException:
        mistake = rebuild_mistake(report)
        if mistake is not None:
            return mistake
        index = report.env_index
        return env_failure(self.block_map.where(b, index), report.type_name, report.message,
                           what, env_index=index, worker_index=b,
                           cause=RemoteTraceback(report.traceback))

    def host_lost(self, exc: BaseException) -> bool:
        """A timeout, or an error of an actor that died (its exit code is not known)."""
        return isinstance(exc, WorkerTimeout) or (isinstance(exc, WorkerError)
                                                  and exc.worker_index in self._dead)

    # -- restart and shutdown --------------------------------------------------------

    def rebuild(self, b: int) -> Any:
        """A new actor for block ``b`` on a trusted node (see :meth:`_launch`), its envs reset."""
        self._launch([b], time.monotonic() + STARTUP_SECONDS, "building its envs after a restart")
        start, stop = self.bounds[b]
        self._refs[b] = self._actors[b].reset.remote([None] * (stop - start), None, None)
        self._posted_at[b] = time.monotonic()
        return self._wait([b], "a reset after restart", 1)[b]

    def _kill(self, b: int) -> None:
        actor, self._actors[b] = self._actors[b], None
        if actor is not None:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # noqa: S110 - already gone
                pass

    def close(self, timeout: float | None = None, terminate: bool = False,
              pending: Sequence[int] = ()) -> None:
        live = [b for b, actor in enumerate(self._actors)
                if actor is not None and b not in self._dead]
        if not terminate and live and self._ray.is_initialized():
            grace = CLOSE_GRACE_SECONDS if timeout is None else max(timeout, 0.0)
            try:  # each actor finishes what it has (pending steps), then closes its envs
                refs = [self._actors[b].close.remote() for b in live]
                self._ray.wait(refs, num_returns=len(refs), timeout=grace)
            except Exception:  # noqa: S110 - the actors are killed below
                pass
        for b in range(len(self._actors)):
            self._kill(b)
        self._refs = [None] * len(self._refs)
        if self.__dict__.pop("started_ray", False):
            stop_local_ray()
