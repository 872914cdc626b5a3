"""The C++ Atari runners the bench measures beside the ``pong`` workloads.

EnvPool and ALE's own ``AtariVectorEnv``, set up as the ``pong`` workload's
Gymnasium wrappers; each runs only beside ``pong`` and ``pong-direct``.
"""

from __future__ import annotations

from typing import Any

from fastvec.bench.drivers import Builder, Driver, EnvFn, EnvPoolDriver
from fastvec.bench.registry import system

__all__ = ["ENVPOOL_PONG"]

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
