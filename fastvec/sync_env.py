"""SyncVecEnv: every env in this process, stepped by the compiled block loop."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from fastvec._base import BatchedVecEnv
from fastvec._layout import batch_views

__all__ = ["SyncVecEnv"]


class SyncVecEnv(BatchedVecEnv):
    """Runs ``num_envs`` envs one after another in this process.

    A drop-in for ``gymnasium.vector.SyncVectorEnv`` with the same results for the
    same seeds and actions, but the per-env work (writing observations into one
    flat batch buffer, stacking rewards and flags, batching infos, autoreset
    bookkeeping) runs in compiled code.  An exception raised by an env reaches the
    caller unchanged.

    Args:
        env_fns: Callables that each return a ``gymnasium.Env``; all are called
            here, once.  Every env must have the same observation and action space.
        autoreset_mode: ``AutoresetMode`` or its value (``"NextStep"``, ``"SameStep"``,
            ``"Disabled"``) or name (``"next_step"``...); see ``docs/autoreset.md``.
        copy: If True (the default), observations are fresh arrays fastvec never
            touches again.  If False, they are views of the batch buffer, valid
            until the next ``step``/``reset``.
        episode_statistics: Add ``infos["episode"] = {"r", "l", "t"}`` and
            ``infos["_episode"]`` when episodes end, as Gymnasium's
            ``RecordEpisodeStatistics`` does.

    Attributes:
        envs: The sub-envs, in order.
        env_fns: The callables the envs were made with.

    Raises:
        ValueError: ``env_fns`` is empty, the envs' spaces differ (the message names
            the env), or ``autoreset_mode`` is unknown.

    Example:
        >>> import fastvec
        >>> envs = fastvec.SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
        >>> obs, infos = envs.reset(seed=0)
        >>> obs.shape
        (2, 4)
        >>> envs.close()
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        episode_statistics: bool = False,
    ) -> None:
        self.env_fns = env_fns
        self.envs: list[gym.Env] = [env_fn() for env_fn in env_fns]
        if not self.envs:
            raise ValueError("expected at least one env function, got none")
        first = self.envs[0]
        for index, env in enumerate(self.envs[1:], start=1):
            if env.observation_space != first.observation_space:
                raise ValueError(f"env {index} has observation space {env.observation_space}, "
                                 f"expected {first.observation_space} (as env 0)")
            if env.action_space != first.action_space:
                raise ValueError(f"env {index} has action space {env.action_space}, "
                                 f"expected {first.action_space} (as env 0)")
        self._setup(len(self.envs), first.observation_space, first.action_space,
                    first.metadata, first.render_mode, autoreset_mode, copy,
                    episode_statistics)
        self._envs_block = self._block(self.envs)
        # copy=True with a single array leaf that fills its record (so the batch is
        # C-contiguous): write each step into a fresh batch buffer and hand that out,
        # instead of writing one buffer and copying it out.
        self._fresh_rows = (self.copy and self.layout is not None
                            and len(self.layout.leaves) == 1
                            and self.layout.leaves[0].nbytes == self.layout.record_size)

    def _next_rows(self, keep: bool) -> None:
        if self._fresh_rows:
            assert self._rows is not None
            self._rows = self._rows.copy() if keep else np.empty_like(self._rows)
            self._envs_block.set_rows(self._rows)

    def _observations(self) -> Any:
        if self._fresh_rows:
            assert self.layout is not None and self._rows is not None
            return batch_views(self.layout, self._rows)
        return super()._observations()

    def _run_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> list:
        self._next_rows(keep=mask is not None)
        return self._envs_block.reset(seeds, options, mask)

    def _start_step(self, actions: Any) -> None:
        self._actions_per_env = self._actions.split(actions)

    def _finish_step(self) -> list:
        actions, self._actions_per_env = self._actions_per_env, []
        self._next_rows(keep=False)  # every env writes its row on a step
        return self._envs_block.step(actions)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env (or read attribute ``name``).

        The name is looked up through the env's wrappers (``get_wrapper_attr``).

        Args:
            name: A method or attribute name.
            *args: Positional arguments of the call.
            **kwargs: Keyword arguments of the call.

        Returns:
            One result per env, in env order; the attribute's value where ``name``
            is not callable.

        Raises:
            ClosedEnvError: The vector env is closed.
            AttributeError: An env has no attribute ``name``.

        Example:
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
            >>> envs.call("get_wrapper_attr", "spec")[0].id
            'CartPole-v1'
            >>> envs.close()
        """
        self._check_open()
        results = []
        for env in self.envs:
            target = env.get_wrapper_attr(name)
            results.append(target(*args, **kwargs) if callable(target) else target)
        return tuple(results)

    def call_each(self, fn: Callable[[gym.Env], Any], indices: Any = None) -> tuple[Any, ...]:
        """``fn(env)`` for each env, or for the envs ``indices``, in that order.

        Args:
            fn: Any callable taking an env (``SubprocVecEnv`` sends it to the workers
                with cloudpickle, so lambdas work there too).
            indices: None (every env), an env index, or a sequence of them.

        Returns:
            One result per env asked for.

        Raises:
            ClosedEnvError: The vector env is closed.
            ValueError: An index is out of range.

        Example:
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 3)
            >>> envs.call_each(lambda env: env.spec.id, indices=[2])
            ('CartPole-v1',)
            >>> envs.close()
        """
        self._check_open()
        return tuple(fn(self.envs[i]) for i in self._env_indices(indices))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every env (a method is called without arguments).

        Args:
            name: The attribute name, looked up through the env's wrappers.

        Returns:
            One value per env, in env order.

        Raises:
            ClosedEnvError: The vector env is closed.
            AttributeError: An env has no attribute ``name``.

        Example:
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
            >>> envs.get_attr("gravity")
            (9.8, 9.8)
            >>> envs.close()
        """
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute ``name`` of every env: one value each (list/tuple) or one for all.

        Args:
            name: The attribute name, set through the env's wrappers
                (``set_wrapper_attr``).
            values: A list or tuple of ``num_envs`` values, one per env; anything
                else is given to every env.

        Raises:
            ClosedEnvError: The vector env is closed.
            ValueError: A list or tuple of the wrong length (nothing is set).

        Example:
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
            >>> envs.set_attr("gravity", [9.8, 1.6])
            >>> envs.get_attr("gravity")
            (9.8, 1.6)
            >>> envs.close()
        """
        self._check_open()
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} values (one per env), got {len(values)}")
        for env, value in zip(self.envs, values, strict=True):
            env.set_wrapper_attr(name, value)

    def render(self) -> tuple[Any, ...]:
        """Each env's ``render()``, in env order.

        Combine ``rgb_array`` frames into one image with :func:`fastvec.tile_images`.

        Returns:
            One frame per env (``None`` each when ``render_mode`` is ``None``).

        Raises:
            ClosedEnvError: The vector env is closed.
        """
        self._check_open()
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        """Close every env; called once by ``close()``, which may be called again.

        Args:
            **kwargs: Ignored (Gymnasium's signature).
        """
        for env in getattr(self, "envs", []):
            env.close()
