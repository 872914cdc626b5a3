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
ALE's own C++ Atari run only beside the Atari workloads).
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym

from fastvec.bench.drivers import (
    Builder,
    DiscardLoop,
    Driver,
    EnvFn,
    EnvPoolDriver,
    PlainLoop,
    PufferDriver,
    RecvSendDriver,
    SB3Driver,
    VectorDriver,
)
from fastvec.bench.registry import SYSTEMS, TIERS, System, system

__all__ = [
    "ENVPOOL_PONG",
    "SYSTEMS",
    "TIERS",
    "Builder",
    "DiscardLoop",
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

# ------------------------------------------------------------------------ systems


@system("plain", "the loop a trainer would write without a vector env: each env's step, a "
        "reset when it ends, observations stacked into one array, rewards, terminations "
        "and truncations into arrays, infos a list", "quick", games=True, procs="in the trainer")
def _load_plain() -> Builder:
    return PlainLoop


@system("plain-discard", "a floor, not a trainer's loop: each env's step called, its results "
        "thrown away, no batch built", games=True, procs="in the trainer")
def _load_plain_discard() -> Builder:
    return DiscardLoop


@system("gymnasium-sync", "gymnasium.vector.SyncVectorEnv(copy=True)", "quick",
        procs="in the trainer")
def _load_gymnasium_sync() -> Builder:
    return VectorDriver.of(functools.partial(gym.vector.SyncVectorEnv, copy=True))


@system("fastvec-sync", "fastvec.SyncVecEnv(copy=True)", "quick", games=True,
        procs="in the trainer")
def _load_fastvec_sync() -> Builder:
    import fastvec

    return VectorDriver.of(functools.partial(fastvec.SyncVecEnv, copy=True))


@system("fastvec-sync-nocopy", "fastvec.SyncVecEnv(copy=False): observations are views",
        games=True, procs="in the trainer")
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

    def build(env_fns: list[EnvFn], **vector_kwargs: Any) -> Driver:
        batch_size = _rows(env_fns) // 2 if batched else None
        vec = fastvec.SubprocVecEnv(
            env_fns,
            num_workers=num_workers,
            batch_size=batch_size,
            copy=True,
            local_block=local_block,
            **vector_kwargs,
        )
        return (RecvSendDriver if batched else VectorDriver)(vec, vec.num_envs)

    return build


@system("fastvec-subproc", "fastvec.SubprocVecEnv(num_workers=2, copy=True), step()", "quick",
        games=True, procs="2 workers")
def _load_fastvec_subproc() -> Builder:
    return _fastvec_subproc(2, batched=False)


@system(
    "fastvec-local",
    "fastvec.SubprocVecEnv(num_workers=1, local_block=True), step(): the trainer steps "
    "the first half of the envs, one worker the other",
    "quick",
    games=True,
    procs="trainer + 1 worker",
)
def _load_fastvec_local() -> Builder:
    return _fastvec_subproc(1, batched=False, local_block=True)


@system(
    "fastvec-async",
    "fastvec.SubprocVecEnv(num_workers=2, batch_size=num_envs // 2): recv() + send()",
    games=True,
    procs="2 workers",
)
def _load_fastvec_async() -> Builder:
    return _fastvec_subproc(2, batched=True)


@system(
    "fastvec-local-async",
    "fastvec.SubprocVecEnv(num_workers=1, local_block=True, batch_size=num_envs // 2): "
    "recv() + send()",
    games=True,
    procs="trainer + 1 worker",
)
def _load_fastvec_local_async() -> Builder:
    return _fastvec_subproc(1, batched=True, local_block=True)


@system(
    "gymnasium-async",
    "gymnasium.vector.AsyncVectorEnv(shared_memory=True, copy=True): a process per env",
    "quick",
    procs="a process per env",
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
        "(optional; games only)", envs=False, games=True, procs="in the trainer")
def _load_supersuit() -> Builder:
    return _supersuit(0)


@system("supersuit-mp", "SuperSuit concat_vec_envs_v1(num_cpus=2): games in 2 processes "
        "(optional; games only)", envs=False, games=True, procs="2 processes")
def _load_supersuit_mp() -> Builder:
    return _supersuit(2)


@system("sb3-subproc", "stable_baselines3 SubprocVecEnv (optional; a process per env)",
        procs="a process per env")
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


@system("pufferlib-mp", "pufferlib.vector.Multiprocessing, 2 workers, step() (optional)",
        procs="2 workers")
def _load_pufferlib_mp() -> Builder:
    return _pufferlib(batched=False)


@system(
    "pufferlib-async",
    "pufferlib.vector.Multiprocessing, 2 workers, batch_size=num_envs // 2 (optional)",
    procs="2 workers",
)
def _load_pufferlib_async() -> Builder:
    return _pufferlib(batched=True)


# ----------------------------------------------------- Ray (named only)


def _fastvec_ray(inner: str, batched: bool = False) -> Builder:
    """``RayVecEnv`` with 2 actors (``num_cpus=0``), each stepping half of the envs.

    ``inner``: in the actor's own process, or through worker processes on its node; it
    starts a loopback-only Ray in the child.
    """
    import fastvec

    def build(env_fns: list[EnvFn], **vector_kwargs: Any) -> Driver:
        batch_size = len(env_fns) // 2 if batched else None
        inner_options = {"num_workers": 1} if inner == "subproc" else None
        vec = fastvec.RayVecEnv(env_fns, num_actors=2, inner=inner, batch_size=batch_size,
                                copy=True, inner_options=inner_options, **vector_kwargs)
        return (RecvSendDriver if batched else VectorDriver)(vec, len(env_fns))

    return build


@system("fastvec-ray", "fastvec.RayVecEnv(num_actors=2, inner='sync'), step() (needs ray)",
        "named", procs="2 Ray actors")
def _load_fastvec_ray() -> Builder:
    import ray  # noqa: F401 - unavailable without it

    return _fastvec_ray("sync")


@system(
    "fastvec-ray-subproc",
    "fastvec.RayVecEnv(num_actors=2, inner='subproc'): each actor steps its block through "
    "1 worker process on its node, step() (needs ray)",
    "named",
    procs="2 Ray actors + 2 workers",
)
def _load_fastvec_ray_subproc() -> Builder:
    import ray  # noqa: F401 - unavailable without it

    return _fastvec_ray("subproc")


@system(
    "fastvec-ray-async",
    "fastvec.RayVecEnv(num_actors=2, batch_size=num_envs // 2): recv() + send() (needs ray)",
    "named",
    procs="2 Ray actors",
)
def _load_fastvec_ray_async() -> Builder:
    import ray  # noqa: F401 - unavailable without it

    return _fastvec_ray("sync", batched=True)


# ------------------------------------------------- many workers (named only)


def _register_worker_variants(workers: int) -> None:
    about = f"as fastvec-subproc, num_workers={workers}"
    system(f"fastvec-subproc-w{workers}", about, "named", procs=f"{workers} workers")(
        lambda: _fastvec_subproc(workers, batched=False)
    )
    about = f"as fastvec-async (batch_size=num_envs // 2), num_workers={workers}"
    system(f"fastvec-async-w{workers}", about, "named", procs=f"{workers} workers")(
        lambda: _fastvec_subproc(workers, batched=True)
    )


for _w in (4, 8):
    _register_worker_variants(_w)


# EnvPool and ALE's AtariVectorEnv, registered after the systems above.
from fastvec.bench.atari_peers import ENVPOOL_PONG  # noqa: E402 - registers them
