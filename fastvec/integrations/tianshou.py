"""Tianshou adapter: a fastvec vector env as a Tianshou ``BaseVectorEnv``.

Tianshou's ``Collector`` steps the envs it names, ``env.step(actions, ready_env_ids)``,
and resets those whose episodes ended, ``env.reset(env_id=done_ids)``: no autoreset.
:class:`TianshouVecEnv` runs a fastvec env with ``autoreset_mode=DISABLED`` and maps
those calls onto its ``step(actions, env_ids=ids)`` and ``reset(env_ids=ids)``
(``pip install -e ".[tianshou]"``): ``Collector(algorithm, TianshouVecEnv("CartPole-v1",
16, vector_kwargs={"num_workers": 2}), buffer)``.  Tianshou sees what its own vector envs
give; ``wait_num`` maps onto fastvec's async batches for ``AsyncCollector``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode

from fastvec.vector.arguments import parse_autoreset_mode
from fastvec.vector.subsets import take_info_rows

try:
    from tianshou.env import BaseVectorEnv
except ImportError as exc:  # the module is Tianshou's adapter: without it, say how
    raise ImportError('the Tianshou adapter needs tianshou: pip install -e ".[tianshou]"'
                      ) from exc

__all__ = ["TianshouVecEnv"]

_CLASSES = {"sync": "SyncVecEnv", "subproc": "SubprocVecEnv", "ray": "RayVecEnv"}
_INTEGER_SPACES = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


class TianshouVecEnv(BaseVectorEnv):
    """A fastvec vector env seen through Tianshou's ``BaseVectorEnv`` interface.

    A ``BaseVectorEnv`` (Tianshou's wrappers take it) that skips its ``__init__``, as
    Tianshou's own ``VectorEnvWrapper`` does: that would start a worker per env.
    Differences from Tianshou's vector envs, on purpose: ``reset(seed=s)`` seeds env
    ``i`` with ``s + i`` (theirs give every env ``s``); a float batch of whole numbers
    for a discrete space is cast to int64 (Tianshou 2.0's ``RandomActionPolicy`` makes
    them), other floats are refused; ``timeout`` is refused (fastvec's batches are
    whole worker blocks of a fixed size: use ``wait_num``).

    Args:
        env: A fastvec vector env made with ``autoreset_mode="disabled"`` (with
            ``batch_size``: async); or a registered id, an ``EnvSpec`` or an env callable
            (with ``num_envs``); or a list of env factories (as Tianshou's envs take).
        num_envs: How many envs to make from an id or callable.
        backend: ``"subproc"`` (worker processes; the default), ``"sync"`` (this
            process) or ``"ray"``.
        vector_kwargs: Options of the fastvec env (``num_workers``, ``context``...);
            ``autoreset_mode`` is always ``DISABLED``.
        wait_num: Async steps: ``step`` returns once this many envs are done
            (fastvec's ``batch_size``: whole worker blocks; not ``sync``).
        timeout: Must be None.
        **env_kwargs: Keyword arguments for each env (an id or callable only).
    """

    def __init__(
        self,
        env: gym.vector.VectorEnv | str | EnvSpec | Callable[..., gym.Env]
        | Sequence[Callable[[], gym.Env]],
        num_envs: int | None = None,
        *,
        backend: str | None = None,
        vector_kwargs: dict[str, Any] | None = None,
        wait_num: int | None = None,
        timeout: float | None = None,
        **env_kwargs: Any,
    ) -> None:
        if timeout is not None:
            raise ValueError("timeout is not supported: fastvec's async batches return "
                             "whole worker blocks of a fixed size; use wait_num (envs per "
                             f"step), got timeout={timeout!r}")
        envs = _vector_env(env, num_envs, backend, vector_kwargs, wait_num, env_kwargs)
        try:
            batch_size = _check_vector_env(envs, wait_num)
        except ValueError:
            if envs is not env:  # made here: close it
                envs.close()
            raise
        self.envs, self.env_num = envs, envs.num_envs
        self.wait_num, self.timeout, self.is_closed = batch_size, None, False
        self.is_async = batch_size < envs.num_envs
        # Per-env copies here, as Tianshou's workers keep: random actions, seed().
        self._action_spaces = [copy.deepcopy(envs.single_action_space)
                               for _ in range(self.env_num)]
        self._integer_actions = isinstance(envs.single_action_space, _INTEGER_SPACES)
        self._dict_obs = isinstance(envs.single_observation_space, gym.spaces.Dict)
        self._all = np.arange(self.env_num)
        self._async = _AsyncSteps(envs) if self.is_async else None

    def __len__(self) -> int:
        return int(self.env_num)

    @property  # Tianshou's is an attribute; here the async steps keep it
    def waiting_id(self) -> list[int]:  # type: ignore[override]
        """Envs sent actions whose results ``step`` has not returned yet (async)."""
        return [] if self._async is None else np.flatnonzero(self._async.waiting).tolist()

    def reset(self, env_id: Any = None, **kwargs: Any) -> tuple[Any, np.ndarray]:
        """Reset every env, or those of ``env_id`` (an index or indices, any order).

        ``kwargs``: ``seed`` (an int: env ``i`` gets ``seed + i``; or one per env
        named) and ``options``.  Returns ``(obs, infos)`` of those envs, in order.
        """
        if set(kwargs) - {"seed", "options"}:
            raise ValueError(f"expected reset keywords seed and options, got {sorted(kwargs)}")
        seed, options = kwargs.get("seed"), kwargs.get("options")
        ids = self._ids(env_id)
        count = self.env_num if ids is None else len(ids)
        if self._async is not None:
            obs, dicts = self._async.reset(ids, seed, options)
        else:
            obs, infos = self.envs.reset(seed=seed, options=options, env_ids=ids)
            dicts = _per_env(infos, count)
        return self._obs(obs, count), _object_array(dicts)

    def step(self, action: Any, id: Any = None) -> tuple:  # noqa: A002 - Tianshou's name
        """Step the envs of ``id`` (None: every env) with ``action``, one per env.

        Returns ``(obs, rewards, terminations, truncations, infos)`` of those envs, in
        order.  Async (``wait_num``): sends ``action`` (None: nothing) to the envs of
        ``id`` and returns the first ``wait_num`` envs done (``infos[k]["env_id"]``).
        """
        ids = self._ids(id)
        actions = None if action is None else self._actions(action)
        if self._async is not None:
            obs, rewards, terms, truncs, infos, stepped = self._async.step(
                actions, self._all if ids is None else ids)
        else:
            if actions is None:
                raise ValueError("action must not be None: it fetches the results of async "
                                 "steps, and this env steps synchronously (no wait_num)")
            obs, rewards, terms, truncs, infos = self.envs.step(actions, env_ids=ids)
            stepped = self._all if ids is None else ids
        dicts = _per_env(infos, len(stepped))
        for info, i in zip(dicts, stepped.tolist(), strict=True):
            info["env_id"] = i
        return self._obs(obs, len(stepped)), rewards, terms, truncs, _object_array(dicts)

    def seed(self, seed: int | list[int] | None = None) -> list[list[int] | None]:
        """Seed each env's action space (here) and the env, as Tianshou does.

        Env ``i`` gets ``seed + i`` (or ``seed[i]``) and is reset with it now.
        """
        seeds: list[int | None] = [None] * self.env_num
        if isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.env_num)]
        elif seed is not None:
            seeds = list(seed)
        if len(seeds) != self.env_num:
            raise ValueError(f"expected {self.env_num} seeds (one per env), got {len(seeds)}")
        for space, s in zip(self._action_spaces, seeds, strict=True):
            space.seed(s)
        self.reset(seed=seeds)
        return [None if s is None else [s] for s in seeds]

    def get_env_attr(self, key: str, id: Any = None) -> list[Any]:  # noqa: A002
        """Attribute ``key`` of each env of ``id`` (None: all), as a list.

        Read from ``env.unwrapped``, as Tianshou does; the spaces are the vector env's.
        """
        ids = np.atleast_1d(self._all if id is None else id).tolist()
        if key == "action_space":
            return [self._action_spaces[i] for i in ids]
        if key == "observation_space":
            return [self.envs.single_observation_space] * len(ids)
        self._refuse_while_stepping(f"get_env_attr({key!r})")
        found = self.envs.call_each(
            lambda env: (hasattr(env.unwrapped, key), getattr(env.unwrapped, key, None)), ids)
        missing = [i for i, (has, _) in zip(ids, found, strict=True) if not has]
        if missing:
            raise AttributeError(f"env {missing[0]} has no attribute {key!r}")
        return [value for _, value in found]

    def set_env_attr(self, key: str, value: Any, id: Any = None) -> None:  # noqa: A002
        """Set attribute ``key`` of ``env.unwrapped`` to ``value`` for each env of ``id``."""
        if key in ("action_space", "observation_space"):
            raise ValueError(f"{key} is the vector env's, fixed when it was made")
        self._refuse_while_stepping(f"set_env_attr({key!r})")
        ids = np.atleast_1d(self._all if id is None else id).tolist()
        self.envs.call_each(lambda env: setattr(env.unwrapped, key, value), ids)

    def render(self, **kwargs: Any) -> list[Any]:
        """Each env's ``render()``, in the envs' render mode (keywords are ignored)."""
        self._refuse_while_stepping("render()")
        return list(self.envs.render())

    def close(self) -> None:
        """Close the fastvec env and its workers (a second call does nothing)."""
        if not self.is_closed:
            self.is_closed = True
            self.envs.close()

    def _ids(self, id: Any) -> np.ndarray | None:  # noqa: A002
        """``id`` as an int64 array, or None for every env in order (the fast path)."""
        if id is None:
            return None
        ids = np.atleast_1d(np.asarray(id))
        if ids.dtype.kind not in "iu" and ids.size:
            raise ValueError(f"expected env ids as integers, got {id!r}")
        ids = ids.astype(np.int64, copy=False)
        return None if len(ids) == self.env_num and np.array_equal(ids, self._all) else ids

    def _actions(self, action: Any) -> Any:
        """A float batch of whole numbers for a discrete space as int64; else as given."""
        if hasattr(action, "detach"):  # a torch tensor
            action = action.detach().cpu().numpy()
        if self._integer_actions:
            array = np.asarray(action)
            if (array.dtype.kind == "f" and np.isfinite(array).all()
                    and np.array_equal(array, np.trunc(array))):
                return array.astype(np.int64)
        return action  # fastvec's checks name the env of an action that does not fit

    def _obs(self, obs: Any, count: int) -> Any:
        """Tianshou's form: a ``Dict`` space's observations as an array of per-env dicts."""
        return _object_array([_row(obs, k) for k in range(count)]) if self._dict_obs else obs

    def _refuse_while_stepping(self, what: str) -> None:
        if self._async is not None and self._async.waiting.any():
            raise RuntimeError(f"{what} while envs {self.waiting_id} are stepping (async): "
                               "call it before collecting, or after reset()")


class _AsyncSteps:
    """Tianshou's async ``step``/``reset`` over fastvec's ``async_reset``/``recv``/``send``.

    ``waiting``: envs sent actions whose results Tianshou has not had yet; some may be
    in ``stash`` (received while a partial reset waited).  Sends name whole blocks.
    """

    def __init__(self, envs: Any) -> None:
        self.envs = envs
        self.waiting = np.zeros(envs.num_envs, dtype=np.bool_)
        self.stash: list[tuple] = []

    def step(self, actions: Any, ids: np.ndarray) -> tuple:
        """Send ``actions`` to ``ids`` (None: send nothing); the next batch done."""
        if actions is not None:
            if self.waiting[ids].any():
                raise ValueError(f"envs {ids[self.waiting[ids]].tolist()} are still "
                                 "stepping: step(None) returns their results first")
            self.envs.send(actions, ids)
            self.waiting[ids] = True
        if not self.stash and not self.waiting.any():
            raise ValueError("step(None) with no envs stepping: pass actions")
        batch = self.stash.pop(0) if self.stash else self.envs.recv()
        self.waiting[batch[-1]] = False
        return batch

    def reset(self, ids: np.ndarray | None, seed: Any, options: dict | None
              ) -> tuple[Any, list[dict]]:
        """Reset every env (what is stepping is dropped), or the envs ``ids``."""
        n = self.envs.num_envs
        if ids is None:
            self.stash.clear()
            self.waiting[:] = False
            self.envs.async_reset(seed=seed, options=options)
            return self._gather(np.arange(n))
        if self.waiting[ids].any():
            raise ValueError(f"envs {ids[self.waiting[ids]].tolist()} are stepping: only "
                             "envs that step() returned can be reset")
        if isinstance(seed, (list, tuple, np.ndarray)):  # one per env named -> per env
            seed = [dict(zip(ids.tolist(), seed, strict=True)).get(i) for i in range(n)]
        mask = np.zeros(n, dtype=np.bool_)
        mask[ids] = True
        self.envs.async_reset(seed=seed, options={**(options or {}), "reset_mask": mask})
        return self._gather(ids)

    def _gather(self, wanted: np.ndarray) -> tuple[Any, list[dict]]:
        """Receive until the envs ``wanted`` have reset; their results, in that order.

        Results of envs that Tianshou waits for go to the stash; other envs of a reset
        worker block come back with their last results, which are dropped.
        """
        position = np.full(self.envs.num_envs, -1, dtype=np.int64)
        position[wanted] = np.arange(len(wanted))
        obs_parts, ids_parts, dicts = [], [], []  # type: ignore[var-annotated]
        while len(dicts) < len(wanted):
            obs, rewards, terms, truncs, infos, env_ids = self.envs.recv()
            mine = position[env_ids] >= 0
            if mine.any():
                obs_parts.append(_row(obs, mine))
                ids_parts.append(env_ids[mine])
                dicts += _per_env(take_info_rows(infos, mine), int(mine.sum()))
            stepped = self.waiting[env_ids]
            if stepped.any():
                self.stash.append((_row(obs, stepped), rewards[stepped], terms[stepped],
                                   truncs[stepped], take_info_rows(infos, stepped),
                                   env_ids[stepped]))
        order = np.argsort(position[np.concatenate(ids_parts)])
        return _row(_concat(obs_parts), order), [dicts[k] for k in order]


def _vector_env(env: Any, num_envs: int | None, backend: str | None,
                vector_kwargs: dict[str, Any] | None, wait_num: int | None,
                env_kwargs: dict[str, Any]) -> Any:
    """``env`` itself when it is a vector env, else the fastvec env it describes."""
    import fastvec

    if isinstance(env, gym.vector.VectorEnv):
        if num_envs is not None or backend or vector_kwargs or env_kwargs:
            raise ValueError("num_envs, backend, vector_kwargs and env keywords describe "
                             "envs to make: give them with an env id, not a vector env")
        return env
    options = dict(vector_kwargs or {})
    mode = options.pop("autoreset_mode", AutoresetMode.DISABLED)
    if parse_autoreset_mode(mode) is not AutoresetMode.DISABLED:
        raise ValueError(f"Tianshou resets the envs itself: autoreset_mode must be "
                         f"'disabled', got {mode!r}")
    options["autoreset_mode"] = AutoresetMode.DISABLED
    name = backend or "subproc"
    if name not in _CLASSES:
        raise ValueError(f"expected backend 'subproc', 'sync' or 'ray', got {backend!r}")
    listed = isinstance(env, (list, tuple))
    if listed and (num_envs is not None or env_kwargs):
        raise ValueError("a list of env factories makes one env each: give no num_envs "
                         "or env keywords with it")
    count = len(env) if listed else num_envs
    if count is None:
        raise ValueError("expected num_envs with an env id or callable")
    if wait_num is not None and wait_num != count:
        if name == "sync":
            raise ValueError("wait_num below the number of envs (async steps) needs worker "
                             "processes or actors: backend='subproc' or 'ray', not 'sync'")
        options["batch_size"] = wait_num
    if listed:
        return getattr(fastvec, _CLASSES[name])(list(env), **options)
    return fastvec.make(env, count, backend=name, vector_kwargs=options, **env_kwargs)


def _check_vector_env(envs: Any, wait_num: int | None) -> int:
    """The batch size of ``envs`` (its ``num_envs`` when sync); ValueError if unusable."""
    from fastvec.vector.base import BatchedVecEnv

    if not isinstance(envs, BatchedVecEnv):
        raise ValueError(f"expected a fastvec SyncVecEnv, SubprocVecEnv or RayVecEnv, got "
                         f"{type(envs)!r}")
    mode = envs.metadata.get("autoreset_mode")
    if mode != AutoresetMode.DISABLED:
        raise ValueError(f"Tianshou resets the envs itself: make the fastvec env with "
                         f"autoreset_mode='disabled' (got {mode}), e.g. fastvec.make(env_id, "
                         "n, vector_kwargs={'autoreset_mode': 'disabled'})")
    if envs.num_games != envs.num_envs:
        raise ValueError("multi-agent game rows are not supported by the Tianshou adapter")
    if isinstance(envs.single_observation_space, gym.spaces.Tuple):
        raise ValueError("Tianshou does not take Tuple observations: use a Dict or Box space")
    batch_size = int(getattr(envs, "batch_size", envs.num_envs))
    if wait_num is not None and wait_num != batch_size:
        raise ValueError(f"wait_num={wait_num} but the fastvec env steps {batch_size} envs "
                         "at a time (its batch_size): give one of the two")
    return batch_size


def _row(obs: Any, rows: Any) -> Any:
    """Rows ``rows`` (an index, mask or index array) of a batch (dicts of batches too)."""
    return {k: _row(v, rows) for k, v in obs.items()} if isinstance(obs, dict) else obs[rows]


def _concat(parts: Sequence[Any]) -> Any:
    """Batches (dicts of batches too) one after the other."""
    return {key: _concat([p[key] for p in parts]) for key in parts[0]} \
        if isinstance(parts[0], dict) else np.concatenate(parts)


def _object_array(items: list[Any]) -> np.ndarray:
    """Per-env dicts as a 1-D object array (``np.array`` would try to stack them)."""
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _per_env(batched: dict, count: int) -> list[dict]:
    """One dict per env from dict-of-arrays infos: each key where its ``_key`` mask is set."""
    out: list[dict] = [{} for _ in range(count)]
    for key, value in batched.items():
        mask = batched.get(f"_{key}")
        if mask is None:  # a mask itself (or a key without one)
            continue
        nested = _per_env(value, count) if isinstance(value, dict) else None
        for i in np.flatnonzero(mask):
            item = nested[i] if nested is not None else value[i]
            out[i][key] = item.copy() if isinstance(item, np.ndarray) else item
    return out

