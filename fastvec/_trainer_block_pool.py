"""TrainerBlockPool: the first block steps in the trainer's own process, the rest in workers.

``SubprocVecEnv(local_block=True)``.  On a machine with few cores the trainer
would otherwise sit idle while its workers step; here it steps block 0 itself,
between posting the step to the workers and waiting for them, so two cores run
the trainer and one worker, both busy.  Block 0 writes into the same shared
batch as the workers' blocks, so the batch is one array as before.

A local env that raises gives the ``WorkerError`` a worker's env would (with
``worker_index=None`` and the exception itself as ``__cause__``), and
``on_failure="restart"`` rebuilds the local envs in place.  A crash of native
code in a local env takes the trainer with it: that is what isolation costs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fastvec._actions import ActionChecker
from fastvec._buffers import Buffers
from fastvec._failure_policy import Restarts
from fastvec._pool import Entries, LocalBlock, Pool
from fastvec._games import check_blocks, describe
from fastvec._observation_mode import observation_spaces, same_space_hint
from fastvec._process_pool import ProcessPool
from fastvec.errors import ObservationError, WorkerError

__all__ = ["TrainerBlockPool"]


class TrainerBlockPool(Pool):
    """Block 0 in this process (env functions ``0:stop``), blocks 1.. are ``workers``' 0.."""

    owner = "SubprocVecEnv"

    def __init__(self, env_fns: Sequence[Callable], stop: int, workers: ProcessPool) -> None:
        self.env_fns = list(env_fns[:stop])
        self.workers = workers
        self.seats, self.unit_name = workers.seats, workers.unit_name
        self.bounds = [(0, stop * self.seats), *workers.bounds]
        self.unit_bounds = [(0, stop), *workers.unit_bounds]
        self.on_failure = workers.on_failure
        self.restarts = workers.restarts = Restarts(len(env_fns), workers.restarts.limit)
        self.hello = workers.hello
        self._broken: str | None = None
        self._local_ticket: int | None = None  # block 0's place in the order of completion
        self.envs = self._build()
        mine = describe(self.envs)
        mode = workers.observation_mode
        check_blocks([mine, *workers.hellos], 0, mode == "same", same_space_hint)
        # env 0 is this block's: the single space is its (for "different"), and the
        # workers lay out their shared batch by the one decided here
        every = [triple[0] for triple in mine.env_spaces] + \
            [triple[0] for hello in workers.hellos for triple in hello.env_spaces]
        self.observation_spaces = workers.observation_spaces = observation_spaces(
            mode, every, games=mine.agents is not None)

    @property
    def broken(self) -> str | None:  # type: ignore[override]
        return self._broken or self.workers.broken

    @broken.setter
    def broken(self, reason: str | None) -> None:
        self._broken = reason

    @property
    def pids(self) -> list[int | None]:
        return self.workers.pids

    @property
    def exitcodes(self) -> list[int | None]:
        return self.workers.exitcodes

    def _build(self) -> list:
        envs = []
        for index, env_fn in enumerate(self.env_fns):
            try:
                envs.append(env_fn())
            except Exception as exc:
                for env in envs:
                    env.close()
                raise _local_error(exc, index, "building its envs") from exc
        return envs

    def attach(self, mode: int, copy: bool) -> Buffers:
        """The workers' shared batch; block 0 writes its rows there too."""
        self.buffers = self.workers.attach(mode, copy)
        self._mode = mode
        self.local = LocalBlock(self.envs, 0, self.buffers, mode)
        return self.buffers

    # -- commands --------------------------------------------------------------------

    def post_step(self, blocks: Sequence[int], actions: Any, checker: ActionChecker,
                  env_ids: np.ndarray | None = None) -> None:
        remote = [b - 1 for b in blocks if b]
        if remote:  # the workers first, so they step while this process steps block 0
            self.workers.post_step(remote, actions, checker, env_ids)
        if blocks and blocks[0] == 0:
            self._local_ticket = None
            per_env = checker.split(actions)
            stop = self.bounds[0][1]
            if env_ids is None:
                self.local.post_step(per_env[:stop])
            else:
                by_env = dict(zip(env_ids.tolist(), per_env))
                self.local.post_step([by_env[i] for i in range(stop)])

    def post_reset(self, blocks: Sequence[int], seeds: list, options: dict | None,
                   mask: np.ndarray | None) -> None:
        remote = [b - 1 for b in blocks if b]
        if remote:
            self.workers.post_reset(remote, seeds, options, mask)
        if blocks and blocks[0] == 0:
            self._local_ticket = None
            stop = self.bounds[0][1]
            self.local.post_reset(seeds[:stop], options, None if mask is None else mask[:stop])

    def collect(self, blocks: Sequence[int], what: str, want: int | None = None,
                restart_truncates: bool = True) -> tuple[list[int], Entries]:
        want = len(blocks) if want is None else want
        remote = [b - 1 for b in blocks if b]
        local = bool(blocks) and blocks[0] == 0
        replies: dict[int, Any] = {}
        if local and want < len(blocks):
            self.workers.let_run(remote)  # block 0 keeps this process busy: see ProcessPool
            # Async batches: block 0 is ready whenever this process can run it, that is
            # from the first wait for a batch after it was posted; it takes its turn in
            # the order of completion from then, after the workers done before, so that
            # it neither always comes first (starving the workers) nor last.
            if self._local_ticket is None:
                self._local_ticket = self.workers.take_ticket()
            done = self.workers.ready(remote)
            order = sorted([(0, 0)] + [(_since(self.workers.ticket(w), self._local_ticket), w + 1)
                                       for w in done])
            chosen = [b for _, b in order[:want]]
            local = 0 in chosen
            if not local:
                remote = [b - 1 for b in chosen]
        if local:
            replies[0] = self._run_local(what)
        if remote and want > len(replies):
            for w, reply in self.workers.collect_entries(remote, what,
                                                         want - len(replies)).items():
                replies[w + 1] = reply
        return self.settle(replies, restart_truncates)

    def drain(self, blocks: Sequence[int], what: str) -> None:
        if blocks and blocks[0] == 0:
            self._run_local(what)  # run as a worker would, so later results stay the same
        remote = [b - 1 for b in blocks if b]
        if remote:
            self.workers.drain(remote, what)

    def _run_local(self, what: str) -> Entries | BaseException:
        try:
            return self.local.run()
        except ObservationError as exc:
            return exc
        except Exception as exc:
            return _local_error(exc, self.local.block.current // self.seats, what,
                                self.unit_name)

    def control(self, fn: Callable, targets: list[int], args_per_env: list[tuple] | None,
                what: str) -> list:
        stop = self.unit_bounds[0][1]
        local = [k for k, i in enumerate(targets) if i < stop]
        results: list[Any] = []
        error: BaseException | None = None
        for k in local:
            try:
                args = () if args_per_env is None else args_per_env[k]
                results.append(fn(self.envs[targets[k]], *args))
            except Exception as exc:
                error = _local_error(exc, targets[k], what, self.unit_name)
                break
        remote_targets = targets[len(local):]
        try:  # every worker runs its part, as without a local block
            results += self.workers.control(
                fn, remote_targets, None if args_per_env is None else args_per_env[len(local):],
                what)
        except WorkerError:
            if error is None:
                raise
        if error is not None:  # the lowest env's first
            raise error
        return results

    def batch_infos(self, entries: Entries, num_envs: int,
                    position: dict[int, int] | None = None) -> dict:
        return self.workers.batch_infos(entries, num_envs, position)

    def rebuild(self, b: int) -> Entries:
        if b:
            return self.workers.rebuild(b - 1)
        for env in self.envs:
            try:
                env.close()
            except Exception:  # noqa: S110 - the envs are being replaced
                pass
        self.envs = self._build()
        self.local = LocalBlock(self.envs, 0, self.buffers, self._mode)
        self.local.post_reset([None] * self.bounds[0][1], None, None)
        reply = self._run_local("a reset after restart")
        if isinstance(reply, BaseException):
            self.broken = "the local block failed again right after a restart"
            raise reply
        return reply

    def close(self, timeout: float | None = None, terminate: bool = False,
              pending: Sequence[int] = ()) -> None:
        for name in ("local", "buffers"):  # views of the workers' shared block
            self.__dict__.pop(name, None)
        self.workers.close(timeout, terminate, [b - 1 for b in pending if b])
        if not terminate:
            for env in getattr(self, "envs", []):
                env.close()
        self.envs = []


def _since(ticket: int, base: int) -> int:
    """How many completions after ``base`` ``ticket`` came (negative: before); tickets wrap."""
    return (ticket - base + 2**31) % 2**32 - 2**31


def _local_error(exc: Exception, env_index: int, what: str, unit: str = "env") -> WorkerError:
    """The error a worker would report for ``exc`` in env (game) ``env_index`` of block 0."""
    error = WorkerError(f"{unit} {env_index} (local block) raised {type(exc).__name__} during "
                        f"{what}: {exc}", env_index=env_index, worker_index=None)
    error.__cause__ = exc
    return error
