"""Multi-agent workloads for ``python -m fastvec.bench``: two-player PettingZoo games.

``DuelGame`` is a cheap parallel game of two agents (a float32 (8,) observation,
Discrete(3) actions, a seeded episode length), so a benchmark over it measures
the per-agent-step overhead of vectorizing games; ``HeavyDuelGame`` burns
~300 us of CPU per game step (calibrated as the ``heavy`` workload), so a
benchmark over it measures how well a system spreads games over cores.  Both
need PettingZoo (``pip install -e ".[multiagent]"``).  Throughput is counted
in agent-steps (rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from fastvec.bench.envs import EPISODE_LENGTH, StepCost, burn, spin_rate

try:
    from pettingzoo import ParallelEnv
except ImportError:  # the workloads are reported unavailable
    ParallelEnv = object  # type: ignore[assignment,misc]

__all__ = ["MULTIAGENT_EXTRA", "DuelGame", "HeavyDuelGame", "game_action_space", "is_game"]

MULTIAGENT_EXTRA = "pip install -e '.[multiagent]' (pettingzoo)"


def is_game(env: Any) -> bool:
    """Whether ``env`` is a PettingZoo game (its rows are its agents)."""
    return hasattr(env, "possible_agents")


def game_action_space(game: Any) -> spaces.Space:
    """The action space every agent of ``game`` shares."""
    return game.action_space(game.possible_agents[0])


class DuelGame(ParallelEnv):  # type: ignore[misc]
    """Two agents move at once for a seeded number of steps; nothing else costs."""

    metadata = {"render_modes": [], "name": "duel_v0", "is_parallelizable": True}
    cost: StepCost | None = None  # CPU burnt per game step (None: nothing)

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.possible_agents = ["left", "right"]
        self.agents: list[str] = []
        self._obs_space = spaces.Box(-1.0, 1.0, (8,), np.float32)
        self._act_space = spaces.Discrete(3)
        self._rng = np.random.default_rng()
        if self.cost is not None:
            spin_rate()  # calibrate now rather than in the first step

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        self._length = int(self._rng.integers(EPISODE_LENGTH[0], EPISODE_LENGTH[1] + 1))
        self._state = self._rng.uniform(-1.0, 1.0, 8).astype(np.float32)
        self.agents = list(self.possible_agents)
        return {a: self._state.copy() for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        if self.cost is not None:
            burn(self.cost.draw(self._rng))
        self._t += 1
        left, right = int(actions["left"]), int(actions["right"])
        self._state[self._t % 8] = (left - right) / 2.0
        done = self._t >= self._length
        win = float((left - right) % 3 == 1) - float((right - left) % 3 == 1)
        obs = {a: self._state.copy() for a in self.agents}
        rewards = {"left": win, "right": -win}
        flags = {a: done for a in self.agents}
        truncs = {a: False for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, flags, truncs, {a: {} for a in obs}


class HeavyDuelGame(DuelGame):
    """``DuelGame`` whose steps cost about 300 us of CPU each (lognormal, sigma 0.1)."""

    cost = StepCost(300.0, 0.1)
