"""SubprocVecEnv: envs step in worker processes, talking through shared memory.

Data flow of a step: actions -> shared action rows -> the barrier posts STEP to
every worker -> each worker steps its block of envs and writes obs / reward /
flags into its rows -> it reports done (non-empty infos follow on its pipe) ->
the parent waits on the barrier, in short slices that check liveness and the
deadline -> views of the rows (or copies) -> trainer.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait as wait_for
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from fastvec._async import AsyncBatches, check_batch_size
from fastvec._base import BatchedVecEnv
from fastvec._info_slab import (
    INFO_BYTES,
    Block,
    Mismatch,
    area_views,
    batch_entries,
    fetch_raw,
    read_block,
)
from fastvec._kernels.barrier import Barrier, barrier_nbytes
from fastvec._kernels.infos import batch_infos
from fastvec._layout import batch_views, layout_of
from fastvec._procs import SLICE_SECONDS, WorkerProcess, send_all
from fastvec._shm import SharedBlock, plan_block
from fastvec._worker import Command, Status
from fastvec.errors import FastVecError, ObservationError, WorkerError, WorkerTimeout

__all__ = ["SubprocVecEnv"]

STARTUP_SECONDS = 300.0  # building envs may be slow (asset loading), but not forever
CLOSE_GRACE_SECONDS = 1.0
_LIVE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for envs in list(_LIVE):
        envs.close()


def default_context() -> str:
    """Forkserver where available (safe with threads in the trainer), else spawn."""
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


def split_blocks(num_envs: int, num_workers: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, end)`` env blocks, the first ``num_envs % num_workers`` one larger."""
    size, extra = divmod(num_envs, num_workers)
    bounds, start = [], 0
    for w in range(num_workers):
        end = start + size + (w < extra)
        bounds.append((start, end))
        start = end
    return bounds


class SubprocVecEnv(AsyncBatches, BatchedVecEnv):
    """Runs envs in worker processes, several per worker, stepping through shared memory.

    Args:
        env_fns: callables returning ``gymnasium.Env``; sent to workers with cloudpickle.
        num_workers: worker processes (default ``min(num_envs, os.cpu_count())``); envs
            are split into contiguous blocks, one per worker.
        context: ``"fork"``, ``"spawn"`` or ``"forkserver"`` (default: forkserver where
            available, else spawn).
        autoreset_mode, copy, episode_statistics: as in :class:`fastvec.SyncVecEnv`.
        batch_size: below ``num_envs``, async batches: ``async_reset`` / ``recv`` / ``send``
            on whole worker blocks (a multiple of ``num_envs // num_workers``).
        timeout: seconds a step, reset or call may take before ``WorkerTimeout``.
        on_worker_failure: ``"raise"`` (a ``WorkerError``) or ``"restart"`` (respawn the
            worker, rebuild and reset its envs; they report ``truncations=True`` and
            ``infos["worker_restarted"]``).
        episode_statistics: add ``infos["episode"]`` (return, length, time) when an
            episode ends, as Gymnasium's ``RecordEpisodeStatistics`` does.

    Raises:
        ValueError: an argument is out of range (the message says what would work).
        WorkerError: an env could not be built in its worker.

    Example:
        >>> import gymnasium as gym, numpy as np, fastvec
        >>> envs = fastvec.SubprocVecEnv([lambda: gym.make("CartPole-v1")] * 4, num_workers=2)
        >>> obs, infos = envs.reset(seed=0)
        >>> obs.shape
        (4, 4)
        >>> obs, rewards, terminations, truncations, infos = envs.step(np.zeros(4, np.int64))
        >>> rewards.tolist()
        [1.0, 1.0, 1.0, 1.0]
        >>> envs.close()
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_workers: int | None = None,
        context: str | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        batch_size: int | None = None,
        timeout: float | None = None,
        on_worker_failure: str = "raise",
        episode_statistics: bool = False,
    ) -> None:
        self._workers: list[WorkerProcess] = []
        self._shared: SharedBlock | None = None
        self._arrays: dict[str, np.ndarray] = {}
        self._broken: str | None = None
        num_envs = len(env_fns)
        if num_envs < 1:
            raise ValueError("expected at least one env function, got none")
        num_workers = min(num_envs, os.cpu_count() or 1) if num_workers is None else num_workers
        if not 1 <= num_workers <= num_envs:
            raise ValueError(f"expected num_workers in [1, {num_envs}], got {num_workers}")
        if on_worker_failure not in ("raise", "restart"):
            raise ValueError("expected on_worker_failure 'raise' or 'restart', "
                             f"got {on_worker_failure!r}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"expected a positive timeout in seconds or None, got {timeout}")
        self.num_workers = num_workers
        self.batch_size = check_batch_size(batch_size, num_envs, num_workers)
        self.timeout = timeout
        self.on_worker_failure = on_worker_failure
        self.context = context or default_context()
        self._ctx = mp.get_context(self.context)
        self._bounds = split_blocks(num_envs, num_workers)
        self._posted_at = np.zeros(num_workers)  # monotonic time of each worker's command
        self._next_check = 0.0  # monotonic time of the next liveness/deadline check
        self._env_fns_bytes = [cloudpickle.dumps(list(env_fns[a:b])) for a, b in self._bounds]
        _LIVE.add(self)
        try:
            self._start(num_envs, autoreset_mode, copy, episode_statistics)
            self._init_async()
        except BaseException:
            self._shutdown()
            raise

    # -- start-up --------------------------------------------------------------------

    def _start(self, num_envs: int, autoreset_mode: Any, copy: bool,
               episode_statistics: bool) -> None:
        self._workers = [WorkerProcess(self._ctx, w, b) for w, b in
                         enumerate(self._env_fns_bytes)]
        deadline = time.monotonic() + STARTUP_SECONDS
        hello = [self._hello(w, deadline) for w in range(self.num_workers)]
        obs_space, act_space, metadata, render_mode = hello[0][:4]
        spaces = [pair for message in hello for pair in message[4]]
        for index, (env_obs, env_act) in enumerate(spaces):
            if env_obs != obs_space or env_act != act_space:
                raise ValueError(f"env {index} has spaces ({env_obs}, {env_act}); expected "
                                 f"({obs_space}, {act_space}) as env 0")
        self._setup(num_envs, obs_space, act_space, metadata, render_mode, autoreset_mode,
                    copy, episode_statistics, buffers=self._make_shared(obs_space, act_space))
        for w in range(self.num_workers):
            self._attach(w, deadline)

    def _hello(self, w: int, deadline: float) -> tuple:
        message = self._workers[w].recv(deadline, "start-up")
        if message[0] == "error":
            if message[1] is not None:  # the worker counts the envs of its block from 0
                message = (message[0], self._bounds[w][0] + message[1], *message[2:])
            raise self._error(w, message, "building its envs")
        return message[1:]

    def _make_shared(self, obs_space: gym.Space, act_space: gym.Space) -> dict:
        n = self._bounds[-1][1]
        obs_layout, act_layout = layout_of(obs_space), layout_of(act_space)
        self._plan = plan_block([
            ("barrier", (barrier_nbytes(self.num_workers),), "u1"),
            ("obs", (n, obs_layout.record_size if obs_layout else 0), "u1"),
            ("actions", (n, act_layout.record_size if act_layout else 0), "u1"),
            ("rewards", (n,), "f8"),
            ("terminations", (n,), "?"),
            ("truncations", (n,), "?"),
            ("needs_reset", (n,), "?"),
            ("infos", (self.num_workers, INFO_BYTES), "u1"),
            ("infos_raw_only", (1,), "u1"),
        ])
        self._shared = SharedBlock.create(self._plan)
        arrays = self._arrays = self._shared.arrays
        self._barrier = Barrier(arrays["barrier"], self.num_workers)
        self._info_layouts: list[tuple | None] = [None] * self.num_workers  # (schema, views)
        self._action_layout = act_layout
        self._action_views = None if act_layout is None else batch_views(
            act_layout, arrays["actions"])
        return {name: arrays[name] for name in
                ("obs", "rewards", "terminations", "truncations", "needs_reset")}

    def _attach(self, w: int, deadline: float) -> None:
        worker = self._workers[w]
        worker.send(("attach", self._plan, self._bounds[w][0], self.num_workers,
                     self._mode_code))
        assert self._shared is not None
        worker.send_fd(self._shared.fd)
        message = worker.recv(deadline, "start-up")
        if message[0] == "error":
            raise self._error(w, message, "attaching shared memory")
        worker.attached = True

    # -- the step path ---------------------------------------------------------------

    def _start_step(self, actions: Any) -> None:
        self._check_usable()
        self._check_sync_allowed("step")
        workers = range(self.num_workers)
        self._send_actions(workers, actions, self._actions, None)
        self._post(workers, Command.STEP)

    def _send_actions(self, workers: Sequence[int], checked: Any, checker: Any,
                      env_ids: np.ndarray | None) -> None:
        """Put the checked batch where the workers read it (for ``env_ids``, default all)."""
        if self._action_views is not None:
            _copy_into(self._action_views, checked, env_ids)
            return
        per_env = checker.split(checked)
        if env_ids is not None:  # into env order, as each worker expects
            per_env = [per_env[k] for k in np.argsort(env_ids)]
        messages, start = [], 0
        for w in workers:
            a, b = self._bounds[w]
            messages.append(per_env[start:start + b - a])
            start += b - a
        send_all([self._workers[w] for w in workers], messages)

    def _finish_step(self) -> list:
        replies = self._collect(range(self.num_workers), "a step")
        return self._merge(replies, restart_truncates=True)

    def _run_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> list:
        self._check_usable()
        self._check_sync_allowed("reset")
        workers = [w for w, (a, b) in enumerate(self._bounds) if mask is None or mask[a:b].any()]
        self._post_reset(workers, seeds, options, mask)
        return self._merge(self._collect(workers, "a reset"), restart_truncates=False)

    def _post_reset(self, workers: list[int], seeds: list, options: dict | None,
                    mask: np.ndarray | None) -> None:
        send_all([self._workers[w] for w in workers],
                 [(seeds[a:b], options, None if mask is None else mask[a:b])
                  for a, b in (self._bounds[w] for w in workers)])
        self._post(workers, Command.RESET)

    def _collect(self, workers: Sequence[int], what: str, want: int | None = None
                 ) -> dict[int, Any]:
        """Wait for ``want`` (default: all) of ``workers`` to finish, earliest first.

        Returns their replies: None, a message, or an exception (the worker raised
        or died).  Anything else that interrupts the wait (a timeout, Ctrl-C)
        leaves the env unusable, since replies may be left unread.
        """
        try:
            return self._gather(list(workers), what, len(workers) if want is None else want)
        except BaseException as exc:
            if self._broken is None:
                self._broken = f"{type(exc).__name__} while waiting for {what}"
            raise

    def _gather(self, waiting: list[int], what: str, want: int) -> dict[int, Any]:
        deadline = time.monotonic() + (self.timeout if self.timeout else float("inf"))
        replies: dict[int, Any] = {}
        while len(replies) < want:
            self._barrier.wait(waiting, want - len(replies), SLICE_SECONDS)
            for w in self._barrier.done_in_order(waiting)[: want - len(replies)]:
                waiting.remove(w)
                replies[w] = self._reply(w, deadline, what)
            # Liveness and deadlines are checked whenever a wait comes back short, and
            # at least every SLICE_SECONDS while batches keep coming, so a dead or hung
            # worker is noticed even when others are always ready first (async batches).
            now = time.monotonic()
            if waiting and (len(replies) < want or now >= self._next_check):
                self._next_check = now + SLICE_SECONDS
                self._check_waiting(waiting, replies, want, what, now)
        return replies

    def _check_waiting(self, waiting: list[int], replies: dict[int, Any], want: int,
                       what: str, now: float) -> None:
        """Report dead workers among ``waiting`` (into ``replies``); raise on a late one."""
        # A worker that died with a command pending is reported now, even when
        # enough others are ready (unless it would be restarted into a bigger batch),
        # and without waiting for the others when it is not to be restarted.
        for w in self._dead(waiting):
            if not self._barrier.is_done(w) and (
                    len(replies) < want or self.on_worker_failure == "raise"):
                waiting.remove(w)
                replies[w] = self._workers[w].died(what)
                if self.on_worker_failure == "raise":
                    self._broken = str(replies[w])
                    raise replies[w]
        # Late: a command older than the timeout, whether or not the trainer needs
        # that worker for this batch (async batches would silently drop it).
        if self.timeout:
            late = [w for w in waiting if now - self._posted_at[w] > self.timeout
                    and not self._barrier.is_done(w)]
            if late:
                self._broken = f"a worker exceeded the {self.timeout} s timeout"
                raise WorkerTimeout(f"workers {late} did not finish {what} within "
                                    f"timeout={self.timeout} s")

    def _post(self, workers: Sequence[int], command: Command) -> None:
        """Post ``command`` to ``workers``, noting when (for the timeout)."""
        self._posted_at[list(workers)] = time.monotonic()
        self._barrier.post(workers, command)

    def _dead(self, workers: list[int]) -> list[int]:
        """The workers among ``workers`` whose process has exited (one poll for all)."""
        if not workers:
            return []
        ready = set(wait_for([self._workers[w].sentinel for w in workers], timeout=0))
        return [w for w in workers if self._workers[w].sentinel in ready]

    def _reply(self, w: int, deadline: float, what: str) -> Any:
        status = self._barrier.status(w)
        if status == Status.OK:
            return None
        if status == Status.INFOS:
            return Status.INFOS
        try:
            if status == Status.MESSAGE_SENT:  # whole on the pipe: no need to wait
                return self._workers[w].recv_now(what)
            message = self._workers[w].recv(deadline, what)
        except WorkerError as exc:
            return exc
        return self._error(w, message, what) if status == Status.ERROR else message

    def _merge(self, replies: dict[int, Any], restart_truncates: bool) -> list:
        """Entries of all replies in env order; failures raised or repaired."""
        entries: list = []
        failures = {w: r for w, r in sorted(replies.items()) if isinstance(r, BaseException)}
        for exc in failures.values():  # the lowest env's first, whichever finished first
            if isinstance(exc, ObservationError) or self.on_worker_failure == "raise":
                self._note_dead(failures.values())
                raise exc
        for w in sorted(replies):
            a, b = self._bounds[w]
            reply = replies[w]
            if w in failures:
                entries.extend(self._restart(w, restart_truncates))
            elif reply is Status.INFOS:
                layout = self._info_layouts[w]
                assert layout is not None  # the worker sent it before using its area
                schema, views = layout
                entries.append((a, Block(read_block(schema, views), b - a, w)))
            elif reply is not None:
                entries.extend(reply[1])
                if reply[2] is not None:
                    assert self._obs_objects is not None
                    self._obs_objects[a:b] = reply[2]
                if len(reply) > 3:  # the worker's infos will come through its info area
                    area = self._arrays["infos"][w]
                    self._info_layouts[w] = (reply[3], area_views(reply[3], area))
        return entries

    def _batch_infos(self, entries: list, num_envs: int,
                     position: dict[int, int] | None = None) -> dict:
        """Infos of entries, some of them workers' blocks; raw infos when blocks disagree.

        ``position`` maps env index to row (async batches) for raw entries fetched again.
        """
        try:
            return batch_entries(entries, num_envs)
        except Mismatch:
            pass
        # Two workers' blocks disagree on a leaf's dtype or shape, so the blocks' arrays
        # cannot be combined exactly: ask for the raw infos, and from now on send only those.
        self._arrays["infos_raw_only"][0] = 1
        raw = {}
        for index, info in entries:
            if type(info) is Block:
                fetched = self._last_infos(info.worker)
                raw[index] = [(i if position is None else position[i], value)
                              for i, value in fetched]
        return batch_infos(fetch_raw(entries, raw), num_envs)

    def _last_infos(self, w: int) -> list:
        """Worker ``w``'s raw infos of its last step (it is idle: its reply was read)."""
        self._workers[w].send(("last_infos", ()))
        self._post([w], Command.CONTROL)
        reply = self._collect([w], "a resend of infos")[w]
        if isinstance(reply, BaseException):
            raise reply
        return reply[1]

    def _restart(self, w: int, truncate: bool) -> list:
        """Replace worker ``w`` with a new one, rebuild and reset its envs."""
        self._workers[w].kill()
        self._barrier.settle(w)
        self._info_layouts[w] = None
        self._workers[w] = WorkerProcess(self._ctx, w, self._env_fns_bytes[w])
        deadline = time.monotonic() + STARTUP_SECONDS
        self._hello(w, deadline)
        self._attach(w, deadline)
        a, b = self._bounds[w]
        self._workers[w].send(([None] * (b - a), None, None))
        self._post([w], Command.RESET)
        reply = self._gather([w], "a reset after restart", 1)[w]
        if isinstance(reply, BaseException):
            self._broken = f"worker {w} failed again right after a restart"
            raise reply
        entries = [] if reply is None else list(reply[1])
        if reply is not None and reply[2] is not None:
            assert self._obs_objects is not None
            self._obs_objects[a:b] = reply[2]
        self._rewards[a:b] = 0.0
        self._terminations[a:b] = False
        self._truncations[a:b] = truncate
        self._needs_reset[a:b] = False
        return entries + [(i, {"worker_restarted": True}) for i in range(a, b)]

    def _error(self, w: int, message: tuple, what: str) -> BaseException:
        _, env_index, type_name, text, remote_tb, is_obs_error = message
        where = f"env {env_index} (worker {w})" if env_index is not None else f"worker {w}"
        if is_obs_error:
            exc: BaseException = ObservationError(text)
        else:
            exc = WorkerError(f"{where} raised {type_name} during {what}: {text}",
                              env_index=env_index, worker_index=w)
        exc.__cause__ = RemoteTraceback(remote_tb)
        return exc

    # -- control messages ------------------------------------------------------------

    def _control(self, name: str, args_per_worker: list[tuple]) -> list:
        self._check_open()
        self._check_usable()
        if self._pending is not None:
            raise FastVecError(f"{name}() called while a step is pending; call step_wait()")
        if self._in_flight.any():
            raise FastVecError(f"{name}() called while envs are in flight; recv() them first")
        send_all(self._workers, [(name, args) for args in args_per_worker])
        self._post(range(self.num_workers), Command.CONTROL)
        replies = self._collect(range(self.num_workers), f"{name}()")
        failures = [replies[w] for w in sorted(replies) if isinstance(replies[w], BaseException)]
        if failures:  # the lowest env's first, whichever finished first
            self._note_dead(failures)
            raise failures[0]
        return [replies[w][1] for w in range(self.num_workers)]

    def _note_dead(self, failures: Any) -> None:
        """Mark this env unusable if any of ``failures`` is a worker that died."""
        for exc in failures:
            if isinstance(exc, WorkerError) and exc.exitcode is not None:
                self._broken = str(exc)
                return

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env (or read attribute ``name``)."""
        results = self._control("call", [(name, args, kwargs)] * self.num_workers)
        return tuple(value for block in results for value in block)

    def call_each(self, fn: Callable[[gym.Env], Any], indices: Any = None) -> tuple[Any, ...]:
        """``fn(env)`` in the workers for each env, or for the envs ``indices``, in that order.

        ``fn`` travels with cloudpickle (lambdas work); its results must pickle.
        """
        targets = self._env_indices(indices)
        fn_bytes = cloudpickle.dumps(fn)
        asked = [[i - a for i in sorted(set(targets)) if a <= i < b] for a, b in self._bounds]
        results = self._control("call_each", [(fn_bytes, local) for local in asked])
        by_env = {self._bounds[w][0] + k: value for w, block in enumerate(results)
                  for k, value in zip(asked[w], block, strict=True)}
        return tuple(by_env[i] for i in targets)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every env."""
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute ``name`` of every env: one value each (list/tuple) or one for all."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} values (one per env), got {len(values)}")
        self._control("set_attr", [(name, list(values[a:b])) for a, b in self._bounds])

    def render(self) -> tuple[Any, ...]:
        """Each env's ``render()``."""
        results = self._control("render", [()] * self.num_workers)
        return tuple(frame for block in results for frame in block)

    # -- shutdown --------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._broken is not None:
            hint = "" if self.on_worker_failure == "restart" else (
                ", or use on_worker_failure='restart' (it covers steps and resets)")
            raise FastVecError(f"this SubprocVecEnv is unusable ({self._broken}); close it "
                               f"and make a new one{hint}")

    def close_extras(self, **kwargs: Any) -> None:
        """Stop every worker and release the shared memory."""
        self._shutdown()

    def _shutdown(self) -> None:
        _LIVE.discard(self)
        live = [w for w in self._workers if w.alive]
        if self._shared is not None and hasattr(self, "_barrier"):
            self._barrier.post([worker.index for worker in live], Command.CLOSE)
        for worker in live:
            if not worker.attached:  # still starting up, it listens on its pipe
                worker.tell_to_stop()
        deadline = time.monotonic() + CLOSE_GRACE_SECONDS
        for worker in self._workers:
            worker.stop(deadline - time.monotonic())
        self._workers = []
        self._arrays = {}
        if self._shared is not None:
            self._shared.close()
            self._shared = None

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            self.close()


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker (attached as ``__cause__``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


def _copy_into(views: Any, batch: Any, env_ids: np.ndarray | None = None) -> None:
    """Copy a checked action batch into the shared action views (rows ``env_ids``)."""
    if isinstance(views, dict):
        for key, view in views.items():
            _copy_into(view, batch[key], env_ids)
    elif isinstance(views, tuple):
        for view, part in zip(views, batch, strict=True):
            _copy_into(view, part, env_ids)
    elif env_ids is None:
        np.copyto(views, batch)
    else:
        views[env_ids] = batch
