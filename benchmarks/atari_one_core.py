"""One Atari env on one core: steps/s of fastvec.atari's designs and of the C++ runners.

    python benchmarks/atari_one_core.py            # 3 interleaved rounds, taskset -c 0
    python benchmarks/atari_one_core.py --rounds 5 --seconds 4

Each measurement is a fresh process pinned to CPU 0 (``taskset -c 0``): 1 s of
warm-up, then ``--seconds`` of steps with random actions on ``ALE/Pong-v5`` with the
settings of the bench's ``pong`` workload.  Systems: ``fastvec`` (``fastvec.atari``,
stack in the record, compiled resize), ``fastvec-cv2`` (the same with OpenCV's
resize), ``fastvec-envstack`` (Gymnasium's ``FrameStackObservation`` around the
env instead of the record's stack), ``envpool`` and ``ale-vector`` with one thread,
``gym-pipeline`` (Gymnasium's wrappers in ``SyncVectorEnv``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

SYSTEMS = ("fastvec", "fastvec-cv2", "fastvec-envstack", "envpool", "ale-vector",
           "gym-pipeline")


def make(system: str) -> tuple[Any, Any]:
    """The vector env of one Pong env for ``system``, and its reset call."""
    if system.startswith("fastvec"):
        import fastvec
        import fastvec.atari
        import fastvec.atari.env as atari_env

        if system == "fastvec-cv2":
            atari_env.compiled_area_resize = lambda *args: None  # OpenCV's resize
        if system == "fastvec-envstack":
            from gymnasium.wrappers import FrameStackObservation

            vec = fastvec.SyncVecEnv([lambda: FrameStackObservation(
                atari_env.PreprocessedAtari("ALE/Pong-v5"), 4)])
        else:
            vec = fastvec.atari.make("ALE/Pong-v5", 1, backend="sync")
        return vec, lambda: vec.reset(seed=0)
    if system == "gym-pipeline":
        import gymnasium as gym

        from fastvec.bench.envs import make_pong

        vec = gym.vector.SyncVectorEnv([make_pong])
        return vec, lambda: vec.reset(seed=0)
    if system == "envpool":
        import envpool

        from fastvec.bench.atari_peers import ENVPOOL_PONG

        vec = envpool.make("Pong-v5", env_type="gymnasium", num_envs=1, batch_size=1,
                           num_threads=1, seed=0, **ENVPOOL_PONG)
        return vec, vec.reset
    from ale_py.vector_env import AtariVectorEnv

    vec = AtariVectorEnv("pong", 1, num_threads=1, repeat_action_probability=0.25,
                         frameskip=4, img_height=84, img_width=84, grayscale=True,
                         stack_num=4, noop_max=30, reward_clipping=False, use_fire_reset=False)
    return vec, lambda: vec.reset(seed=0)


def rate(system: str, seconds: float) -> float:
    """Steps per second of ``system`` in this process."""
    vec, reset = make(system)
    actions = [np.random.default_rng(0).integers(0, 6, 1) for _ in range(256)]
    reset()
    for window in (1.0, seconds):  # warm-up, then the measurement
        start, steps = time.perf_counter(), 0
        while time.perf_counter() - start < window:
            vec.step(actions[steps % 256])
            steps += 1
    result = steps / (time.perf_counter() - start)
    vec.close()
    return result


def main() -> None:
    """Every system in a fresh pinned process, ``--rounds`` interleaved rounds; medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(rate(args.child, args.seconds))
        return
    rates: dict[str, list[float]] = {s: [] for s in SYSTEMS}
    for _ in range(args.rounds):
        for system in SYSTEMS:
            out = subprocess.run(["taskset", "-c", "0", sys.executable, __file__, "--child",
                                  system, "--seconds", str(args.seconds)],
                                 capture_output=True, text=True)
            lines = out.stdout.strip().splitlines()
            rates[system].append(float(lines[-1]) if out.returncode == 0 and lines else
                                 float("nan"))
    for system, values in rates.items():
        shown = " / ".join(f"{v:,.0f}" for v in values)
        print(f"{system:18s} {shown:30s} median {statistics.median(values):8,.0f}")


if __name__ == "__main__":
    main()
