"""Stable-Baselines3 adapter: a fastvec vector env as an SB3 ``VecEnv``.

A one-line swap for SB3 scripts (``pip install -e ".[sb3]"``)::

    from fastvec.integrations.sb3 import make_sb3_env
    from stable_baselines3 import PPO

    venv = make_sb3_env("CartPole-v1", n_envs=8, seed=0)  # worker processes
    PPO("MlpPolicy", venv).learn(100_000)   # was make_vec_env(..., SubprocVecEnv)
    venv.close()

or ``to_sb3(envs)`` on a fastvec env made by hand. SB3 resets an env the moment
its episode ends and returns the final observation in
``infos[i]["terminal_observation"]``: that is Gymnasium's ``SAME_STEP`` autoreset,
so ``to_sb3`` needs an env made with ``autoreset_mode="same_step"`` (and refuses
others, which would shift every episode by one step); ``make_sb3_env`` makes one.

What SB3 code sees is what its own ``DummyVecEnv`` gives for the same seeds and
actions: observations, ``float32`` rewards, ``dones = terminated | truncated``, and
one info dict per env with ``"TimeLimit.truncated"`` and, on a done step, the
terminal step's info and ``"terminal_observation"`` (the reset's info goes to
``reset_infos``). One difference: info values come back from Gymnasium's batched
form, so a Python ``int``/``float``/``bool`` arrives as the numpy scalar of its
array (equal in value).
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from fastvec.errors import ClosedEnvError
from fastvec.vector.arguments import parse_autoreset_mode

__all__ = ["make_sb3_env", "to_sb3"]

_INSTALL = 'the Stable-Baselines3 adapter needs stable-baselines3: pip install -e ".[sb3]"'


def to_sb3(envs: gym.vector.VectorEnv) -> Any:
    """Wrap a fastvec vector env as a Stable-Baselines3 ``VecEnv``.

    Args:
        envs: A ``fastvec.SyncVecEnv`` or ``fastvec.SubprocVecEnv`` made with
            ``autoreset_mode="same_step"``, in synchronous mode (no ``batch_size``).

    Returns:
        A subclass of ``stable_baselines3.common.vec_env.VecEnv`` stepping ``envs``;
        closing it closes ``envs``.

    Raises:
        ImportError: stable-baselines3 is not installed.
        ValueError: ``envs`` is not a fastvec env, uses another autoreset mode, or
            runs async batches.
        fastvec.errors.ClosedEnvError: ``envs`` is closed.
    """
    from fastvec.vector.base import BatchedVecEnv

    if not isinstance(envs, BatchedVecEnv):
        raise ValueError(f"expected a fastvec SyncVecEnv or SubprocVecEnv, got {type(envs)!r}")
    if envs.closed:
        raise ClosedEnvError(f"{type(envs).__name__} is closed; make a new one")
    if envs.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
        raise ValueError(
            "SB3 resets an env as soon as its episode ends, so to_sb3 needs a fastvec env "
            "made with autoreset_mode='same_step' (got "
            f"{envs.metadata.get('autoreset_mode')}); e.g. fastvec.make(env_id, n, "
            "vector_kwargs={'autoreset_mode': 'same_step'}), or use make_sb3_env()")
    batch_size = getattr(envs, "batch_size", envs.num_envs)
    if batch_size != envs.num_envs:
        raise ValueError("SB3 steps every env at once: make the fastvec env without "
                         f"batch_size (got batch_size={batch_size} < {envs.num_envs})")
    return _adapter_class()(envs)


def make_sb3_env(
    env_id: str | Callable[..., gym.Env],
    n_envs: int = 1,
    seed: int | None = None,
    start_index: int = 0,
    monitor_dir: str | None = None,
    wrapper_class: Callable[..., gym.Env] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    vec_env_cls: type | None = None,
    vec_env_kwargs: dict[str, Any] | None = None,
    monitor_kwargs: dict[str, Any] | None = None,
    wrapper_kwargs: dict[str, Any] | None = None,
    *,
    backend: str | None = None,
    monitor: bool = True,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] | None = None,
    vector_kwargs: dict[str, Any] | None = None,
    **more_env_kwargs: Any,
) -> Any:
    """SB3's ``make_vec_env`` on fastvec: ``n_envs`` envs as an SB3 ``VecEnv``.

    Takes ``make_vec_env``'s arguments, in its order, and builds each env as it does
    (a string id gets ``render_mode="rgb_array"`` unless told otherwise; env
    ``start_index + i`` seeds its action space with ``seed + start_index + i``; a
    ``Monitor``, writing to ``monitor_dir/<rank>`` when given, then
    ``wrapper_class(env, **wrapper_kwargs)``), so the same seeds and actions give
    what ``make_vec_env`` gives.

    Args:
        env_id: A registered id or a callable returning a ``gymnasium.Env``.
        n_envs: How many envs.
        seed: Seeds env ``i`` with ``seed + i`` at the first reset (SB3's ``seed``).
        start_index: The rank of the first env (monitor files, action-space seeds).
        monitor_dir: Where each env's ``Monitor`` writes ``<rank>.monitor.csv``.
        wrapper_class: A wrapper for each env, applied after ``Monitor``.
        env_kwargs: Keyword arguments for each env.
        monitor_kwargs: Keyword arguments for ``Monitor``.
        wrapper_kwargs: Keyword arguments for ``wrapper_class``.
        vec_env_cls: SB3's ``DummyVecEnv`` (means ``backend="sync"``) or
            ``SubprocVecEnv`` (``"subproc"``), or a fastvec class.
        vec_env_kwargs: Options of that class: SB3's ``start_method`` becomes
            fastvec's ``context``; others go to the fastvec env (``num_workers``...).
        backend: ``"subproc"`` (worker processes; the default), ``"sync"`` (this
            process) or ``"ray"``; give this or ``vec_env_cls``.
        monitor: ``False`` leaves SB3's ``Monitor`` out (``make_vec_env`` always adds it).
        wrappers: More wrappers for each env, applied after ``wrapper_class``.
        vector_kwargs: Options of the fastvec env, as ``vec_env_kwargs``;
            ``autoreset_mode`` is always ``SAME_STEP`` (given, it may be spelt any way
            the vector envs take: ``"same_step"``, ``"SameStep"``, ``"SAMESTEP"``...).
        **more_env_kwargs: More keyword arguments for each env (with ``env_kwargs``).

    Returns:
        The SB3 ``VecEnv`` (see :func:`to_sb3`).
    """
    try:
        import stable_baselines3.common.monitor  # noqa: F401
    except ImportError as exc:
        raise ImportError(_INSTALL) from exc
    import fastvec

    options = dict(vec_env_kwargs or {})
    if "start_method" in options:
        options["context"] = options.pop("start_method")
    options.update(vector_kwargs or {})
    mode = options.pop("autoreset_mode", AutoresetMode.SAME_STEP)
    if parse_autoreset_mode(mode) is not AutoresetMode.SAME_STEP:  # the vector envs' spellings
        raise ValueError(f"SB3 needs autoreset_mode='same_step', got {mode!r}")
    options["autoreset_mode"] = AutoresetMode.SAME_STEP
    vec_class = {"sync": fastvec.SyncVecEnv, "subproc": fastvec.SubprocVecEnv,
                 "ray": fastvec.RayVecEnv}[_backend(backend, vec_env_cls)]
    build = functools.partial(
        _sb3_env, env_id, seed, monitor_dir if monitor else None,
        dict(monitor_kwargs or {}) if monitor else None, wrapper_class,
        dict(wrapper_kwargs or {}), tuple(wrappers or ()),
        {**(env_kwargs or {}), **more_env_kwargs})
    env_fns = [functools.partial(build, start_index + i) for i in range(n_envs)]
    venv = to_sb3(vec_class(env_fns, **options))
    venv.seed(seed)
    return venv


def _backend(backend: str | None, vec_env_cls: type | None) -> str:
    """The backend that ``backend`` or SB3's ``vec_env_cls`` names (one of the two)."""
    if vec_env_cls is None:
        name = backend or "subproc"
    else:
        names = {"DummyVecEnv": "sync", "SubprocVecEnv": "subproc", "SyncVecEnv": "sync",
                 "RayVecEnv": "ray"}
        name = names.get(vec_env_cls.__name__, "")
        if not name:
            raise ValueError("expected vec_env_cls to be SB3's DummyVecEnv or SubprocVecEnv "
                             f"or a fastvec vector env class, got {vec_env_cls!r}")
        if backend is not None and backend != name:
            raise ValueError(f"backend={backend!r} and vec_env_cls={vec_env_cls.__name__} "
                             "disagree: give one of the two")
    if name not in ("sync", "subproc", "ray"):
        raise ValueError(f"expected backend 'subproc', 'sync' or 'ray', got {backend!r}")
    return name


def _sb3_env(env_id: str | Callable[..., gym.Env], seed: int | None, monitor_dir: str | None,
             monitor_kwargs: dict | None, wrapper_class: Callable[..., gym.Env] | None,
             wrapper_kwargs: dict, wrappers: tuple, env_kwargs: dict, rank: int) -> gym.Env:
    """Env ``rank``, built as ``make_vec_env`` builds it (``monitor_kwargs`` None: no Monitor)."""
    if isinstance(env_id, str):
        try:
            env = gym.make(env_id, **{"render_mode": "rgb_array", **env_kwargs})
        except TypeError:  # an env that takes no render_mode
            env = gym.make(env_id, **env_kwargs)
    else:
        env = env_id(**env_kwargs)
    if seed is not None:
        env.action_space.seed(seed + rank)
    if monitor_kwargs is not None:
        from stable_baselines3.common.monitor import Monitor

        path = None
        if monitor_dir is not None:
            os.makedirs(monitor_dir, exist_ok=True)
            path = os.path.join(monitor_dir, str(rank))
        env = Monitor(env, filename=path, **monitor_kwargs)
    if wrapper_class is not None:
        env = wrapper_class(env, **wrapper_kwargs)
    for wrapper in wrappers:
        env = wrapper(env)
    return env


@functools.cache
def _adapter_class() -> type:
    """The adapter class, made on first use so that SB3 is imported only then."""
    try:
        from stable_baselines3.common.vec_env.base_vec_env import VecEnv
    except ImportError as exc:
        raise ImportError(_INSTALL) from exc

    class FastVecSB3(VecEnv):
        """A fastvec vector env seen through SB3's ``VecEnv`` interface."""

        def __init__(self, envs: Any) -> None:
            self.envs = envs
            super().__init__(envs.num_envs, envs.single_observation_space,
                             envs.single_action_space)

        def reset(self) -> Any:
            seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
            obs = None
            for mask, options in _option_groups(self._options, self.num_envs):
                opts = dict(options) if options else {}
                if mask is not None:
                    opts["reset_mask"] = mask
                obs, infos = self.envs.reset(seed=seeds, options=opts or None)
                per_env = _per_env(infos, self.num_envs)
                for i in range(self.num_envs):
                    if mask is None or mask[i]:
                        self.reset_infos[i] = per_env[i]
            self._reset_seeds()
            self._reset_options()
            return obs

        def step_async(self, actions: np.ndarray) -> None:
            self.envs.step_async(actions)

        def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict]]:
            obs, rewards, terminations, truncations, infos = self.envs.step_wait()
            dones = terminations | truncations
            per_env = _per_env(infos, self.num_envs)
            finals = _per_env(infos.get("final_info", {}), self.num_envs)
            out = []
            for i in range(self.num_envs):
                if dones[i]:
                    info = finals[i]
                    self.reset_infos[i] = per_env[i]
                else:
                    info = per_env[i]
                info["TimeLimit.truncated"] = bool(truncations[i] and not terminations[i])
                if dones[i]:
                    info["terminal_observation"] = infos["final_obs"][i]
                out.append(info)
            return obs, rewards.astype(np.float32), dones, out

        def close(self) -> None:
            self.envs.close()

        def has_attr(self, attr_name: str) -> bool:
            return all(self.envs.call_each(functools.partial(_has_attr, attr_name)))

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            return list(self.envs.call_each(functools.partial(_get_attr, attr_name), indices))

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            self.envs.call_each(functools.partial(_set_attr, attr_name, value), indices)

        def env_method(self, method_name: str, *method_args: Any, indices: Any = None,
                       **method_kwargs: Any) -> list[Any]:
            call = functools.partial(_call_method, method_name, method_args, method_kwargs)
            return list(self.envs.call_each(call, indices))

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            return list(self.envs.call_each(functools.partial(_is_wrapped, wrapper_class),
                                            indices))

        def get_images(self) -> Sequence[np.ndarray | None]:
            if self.render_mode != "rgb_array":
                warnings.warn(f"The render mode is {self.render_mode}, but get_images() needs "
                              "'rgb_array'", stacklevel=2)
                return [None] * self.num_envs
            return list(self.envs.render())

    return FastVecSB3


def _option_groups(options: list[dict], num_envs: int) -> list[tuple[np.ndarray | None, dict]]:
    """Resets to make: one for all envs when their options agree, else one per options."""
    if all(o == options[0] for o in options):
        return [(None, options[0])]
    groups: list[tuple[np.ndarray | None, dict]] = []
    for i, o in enumerate(options):
        for mask, known in groups:
            if known == o:
                mask[i] = True  # type: ignore[index]
                break
        else:
            mask = np.zeros(num_envs, dtype=bool)
            mask[i] = True
            groups.append((mask, o))
    return groups


def _per_env(batched: dict, num_envs: int) -> list[dict]:
    """Gymnasium's dict-of-arrays infos back to one dict per env (SAME_STEP keys left out)."""
    out: list[dict] = [{} for _ in range(num_envs)]
    for key, value in batched.items():
        if key in ("final_obs", "final_info") or (
                isinstance(key, str) and key.startswith("_") and key[1:] in batched):
            continue
        mask = batched.get(f"_{key}")
        if mask is None:
            continue
        parts = _per_env(value, num_envs) if isinstance(value, dict) else None
        for i in np.flatnonzero(mask):
            if parts is not None:
                out[i][key] = parts[i]
            else:
                item = value[i]
                out[i][key] = item.copy() if isinstance(item, np.ndarray) else item
    return out


def _get_attr(name: str, env: gym.Env) -> Any:
    return env.get_wrapper_attr(name)


def _has_attr(name: str, env: gym.Env) -> bool:
    try:
        env.get_wrapper_attr(name)
    except AttributeError:
        return False
    return True


def _set_attr(name: str, value: Any, env: gym.Env) -> None:
    setattr(env, name, value)


def _call_method(name: str, args: tuple, kwargs: dict, env: gym.Env) -> Any:
    return env.get_wrapper_attr(name)(*args, **kwargs)


def _is_wrapped(wrapper_class: type, env: gym.Env) -> bool:
    from stable_baselines3.common.env_util import is_wrapped

    return is_wrapped(env, wrapper_class)
