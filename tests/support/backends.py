"""The backends the contract suite runs on, and one factory that builds each.

``BACKENDS``: ``"sync"`` (``SyncVecEnv``), ``"subproc"`` (``SubprocVecEnv``) and
``"subproc-async"`` (``SubprocVecEnv`` with ``batch_size`` half of ``num_envs``,
driven through :class:`FullBatches`, so that the full-batch contract tests run
against ``async_reset`` / ``recv`` / ``send``) and ``"subproc-local"``
(``SubprocVecEnv(local_block=True)``: the first block steps in the trainer's
process, up to 2 workers the rest; it needs at least 2 envs) and ``"ray"`` (``RayVecEnv``
with one actor, on the one Ray the whole test run shares, bound to 127.0.0.1; skipped
when Ray is not installed; several actors and their failures are
``tests/pool/ray/test_ray_env.py``'s).  ``tests/support/suite.py`` turns them
into the ``backend`` fixture and ``make_envs``; with ``--impl gymnasium`` the
subprocess backends are Gymnasium's ``AsyncVectorEnv`` (async batches are skipped:
Gymnasium has none).

Workers start with ``fork`` here: a forked worker is up in ~15 ms, one from the
forkserver (the default) or spawn in ~0.3-0.5 s on a 2-core machine, and what
the contract tests check does not depend on how the workers started.  The start
methods are a subprocess-only axis, tested in ``test_subproc.py``,
``test_subproc_parity.py`` and ``test_faults.py``.

Worker counts: ``"subproc"`` uses up to 4 workers, so that 6 envs make uneven
blocks (2, 2, 1, 1); ``"subproc-async"`` needs an even number of envs and uses 4
workers when that divides them (a batch is then two blocks, not always
neighbours, so ``recv`` both slices and gathers rows) and 2 otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

__all__ = [
    "ASYNC",
    "BACKENDS",
    "LOCAL",
    "RAY",
    "SUBPROCESS_BACKENDS",
    "WORKER_BACKENDS",
    "FullBatches",
    "is_gymnasium",
    "make",
    "marks",
    "merge_infos",
    "param",
    "skip_async",
]

SYNC, SUBPROC, ASYNC, LOCAL = "sync", "subproc", "subproc-async", "subproc-local"
RAY = "ray"
BACKENDS = (SYNC, SUBPROC, ASYNC, LOCAL, RAY)
# Envs in other processes (errors come back as WorkerError); all but RAY start workers.
SUBPROCESS_BACKENDS = (SUBPROC, ASYNC, LOCAL, RAY)
WORKER_BACKENDS = (SUBPROC, ASYNC, LOCAL)
RAY_ACTORS = 1  # an actor's start costs ~0.5 s of CPU; blocks of several: test_ray_env.py
CONTEXT = "fork"
SUBPROC_WORKERS = 4


def marks(backend: str) -> list[pytest.MarkDecorator]:
    """The markers a test on ``backend`` carries (``subprocess``: the leak check)."""
    if backend == RAY:  # Ray's own processes live for the whole run: no leak check
        return [pytest.mark.ray]
    return [pytest.mark.subprocess] if backend in WORKER_BACKENDS else []


def param(backend: str, *values: Any, id: str | None = None) -> Any:  # noqa: A002
    """``pytest.param(backend, *values)`` with the backend's markers, for tests that
    parametrize ``backend`` directly (pairing it with other arguments)."""
    name = "-".join([backend, *([id] if id else [])])
    return pytest.param(backend, *values, marks=marks(backend), id=name)


def is_gymnasium(impl: Any) -> bool:
    """Whether the tests run against Gymnasium's own vector envs (``--impl gymnasium``)."""
    return getattr(impl, "__name__", None) == "gymnasium"


def skip_async(backend: str, reason: str) -> None:
    """Skip the calling test on the async-batches backend, saying why."""
    if backend == ASYNC:
        pytest.skip(f"async batches: {reason}")


def make(impl: Any, backend: str, env_fns: Sequence[Callable[[], gym.Env]],
         **kwargs: Any) -> Any:
    """A vector env of ``impl`` for ``backend``; ``kwargs`` go to its constructor."""
    if backend == SYNC:
        return impl.SyncVecEnv(env_fns, **kwargs)
    if backend == RAY:
        if is_gymnasium(impl):
            pytest.skip("RayVecEnv is fastvec-only; --impl gymnasium")
        if env_fns:
            kwargs.setdefault("num_actors", min(RAY_ACTORS, len(env_fns)))
        return impl.RayVecEnv(env_fns, **kwargs)
    if backend not in SUBPROCESS_BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    kwargs.setdefault("context", CONTEXT)
    n = len(env_fns)
    if backend == LOCAL and n >= 2:
        kwargs.setdefault("num_workers", min(2, n - 1))
        return impl.SubprocVecEnv(env_fns, local_block=True, **kwargs)
    if backend == LOCAL and n == 1:
        pytest.skip("a local block needs at least 2 envs (one block here, one in a worker)")
    if backend in (SUBPROC, LOCAL) or n == 0:
        if n:
            kwargs.setdefault("num_workers", min(SUBPROC_WORKERS, n))
        return impl.SubprocVecEnv(env_fns, **kwargs)
    if n % 2:
        raise ValueError(f"the {ASYNC} backend needs an even number of envs, got {n}")
    kwargs.setdefault("num_workers", 4 if n % 4 == 0 else 2)
    kwargs.setdefault("batch_size", n // 2)
    return FullBatches(impl.SubprocVecEnv(env_fns, **kwargs))


# ---------------------------------------------------------------------------
# full batches out of async ones


class FullBatches(gym.vector.VectorEnv):
    """The full-batch ``VectorEnv`` API over a ``SubprocVecEnv`` in async-batch mode.

    ``reset`` is ``async_reset`` then ``recv`` until every env it reset is back;
    ``step`` sends each batch ``recv`` returned its share of the actions (as a
    trainer would: one ``send`` per batch, with the ``env_ids`` it came with), then
    ``recv``s until every env is back.  The batches are put together by their
    ``env_ids`` into what one full batch would hold: observations, rewards and
    flags by env, infos key by key with their ``_key`` masks.  A partial reset
    returns the last observations of the envs it did not reset, as Gymnasium does.
    ``batches`` holds what ``recv`` returned for the last ``reset`` or ``step``.

    One thing cannot be put back: a batch's info arrays take the type of the first
    env in it that reports the key (Gymnasium's rule, applied per batch), so when
    envs report one key with different types, a full batch may differ from
    Gymnasium's (an int array where Gymnasium's env 0 made it float).

    Everything else (``call``, ``get_attr``, ``render``, ``close``, ``recv``,
    ``send``, ``num_workers`` ...) is the wrapped env's.
    """

    def __init__(self, envs: Any) -> None:
        self.inner = envs
        self.num_envs = envs.num_envs
        self.single_observation_space = envs.single_observation_space
        self.single_action_space = envs.single_action_space
        self.observation_space = envs.observation_space
        self.action_space = envs.action_space
        self.batches: list[tuple] = []
        self._held: list[np.ndarray] = []  # env_ids of batches received, not yet sent
        self._obs: Any = None  # the last full observation batch

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (unpickling, a failed __init__)
            raise AttributeError(name)
        return getattr(self.inner, name)

    metadata = property(lambda self: self.inner.metadata)  # type: ignore[assignment]
    render_mode = property(lambda self: self.inner.render_mode)  # type: ignore[assignment]
    spec = property(lambda self: self.inner.spec)  # type: ignore[assignment]
    closed = property(lambda self: self.inner.closed)  # type: ignore[assignment]
    np_random_seed = property(lambda self: self.inner.np_random_seed)  # type: ignore[assignment]
    np_random = property(lambda self: self.inner.np_random)  # type: ignore[assignment]

    def reset(self, *, seed: Any = None, options: dict | None = None) -> tuple[Any, dict]:
        mask = None if options is None else options.get("reset_mask")
        self.inner.async_reset(seed=seed, options=options)
        if mask is None:
            self._held, expected = [], self.num_envs
        else:  # the blocks it resets come back in new batches; the others stay held
            again = self._blocks_of(mask)
            self._held = [ids[~again[ids]] for ids in self._held if not again[ids].all()]
            expected = int(again.sum())
        parts = self._receive(expected)
        if mask is not None and self._obs is not None:
            back = np.concatenate([ids for ids, *_ in parts])
            others = np.setdiff1d(np.arange(self.num_envs), back)
            if len(others):
                parts.append((others, take(self.single_observation_space, self._obs, others)))
        self._obs = merge_obs(self.single_observation_space, [p[:2] for p in parts],
                              self.num_envs)
        infos = merge_infos([(p[0], p[5]) for p in parts if len(p) > 2], self.num_envs)
        return self._obs, infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        held, self._held = self._held, []
        for k, ids in enumerate(held):
            try:
                self.inner.send(take(self.single_action_space, actions, ids), ids)
            except BaseException:
                self._held = held[k:]  # not sent: still held
                raise
        parts = self._receive(self.num_envs)
        self._obs = merge_obs(self.single_observation_space, [p[:2] for p in parts],
                              self.num_envs)
        rewards, terminations, truncations = (
            merge_obs(spaces.Box(-np.inf, np.inf), [(p[0], p[k]) for p in parts],
                      self.num_envs) for k in (2, 3, 4))
        infos = merge_infos([(p[0], p[5]) for p in parts], self.num_envs)
        return self._obs, rewards, terminations, truncations, infos

    def _receive(self, expected: int) -> list[tuple]:
        """``recv`` until ``expected`` envs came back; (env_ids, obs, rewards,
        terminations, truncations, infos) per batch, in env order."""
        self.batches, got = [], 0
        while got < expected:
            obs, rewards, terminations, truncations, infos, ids = self.inner.recv()
            self.batches.append((obs, rewards, terminations, truncations, infos, ids))
            self._held.append(ids.copy())
            got += len(ids)
        return sorted(((b[5], *b[:5]) for b in self.batches), key=lambda p: int(p[0][0]))

    def _blocks_of(self, mask: np.ndarray) -> np.ndarray:
        """Per env: whether its worker's block holds an env of ``mask``."""
        size = self.num_envs // self.inner.num_workers
        blocks = np.asarray(mask, dtype=bool).reshape(-1, size).any(axis=1)
        return np.repeat(blocks, size)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple:
        return self.inner.call(name, *args, **kwargs)

    def get_attr(self, name: str) -> tuple:
        return self.inner.get_attr(name)

    def set_attr(self, name: str, values: Any) -> None:
        self.inner.set_attr(name, values)

    def render(self) -> tuple:
        return self.inner.render()

    def close(self, **kwargs: Any) -> None:
        self.inner.close(**kwargs)

    def __enter__(self) -> FullBatches:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FullBatches({self.inner!r})"


_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def take(space: spaces.Space, batch: Any, ids: np.ndarray) -> Any:
    """The part of a batch of ``space`` that belongs to envs ``ids``, in that order.

    A list stays a list (so that ``send`` sees what the caller gave ``step``);
    anything that is not a batch (a scalar, a wrong container) is passed on as it
    is, for ``send`` to refuse.
    """
    if isinstance(space, spaces.Dict) and isinstance(batch, dict):
        return {key: take(sub, batch[key], ids) if key in batch else None
                for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple) and isinstance(batch, tuple):
        return tuple(take(sub, part, ids) for sub, part in zip(space.spaces, batch,
                                                                strict=False))
    if isinstance(batch, list):
        return [batch[i] for i in ids]
    if isinstance(space, _ARRAY_SPACES):
        return batch[ids] if isinstance(batch, np.ndarray) and batch.ndim else batch
    return tuple(batch[i] for i in ids)  # Text, Graph, Sequence...: a tuple per env


def merge_obs(space: spaces.Space, parts: list[tuple[np.ndarray, Any]], num_envs: int) -> Any:
    """One batch of ``num_envs`` from ``(env_ids, batch)`` parts that cover every env."""
    if isinstance(space, spaces.Dict):
        return {key: merge_obs(sub, [(ids, part[key]) for ids, part in parts], num_envs)
                for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(merge_obs(sub, [(ids, part[k]) for ids, part in parts], num_envs)
                     for k, sub in enumerate(space.spaces))
    if isinstance(space, _ARRAY_SPACES):
        first = np.asarray(parts[0][1])
        out = np.empty((num_envs, *first.shape[1:]), dtype=first.dtype)
        for ids, part in parts:
            out[ids] = part
        return out
    items: list[Any] = [None] * num_envs
    for ids, part in parts:
        for k, i in enumerate(ids):
            items[i] = part[k]
    return tuple(items)


def merge_infos(parts: list[tuple[np.ndarray, dict]], num_envs: int) -> dict:
    """Gymnasium's dict-of-arrays infos for ``num_envs`` from per-batch infos.

    Parts are taken in env order: an array is made by the first part with its key
    (its dtype, or an object array of None), as Gymnasium makes it from the first
    env with the key; later parts write their masked entries into it.  A key with
    no ``_key`` mask (``infos["episode"]["r"]``) follows its parent's mask.
    """
    out: dict = {}
    for ids, infos in parts:
        ids = np.asarray(ids)
        _merge_into(out, infos, ids, np.ones(len(ids), dtype=bool), num_envs)
    return out


def _merge_into(out: dict, infos: dict, ids: np.ndarray, parent_mask: np.ndarray,
                num_envs: int) -> None:
    for key, value in infos.items():
        if isinstance(key, str) and key.startswith("_") and key[1:] in infos:
            continue  # a mask, merged with its key
        has_mask = f"_{key}" in infos
        mask = np.asarray(infos[f"_{key}"], dtype=bool) if has_mask else parent_mask
        if isinstance(value, dict):
            _merge_into(out.setdefault(key, {}), value, ids, mask, num_envs)
        else:
            if key not in out:
                out[key] = np.full(num_envs, None, dtype=object) if value.dtype == object \
                    else np.zeros((num_envs, *value.shape[1:]), dtype=value.dtype)
            target = out[key]
            for k in np.flatnonzero(mask):
                target[ids[k]] = value[k]
        if has_mask:
            out.setdefault(f"_{key}", np.zeros(num_envs, dtype=np.bool_))[ids[mask]] = True
