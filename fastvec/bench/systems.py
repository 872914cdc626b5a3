"""The systems ``python -m fastvec.bench`` can measure, each behind a small driver.

A system is a loader registered with ``@system(...)``: it imports what it needs
(raising if that is absent, which marks the system unavailable) and returns a
builder.  The builder takes the env makers and returns a *driver*: ``reset(seed)``,
``step(actions)`` returning how many env-steps it took, and ``close()``.  For a
synchronous vector env one driver step is one ``step`` of all envs; for an async
one it is one ``recv()`` and one ``send()`` of the batch received.

Tiers: ``quick`` systems run by default, ``full`` ones with ``--full``, ``named``
ones (the many-worker variants, heavy on a small machine) only when named in
``--systems``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

__all__ = [
    "SYSTEMS",
    "TIERS",
    "Builder",
    "Driver",
    "EnvFn",
    "PlainLoop",
    "RecvSendDriver",
    "System",
    "VectorDriver",
    "system",
]

EnvFn = Callable[[], gym.Env[Any, Any]]
TIERS = ("quick", "full", "named")


class Driver(Protocol):
    """What the measuring loop calls; ``step`` returns the env-steps it took."""

    def reset(self, seed: int) -> None: ...  # noqa: D102

    def step(self, actions: np.ndarray) -> int: ...  # noqa: D102

    def close(self) -> None: ...  # noqa: D102


Builder = Callable[[list[EnvFn]], Driver]


@dataclass(frozen=True)
class System:
    """A vector env to measure: ``load()`` imports it and returns a builder."""

    name: str
    about: str
    load: Callable[[], Builder]
    tier: str = "full"


SYSTEMS: dict[str, System] = {}


def system(
    name: str, about: str, tier: str = "full"
) -> Callable[[Callable[[], Builder]], Callable[[], Builder]]:
    """Register a loader under ``name``; the loader may raise if its package is absent."""
    if tier not in TIERS:
        raise ValueError(f"expected tier in {TIERS}, got {tier!r}")

    def register(load: Callable[[], Builder]) -> Callable[[], Builder]:
        SYSTEMS[name] = System(name, about, load, tier)
        return load

    return register


# ------------------------------------------------------------------------ drivers


class PlainLoop:
    """The baseline: a Python for-loop over the envs, resetting each by hand."""

    def __init__(self, env_fns: list[EnvFn]) -> None:
        self.envs = [fn() for fn in env_fns]

    def reset(self, seed: int) -> None:
        """Reset env ``i`` with ``seed + i``, as the vector envs do."""
        for i, env in enumerate(self.envs):
            env.reset(seed=seed + i)

    def step(self, actions: np.ndarray) -> int:
        """Step every env once with its action; reset the ones that finished."""
        for i, env in enumerate(self.envs):
            obs, r, term, trunc, info = env.step(actions[i])
            if term or trunc:
                env.reset()
        return len(self.envs)

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()


class VectorDriver:
    """Gymnasium's vector API: ``reset(seed=...)``, ``step`` of every env, ``close``."""

    def __init__(self, vec: Any, num_envs: int) -> None:
        self.vec, self.num_envs = vec, num_envs

    @classmethod
    def of(cls, factory: Callable[[list[EnvFn]], Any]) -> Builder:
        """A builder that wraps what ``factory(env_fns)`` returns."""
        return lambda env_fns: cls(factory(env_fns), len(env_fns))

    def reset(self, seed: int) -> None:
        """Reset env ``i`` with ``seed + i``."""
        self.vec.reset(seed=seed)

    def step(self, actions: np.ndarray) -> int:
        """One batched step of every env."""
        self.vec.step(actions)
        return self.num_envs

    def close(self) -> None:
        """Close the vector env."""
        self.vec.close()


class RecvSendDriver(VectorDriver):
    """Async batches: ``async_reset(seed=...)``, then each step is ``recv()`` + ``send()``.

    The batch's actions are the first ``len(env_ids)`` rows of the action batch.
    """

    def reset(self, seed: int) -> None:
        """Start resetting every env; the first ``recv`` returns the reset results."""
        self.vec.async_reset(seed=seed)

    def step(self, actions: np.ndarray) -> int:
        """Receive the next ready batch and send it its actions."""
        obs, rewards, terms, truncs, infos, env_ids = self.vec.recv()
        n = len(env_ids)
        self.vec.send(actions[:n], env_ids)
        return n


# ------------------------------------------------------------------------ systems


@system("plain", "a Python for-loop calling each env's step, resetting finished envs", "quick")
def _load_plain() -> Builder:
    return PlainLoop


@system("gymnasium-sync", "gymnasium.vector.SyncVectorEnv(copy=True)", "quick")
def _load_gymnasium_sync() -> Builder:
    return VectorDriver.of(functools.partial(gym.vector.SyncVectorEnv, copy=True))


@system("fastvec-sync", "fastvec.SyncVecEnv(copy=True)", "quick")
def _load_fastvec_sync() -> Builder:
    import fastvec

    return VectorDriver.of(functools.partial(fastvec.SyncVecEnv, copy=True))


@system("fastvec-sync-nocopy", "fastvec.SyncVecEnv(copy=False): observations are views")
def _load_fastvec_sync_nocopy() -> Builder:
    import fastvec

    return VectorDriver.of(functools.partial(fastvec.SyncVecEnv, copy=False))


def _fastvec_subproc(num_workers: int, batched: bool) -> Builder:
    import fastvec

    def build(env_fns: list[EnvFn]) -> Driver:
        batch_size = len(env_fns) // 2 if batched else None
        vec = fastvec.SubprocVecEnv(
            env_fns, num_workers=num_workers, batch_size=batch_size, copy=True
        )
        return (RecvSendDriver if batched else VectorDriver)(vec, len(env_fns))

    return build


@system("fastvec-subproc", "fastvec.SubprocVecEnv(num_workers=2, copy=True), step()", "quick")
def _load_fastvec_subproc() -> Builder:
    return _fastvec_subproc(2, batched=False)


@system(
    "fastvec-async",
    "fastvec.SubprocVecEnv(num_workers=2, batch_size=num_envs // 2): recv() + send()",
)
def _load_fastvec_async() -> Builder:
    return _fastvec_subproc(2, batched=True)


@system(
    "gymnasium-async",
    "gymnasium.vector.AsyncVectorEnv(shared_memory=True, copy=True): a process per env",
    "quick",
)
def _load_gymnasium_async() -> Builder:
    return VectorDriver.of(functools.partial(gym.vector.AsyncVectorEnv, shared_memory=True))


# ---------------------------------------------------------- optional peers


class SB3Driver(VectorDriver):
    """Stable-Baselines3's VecEnv: ``seed(s)`` then ``reset()``; it auto-resets itself."""

    def reset(self, seed: int) -> None:
        """Seed env ``i`` with ``seed + i`` for the next reset, then reset."""
        self.vec.seed(seed)
        self.vec.reset()


@system("sb3-subproc", "stable_baselines3 SubprocVecEnv (optional; a process per env)")
def _load_sb3_subproc() -> Builder:
    from stable_baselines3.common.vec_env import SubprocVecEnv

    return SB3Driver.of(SubprocVecEnv)


def _puffer_env(make_env: EnvFn) -> Any:
    """A Gymnasium env wrapped for PufferLib's vector backends."""
    import pufferlib.emulation

    return pufferlib.emulation.GymnasiumPufferEnv(env=make_env())


class PufferDriver(VectorDriver):
    """PufferLib's vector API: ``async_reset(seed)``; sync ``step``, or ``recv`` + ``send``."""

    def __init__(self, vec: Any, num_envs: int, batched: bool) -> None:
        super().__init__(vec, num_envs)
        self.batched = batched

    def reset(self, seed: int) -> None:
        """Reset env ``i`` with ``seed + i`` (sync: wait for it)."""
        if self.batched:
            self.vec.async_reset(seed)
        else:
            self.vec.reset(seed)

    def step(self, actions: np.ndarray) -> int:
        """One step of every env, or one ``recv`` + ``send`` of a batch."""
        if not self.batched:
            self.vec.step(actions)
            return self.num_envs
        rewards = self.vec.recv()[1]
        n = int(np.size(rewards))
        self.vec.send(actions[:n])
        return n


def _pufferlib(batched: bool) -> Builder:
    import pufferlib.vector

    def build(env_fns: list[EnvFn]) -> Driver:
        creators = [functools.partial(_puffer_env, fn) for fn in env_fns]
        n = len(env_fns)
        vec = pufferlib.vector.make(
            creators,
            backend=pufferlib.vector.Multiprocessing,
            num_envs=n,
            num_workers=2,
            batch_size=n // 2 if batched else n,
        )
        return PufferDriver(vec, n, batched)

    return build


@system("pufferlib-mp", "pufferlib.vector.Multiprocessing, 2 workers, step() (optional)")
def _load_pufferlib_mp() -> Builder:
    return _pufferlib(batched=False)


@system(
    "pufferlib-async",
    "pufferlib.vector.Multiprocessing, 2 workers, batch_size=num_envs // 2 (optional)",
)
def _load_pufferlib_async() -> Builder:
    return _pufferlib(batched=True)


# ------------------------------------------------- many workers (named only)


def _register_worker_variants(workers: int) -> None:
    about = f"as fastvec-subproc, num_workers={workers}"
    system(f"fastvec-subproc-w{workers}", about, "named")(
        lambda: _fastvec_subproc(workers, batched=False)
    )
    about = f"as fastvec-async (batch_size=num_envs // 2), num_workers={workers}"
    system(f"fastvec-async-w{workers}", about, "named")(
        lambda: _fastvec_subproc(workers, batched=True)
    )


for _w in (4, 8):
    _register_worker_variants(_w)
