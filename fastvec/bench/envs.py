"""Synthetic workloads for ``python -m fastvec.bench``.

Each env does almost no work per step, so a benchmark over it measures the
vector env's own overhead for one shape of data: large image observations
(``AtariLikeEnv``), nested observations (``DictObsEnv``) and per-step infos
(``InfoEnv``).  ``BusyEnv`` is the opposite: each step burns a seeded,
lognormally distributed amount of CPU time (``HeavyEnv`` with little spread,
``LongTailEnv`` with a long tail, ``BlockEnv`` ~2.5 ms a step for remote
blocks), so a benchmark over it measures how well a vector env spreads real
work over cores.  All are deterministic given ``reset(seed=...)``: the seed
fixes the first observation, the episode length and the step costs; the
actions fix the rest.

One workload is a real game: ``pong`` (:func:`make_pong`), Gymnasium's
``ALE/Pong-v5`` with the usual Atari preprocessing; it needs the ``atari``
extra (``pip install -e ".[atari]"``: ale-py, which ships the ROMs, and
opencv for the resizing) and runs only when named in ``--workloads``.

The state lives in arrays allocated at reset and changed in place by ``step``;
every call returns a copy, as Gymnasium asks (its ``check_env`` rejects an env
whose returned data share memory between calls).  The copy is a single memcpy,
which a real emulator pays too when it hands out a new frame.
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = [
    "ATARI_EXTRA",
    "AtariLikeEnv",
    "BlockEnv",
    "BusyEnv",
    "DictObsEnv",
    "HeavyEnv",
    "InfoEnv",
    "LongTailEnv",
    "StepCost",
    "burn",
    "make_breakout",
    "make_breakout_direct",
    "make_pong",
    "make_pong_direct",
    "spin_rate",
]

# Episodes last a seeded number of steps in this range (inclusive), so resets
# happen every few hundred batched steps in every workload.
EPISODE_LENGTH = (50, 200)


class _SeededEpisodeEnv(gym.Env[Any, np.int64]):
    """Episode bookkeeping shared by the synthetic envs: a step count and a seeded length."""

    metadata: dict[str, Any] = {"render_modes": []}

    def _start_episode(self, seed: int | None) -> None:
        super().reset(seed=seed)
        self._t = 0
        self._length = int(self.np_random.integers(EPISODE_LENGTH[0], EPISODE_LENGTH[1] + 1))

    def _advance(self) -> bool:
        """Count one step; return True when the episode has reached its length."""
        self._t += 1
        return self._t >= self._length


class AtariLikeEnv(_SeededEpisodeEnv):
    """An 84x84x4 uint8 frame stack and 6 actions, like a preprocessed Atari game."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 255, (84, 84, 4), np.uint8)
        self.action_space = spaces.Discrete(6)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode with a random frame stack."""
        self._start_episode(seed)
        self._frame = self.np_random.integers(0, 256, (84, 84, 4), dtype=np.uint8)
        self._pixels = self._frame.reshape(-1)
        return self._frame.copy(), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Change one pixel; reward 1 when the action matches the step count mod 6."""
        done = self._advance()
        i = (self._t * 7919) % self._pixels.size
        self._pixels[i] = (int(self._pixels[i]) + int(action) + 1) & 0xFF
        reward = 1.0 if int(action) == self._t % 6 else 0.0
        return self._frame.copy(), reward, done, False, {}


class DictObsEnv(_SeededEpisodeEnv):
    """A Dict observation mixing an image, a float vector, a bit mask and a mode."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "image": spaces.Box(0, 255, (64, 64, 3), np.uint8),
                "vec": spaces.Box(-1.0, 1.0, (32,), np.float32),
                "mask": spaces.MultiBinary(8),
                "mode": spaces.Discrete(10),
            }
        )
        self.action_space = spaces.Discrete(4)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode with random contents in every field."""
        self._start_episode(seed)
        rng = self.np_random
        self._image = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
        self._pixels = self._image.reshape(-1)
        self._vec = rng.uniform(-1.0, 1.0, 32).astype(np.float32)
        self._mask = rng.integers(0, 2, 8, dtype=np.int8)
        self._mode = int(rng.integers(10))
        return self._obs(), {}

    def step(self, action: np.int64) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Change one pixel, one vector entry and one mask bit; the action shifts the mode."""
        done = self._advance()
        t = self._t
        i = (t * 7919) % self._pixels.size
        self._pixels[i] = (int(self._pixels[i]) + 1) & 0xFF
        self._vec[t % 32] = math.sin(t)
        self._mask[t % 8] ^= 1
        self._mode = (self._mode + int(action)) % 10
        return self._obs(), self._mode / 10.0, done, False, {}

    def _obs(self) -> dict[str, Any]:
        return {
            "image": self._image.copy(),
            "vec": self._vec.copy(),
            "mask": self._mask.copy(),
            "mode": np.int64(self._mode),
        }


class InfoEnv(_SeededEpisodeEnv):
    """A small Box observation, with four info keys on every reset and step.

    The infos are ``count`` (int), ``score`` (float), ``flag`` (bool) and
    ``vector`` (float32 array of shape (3,)).
    """

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode from a random state."""
        self._start_episode(seed)
        self._state = self.np_random.uniform(-1.0, 1.0, 4).astype(np.float32)
        self._score = 0.0
        return self._state.copy(), self._info()

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Move one state entry; reward 1 for action 1."""
        done = self._advance()
        self._state[self._t % 4] = math.cos(self._t + int(action))
        reward = float(action)
        self._score += reward
        return self._state.copy(), reward, done, False, self._info()

    def _info(self) -> dict[str, Any]:
        return {
            "count": self._t,
            "score": self._score,
            "flag": self._t % 2 == 0,
            "vector": self._state[:3].copy(),
        }


# ----------------------------------------------------------------- CPU-bound envs

# The benchmark parent measures the spin rate once and passes it to every child
# (and so to their workers) in this variable, so all systems burn the same work.
SPIN_RATE_VAR = "FASTVEC_BENCH_SPIN_RATE"
_CALIBRATION_SPINS = 10_000
_CALIBRATION_ROUNDS = 9


def _spin(n: int) -> int:
    """Integer arithmetic in a Python loop: CPU work that holds its core (and the GIL)."""
    x = 0
    for i in range(n):
        x = (x ^ i) + 1
    return x


@functools.cache
def spin_rate() -> float:
    """Loop iterations of ``_spin`` per microsecond in this process (measured once).

    Taken from ``$FASTVEC_BENCH_SPIN_RATE`` when set, else the fastest of a few
    timed runs (the fastest is the one least disturbed by other processes).
    """
    preset = os.environ.get(SPIN_RATE_VAR)
    if preset:
        return float(preset)
    best = math.inf
    for _ in range(_CALIBRATION_ROUNDS):
        start = time.perf_counter()
        _spin(_CALIBRATION_SPINS)
        best = min(best, time.perf_counter() - start)
    return _CALIBRATION_SPINS / (best * 1e6)


def burn(microseconds: float) -> int:
    """Keep the CPU busy for about ``microseconds`` (as calibrated by ``spin_rate``)."""
    return _spin(int(microseconds * spin_rate()))


@dataclass(frozen=True)
class StepCost:
    """A lognormal step cost in microseconds, given by its mean and the sigma of its log."""

    mean_us: float
    sigma: float

    @property
    def mu(self) -> float:
        """Mean of the log of the cost: the mean of a lognormal is exp(mu + sigma^2 / 2)."""
        return math.log(self.mean_us) - self.sigma**2 / 2

    def draw(self, rng: np.random.Generator) -> float:
        """One step's cost, in microseconds."""
        return float(rng.lognormal(self.mu, self.sigma))


class BusyEnv(_SeededEpisodeEnv):
    """A small Box observation and 2 actions; each step burns CPU for a seeded time.

    The cost of each step is drawn from ``cost`` with the env's seeded generator;
    the observation never depends on it (nor on the calibration).  Subclasses
    set ``cost``.
    """

    cost = StepCost(300.0, 0.1)

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.last_cost_us = 0.0
        spin_rate()  # calibrate now rather than in the first step

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode from a random state (no CPU burnt)."""
        self._start_episode(seed)
        self._state = self.np_random.uniform(-1.0, 1.0, 4).astype(np.float32)
        return self._state.copy(), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Burn this step's cost, then move one state entry; reward 1 for action 1."""
        self.last_cost_us = self.cost.draw(self.np_random)
        burn(self.last_cost_us)
        done = self._advance()
        self._state[self._t % 4] = math.sin(self._t + int(action))
        return self._state.copy(), float(action), done, False, {}


class HeavyEnv(BusyEnv):
    """``BusyEnv`` whose steps cost about 300 us each (lognormal, sigma 0.1)."""

    cost = StepCost(300.0, 0.1)


class BlockEnv(BusyEnv):
    """``BusyEnv`` whose steps cost about 2.5 ms each: 10 ms per block of 4 envs."""

    cost = StepCost(2500.0, 0.1)


class LongTailEnv(BusyEnv):
    """``BusyEnv`` whose step cost has a long tail: lognormal, mean 300 us, sigma 1.0."""

    cost = StepCost(300.0, 1.0)


# ------------------------------------------------------------------ a real game

ATARI_EXTRA = "pip install -e '.[atari]' (ale-py, opencv-python-headless)"


def make_pong() -> gym.Env[Any, Any]:
    """``ALE/Pong-v5`` as DQN-style trainers see it: obs uint8 (4, 84, 84), Discrete(6).

    ``frameskip=1`` in the emulator, then Gymnasium's ``AtariPreprocessing`` (up to
    30 no-ops on reset, frame skip 4 with max-pooling of the last two frames, 84x84
    grayscale, no end of episode on a lost life) and ``FrameStackObservation(4)``.
    ALE v5's other defaults stay: sticky actions with probability 0.25, the minimal
    action set, at most 108,000 frames per episode.  A module-level function, so
    worker processes import it by name.
    """
    return _atari_pipeline("ALE/Pong-v5")


def make_breakout() -> gym.Env[Any, Any]:
    """``ALE/Breakout-v5`` through the same Gymnasium pipeline as :func:`make_pong`."""
    return _atari_pipeline("ALE/Breakout-v5")


def make_pong_direct() -> gym.Env[Any, Any]:
    """:func:`make_pong` as ``fastvec.atari`` runs it: the same observations, rewards
    and flags, with a frame loop that calls the emulator directly."""
    from fastvec.atari import PreprocessedAtari

    return PreprocessedAtari("ALE/Pong-v5")


def make_breakout_direct() -> gym.Env[Any, Any]:
    """:func:`make_breakout` as ``fastvec.atari`` runs it."""
    from fastvec.atari import PreprocessedAtari

    return PreprocessedAtari("ALE/Breakout-v5")


def _atari_pipeline(env_id: str) -> gym.Env[Any, Any]:
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gym.register_envs(ale_py)
    env = gym.make(env_id, frameskip=1)
    env = AtariPreprocessing(
        env,
        noop_max=30,
        frame_skip=4,
        screen_size=84,
        terminal_on_life_loss=False,
        grayscale_obs=True,
    )
    return FrameStackObservation(env, 4)
