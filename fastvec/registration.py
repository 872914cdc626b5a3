"""``fastvec/<id>``: ids that ``gymnasium.make_vec`` builds as fastvec vector envs.

Gymnasium gives each id one hook for a vector env of its own, the spec's
``vector_entry_point``, which ``gym.make_vec(id, n)`` calls when no
``vectorization_mode`` is given (or ``"vector_entry_point"`` is).  ``register``
copies a registered id's spec under a new id whose vector entry point is fastvec's;
importing fastvec registers ``fastvec/<id>`` for each of Gymnasium's own envs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from fastvec.make import _backend_name, find_spec, make

__all__ = ["register"]

NAMESPACE = "fastvec"
# Keywords of ``gym.make_vec`` that the vector entry point takes for itself (Gymnasium
# keeps ``vector_kwargs`` and refuses it in this mode); every other one goes to the envs.
RESERVED = ("backend", "backend_kwargs")


def register(
    env_id: str | EnvSpec,
    backend: str = "sync",
    backend_kwargs: Mapping[str, Any] | None = None,
    *,
    new_id: str | None = None,
) -> str:
    """Register a copy of ``env_id`` that ``gymnasium.make_vec`` makes with fastvec.

    The copy has the original's entry point, kwargs and episode limit, and a
    ``vector_entry_point`` that calls :func:`fastvec.make`; so
    ``gym.make_vec(new_id, n, **env_kwargs)`` gives a fastvec vector env, and an
    explicit ``vectorization_mode="sync"``/``"async"`` still gives Gymnasium's own.

    Args:
        env_id: A registered id (``"module:Id-v0"`` imports ``module`` first) or an
            ``EnvSpec``, with an ``entry_point``.
        backend: The default backend: ``"sync"``, ``"subproc"`` or ``"ray"``.
            ``gym.make_vec(..., backend=...)`` overrides it.
        backend_kwargs: Default keyword arguments for the vector env class
            (``fastvec.make``'s ``vector_kwargs``); ``gym.make_vec(...,
            backend_kwargs={...})`` adds to them.
        new_id: The id to register; by default ``"fastvec/" + id`` (a namespaced
            id's ``/`` becomes ``-``: ``"ALE/Pong-v5"`` gives ``"fastvec/ALE-Pong-v5"``).
            An id already registered under that name is replaced.

    Returns:
        The id registered.

    Raises:
        ValueError: The spec has no ``entry_point``, has ``additional_wrappers``
            (``make_vec`` refuses them with a vector entry point) or kwargs named
            ``backend``/``backend_kwargs``; or ``backend`` is unknown.
        TypeError: ``backend_kwargs`` is not a mapping.
        gymnasium.error.Error: ``env_id`` is not registered.

    Example:
        >>> import gymnasium as gym
        >>> import fastvec
        >>> fastvec.register("Pendulum-v1", new_id="fastvec/MyPendulum-v1")
        'fastvec/MyPendulum-v1'
        >>> envs = gym.make_vec("fastvec/MyPendulum-v1", 2, g=1.62)
        >>> type(envs).__name__, envs.get_attr("g")
        ('SyncVecEnv', (1.62, 1.62))
        >>> envs.close()
    """
    spec = find_spec(env_id) if isinstance(env_id, (str, EnvSpec)) else env_id
    if not isinstance(spec, EnvSpec):
        raise TypeError(f"expected env_id to be a registered id or an EnvSpec, got {env_id!r}")
    _check_spec(spec)
    _backend_name(backend, None)
    if backend_kwargs is not None and not isinstance(backend_kwargs, Mapping):
        raise TypeError(f"expected backend_kwargs to be a dict, got {backend_kwargs!r}")
    new_id = new_id or f"{NAMESPACE}/{spec.id.replace('/', '-')}"
    env_spec = dataclasses.replace(spec, id=new_id, vector_entry_point=None)
    gym.registry.pop(new_id, None)  # replaced without Gymnasium's "overriding" warning
    gym.register(
        new_id,
        entry_point=spec.entry_point,
        reward_threshold=spec.reward_threshold,
        nondeterministic=spec.nondeterministic,
        max_episode_steps=spec.max_episode_steps,
        order_enforce=spec.order_enforce,
        disable_env_checker=spec.disable_env_checker,
        kwargs=dict(spec.kwargs),
        vector_entry_point=functools.partial(
            _make_vec, env_spec, backend, dict(backend_kwargs or {})),
    )
    return new_id


def _check_spec(spec: EnvSpec) -> None:
    if spec.entry_point is None:
        raise ValueError(f"{spec.id} has no entry_point (only a vector entry point): fastvec "
                         "vectorizes single envs, so it needs the env's entry_point")
    if spec.additional_wrappers:
        raise ValueError(
            f"{spec.id} has additional_wrappers, which gymnasium.make_vec refuses for an id "
            "with a vector entry point; use fastvec.make(id, ...) for it")
    clash = [key for key in RESERVED if key in spec.kwargs]
    if clash:
        raise ValueError(f"{spec.id}'s kwargs use {clash}, which the fastvec id takes for "
                         "itself; use fastvec.make(id, ...) for it")


def _make_vec(
    env_spec: EnvSpec,
    default_backend: str,
    default_kwargs: dict[str, Any],
    num_envs: int = 1,
    **kwargs: Any,
) -> gym.vector.VectorEnv:
    """The vector entry point: ``gym.make_vec``'s num_envs and keywords to ``fastvec.make``."""
    backend = kwargs.pop("backend", default_backend)
    extra = kwargs.pop("backend_kwargs", None) or {}
    if not isinstance(extra, Mapping):
        raise TypeError(f"expected backend_kwargs to be a dict, got {extra!r}")
    return make(env_spec, num_envs, backend=backend,
                vector_kwargs={**default_kwargs, **extra}, **kwargs)


def _register_gymnasium_ids() -> None:
    """``fastvec/<id>`` for each env Gymnasium registers itself (no namespace)."""
    for spec in list(gym.registry.values()):
        if (spec.namespace is None and isinstance(spec.entry_point, str)
                and spec.entry_point.startswith("gymnasium.envs.")
                and not spec.additional_wrappers):
            register(spec)


_register_gymnasium_ids()
