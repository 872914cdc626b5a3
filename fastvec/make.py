"""``fastvec.make``: a vector env from a registered id or an env factory."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

__all__ = ["make"]

BACKENDS = ("sync", "subproc")


def make(
    env_id: str | gym.envs.registration.EnvSpec | Callable[..., gym.Env],
    num_envs: int = 1,
    backend: str = "sync",
    vector_kwargs: dict[str, Any] | None = None,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] | None = None,
    **env_kwargs: Any,
) -> gym.vector.VectorEnv:
    """Make ``num_envs`` copies of an env as one fastvec vector env.

    Like ``gymnasium.make_vec``: ``env_kwargs`` go to each env (``gymnasium.make``
    or the callable), ``wrappers`` wrap each env in order, ``vector_kwargs`` go to
    the vector env class of ``backend``.

    Example:
        >>> import fastvec
        >>> envs = fastvec.make("CartPole-v1", num_envs=3)
        >>> envs.num_envs
        3
        >>> envs.close()
    """
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"expected num_envs to be a positive int, got {num_envs!r}")
    env_fn = functools.partial(_make_one, env_id, tuple(wrappers or ()), env_kwargs)
    env_fns = [env_fn] * num_envs
    vector_kwargs = dict(vector_kwargs or {})
    if backend == "sync":
        from fastvec.sync_env import SyncVecEnv

        envs = SyncVecEnv(env_fns, **vector_kwargs)
    elif backend == "subproc":
        from fastvec.subproc_env import SubprocVecEnv

        envs = SubprocVecEnv(env_fns, **vector_kwargs)
    else:
        raise ValueError(f"expected backend to be one of {BACKENDS}, got {backend!r}")
    if isinstance(env_id, (str, gym.envs.registration.EnvSpec)):
        spec = gym.spec(env_id) if isinstance(env_id, str) else env_id
        envs.spec = spec.copy() if hasattr(spec, "copy") else spec
    return envs


def _make_one(env_id: Any, wrappers: tuple, env_kwargs: dict[str, Any]) -> gym.Env:
    env = env_id(**env_kwargs) if callable(env_id) else gym.make(env_id, **env_kwargs)
    for wrapper in wrappers:
        env = wrapper(env)
    return env
