"""What every fastvec vector env shares: the call guard, the step and reset API, outputs.

A vector env owns a pool of blocks (:mod:`fastvec.pool`) that runs its envs
somewhere and writes their results into its buffers.  This class checks
arguments and actions, keeps the call state (:mod:`fastvec.vector.call_state`),
the autoreset and episode-statistics state, and builds Gymnasium's outputs;
:mod:`fastvec.vector.env_calls` adds ``call``/``get_attr``/... over the pool's
control calls, and :mod:`fastvec.vector.split_calls` the calls in two parts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from fastvec._kernels.stepping import Autoreset
from fastvec.errors import ClosedEnvError
from fastvec.pool.base import Pool
from fastvec.pool.buffers import Buffers
from fastvec.pool.restarts import Restarts
from fastvec.spaces.actions import ActionChecker
from fastvec.spaces.layout import Layout
from fastvec.vector.arguments import mode_code, parse_autoreset_mode, refuse_ended, reset_rows
from fastvec.vector.call_state import CallState, check_call, guarded, refuse_concurrent_call
from fastvec.vector.env_calls import EnvCalls
from fastvec.vector.episode_stats import EpisodeStats
from fastvec.vector.game_infos import add_game_infos
from fastvec.vector.split_calls import SplitCalls
from fastvec.vector.subsets import Subsets, take_info_rows

__all__ = ["BatchedVecEnv", "parse_autoreset_mode"]

_Self = TypeVar("_Self", bound="BatchedVecEnv")  # `with Env(...) as envs` keeps the type
_RECV_SEND = ("recv", "send")
_IDLE, _WAITING_STEP, _CLOSED = CallState.IDLE, CallState.WAITING_STEP, CallState.CLOSED
_DISABLED, _SAME_STEP = int(Autoreset.DISABLED), int(Autoreset.SAME_STEP)
_WAIT_CALLS = ("step_wait", "reset_wait")
_get_ident = threading.get_ident


class BatchedVecEnv(SplitCalls, EnvCalls, VectorEnv):  # type: ignore[misc]  # np_random*: tuples
    """Base of fastvec's vector envs (not used directly).

    Implements Gymnasium's ``VectorEnv`` API for :class:`fastvec.SyncVecEnv` and
    :class:`fastvec.SubprocVecEnv`: ``reset``, ``step`` and its split form
    ``step_async``/``step_wait``, and ``close()`` (idempotent; also a context
    manager).  Besides Gymnasium's attributes (``num_envs``, the single and batched
    spaces, ``metadata`` with ``"autoreset_mode"``, ``render_mode``, ``closed``),
    each env has ``autoreset_mode`` (an ``AutoresetMode``), ``copy`` and
    ``episode_statistics``.

    Example:
        >>> import gymnasium as gym
        >>> from fastvec import SyncVecEnv
        >>> with SyncVecEnv([lambda: gym.make("CartPole-v1")] * 3) as envs:
        ...     obs, infos = envs.reset(seed=0)
        ...     print(envs.num_envs, envs.observation_space.shape, envs.autoreset_mode)
        3 (3, 4) AutoresetMode.NEXT_STEP
        >>> envs.closed
        True
    """

    _state = CallState.IDLE
    _pool: Pool | None = None
    batch_size: int

    def _setup(self, pool: Pool, autoreset_mode: AutoresetMode, copy: bool,
               episode_statistics: bool) -> None:
        """Take the spaces and the batch from ``pool`` (built with ``autoreset_mode``)."""
        about = pool.about
        num_envs = pool.num_rows  # rows: one per env, one per seat of a game
        self.num_envs = num_envs
        self._games = about.agents is not None
        self.agents = tuple(about.agents) if about.agents is not None else ("agent_0",)
        seats = len(self.agents)
        self.num_games = num_envs // seats
        self.game_of_row = np.repeat(np.arange(self.num_games, dtype=np.int64), seats)
        self.seat_of_row = np.tile(np.arange(seats, dtype=np.int64), self.num_games)
        self.batch_size = getattr(self, "batch_size", num_envs)
        self._full_batches = self.batch_size == num_envs  # no async batches
        self.autoreset_mode = autoreset_mode
        self._mode_code = mode_code(autoreset_mode)
        self.copy = bool(copy)
        self.episode_statistics = bool(episode_statistics)
        self.metadata = dict(about.metadata)
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = about.render_mode
        single, batched = pool.observation_spaces
        self.single_observation_space = single
        self.observation_space = batch_space(single, num_envs) if batched is None else batched
        self.single_action_space = about.action_space
        self.action_space = batch_space(about.action_space, num_envs)
        self._actions = ActionChecker(about.action_space, self.action_space, num_envs,
                                      about.agents)  # games: messages name row, game, agent
        self._stats = EpisodeStats(num_envs, self._games) if self.episode_statistics else None
        lock = threading.Lock()  # held by the call in progress (see _guarded)
        self._acquire, self._leave = lock.acquire, lock.release
        self._caller = (0, "")  # the thread and call holding it
        self._pool = pool
        self._restarts: Restarts | None = pool.restarts  # kept after close
        self._all_blocks = range(pool.num_blocks)
        self._subsets = Subsets(pool.bounds, about.action_space, about.agents,
                                self._mode_code, self._stats)
        self._buffers: Buffers = pool.buffers
        self.layout: Layout | None = pool.buffers.obs.layout

    @property
    def _open_pool(self) -> Pool:
        """Where the envs run (set by the constructor; None once closed)."""
        pool = self._pool
        if pool is None:
            raise ClosedEnvError(f"{type(self).__name__} is closed")
        return pool

    @property
    def closed(self) -> bool:  # type: ignore[override]
        """Whether ``close()`` was called."""
        return self._state is CallState.CLOSED

    @closed.setter
    def closed(self, value: bool) -> None:
        if value:
            self._state = CallState.CLOSED

    @property
    def restart_counts(self) -> np.ndarray:
        """How many times each env (game) was restarted (``on_worker_failure="restart"``)."""
        restarts = self._restarts
        return np.zeros(self.num_games, np.int64) if restarts is None else restarts.counts.copy()

    @property
    def total_restarts(self) -> int:
        """How many restarts happened in all (a restart rebuilds one block of envs)."""
        return 0 if self._restarts is None else self._restarts.total

    def _guarded(self, call: str, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``work(*args, **kwargs)`` as the public call ``call``: the one guard every
        public method passes (see :func:`fastvec.vector.call_state.guarded`).

        No other call in progress (another thread's), the call state, then the pool's
        health; the call lock is held until ``work`` returns.
        """
        if not self._acquire(False):
            refuse_concurrent_call(type(self).__name__, call, *self._caller)
        self._caller = (_get_ident(), call)
        try:
            state = self._state
            # The calls of an ordinary step loop pass without further checks (recv and
            # send check which envs are in flight themselves).
            if not ((state is _IDLE and self._full_batches and call not in _WAIT_CALLS)
                    or (state is _WAITING_STEP and call == "step_wait")
                    or (call in _RECV_SEND and state is not _CLOSED)):
                async_only = None if self._full_batches else (
                    f"batch_size={self.batch_size} < num_envs={self.num_envs}")
                check_call(state, call, type(self).__name__, async_only)
            pool = self._pool
            if pool is not None and pool.broken is not None:
                pool.check_usable()
            return work(*args, **kwargs)
        except Exception as exc:
            self._failed(exc)
        finally:
            self._leave()

    def _failed(self, exc: Exception) -> NoReturn:
        """Re-raise ``exc`` from a call; as ``ClosedEnvError`` if ``close()`` ran meanwhile
        (from a signal handler, or another thread) and pulled the envs from under it.
        """
        if self._state is CallState.CLOSED and not isinstance(exc, ClosedEnvError):
            raise ClosedEnvError(f"{type(self).__name__} was closed while a call was in "
                                 "progress (close() from a signal handler or another "
                                 "thread); its result is lost") from exc
        raise exc

    # -- the Gymnasium API -----------------------------------------------------------

    @guarded("reset")
    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
        env_ids: Any = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env (or those in ``options["reset_mask"]``, or ``env_ids``); env i
        gets seed ``seed + i``.

        A reset cancels any pending autoreset of the envs it resets.

        Args:
            seed: An int (env ``i`` is seeded with ``seed + i``), a list of
                ``num_envs`` ints or ``None``s, or ``None`` (no seeding).
            options: Passed to every env's ``reset``.  A ``"reset_mask"`` entry (a
                bool array of shape ``(num_envs,)``, at least one True) resets only
                those envs; it is removed from the dict, as Gymnasium does.  The
                other envs keep their state and their last observation.
            env_ids: Reset only these envs (distinct indices, any order; for games,
                every row of a game or none): the results are theirs, in this order,
                and a list ``seed`` has one entry per env (game) named.

        Returns:
            ``(obs, infos)``: the batched observations of all envs (of ``env_ids``,
            in order, when given) and Gymnasium's dict-of-arrays infos (with
            ``_key`` masks) of the envs that were reset.

        Raises:
            ClosedEnvError: The vector env is closed.
            AlreadyPendingCallError: A ``step_async`` is pending.
            ValueError: A seed list of the wrong length, a bad ``reset_mask`` or bad
                ``env_ids``.

        Example:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from fastvec import SyncVecEnv
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
            >>> obs, infos = envs.reset(seed=[7, None])
            >>> obs, infos = envs.reset(options={"reset_mask": np.array([True, False])})
            >>> obs, infos = envs.reset(seed=3, env_ids=[1])  # env 1, seeded with 3 + 1
            >>> obs.shape
            (1, 4)
            >>> envs.close()
        """
        pool = self._open_pool
        return self._finish_reset(*(self._post_reset(seed, options) if env_ids is None else
                                    self._subsets.post_reset(pool, seed, options, env_ids)))

    def _post_reset(self, seed: Any, options: dict[str, Any] | None
                    ) -> tuple[list[int], np.ndarray | None]:
        """Check the arguments and start resetting; the blocks reset and the mask."""
        seeds, mask = self._reset_args(seed, options)
        pool = self._open_pool
        blocks = [b for b, (start, stop) in enumerate(pool.bounds)
                  if mask is None or mask[start:stop].any()]
        pool.post_reset(blocks, seeds, options, mask)
        return blocks, mask

    def _finish_reset(self, blocks: list[int], mask: np.ndarray | None,
                      ids: np.ndarray | None = None) -> tuple[Any, dict[str, Any]]:
        """The reset's results: of every env, or of ``ids`` in that order."""
        _, infos = self._open_pool.collect(blocks, "a reset", restart_truncates=False)
        buffers = self._buffers
        buffers.clear(slice(None) if mask is None else mask)
        if self._stats is not None:
            self._stats.reset(mask)
        if ids is not None and infos:
            infos = take_info_rows(infos, ids)
        if self._games:
            add_game_infos(infos, buffers, slice(None) if ids is None else ids)
        return (buffers.obs.observations() if ids is None else buffers.obs.batch(ids, ids),
                infos)

    @guarded("step_async")
    def step(self, actions: Any, env_ids: Any = None
             ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step every env (or those of ``env_ids``) with its action; auto-reset as
        ``autoreset_mode`` says.

        Same as ``step_async(actions)`` then ``step_wait()`` (without ``env_ids``).

        Args:
            actions: A batch from ``action_space``: an array of shape
                ``(num_envs, *single_action_space.shape)`` (a list converts), or a
                dict/tuple of such batches for ``Dict``/``Tuple`` spaces; with
                ``env_ids``, a batch of ``len(env_ids)`` actions in that order.
            env_ids: Step only these envs (distinct indices, any order; for games,
                every row of a game or none): the others do nothing at all (no
                step, no autoreset, no statistics), and a worker that holds none of
                them is not woken.

        Returns:
            ``(obs, rewards, terminations, truncations, infos)``: batched
            observations, float64 rewards, bool flags (fresh arrays), and
            Gymnasium's dict-of-arrays infos with ``_key`` masks (``{}`` when no
            env returned infos); with ``env_ids``, of those envs in that order.

        Raises:
            ValueError: The actions do not fit the action space, or ``env_ids``
                repeat an env, are out of range, are not integers or do not match the
                actions' length (checked before any env steps; see :meth:`step_async`).
            RuntimeError: ``DISABLED`` mode and an env whose episode ended has not
                been reset with a ``reset_mask``.
            ClosedEnvError: The vector env is closed.
            AlreadyPendingCallError: A ``step_async`` is pending.
            ObservationError: An env returned an observation outside its space.
            WorkerError: (``SubprocVecEnv``) an env raised or a worker died; a
                ``SyncVecEnv`` lets an env's own exception through instead.
            WorkerTimeout: (``SubprocVecEnv``) the step took longer than ``timeout``.

        Example:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from fastvec import SyncVecEnv
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
            >>> _ = envs.reset(seed=0)
            >>> obs, rewards, terminations, truncations, infos = envs.step(np.array([0, 1]))
            >>> rewards, terminations, infos
            (array([1., 1.]), array([False, False]), {})
            >>> obs, rewards, terminations, truncations, infos = envs.step([0], env_ids=[1])
            >>> obs.shape, rewards
            ((1, 4), array([1.]))
            >>> envs.close()
        """
        if env_ids is not None:
            return self._subsets.step(self._open_pool, actions, env_ids)
        self._post_step(actions)
        return self._finish_step()

    def _post_step(self, actions: Any) -> None:
        checked = self._actions.check(actions)
        if self._mode_code == _DISABLED:
            refuse_ended(self._buffers.needs_reset, None, "reset(options={'reset_mask': mask}) "
                         "before stepping")
        # The pool is open: the call guard let this call through.  Read without
        # _open_pool here and in _finish_step, a property call each step.
        self._pool.post_step(self._all_blocks, checked, self._actions)  # type: ignore[union-attr]

    def _finish_step(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        _, infos = self._pool.collect(self._all_blocks, "a step")  # type: ignore[union-attr]
        buffers = self._buffers
        if self._games:
            add_game_infos(infos, buffers, slice(None))
        if self._stats is not None:
            self._stats.record(buffers, self._mode_code == _SAME_STEP, infos)
        return (
            buffers.obs.observations(),
            buffers.rewards.copy(),
            buffers.terminations.copy(),
            buffers.truncations.copy(),
            infos,
        )

    def _call_each(self, fn: Callable[..., Any], indices: list[int],
                   args_per_env: list[tuple] | None, what: str) -> tuple[Any, ...]:
        order = sorted(range(len(indices)), key=indices.__getitem__)
        targets = [indices[k] for k in order]
        args = None if args_per_env is None else [args_per_env[k] for k in order]
        results = self._guarded(what, self._control, fn, targets, args, f"{what}()")
        out: list[Any] = [None] * len(indices)
        for k, value in zip(order, results, strict=True):
            out[k] = value
        return tuple(out)

    def _control(self, fn: Callable[..., Any], targets: list[int],
                 args: list[tuple] | None, what: str) -> list:
        return self._open_pool.control(fn, targets, args, what)

    def close_extras(self, timeout: float | None = None, terminate: bool = False,
                     **kwargs: Any) -> None:
        """Close every env and release what the pool holds; called once by ``close()``.

        Args:
            timeout: Seconds to wait for a step in flight and for the envs to close
                before the remaining workers are terminated (None: drop what is in
                flight, give the workers a second to close their envs).
            terminate: Stop the workers at once, without closing their envs.
            **kwargs: Ignored (Gymnasium's signature).
        """
        pending = self._pending_blocks()
        pool, self._pool = self._pool, None
        self._forget_buffers()
        if pool is not None:
            pool.close(timeout, terminate, pending)

    def _forget_buffers(self) -> None:
        """Drop this env's views of the batch, so that shared memory is unmapped at once."""
        for name in ("_buffers", "layout"):
            self.__dict__.pop(name, None)

    def _pending_blocks(self) -> list[int]:
        """Blocks with a command in flight (a pending ``step_async`` or ``reset_async``)."""
        if self._state is CallState.WAITING_STEP and self._pool is not None:
            return list(self._all_blocks)
        if self._state is CallState.WAITING_RESET and self._pool is not None:
            return list(self._reset_pending[0])
        return []

    # -- helpers ---------------------------------------------------------------------

    def _reset_args(self, seed: Any, options: dict | None) -> tuple[list, np.ndarray | None]:
        """Per-row seeds and the reset mask (see :func:`reset_rows`)."""
        return reset_rows(seed, options, self.num_envs, len(self.agents) if self._games else 1)

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        name = type(self).__name__
        spec = getattr(self, "spec", None)
        return f"{name}({spec.id}, num_envs={self.num_envs})" if spec else \
            f"{name}(num_envs={self.num_envs})"

