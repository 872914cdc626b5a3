"""RLlib adapter: fastvec vector envs in the env runners of RLlib's new API stack.

RLlib's ``SingleAgentEnvRunner`` builds its envs with ``gym.make_vec(config.env,
num_envs_per_env_runner, vectorization_mode=gym_env_vectorize_mode,
**config.env_config)``; with ``gym_env_vectorize_mode="vector_entry_point"`` it calls
the vector entry point of the env (a Gymnasium id's, or that of a creator registered
with ``ray.tune.registry.register_env``, called with ``{**env_config, "num_envs": n}``).
A ``fastvec/<id>`` id needs no adapter; ``register_rllib_env`` is for everything else
(an env factory, an id fastvec has not registered, fixed fastvec options), and its
creator reaches RLlib's remote env runners through Tune's registry::

    from fastvec.integrations.rllib import register_rllib_env
    from ray.rllib.algorithms.ppo import PPOConfig

    register_rllib_env("cartpole-subproc", "CartPole-v1", backend="subproc",
                       vector_kwargs={"num_workers": 2})
    config = (PPOConfig().environment("cartpole-subproc")
              .env_runners(num_envs_per_env_runner=16,
                           gym_env_vectorize_mode="vector_entry_point"))

RLlib's sampling loop expects Gymnasium's ``NEXT_STEP`` autoreset (the step after an
episode's end returns the reset observation) and keeps each step's observations as
views of the batch until the episode ends; it checks neither.  A ``SAME_STEP`` env
silently loses the first step of every episode after the first, and ``copy=False``
lets the next step overwrite the stored observations, so ``register_rllib_env``
refuses both, and ``batch_size`` (RLlib steps every env at once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from fastvec.vector.arguments import parse_autoreset_mode

__all__ = ["check_rllib_vector_kwargs", "register_rllib_env"]

_INSTALL = ('the RLlib adapter needs RLlib: pip install -e ".[rllib]" (or pip install '
            '"ray[rllib]" then "gymnasium>=1.4"; see docs/trainers.md#rllib)')
VECTOR_MODE = "vector_entry_point"  # RLlib's gym_env_vectorize_mode for fastvec envs


def check_rllib_vector_kwargs(vector_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fastvec options ``vector_kwargs`` as RLlib's env runners can use them.

    Args:
        vector_kwargs: Keyword arguments for the vector env class (``num_workers``,
            ``autoreset_mode``...), or None.

    Returns:
        A copy of ``vector_kwargs``.

    Raises:
        TypeError: ``vector_kwargs`` is not a mapping.
        ValueError: It asks for an autoreset mode other than ``NEXT_STEP``, for
            ``copy=False`` or for ``batch_size``, which RLlib's sampling loop cannot run.

    Example:
        >>> check_rllib_vector_kwargs({"num_workers": 2})
        {'num_workers': 2}
        >>> check_rllib_vector_kwargs({"autoreset_mode": "same_step"})
        Traceback (most recent call last):
        ...
        ValueError: RLlib's env runners expect autoreset_mode='next_step' ...
    """
    if vector_kwargs is None:
        return {}
    if not isinstance(vector_kwargs, Mapping):
        raise TypeError(f"expected vector_kwargs to be a dict, got {vector_kwargs!r}")
    options = dict(vector_kwargs)
    mode = options.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if parse_autoreset_mode(mode) is not AutoresetMode.NEXT_STEP:
        raise ValueError(
            "RLlib's env runners expect autoreset_mode='next_step' (the step after an "
            "episode ends returns the reset observation); with "
            f"autoreset_mode={mode!r} they would record every later episode one step short")
    if options.get("copy", True) is False:
        raise ValueError("RLlib keeps each step's observations until its episodes end, so "
                         "the vector env must return copies: leave out copy=False")
    if options.get("batch_size") is not None:
        raise ValueError("RLlib steps every env of a runner at once: leave out batch_size "
                         f"(got batch_size={options['batch_size']!r})")
    return options


def register_rllib_env(
    name: str,
    env: str | Callable[..., gym.Env],
    backend: str = "sync",
    vector_kwargs: Mapping[str, Any] | None = None,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] | None = None,
    **env_kwargs: Any,
) -> str:
    """Register ``name`` with RLlib (Tune's env registry) as a fastvec vector env.

    RLlib then builds each env runner's envs with ``fastvec.make(env,
    num_envs_per_env_runner, backend, vector_kwargs, wrappers, **env_kwargs,
    **env_config)``; the config must set ``gym_env_vectorize_mode=
    "vector_entry_point"``.  The registry carries the creator to remote env runners,
    which import fastvec when they unpickle it.

    Args:
        name: The name for ``config.environment(name)``.
        env: A registered Gymnasium id (``"module:Id-v0"`` imports ``module`` first,
            in each runner) or a picklable callable returning a ``gymnasium.Env``.
        backend: ``"sync"`` (in the env runner), ``"subproc"`` (worker processes of
            the env runner) or ``"ray"``.
        vector_kwargs: Options of the vector env class (see
            :func:`check_rllib_vector_kwargs`).
        wrappers: Wrappers applied to each env, in order.
        **env_kwargs: Keyword arguments for each env; ``config.environment(...,
            env_config={...})`` adds to them (and wins).

    Returns:
        ``name``.

    Raises:
        ImportError: RLlib is not installed.
        ValueError: ``name`` is empty, ``backend`` is unknown, or ``vector_kwargs``
            asks for what RLlib cannot run.
    """
    try:
        from ray.tune.registry import register_env
    except ImportError as exc:
        raise ImportError(_INSTALL) from exc
    from fastvec.make import _backend_name

    if not isinstance(name, str) or not name:
        raise ValueError(f"expected name to be a non-empty string, got {name!r}")
    if not (isinstance(env, str) or callable(env)):
        raise TypeError(f"expected env to be a registered id or a callable, got {env!r}")
    _backend_name(backend, None)
    creator = VectorCreator(env, backend, check_rllib_vector_kwargs(vector_kwargs),
                            tuple(wrappers or ()), dict(env_kwargs))
    register_env(name, creator)
    return name


class VectorCreator:
    """The env creator ``register_rllib_env`` gives RLlib: ``env_config`` -> a fastvec env.

    A class (not a closure), so that it pickles by reference to fastvec.
    """

    def __init__(self, env: str | Callable[..., gym.Env], backend: str,
                 vector_kwargs: dict[str, Any], wrappers: tuple, env_kwargs: dict[str, Any]):
        self.env = env
        self.backend = backend
        self.vector_kwargs = vector_kwargs
        self.wrappers = wrappers
        self.env_kwargs = env_kwargs

    def __call__(self, env_config: Mapping[str, Any]) -> gym.vector.VectorEnv:
        """A fastvec env of ``env_config["num_envs"]`` envs, each with ``env_config``."""
        from fastvec.make import make

        config = dict(env_config)
        if "num_envs" not in config:
            raise ValueError(
                "RLlib asked for a single env, but this creator makes a fastvec vector env: "
                f"set config.env_runners(gym_env_vectorize_mode={VECTOR_MODE!r})")
        num_envs = config.pop("num_envs")
        return make(self.env, num_envs, backend=self.backend,
                    vector_kwargs=dict(self.vector_kwargs), wrappers=self.wrappers,
                    **{**self.env_kwargs, **config})

    def __repr__(self) -> str:
        return f"VectorCreator({self.env!r}, backend={self.backend!r})"
