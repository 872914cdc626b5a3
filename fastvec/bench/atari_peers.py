"""The C++ Atari runners the bench measures beside the Atari workloads.

EnvPool and ALE's own ``AtariVectorEnv``, set up as the ``pong`` workload's
Gymnasium wrappers, on the workload's game (Pong or Breakout); each runs only
beside the Atari workloads.
"""

from __future__ import annotations

from typing import Any

from fastvec.bench.drivers import Builder, Driver, EnvFn, EnvPoolDriver
from fastvec.bench.registry import system

__all__ = ["ATARI_WORKLOADS", "ENVPOOL_PONG", "game_of"]

ATARI_WORKLOADS = ("pong", "pong-direct", "breakout", "breakout-direct")


def game_of(env_fns: list[EnvFn]) -> str:
    """The ALE game the workload's envs play, e.g. ``"Pong"`` (from one env's spec)."""
    env: Any = env_fns[0]()
    try:
        inner = getattr(env.unwrapped, "inner", env)  # fastvec.atari's env wraps gym's
        env_id = inner.unwrapped.spec.id  # "ALE/Pong-v5"
    finally:
        env.close()
    return env_id.split("/")[-1].split("-")[0]

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
    "EnvPool's C++ Atari (the workload's game, v5), 2 threads, step() of all envs; settings "
    "as the pong workload (optional: pip install envpool; runs only on the Atari workloads)",
    workloads=ATARI_WORKLOADS,
    procs="own C++ pipeline, 2 threads",
)
def _load_envpool() -> Builder:
    import envpool

    def build(env_fns: list[EnvFn]) -> Driver:
        n, game = len(env_fns), game_of(env_fns)

        def make(seed: int) -> object:
            return envpool.make(
                f"{game}-v5",
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
    "settings as the pong workload (reward clipping and fire reset off); runs only on the "
    "Atari workloads",
    workloads=ATARI_WORKLOADS,
    procs="own C++ pipeline, 2 threads",
)
def _load_ale_vector() -> Builder:
    from ale_py.vector_env import AtariVectorEnv

    def build(env_fns: list[EnvFn]) -> Driver:
        n, game = len(env_fns), game_of(env_fns).lower()

        def make(seed: int) -> object:
            return _SeededAtariVectorEnv(
                AtariVectorEnv(game, n, num_threads=2, repeat_action_probability=0.25,
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
