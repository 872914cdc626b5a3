"""Where one ``fastvec.atari`` Pong step goes: each piece timed on its own.

    python benchmarks/atari_profile.py

Medians of 5 x 2,000 steps in one process: the emulator's four frames, the two
screen reads, the max-pool, the resize (compiled, and OpenCV's for reference), the
env's whole step, and one env's step through ``SyncVecEnv`` and ``SubprocVecEnv``
(the record's stack, the infos, the copy out, and for the latter the hand-off).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

try:
    import ale_py  # noqa: F401  (the emulator and its ROMs)
    import cv2
except ImportError as err:
    raise SystemExit(f"atari_profile.py needs the atari extra ({err.name} is missing): "
                     'pip install -e ".[atari]"') from err

import fastvec.atari
from fastvec.atari import PreprocessedAtari


def per_step(fn: Callable[[int], object], steps: int = 2000, rounds: int = 5) -> float:
    """Median microseconds of one ``fn(i)`` call over ``rounds`` of ``steps``."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for i in range(steps):
            fn(i)
        times.append((time.perf_counter() - start) / steps * 1e6)
    return float(np.median(times))


def main() -> None:
    """Print the table."""
    env = PreprocessedAtari("ALE/Pong-v5")
    env.reset(seed=0)
    ale, action_set, screens = env.ale, env.action_set, env.screens
    actions = np.random.default_rng(0).integers(0, 6, 4096)
    frame = np.empty((84, 84), np.uint8)
    assert env.area is not None, "the compiled resize does not match this OpenCV"

    def emulator(i: int) -> None:
        for _ in range(4):
            ale.act(action_set[actions[i % 4096]], 1.0)
        if ale.game_over():
            env.reset()

    def env_step(i: int) -> None:
        if any(env.step(actions[i % 4096])[2:4]):
            env.reset()

    rows = {
        "emulator: 4 ale.act + flags": per_step(emulator),
        "2 getScreenGrayscale": per_step(
            lambda i: (ale.getScreenGrayscale(screens[1]), ale.getScreenGrayscale(screens[0]))),
        "max-pool (np.maximum out=)": per_step(
            lambda i: np.maximum(screens[0], screens[1], out=screens[0])),
        "resize (compiled INTER_AREA)": per_step(lambda i: env.area.resize(screens[0], frame)),
        "resize (OpenCV INTER_AREA)": per_step(lambda i: cv2.resize(
            screens[0], (84, 84), dst=frame, interpolation=cv2.INTER_AREA)),
        "PreprocessedAtari.step, whole": per_step(env_step),
    }
    env.close()
    batches = [np.array([a]) for a in actions]
    for backend, options in (("sync", None), ("subproc", {"num_workers": 1})):
        vec = fastvec.atari.make("ALE/Pong-v5", 1, backend=backend, vector_kwargs=options)
        vec.reset(seed=0)
        rows[f"{backend}: one env's vec.step, whole"] = per_step(
            lambda i, vec=vec: vec.step(batches[i % 4096]))
        vec.close()
    for name, us in rows.items():
        print(f"{name:40s} {us:8.1f} us")


if __name__ == "__main__":
    main()
