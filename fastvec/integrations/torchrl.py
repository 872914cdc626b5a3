"""TorchRL adapter: a fastvec vector env as a native TorchRL ``EnvBase``.

A one-line swap for TorchRL scripts (``pip install -e ".[torchrl]"``)::

    from fastvec.integrations.torchrl import FastVecEnv

    env = FastVecEnv("CartPole-v1", num_envs=16, vector_kwargs={"num_workers": 2})
    # was GymEnv("CartPole-v1", num_envs=16) or ParallelEnv(16, lambda: GymEnv(...))
    collector = Collector(env, policy, frames_per_batch=1024, total_frames=100_000)

``FastVecEnv`` has ``batch_size == (num_envs,)`` and the specs ``GymEnv`` gives
for the same spaces: the observation under ``"observation"`` (a ``Dict`` space: its
keys), ``"reward"`` of shape ``(num_envs, 1)`` (float32), and ``"done"``,
``"terminated"`` and ``"truncated"`` of shape ``(num_envs, 1)``.  TorchRL resets envs
itself, so the fastvec env runs with ``autoreset_mode=DISABLED``:

- ``"_reset"`` in the tensordict given to ``reset`` resets only those envs
  (``envs.reset(env_ids=...)``); the others keep their last observation.
- ``"_step"`` in the tensordict given to ``step`` (TorchRL's partial steps) steps
  only those envs (``envs.step(actions, env_ids=...)``); the others' ``"next"``
  entries are what the input holds for them (their observation and done flags),
  with reward 0, as TorchRL's own batched envs fill them.

Infos are not put in the tensordict.  ``torchrl.envs.GymWrapper(envs)`` also works
on a fastvec env made with ``autoreset_mode="same_step"`` or ``"disabled"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from fastvec.errors import ClosedEnvError
from fastvec.vector.arguments import parse_autoreset_mode
from fastvec.vector.base import BatchedVecEnv

_INSTALL = 'the TorchRL adapter needs torchrl and tensordict: pip install -e ".[torchrl]"'

try:
    import torch
    from tensordict import TensorDict, TensorDictBase
    from torchrl.data import Categorical, Composite, Unbounded
    from torchrl.envs import EnvBase
    from torchrl.envs.libs.gym import _gym_to_torchrl_spec_transform, set_gym_backend
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(_INSTALL) from exc

__all__ = ["FastVecEnv"]

_LEAF_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class FastVecEnv(EnvBase):
    """A fastvec vector env seen through TorchRL's ``EnvBase`` (batch size ``(num_envs,)``).

    Args:
        envs: A registered id (``"CartPole-v1"``), an ``EnvSpec`` or a callable
            returning a ``gymnasium.Env``, made into ``num_envs`` envs by
            :func:`fastvec.make`; or a fastvec vector env made with
            ``autoreset_mode="disabled"`` (closing this env closes it).
        num_envs: How many envs to make from an id or callable (for a vector env:
            ``None`` or its ``num_envs``).
        backend: ``"subproc"`` (worker processes, the default), ``"sync"`` (this
            process) or ``"ray"``; for an id or callable.
        vector_kwargs: Options of the fastvec env (``num_workers``, ``copy``...);
            ``autoreset_mode`` is always ``DISABLED`` (given, it must say so).
        env_kwargs: Keyword arguments for each env (``gymnasium.make``'s or the
            callable's), e.g. ``{"max_episode_steps": 200}``.
        categorical_action_encoding: ``True``: a ``Discrete`` action is an integer
            (``Categorical`` spec); ``False`` (as ``GymEnv``): one-hot (``OneHot``).
        device: Where the tensordicts are put (``"cpu"`` by default).
        allow_done_after_reset: Tolerate envs that are done right after a reset.

    Raises:
        ImportError: torchrl or tensordict is not installed (at import).
        ValueError: ``envs`` is not a fastvec env, id or callable; it uses another
            autoreset mode or async batches; ``num_envs`` is missing or disagrees;
            a space is of a kind TorchRL's tensors cannot hold here.
        fastvec.errors.ClosedEnvError: ``envs`` is closed.

    Example:
        >>> from fastvec.integrations.torchrl import FastVecEnv
        >>> env = FastVecEnv("CartPole-v1", num_envs=4, backend="sync")
        >>> rollout = env.rollout(10, break_when_any_done=False)
        >>> tuple(rollout.shape), tuple(rollout["next", "reward"].shape)
        ((4, 10), (4, 10, 1))
        >>> env.close()
    """

    def __init__(
        self,
        envs: str | gym.envs.registration.EnvSpec | Callable[..., gym.Env] | gym.vector.VectorEnv,
        num_envs: int | None = None,
        *,
        backend: str = "subproc",
        vector_kwargs: dict[str, Any] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        categorical_action_encoding: bool = False,
        device: Any = "cpu",
        allow_done_after_reset: bool = False,
    ) -> None:
        vector = _vector_env(envs, num_envs, backend, vector_kwargs, env_kwargs)
        try:
            super().__init__(device=device, batch_size=torch.Size([vector.num_envs]),
                             allow_done_after_reset=allow_done_after_reset)
            self.envs = vector
            self._copy_obs = not getattr(vector, "copy", True)  # views of shared rows
            self._pending_seed: int | None = None
            self._make_specs(vector, categorical_action_encoding)
            spec = self.full_observation_spec
            self._obs_keys = [_as_tuple(key) for key in spec.keys(True, True)]
            self._obs_shapes = [(key, spec[key].shape[1:]) for key in self._obs_keys]
            self._last_obs = self.full_observation_spec.zero()  # replaced, never written
            # (a spec's zero() costs about a millisecond: made once, cloned)
            self._done_zeros = self.full_done_spec.zero()
            self._reward_zeros = self.full_reward_spec.zero()
        except BaseException:
            if vector is not envs:  # made here: close its workers
                vector.close()
            raise
        self.is_closed = False

    # -- specs -------------------------------------------------------------------------

    def _make_specs(self, vector: BatchedVecEnv, categorical: bool) -> None:
        """Specs from the gymnasium spaces, with TorchRL's own conversion (as ``GymEnv``)."""
        _check_space(vector.single_observation_space, "observation", allow_dict=True)
        _check_space(vector.single_action_space, "action", allow_dict=False)
        n, device = self.batch_size, self.device
        with set_gym_backend("gymnasium"):
            observation = _gym_to_torchrl_spec_transform(
                vector.single_observation_space, device=device,
                categorical_action_encoding=True,  # integer observations stay integers
                remap_state_to_observation=False)
            action = _gym_to_torchrl_spec_transform(
                vector.single_action_space, device=device,
                categorical_action_encoding=categorical)
        observation = _scalar_boxes(vector.single_observation_space, observation)
        action = _scalar_boxes(vector.single_action_space, action)
        if not isinstance(observation, Composite):
            observation = Composite(observation=observation, device=device)
        flag = Categorical(2, shape=(*n, 1), dtype=torch.bool, device=device)
        self.observation_spec = observation.expand(n)
        self.action_spec = action.expand(*n, *action.shape)
        self.reward_spec = Unbounded(shape=(*n, 1), dtype=torch.float32, device=device)
        self.done_spec = Composite(done=flag, terminated=flag.clone(), truncated=flag.clone(),
                                   shape=n, device=device)

    # -- reset and step ----------------------------------------------------------------

    def _reset(self, tensordict: TensorDictBase | None = None, *,
               options: dict[str, Any] | None = None, **kwargs: Any) -> TensorDictBase:
        """Reset every env, or those of ``tensordict["_reset"]``.

        The others keep their state and last observation.  A seed given to
        ``set_seed`` goes to this reset.
        """
        if kwargs:
            raise TypeError(f"FastVecEnv.reset got unexpected keyword arguments {sorted(kwargs)}")
        mask = None if tensordict is None else tensordict.get("_reset", None)
        ids = self._env_ids(mask, "_reset")
        if ids is None:
            obs, _ = self.envs.reset(seed=self._take_seed(), options=options)
            self._last_obs = self._obs_td(obs, self.batch_size[0])
        elif len(ids):
            obs, _ = self.envs.reset(seed=self._take_seed(), options=options, env_ids=ids)
            self._keep_obs(ids, self._obs_td(obs, len(ids)))
        out = self._last_obs.copy()  # (shallow: the tensors are never written in place)
        out.update(self._done_zeros.clone())
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Step every env, or only those of ``tensordict["_step"]`` (a partial step)."""
        actions = self.action_spec.to_numpy(tensordict.get(self.action_key), safe=False)
        ids = self._env_ids(tensordict.get("_step", None), "_step")
        if ids is None:
            out = self._step_td(*self.envs.step(actions)[:4], self.batch_size[0])
            self._last_obs = out.select(*self._obs_keys)  # the same tensors: no copy
            return out
        out = self._skipped(tensordict)
        if len(ids):
            part = self._step_td(*self.envs.step(actions[ids], env_ids=ids)[:4], len(ids))
            out[torch.from_numpy(ids)] = part
            self._keep_obs(ids, part.select(*self._obs_keys))
        return out

    def _keep_obs(self, ids: np.ndarray, obs: TensorDictBase) -> None:
        """The last observations with those of envs ``ids`` replaced.

        A new tensordict: the one kept before may be in a tensordict returned to TorchRL
        (its tensors are shared, never written in place).
        """
        rows = torch.from_numpy(ids)
        last = TensorDict(batch_size=self.batch_size, device=self.device)
        for key in self._obs_keys:  # leaf by leaf: a tensordict's own indexing costs more
            leaf = self._last_obs.get(key).clone()
            leaf[rows] = obs.get(key)
            last.set(key, leaf)
        self._last_obs = last

    def _skipped(self, tensordict: TensorDictBase) -> TensorDictBase:
        """A whole batch of ``"next"`` entries for envs that do not step.

        What the input holds for them (observation, done flags), else their last
        observation, reward 0 and done flags ``False``.
        """
        out = self._last_obs.clone()
        out.update(self._reward_zeros.clone())
        out.update(self._done_zeros.clone())
        held = tensordict.select(*out.keys(True, True), strict=False)
        out.update(held.clone())
        return out

    def _env_ids(self, mask: torch.Tensor | None, key: str) -> np.ndarray | None:
        """The envs a ``"_reset"``/``"_step"`` mask names (``None``: all of them)."""
        if mask is None:
            return None
        n = self.batch_size[0]
        if mask.numel() != n:
            raise ValueError(f"expected {key!r} to hold one flag per env ({n}), got shape "
                             f"{tuple(mask.shape)}")
        flags = mask.reshape(n).to("cpu", torch.bool).numpy()
        return None if flags.all() else np.flatnonzero(flags)

    def _take_seed(self) -> int | None:
        seed, self._pending_seed = self._pending_seed, None
        return seed

    def _set_seed(self, seed: int | None) -> None:
        """Seed the next reset: env ``i`` gets ``seed + i`` (fastvec's rule)."""
        self._pending_seed = seed

    # -- numpy to tensordicts ----------------------------------------------------------

    def _obs_td(self, obs: Any, rows: int) -> TensorDictBase:
        """The observations of ``rows`` envs (an array, or a dict of them) as a tensordict.

        Each leaf is shaped as its spec says (a ``Box`` of shape ``()``: ``(rows,)``).
        """
        out = TensorDict(batch_size=[rows], device=self.device)
        for key, shape in self._obs_shapes:
            value = obs
            if isinstance(obs, dict):
                for part in key:
                    value = value[part]
            array = np.array(value, copy=True) if self._copy_obs else np.asarray(value)
            out.set(key, torch.from_numpy(array.reshape(rows, *shape)))
        return out

    def _step_td(self, obs: Any, rewards: np.ndarray, terminations: np.ndarray,
                 truncations: np.ndarray, rows: int) -> TensorDictBase:
        out = self._obs_td(obs, rows)
        terminated = torch.from_numpy(np.asarray(terminations, dtype=bool).reshape(rows, 1))
        truncated = torch.from_numpy(np.asarray(truncations, dtype=bool).reshape(rows, 1))
        reward = torch.from_numpy(np.asarray(rewards, dtype=np.float32).reshape(rows, 1))
        # (the vector env returns fresh arrays for these: no copy needed)
        out.update({"reward": reward, "terminated": terminated, "truncated": truncated,
                    "done": terminated | truncated})
        return out

    # -- the rest ----------------------------------------------------------------------

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Close the fastvec env (its workers) too; closing twice does nothing."""
        self.is_closed = True
        envs = self.__dict__.get("envs")
        if envs is not None:
            envs.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(envs={type(self.envs).__name__}, "
                f"num_envs={self.batch_size[0]}, device={self.device})")


def _as_tuple(key: Any) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


def _scalar_boxes(space: gym.Space, spec: Any) -> Any:
    """``spec`` with each ``Box`` of shape ``()`` as one value per env.

    TorchRL's conversion gives such a space the shape ``(1,)``; ``GymWrapper`` gives a
    vector env's ``()``, and so does this adapter.
    """
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            spec[key] = _scalar_boxes(sub, spec[key])
        return spec
    if isinstance(space, spaces.Box) and space.shape == () and spec.shape == (1,):
        return spec.squeeze(-1)
    return spec


def _check_space(space: gym.Space, what: str, *, allow_dict: bool) -> None:
    """Refuse a space whose values are not (a dict of) fixed-shape arrays."""
    if allow_dict and isinstance(space, spaces.Dict):
        for sub in space.spaces.values():
            _check_space(sub, what, allow_dict=True)
        return
    if not isinstance(space, _LEAF_SPACES):
        kinds = "Box, Discrete, MultiDiscrete, MultiBinary" + (" or Dict of them" if allow_dict
                                                             else "")
        raise ValueError(f"FastVecEnv supports {what} spaces {kinds}; got {space!r} "
                         "(wrap the env to change its space, or use torchrl's GymWrapper)")


def _vector_env(envs: Any, num_envs: int | None, backend: str,
                vector_kwargs: dict[str, Any] | None,
                env_kwargs: dict[str, Any] | None) -> BatchedVecEnv:
    """The fastvec env to drive: ``envs`` checked, or made from an id or callable."""
    import fastvec

    if isinstance(envs, BatchedVecEnv):
        return _checked(envs, num_envs, vector_kwargs, env_kwargs)
    if isinstance(envs, (gym.vector.VectorEnv, gym.Env)):
        raise ValueError(f"expected a fastvec vector env, an env id or a callable, got "
                         f"{type(envs).__name__}; for Gymnasium's own envs use torchrl's "
                         "GymWrapper")
    if num_envs is None:
        raise ValueError("FastVecEnv(env_id, num_envs=...) needs num_envs")
    options = dict(vector_kwargs or {})
    mode = options.pop("autoreset_mode", AutoresetMode.DISABLED)
    if parse_autoreset_mode(mode) is not AutoresetMode.DISABLED:
        raise ValueError("TorchRL resets envs itself: FastVecEnv runs the fastvec env with "
                         f"autoreset_mode='disabled' (got {mode!r}); leave it out")
    if "batch_size" in options:
        raise ValueError("TorchRL steps every env at once: FastVecEnv takes no batch_size")
    options["autoreset_mode"] = AutoresetMode.DISABLED
    made = fastvec.make(envs, num_envs, backend=backend, vector_kwargs=options,
                        **(env_kwargs or {}))
    return cast(BatchedVecEnv, made)  # (every class make builds is one)


def _checked(envs: BatchedVecEnv, num_envs: int | None,
             vector_kwargs: dict[str, Any] | None,
             env_kwargs: dict[str, Any] | None) -> BatchedVecEnv:
    """A fastvec env given ready-made: one FastVecEnv can drive."""
    if vector_kwargs or env_kwargs:
        raise ValueError("vector_kwargs and env_kwargs are for making envs from an id or "
                         "callable; this fastvec env is already made")
    if envs.closed:
        raise ClosedEnvError(f"{type(envs).__name__} is closed; make a new one")
    if num_envs is not None and num_envs != envs.num_envs:
        raise ValueError(f"num_envs={num_envs} but the fastvec env has {envs.num_envs} envs")
    if envs.metadata.get("autoreset_mode") != AutoresetMode.DISABLED:
        raise ValueError(
            "TorchRL resets envs itself, so FastVecEnv needs a fastvec env made with "
            f"autoreset_mode='disabled' (got {envs.metadata.get('autoreset_mode')}); e.g. "
            "fastvec.make(env_id, n, vector_kwargs={'autoreset_mode': 'disabled'}), or pass "
            "the env id to FastVecEnv.  (torchrl's GymWrapper takes 'same_step' envs.)")
    if getattr(envs, "num_games", envs.num_envs) != envs.num_envs:
        raise ValueError(f"FastVecEnv runs single-agent envs; this one holds games of "
                         f"{len(envs.agents)} agents (a row per agent)")
    if getattr(envs, "batch_size", envs.num_envs) != envs.num_envs:
        raise ValueError("TorchRL steps every env at once: make the fastvec env without "
                         f"batch_size (got batch_size={envs.batch_size} < {envs.num_envs})")
    return envs
