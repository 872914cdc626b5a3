"""What every fastvec vector env shares: buffers, the call state machine, outputs.

A subclass runs the envs somewhere (in this process, in workers) and implements
``_run_reset`` and ``_run_step``, which fill the batch buffers (observation
record rows, rewards, flags) and return the non-empty infos as
``(env_index, info)`` entries.  This class checks arguments, keeps the
autoreset and episode-statistics state, and builds Gymnasium's outputs.
"""

from __future__ import annotations

import numbers
import time
import warnings
from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from fastvec._actions import ActionChecker
from fastvec._kernels.autoreset import update_episode_stats
from fastvec._kernels.infos import batch_infos
from fastvec._kernels.stepping import Autoreset, EnvBlock
from fastvec._layout import Layout, batch_views, copy_tree, layout_of
from fastvec.errors import (
    AlreadyPendingCallError,
    ClosedEnvError,
    NoAsyncCallError,
    ObjectSpaceWarning,
)

__all__ = ["BatchedVecEnv", "parse_autoreset_mode"]

_MODE_CODES = {
    AutoresetMode.NEXT_STEP: Autoreset.NEXT_STEP,
    AutoresetMode.SAME_STEP: Autoreset.SAME_STEP,
    AutoresetMode.DISABLED: Autoreset.DISABLED,
}
_object_path_warned = False


def parse_autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    """``AutoresetMode`` from the enum, its value (``"NextStep"``) or name (``"next_step"``).

    Args:
        mode: An ``AutoresetMode``, or a string naming one; case and underscores
            do not matter.

    Returns:
        The ``AutoresetMode``.

    Raises:
        ValueError: ``mode`` names no mode (the message lists the accepted ones).

    Example:
        >>> parse_autoreset_mode("same_step")
        <AutoresetMode.SAME_STEP: 'SameStep'>
        >>> parse_autoreset_mode("Disabled") is AutoresetMode.DISABLED
        True
    """
    if isinstance(mode, AutoresetMode):
        return mode
    key = mode.replace("_", "").lower() if isinstance(mode, str) else None
    for candidate in AutoresetMode:
        if key in (candidate.value.lower(), candidate.name.replace("_", "").lower()):
            return candidate
    names = [m.value for m in AutoresetMode]
    raise ValueError(f"expected autoreset_mode to be an AutoresetMode or one of {names} "
                     f"(or 'next_step', 'same_step', 'disabled'), got {mode!r}")


def _warn_object_path(space: spaces.Space) -> None:
    global _object_path_warned
    if not _object_path_warned:
        _object_path_warned = True
        warnings.warn(
            f"observation space {space} has leaves other than Box, Discrete, MultiDiscrete "
            "and MultiBinary; its observations take the slower object path",
            ObjectSpaceWarning, stacklevel=4,
        )


class BatchedVecEnv(VectorEnv):
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

    def _setup(
        self,
        num_envs: int,
        single_observation_space: spaces.Space,
        single_action_space: spaces.Space,
        metadata: dict[str, Any],
        render_mode: str | None,
        autoreset_mode: AutoresetMode | str,
        copy: bool,
        episode_statistics: bool,
        buffers: dict[str, np.ndarray] | None = None,
    ) -> None:
        """Set the spaces, modes and batch buffers.

        ``buffers`` (shared memory) may hold ``obs`` record rows, ``rewards``,
        ``terminations``, ``truncations`` and ``needs_reset``; the rest are allocated.
        """
        buffers = buffers or {}
        self.num_envs = num_envs
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        self._mode_code = int(_MODE_CODES[self.autoreset_mode])
        self.copy = bool(copy)
        self.episode_statistics = bool(episode_statistics)
        self.metadata = dict(metadata)
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = render_mode
        self.single_observation_space = single_observation_space
        self.observation_space = batch_space(single_observation_space, num_envs)
        self.single_action_space = single_action_space
        self.action_space = batch_space(single_action_space, num_envs)
        self._actions = ActionChecker(single_action_space, self.action_space, num_envs)

        self.layout: Layout | None = layout_of(single_observation_space)
        self._table = None if self.layout is None else self.layout.table
        if self.layout is None:
            _warn_object_path(single_observation_space)
            self._rows = None
            self._obs_objects: list[Any] | None = [None] * num_envs
            self._obs_out = create_empty_array(single_observation_space, num_envs)
        else:
            rows = buffers.get("obs")
            if rows is None:
                rows = np.zeros((num_envs, self.layout.record_size), dtype=np.uint8)
            self._rows = rows
            self._obs_objects = None
            self._obs_views = batch_views(self.layout, rows)
        self._rewards = buffers.get("rewards", np.zeros(num_envs, dtype=np.float64))
        self._terminations = buffers.get("terminations", np.zeros(num_envs, dtype=np.bool_))
        self._truncations = buffers.get("truncations", np.zeros(num_envs, dtype=np.bool_))
        self._needs_reset = buffers.get("needs_reset", np.zeros(num_envs, dtype=np.bool_))
        self._stats = _EpisodeStats(num_envs) if self.episode_statistics else None
        self._pending: bool | None = None

    def _block(self, envs: list, first_index: int = 0) -> EnvBlock:
        """An :class:`EnvBlock` over ``envs`` writing into this env's buffers."""
        end = first_index + len(envs)
        return EnvBlock(
            envs, self._mode_code, self._table,
            None if self._rows is None else self._rows[first_index:end],
            None if self._obs_objects is None else self._obs_objects,
            self._rewards[first_index:end], self._terminations[first_index:end],
            self._truncations[first_index:end], self._needs_reset[first_index:end],
            first_index)

    # -- what a subclass implements -------------------------------------------------

    def _run_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> list:
        raise NotImplementedError

    def _start_step(self, actions: Any) -> None:
        """Hand the checked action batch to the envs."""
        raise NotImplementedError

    def _finish_step(self) -> list:
        """Wait for the step started by ``_start_step``; return its info entries."""
        raise NotImplementedError

    # -- the Gymnasium API -----------------------------------------------------------

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env (or those in ``options["reset_mask"]``); env i gets seed ``seed + i``.

        A reset cancels any pending autoreset of the envs it resets.

        Args:
            seed: An int (env ``i`` is seeded with ``seed + i``), a list of
                ``num_envs`` ints or ``None``s, or ``None`` (no seeding).
            options: Passed to every env's ``reset``.  A ``"reset_mask"`` entry (a
                bool array of shape ``(num_envs,)``, at least one True) resets only
                those envs; it is removed from the dict, as Gymnasium does.  The
                other envs keep their state and their last observation.

        Returns:
            ``(obs, infos)``: the batched observations of all envs and Gymnasium's
            dict-of-arrays infos (with ``_key`` masks) of the envs that were reset.

        Raises:
            ClosedEnvError: The vector env is closed.
            AlreadyPendingCallError: A ``step_async`` is pending.
            ValueError: A seed list of the wrong length, or a bad ``reset_mask``.

        Example:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from fastvec import SyncVecEnv
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
            >>> obs, infos = envs.reset(seed=[7, None])
            >>> obs, infos = envs.reset(options={"reset_mask": np.array([True, False])})
            >>> envs.close()
        """
        self._check_open()
        if self._pending is not None:
            raise AlreadyPendingCallError(
                "reset() called while a step_async() is pending; call step_wait() first",
                "step")
        seeds = self._seeds(seed)
        mask = None
        if options is not None and "reset_mask" in options:
            # As Gymnasium does, the mask is taken out of the caller's options dict.
            mask = self._reset_mask(options.pop("reset_mask"))
        entries = self._run_reset(seeds, options, mask)
        where = slice(None) if mask is None else mask
        self._terminations[where] = False
        self._truncations[where] = False
        self._needs_reset[where] = False
        if self._stats is not None:
            self._stats.reset(mask)
        infos = batch_infos(entries, self.num_envs) if entries else {}
        return self._observations(), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step every env with its action; auto-reset as ``autoreset_mode`` says.

        Same as ``step_async(actions)`` then ``step_wait()``.

        Args:
            actions: A batch from ``action_space``: an array of shape
                ``(num_envs, *single_action_space.shape)`` (a list converts), or a
                dict/tuple of such batches for ``Dict``/``Tuple`` spaces.

        Returns:
            ``(obs, rewards, terminations, truncations, infos)``: batched
            observations, float64 rewards, bool flags (fresh arrays), and
            Gymnasium's dict-of-arrays infos with ``_key`` masks (``{}`` when no
            env returned infos).

        Raises:
            ValueError: The actions do not fit the action space (checked before
                any env steps; see :meth:`step_async`).
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
            >>> envs.close()
        """
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Check ``actions`` and start a step; finish it with :meth:`step_wait`.

        The whole batch is checked before anything reaches an env: its shape (a
        scalar where a batch is expected is refused), integer dtype and range for
        discrete spaces.  ``Box`` actions out of bounds pass through, and a dtype
        that converts (float64 for a float32 ``Box``) is converted.  A refused
        batch leaves nothing pending.

        Args:
            actions: A batch from ``action_space`` (see :meth:`step`).

        Raises:
            ValueError: The actions do not fit; the message names the env and
                what was expected.
            RuntimeError: ``DISABLED`` mode and an env whose episode ended has not
                been reset.
            ClosedEnvError: The vector env is closed.
            AlreadyPendingCallError: A step is already pending (it is kept).
        """
        self._check_open()
        if self._pending is not None:
            raise AlreadyPendingCallError(
                "step_async() called while a step is already pending; call step_wait() first",
                "step")
        checked = self._actions.check(actions)
        if self._mode_code == Autoreset.DISABLED and self._needs_reset.any():
            done = np.flatnonzero(self._needs_reset).tolist()
            raise RuntimeError(
                f"envs {done} ended their episodes and autoreset_mode is DISABLED: reset them "
                "with reset(options={'reset_mask': mask}) before stepping")
        self._start_step(checked)
        self._pending = True

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Finish the step started by :meth:`step_async` and return its batch.

        Returns:
            ``(obs, rewards, terminations, truncations, infos)``, as :meth:`step`.

        Raises:
            NoAsyncCallError: No ``step_async`` is pending.
            ClosedEnvError: The vector env is closed.

        Example:
            >>> import gymnasium as gym
            >>> import numpy as np
            >>> from fastvec import SyncVecEnv
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
            >>> _ = envs.reset(seed=0)
            >>> envs.step_async(np.array([0, 1]))
            >>> obs, rewards, terminations, truncations, infos = envs.step_wait()
            >>> envs.close()
        """
        self._check_open()
        if self._pending is None:
            raise NoAsyncCallError("step_wait() called without a pending step_async()", "step")
        self._pending = None
        entries = self._finish_step()
        infos = self._batch_infos(entries, self.num_envs) if entries else {}
        if self._stats is not None:
            self._stats.record(self, infos)
        return (
            self._observations(),
            self._rewards.copy(),
            self._terminations.copy(),
            self._truncations.copy(),
            infos,
        )

    # -- helpers ---------------------------------------------------------------------

    def _observations(self) -> Any:
        if self.layout is not None:
            return copy_tree(self._obs_views) if self.copy else self._obs_views
        assert self._obs_objects is not None  # the object path
        self._obs_out = concatenate(self.single_observation_space, self._obs_objects,
                                    self._obs_out)  # type: ignore[arg-type]
        return deepcopy(self._obs_out) if self.copy else self._obs_out

    def _env_indices(self, indices: Any) -> list[int]:
        """``indices`` (None for all, an int, or ints) as a list, each checked."""
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, numbers.Integral):
            indices = [indices]
        out = []
        for i in indices:
            if not isinstance(i, numbers.Integral) or isinstance(i, bool) \
                    or not 0 <= int(i) < self.num_envs:
                raise ValueError(f"expected env indices in [0, {self.num_envs}), got {i!r}")
            out.append(int(i))
        if len(set(out)) != len(out):
            raise ValueError(f"expected distinct env indices, got {out}")
        return out

    def _batch_infos(self, entries: list, num_envs: int) -> dict:
        """Gymnasium's dict-of-arrays infos of ``(env_index, info)`` entries."""
        return batch_infos(entries, num_envs)

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvError(f"{type(self).__name__} is closed; make a new one")

    def _seeds(self, seed: Any) -> list:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"expected an int seed or a list of {self.num_envs} seeds, "
                             f"got a list of {len(seeds)}")
        return seeds

    def _reset_mask(self, mask: Any) -> np.ndarray:
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
            raise ValueError("expected options['reset_mask'] to be a numpy bool array, got "
                             f"{getattr(mask, 'dtype', type(mask).__name__)}")
        if mask.shape != (self.num_envs,):
            raise ValueError(f"expected options['reset_mask'] of shape ({self.num_envs},), "
                             f"got {mask.shape}")
        if not mask.any():
            raise ValueError("expected options['reset_mask'] to select at least one env")
        return mask

    def __enter__(self) -> BatchedVecEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        name = type(self).__name__
        spec = getattr(self, "spec", None)
        return f"{name}({spec.id}, num_envs={self.num_envs})" if spec else \
            f"{name}(num_envs={self.num_envs})"


class _EpisodeStats:
    """Per-env episode return/length/time, reported as ``infos["episode"]``."""

    def __init__(self, num_envs: int) -> None:
        self.returns = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self.starts = np.full(num_envs, time.perf_counter())
        self.prev_dones = np.zeros(num_envs, dtype=np.bool_)
        self._out = (np.zeros(num_envs), np.zeros(num_envs, np.int64), np.zeros(num_envs))

    def reset(self, mask: np.ndarray | None) -> None:
        where = slice(None) if mask is None else mask
        self.returns[where] = 0.0
        self.lengths[where] = 0
        self.starts[where] = time.perf_counter()
        self.prev_dones[where] = False

    def record(self, env: BatchedVecEnv, infos: dict, index: np.ndarray | None = None,
               skip: np.ndarray | None = None) -> None:
        """Advance the envs of this step (all, or those in ``index``); add finished episodes.

        With ``index``, the batch (and ``infos``) hold exactly those envs, in that
        order; ``skip`` marks batch entries that were resets, not steps (async).
        """
        if skip is not None and skip.any():
            assert index is not None  # skips come with async batches
            batch = len(skip)
            index = index[~skip]
        where = slice(None) if index is None else index
        state = [self.prev_dones[where], self.returns[where], self.lengths[where],
                 self.starts[where]]
        if index is not None:  # fancy indexing copied: work on the copies, write back below
            state = [np.ascontiguousarray(part) for part in state]
        n = len(state[0])
        out_r, out_l, out_t = (self._out[0][:n], self._out[1][:n], self._out[2][:n])
        prev_dones, returns, lengths, starts = state
        finished = update_episode_stats(
            np.ascontiguousarray(env._terminations[where]),
            np.ascontiguousarray(env._truncations[where]),
            np.ascontiguousarray(env._rewards[where]), prev_dones, returns, lengths, starts,
            time.perf_counter(), env._mode_code == Autoreset.SAME_STEP, out_r, out_l, out_t)
        if index is not None:
            self.prev_dones[index], self.returns[index], self.lengths[index], \
                self.starts[index] = state
        if not finished:
            return
        if "episode" in infos or "_episode" in infos:
            raise ValueError("an env's info already has the key 'episode' or '_episode'; "
                             "turn episode_statistics off or rename that key")
        episode = {"r": out_r.copy(), "l": out_l.copy(), "t": out_t.copy()}
        dones = state[0].copy()
        if skip is not None and skip.any():  # spread over the whole batch, zeros at resets
            for key, values in episode.items():
                episode[key] = np.zeros(batch, values.dtype)
                episode[key][~skip] = values
            dones = np.zeros(batch, np.bool_)
            dones[~skip] = state[0]
        infos["episode"] = episode
        infos["_episode"] = dones
