"""The per-env part of the API, declared once over one primitive: ``_call_each``.

``call``, ``get_attr``, ``set_attr``, ``render`` and ``call_each`` are written
here for every vector env; a vector env implements ``_call_each(fn, indices,
args_per_env)``, which runs ``fn(env, *args)`` for the envs ``indices`` wherever
they live.  The functions handed to it are module-level, so they travel to
worker processes by reference.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["EnvCalls", "call_env", "render_env", "set_env_attr"]


def call_env(env: gym.Env, *, name: str, args: tuple, kwargs: dict) -> Any:
    """``env.name(*args, **kwargs)``, or the attribute's value when it is not callable."""
    # a PettingZoo game has no get_wrapper_attr: its own attribute then
    lookup = getattr(env, "get_wrapper_attr", None)
    target = lookup(name) if lookup is not None else getattr(env, name)
    return target(*args, **kwargs) if callable(target) else target


def set_env_attr(env: gym.Env, value: Any, *, name: str) -> None:
    """Set ``name`` through the env's wrappers."""
    if hasattr(env, "set_wrapper_attr"):
        env.set_wrapper_attr(name, value)
    else:  # a PettingZoo game
        setattr(env, name, value)


def render_env(env: gym.Env) -> Any:
    """The env's ``render()``."""
    return env.render()


class EnvCalls(ABC):
    """``call``, ``get_attr``, ``set_attr``, ``render``, ``call_each`` of a vector env."""

    num_envs: int
    num_games: int  # envs, or games for multi-agent games: what these calls act on

    @abstractmethod
    def _call_each(self, fn: Callable[..., Any], indices: list[int],
                   args_per_env: list[tuple] | None, what: str) -> tuple[Any, ...]:
        """``fn(env, *args)`` for each env of ``indices`` (checked, distinct), in that order.

        ``what`` names the public call, for error messages.
        """

    @property
    def np_random_seed(self) -> tuple[int | None, ...]:
        """Each env's ``np_random_seed``, as Gymnasium's vector envs give them."""
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:
        """Each env's random generator (from a worker: a copy), as Gymnasium gives them."""
        return self.get_attr("np_random")

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
            AttributeError: (``SyncVecEnv``) an env has no attribute ``name``;
                ``SubprocVecEnv`` raises a ``WorkerError`` naming the env instead.

        Example:
            >>> import gymnasium as gym
            >>> from fastvec import SyncVecEnv
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
            >>> envs.call("get_wrapper_attr", "spec")[0].id
            'CartPole-v1'
            >>> envs.close()
        """
        return self._call_each(partial(call_env, name=name, args=args, kwargs=kwargs),
                               list(range(self.num_games)), None, "call")

    def call_each(self, fn: Callable[[gym.Env], Any], indices: Any = None) -> tuple[Any, ...]:
        """``fn(env)`` for each env, or for the envs ``indices``, in that order.

        Args:
            fn: Any callable taking an env (``SubprocVecEnv`` sends it to the workers
                with cloudpickle, so lambdas work there too; its results must pickle).
            indices: None (every env), an env index, or a sequence of them.

        Returns:
            One result per env asked for.

        Raises:
            ClosedEnvError: The vector env is closed.
            ValueError: An index is out of range or repeated.

        Example:
            >>> import gymnasium as gym
            >>> from fastvec import SyncVecEnv
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 3)
            >>> envs.call_each(lambda env: env.spec.id, indices=[2])
            ('CartPole-v1',)
            >>> envs.close()
        """
        return self._call_each(fn, self._env_indices(indices), None, "call_each")

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every env (a method is called without arguments).

        Args:
            name: The attribute name, looked up through the env's wrappers.

        Returns:
            One value per env, in env order.

        Raises:
            ClosedEnvError: The vector env is closed.
            AttributeError: An env has no attribute ``name`` (``SubprocVecEnv``: a
                ``WorkerError`` naming the env).

        Example:
            >>> import gymnasium as gym
            >>> from fastvec import SyncVecEnv
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
            >>> envs.get_attr("gravity")
            (9.8, 9.8)
            >>> envs.close()
        """
        return self._call_each(partial(call_env, name=name, args=(), kwargs={}),
                               list(range(self.num_games)), None, "call")

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
            >>> import gymnasium as gym
            >>> from fastvec import SyncVecEnv
            >>> envs = SyncVecEnv([lambda: gym.make("CartPole-v1")] * 2)
            >>> envs.set_attr("gravity", [9.8, 1.6])
            >>> envs.get_attr("gravity")
            (9.8, 1.6)
            >>> envs.close()
        """
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_games
        if len(values) != self.num_games:
            raise ValueError(f"expected {self.num_games} values (one per env; per game for "
                             f"multi-agent games), got {len(values)}")
        self._call_each(partial(set_env_attr, name=name), list(range(self.num_games)),
                        [(value,) for value in values], "set_attr")

    def render(self) -> tuple[Any, ...]:
        """Each env's ``render()``, in env order.

        Combine ``rgb_array`` frames into one image with :func:`fastvec.tile_images`.

        Returns:
            One frame per env (``None`` each when ``render_mode`` is ``None``).

        Raises:
            ClosedEnvError: The vector env is closed.
        """
        return self._call_each(render_env, list(range(self.num_games)), None, "render")

    def _env_indices(self, indices: Any) -> list[int]:
        """``indices`` (None for all, an int, or ints) as a list, each checked."""
        if indices is None:
            return list(range(self.num_games))
        if isinstance(indices, numbers.Integral):
            indices = [indices]
        out = []
        for i in indices:
            if not isinstance(i, numbers.Integral) or isinstance(i, bool) \
                    or not 0 <= int(i) < self.num_games:
                raise ValueError(f"expected env indices in [0, {self.num_games}), got {i!r}")
            out.append(int(i))
        if len(set(out)) != len(out):
            raise ValueError(f"expected distinct env indices, got {out}")
        return out
