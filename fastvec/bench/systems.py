"""The systems ``python -m fastvec.bench`` can measure, each behind a small driver.

A system is a loader registered with ``@system(...)``: it imports what it needs
(raising if that is absent, which marks the system unavailable) and returns a
builder.  The builder takes the env makers and returns a *driver*
(:mod:`fastvec.bench.drivers`): ``reset(seed)``, ``step(actions)`` returning how
many env-steps it took, and ``close()``.  For a synchronous vector env one
driver step is one ``step`` of all envs; for an async one it is one ``recv()``
and one ``send()`` of the batch received.

Tiers: ``quick`` systems run by default, ``full`` ones with ``--full``, ``named``
ones (the many-worker variants, heavy on a small machine) only when named in
``--systems``.  A system given ``workloads=`` runs only on those (EnvPool's and
ALE's own C++ Pong run only beside the ``pong`` and ``pong-direct`` workloads).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from fastvec.bench.drivers import (
    Builder,
    Driver,
    EnvFn,
    EnvPoolDriver,
    PlainLoop,
    PufferDriver,
    RecvSendDriver,
    SB3Driver,
    VectorDriver,
)
from fastvec.bench.workloads import WORKLOADS

__all__ = [
    "SYSTEMS",
    "TIERS",
    "Builder",
    "Driver",
    "EnvFn",
    "EnvPoolDriver",
    "PlainLoop",
    "PufferDriver",
    "RecvSendDriver",
    "SB3Driver",
    "System",
    "VectorDriver",
    "system",
]

TIERS = ("quick", "full", "named")


@dataclass(frozen=True)
class System:
    """A vector env to measure: ``load()`` imports it and returns a builder.

    ``workloads``: the only workloads it can run (None: every one).
    """

    name: str
    about: str
    load: Callable[[], Builder]
    tier: str = "full"
    workloads: tuple[str, ...] | None = None
    envs: bool = True  # runs single-agent workloads
    games: bool = False  # runs multi-agent (game) workloads

    def runs_on(self, workload: str) -> bool:
        """Whether this system can run ``workload``."""
        spec = WORKLOADS.get(workload)
        if spec is not None and not (self.games if spec.game else self.envs):
            return False
        return self.workloads is None or workload in self.workloads


SYSTEMS: dict[str, System] = {}


def system(
    name: str, about: str, tier: str = "full", workloads: tuple[str, ...] | None = None,
    envs: bool = True, games: bool = False,
) -> Callable[[Callable[[], Builder]], Callable[[], Builder]]:
    """Register a loader under ``name``; the loader may raise if its package is absent.

    ``envs`` / ``games``: whether it runs single-agent and multi-agent workloads.
    """
    if tier not in TIERS:
        raise ValueError(f"expected tier in {TIERS}, got {tier!r}")

    def register(load: Callable[[], Builder]) -> Callable[[], Builder]:
        SYSTEMS[name] = System(name, about, load, tier, workloads, envs, games)
        return load

    return register


# ------------------------------------------------------------------------ systems


@system("plain", "a Python for-loop calling each env's step, resetting finished envs", "quick",
        games=True)
def _load_plain() -> Builder:
    return PlainLoop


@system("gymnasium-sync", "gymnasium.vector.SyncVectorEnv(copy=True)", "quick")
def _load_gymnasium_sync() -> Builder:
    return VectorDriver.of(functools.partial(gym.vector.SyncVectorEnv, copy=True))


@system("fastvec-sync", "fastvec.SyncVecEnv(copy=True)", "quick", games=True)
def _load_fastvec_sync() -> Builder:
    import fastvec

    return VectorDriver.of(functools.partial(fastvec.SyncVecEnv, copy=True))


@system("fastvec-sync-nocopy", "fastvec.SyncVecEnv(copy=False): observations are views", games=True)
def _load_fastvec_sync_nocopy() -> Builder:
    import fastvec

    return VectorDriver.of(functools.partial(fastvec.SyncVecEnv, copy=False))


def _rows(env_fns: list[EnvFn]) -> int:
    """Batch rows of ``env_fns``: one per env, one per agent of a game."""
    probe = env_fns[0]()
    seats = len(getattr(probe, "possible_agents", [None]))
    probe.close()
    return len(env_fns) * seats


def _fastvec_subproc(num_workers: int, batched: bool, local_block: bool = False) -> Builder:
    """``SubprocVecEnv`` with ``num_workers`` (plus the trainer's block with ``local_block``);
    ``batched``: async batches of ``num_envs // 2``, driven by ``recv()`` + ``send()``.
    """
    import fastvec

    def build(env_fns: list[EnvFn]) -> Driver:
        batch_size = _rows(env_fns) // 2 if batched else None
        vec = fastvec.SubprocVecEnv(
            env_fns,
            num_workers=num_workers,
            batch_size=batch_size,
            copy=True,
            local_block=local_block,
        )
        return (RecvSendDriver if batched else VectorDriver)(vec, vec.num_envs)

    return build


@system("fastvec-subproc", "fastvec.SubprocVecEnv(num_workers=2, copy=True), step()", "quick",
        games=True)
def _load_fastvec_subproc() -> Builder:
    return _fastvec_subproc(2, batched=False)


@system(
    "fastvec-local",
    "fastvec.SubprocVecEnv(num_workers=1, local_block=True), step(): the trainer steps "
    "the first half of the envs, one worker the other",
    "quick",
    games=True,
)
def _load_fastvec_local() -> Builder:
    return _fastvec_subproc(1, batched=False, local_block=True)


@system(
    "fastvec-async",
    "fastvec.SubprocVecEnv(num_workers=2, batch_size=num_envs // 2): recv() + send()",
    games=True,
)
def _load_fastvec_async() -> Builder:
    return _fastvec_subproc(2, batched=True)


@system(
    "fastvec-local-async",
    "fastvec.SubprocVecEnv(num_workers=1, local_block=True, batch_size=num_envs // 2): "
    "recv() + send()",
    games=True,
)
def _load_fastvec_local_async() -> Builder:
    return _fastvec_subproc(1, batched=True, local_block=True)


@system(
    "gymnasium-async",
    "gymnasium.vector.AsyncVectorEnv(shared_memory=True, copy=True): a process per env",
    "quick",
)
def _load_gymnasium_async() -> Builder:
    return VectorDriver.of(functools.partial(gym.vector.AsyncVectorEnv, shared_memory=True))


# ---------------------------------------------------------- optional peers


def _supersuit(num_cpus: int) -> Builder:
    """SuperSuit's vectorization of a PettingZoo game: ``num_cpus=0`` in this process,
    else that many processes (its multiprocessing vector env).
    """
    import supersuit as ss

    def build(env_fns: list[EnvFn]) -> Driver:
        vec = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(env_fns[0]()), len(env_fns),
                                    num_cpus=num_cpus, base_class="gymnasium")
        return VectorDriver(vec, vec.num_envs)

    return build


@system("supersuit", "SuperSuit concat_vec_envs_v1(num_cpus=0): games in this process "
        "(optional; games only)", envs=False, games=True)
def _load_supersuit() -> Builder:
    return _supersuit(0)


@system("supersuit-mp", "SuperSuit concat_vec_envs_v1(num_cpus=2): games in 2 processes "
        "(optional; games only)", envs=False, games=True)
def _load_supersuit_mp() -> Builder:
    return _supersuit(2)


@system("sb3-subproc", "stable_baselines3 SubprocVecEnv (optional; a process per env)")
def _load_sb3_subproc() -> Builder:
    from stable_baselines3.common.vec_env import SubprocVecEnv

    return SB3Driver.of(SubprocVecEnv)


def _puffer_env(make_env: EnvFn) -> object:
    """A Gymnasium env wrapped for PufferLib's vector backends."""
    import pufferlib.emulation

    return pufferlib.emulation.GymnasiumPufferEnv(env=make_env())


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


# EnvPool's own C++ Atari, set up as the ``pong`` workload's Gymnasium wrappers
# (fastvec.bench.envs.make_pong): no fire reset, no life-loss episodes, rewards not
# clipped, 30 no-op resets, frame skip 4 with max-pooling, 84x84 grayscale, 4 frames
# stacked, sticky actions 0.25 (ALE v5's default), 27,000-step (108,000-frame) limit.
ENVPOOL_PONG = {
    "episodic_life": False,
    "reward_clip": False,
    "use_fire_reset": False,
    "noop_max": 30,
    "frame_skip": 4,
    "stack_num": 4,
    "img_height": 84,
    "img_width": 84,
    "gray_scale": True,
    "repeat_action_probability": 0.25,
    "max_episode_steps": 27_000,
}


@system(
    "envpool",
    "EnvPool's C++ Pong-v5, 2 threads, step() of all envs; settings as the pong workload "
    "(optional: pip install envpool; runs only on pong)",
    workloads=("pong", "pong-direct"),
)
def _load_envpool() -> Builder:
    import envpool

    def build(env_fns: list[EnvFn]) -> Driver:
        n = len(env_fns)

        def make(seed: int) -> object:
            return envpool.make(
                "Pong-v5",
                env_type="gymnasium",
                num_envs=n,
                batch_size=n,
                num_threads=2,
                seed=seed,
                **ENVPOOL_PONG,
            )

        return EnvPoolDriver(make, n)

    return build


@system(
    "ale-vector",
    "ALE's C++ AtariVectorEnv (what gym.make_vec('ALE/Pong-v5') gives), 2 threads; "
    "settings as the pong workload (reward clipping and fire reset off); runs only on pong",
    workloads=("pong", "pong-direct"),
)
def _load_ale_vector() -> Builder:
    from ale_py.vector_env import AtariVectorEnv

    def build(env_fns: list[EnvFn]) -> Driver:
        n = len(env_fns)

        def make(seed: int) -> object:
            return _SeededAtariVectorEnv(
                AtariVectorEnv("pong", n, num_threads=2, repeat_action_probability=0.25,
                               frameskip=4, img_height=84, img_width=84, grayscale=True,
                               stack_num=4, noop_max=30, reward_clipping=False,
                               use_fire_reset=False), seed)

        return EnvPoolDriver(make, n)

    return build


class _SeededAtariVectorEnv:
    """An ``AtariVectorEnv`` whose ``reset()`` uses the seed it was made with."""

    def __init__(self, vec: Any, seed: int) -> None:
        self.vec, self.seed = vec, seed

    def reset(self) -> Any:
        return self.vec.reset(seed=self.seed)

    def step(self, actions: Any) -> Any:
        return self.vec.step(actions)

    def close(self) -> None:
        self.vec.close()


# ----------------------------------------------------- Ray (named only)


def _fastvec_ray(inner: str, batched: bool = False) -> Builder:
    """``RayVecEnv`` with 2 actors (``num_cpus=0``), each hosting half of the envs in a
    vector env of its own (``inner``); it starts a loopback-only Ray in the child.
    """
    import fastvec

    def build(env_fns: list[EnvFn]) -> Driver:
        batch_size = len(env_fns) // 2 if batched else None
        inner_options = {"num_workers": 1} if inner == "subproc" else None
        vec = fastvec.RayVecEnv(env_fns, num_actors=2, inner=inner, batch_size=batch_size,
                                copy=True, inner_options=inner_options)
        return (RecvSendDriver if batched else VectorDriver)(vec, len(env_fns))

    return build


@system("fastvec-ray", "fastvec.RayVecEnv(num_actors=2, inner='sync'), step() (needs ray)",
        "named")
def _load_fastvec_ray() -> Builder:
    import ray  # noqa: F401 - unavailable without it

    return _fastvec_ray("sync")


@system(
    "fastvec-ray-subproc",
    "fastvec.RayVecEnv(num_actors=2, inner='subproc'): each actor steps its block through "
    "a SubprocVecEnv of 1 worker, step() (needs ray)",
    "named",
)
def _load_fastvec_ray_subproc() -> Builder:
    import ray  # noqa: F401 - unavailable without it

    return _fastvec_ray("subproc")


@system(
    "fastvec-ray-async",
    "fastvec.RayVecEnv(num_actors=2, batch_size=num_envs // 2): recv() + send() (needs ray)",
    "named",
)
def _load_fastvec_ray_async() -> Builder:
    import ray  # noqa: F401 - unavailable without it

    return _fastvec_ray("sync", batched=True)


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
