"""``fastvec.make``: a vector env from a registered id or an env factory."""

from __future__ import annotations

import copy
import functools
import importlib
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec, VectorizeMode

__all__ = ["find_spec", "make"]

BACKENDS = ("sync", "subproc", "ray")
# Gymnasium's ``vectorization_mode`` names, so ``gym.make_vec`` arguments carry over.
_ALIASES = {VectorizeMode.SYNC.value: "sync", VectorizeMode.ASYNC.value: "subproc"}


def make(
    env_id: str | EnvSpec | Callable[..., gym.Env],
    num_envs: int = 1,
    backend: str | VectorizeMode | None = None,
    vector_kwargs: dict[str, Any] | None = None,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] | None = None,
    *,
    vectorization_mode: str | VectorizeMode | None = None,
    **env_kwargs: Any,
) -> gym.vector.VectorEnv:
    """Make ``num_envs`` copies of an env as one fastvec vector env.

    Mirrors ``gymnasium.make_vec``, so switching is one name:
    ``gym.make_vec("CartPole-v1", 8, vectorization_mode="async", vector_kwargs=...)``
    becomes ``fastvec.make("CartPole-v1", 8, vectorization_mode="async",
    vector_kwargs=...)`` (a ``SubprocVecEnv``, which takes ``AsyncVectorEnv``'s
    keywords), or ``fastvec.make("CartPole-v1", 8, backend="subproc")``.

    Args:
        env_id: A registered id (``"CartPole-v1"``; ``"module:Id-v0"`` imports
            ``module`` first, as ``gymnasium.make`` does), an ``EnvSpec``, or a callable
            returning a ``gymnasium.Env`` (called with ``env_kwargs``).
        num_envs: How many copies to run.
        backend: ``"sync"`` (``SyncVecEnv``, in this process; the default),
            ``"subproc"`` (``SubprocVecEnv``, worker processes) or ``"ray"``
            (``RayVecEnv``, Ray actors; needs the ``ray`` extra). Gymnasium's mode
            names are accepted too: ``"async"`` means ``"subproc"``.
        vector_kwargs: Keyword arguments for the vector env class, e.g.
            ``{"num_workers": 2, "autoreset_mode": "same_step"}``.
        wrappers: Wrappers applied to each env, in order (``wrapper(env)``).
        vectorization_mode: ``gymnasium.make_vec``'s name for ``backend`` (give one
            of the two): ``"sync"``, ``"async"`` or a ``VectorizeMode``; fastvec's
            backend names are accepted too.
        **env_kwargs: Keyword arguments for each env (``gymnasium.make`` or the
            callable), e.g. ``max_episode_steps=200`` or ``render_mode="rgb_array"``.

    Returns:
        A ``gymnasium.vector.VectorEnv``; for an id, its ``spec`` records the env
        kwargs and ``num_envs`` as ``gymnasium.make_vec`` does.

    Raises:
        ValueError: ``num_envs`` is not a positive int, ``backend`` is unknown, or
            ``backend`` and ``vectorization_mode`` disagree.
        gymnasium.error.Error: The id is not registered.

    Example:
        >>> import fastvec
        >>> envs = fastvec.make("CartPole-v1", num_envs=3, max_episode_steps=50)
        >>> envs.num_envs, envs.spec.kwargs["max_episode_steps"]
        (3, 50)
        >>> envs.close()
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"expected num_envs to be a positive int, got {num_envs!r}")
    backend_name = _backend_name(backend, vectorization_mode)
    spec = None
    if isinstance(env_id, (str, EnvSpec)):
        spec = find_spec(env_id)
    elif not callable(env_id):
        raise TypeError(
            f"expected env_id to be a registered id, an EnvSpec or a callable, got {env_id!r}"
        )
    env_fn = functools.partial(_make_one, env_id, tuple(wrappers or ()), env_kwargs)
    env_fns = [env_fn] * num_envs
    if backend_name == "sync":
        from fastvec.vector.sync import SyncVecEnv

        envs: gym.vector.VectorEnv = SyncVecEnv(env_fns, **(vector_kwargs or {}))
    elif backend_name == "subproc":
        from fastvec.vector.subproc import SubprocVecEnv

        envs = SubprocVecEnv(env_fns, **(vector_kwargs or {}))
    else:
        from fastvec.vector.ray import RayVecEnv

        envs = RayVecEnv(env_fns, **(vector_kwargs or {}))
    if spec is not None:
        envs.spec = copy.deepcopy(spec)
        envs.spec.kwargs = {**spec.kwargs, **env_kwargs}
        if num_envs != 1:
            envs.spec.kwargs["num_envs"] = num_envs
    return envs


def find_spec(env_id: str | EnvSpec) -> EnvSpec:
    """The spec of a registered id, as ``gymnasium.make`` finds it: ``"module:Id-v0"``
    imports ``module`` (which registers ``Id-v0``) first.  An ``EnvSpec`` is returned as
    it is.
    """
    if not isinstance(env_id, str):
        return env_id
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                f"{exc}: {env_id!r} names module {module!r} to import before looking up "
                f"{name!r}; expected an importable module that registers it") from exc
    return gym.spec(name)


def _backend_name(backend: str | VectorizeMode | None,
                  vectorization_mode: str | VectorizeMode | None) -> str:
    names = {arg: _one_name(value, arg) for arg, value in
             (("backend", backend), ("vectorization_mode", vectorization_mode))
             if value is not None}
    if len(set(names.values())) > 1:
        raise ValueError(f"backend={backend!r} and vectorization_mode={vectorization_mode!r} "
                         "disagree: give one of the two")
    return next(iter(names.values()), "sync")


def _one_name(value: str | VectorizeMode, arg: str) -> str:
    name = value.value if isinstance(value, VectorizeMode) else value
    if name == VectorizeMode.VECTOR_ENTRY_POINT.value:
        raise ValueError(f"{arg}={value!r}: an env's own vector entry point is not run by "
                         "fastvec; use gymnasium.make_vec for it, or 'sync' / 'async'")
    name = _ALIASES.get(name, name)
    if name not in BACKENDS:
        raise ValueError(
            f"expected {arg} to be one of {BACKENDS} (or Gymnasium's 'sync'/'async'), "
            f"got {value!r}"
        )
    return name


def _make_one(env_id: Any, wrappers: tuple, env_kwargs: dict[str, Any]) -> gym.Env:
    if isinstance(env_id, (str, EnvSpec)):
        env = gym.make(env_id, **env_kwargs)
    else:
        env = env_id(**env_kwargs)
    for wrapper in wrappers:
        env = wrapper(env)
    return env
