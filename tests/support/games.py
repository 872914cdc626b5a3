"""Small numpy-only PettingZoo games for the multi-agent tests.

Observations encode the game (its seed tag), the step and the seat, so a row that
shows another game's or another seat's data is caught.  Every game is a
module-level class, so ``functools.partial(RelayGame, ...)`` pickles and can go to
a worker.  Both pass PettingZoo's own API tests (``tests/vector/test_multiagent.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils import AgentSelector

__all__ = ["Duel", "RelayGame", "TurnGame", "game_fns", "relay_leave_step"]


def next_tag(game: Any, seed: int | None) -> int:
    """The tag of a game's next episode: its seed, else the next draw of its seeded RNG."""
    if seed is not None:
        game.tag_rng = np.random.default_rng(seed)
        return int(seed)
    if not hasattr(game, "tag_rng"):
        game.tag_rng = np.random.default_rng()
    return int(game.tag_rng.integers(1000))


def relay_leave_step(tag: int, seat: int, horizon: int) -> int | None:
    """The step at which seat ``seat`` of a relay game tagged ``tag`` leaves (None: stays)."""
    if seat == 1:
        return 2 + tag % 3  # leaves early, by termination
    if seat == 2 and tag % 2:
        return 3 + tag % 2  # leaves early, by truncation, in odd games
    return None


class RelayGame(ParallelEnv):
    """A parallel game of ``num_agents`` seats that runs for ``horizon`` steps.

    Observation of agent ``k`` at step ``t``: ``[tag, t, k, its last action]``
    (float32).  Reward: ``action * 0.5 + k + t / 10``.  Seat 1 leaves early by
    termination and, in odd-tagged games, seat 2 by truncation (unless
    ``early_exits`` is False); with ``late_seat``
    that seat joins only at step 2.  At ``horizon`` every agent left is truncated
    (the game is over).  Infos: ``{"t": t}`` for every agent on even steps, and
    ``{"left": t}`` for an agent on the step it leaves.
    """

    metadata = {"render_modes": [], "name": "relay_v0", "is_parallelizable": True}

    def __init__(self, num_agents: int = 3, horizon: int = 6, late_seat: int | None = None,
                 early_exits: bool = True, render_mode: str | None = None) -> None:
        self.early_exits = early_exits  # False: every agent stays until the horizon
        self.possible_agents = [f"runner_{k}" for k in range(num_agents)]
        self.horizon, self.late_seat, self.render_mode = horizon, late_seat, render_mode
        self.observation_spaces = {a: spaces.Box(-1e6, 1e6, (4,), np.float32)
                                   for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(3) for a in self.possible_agents}
        self.tag, self.t, self.agents = 0, 0, []

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def _obs(self, agent: str, action: int) -> np.ndarray:
        seat = self.possible_agents.index(agent)
        return np.array([self.tag, self.t, seat, action], np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.tag = next_tag(self, seed)
        self.t = 0
        self.agents = [a for k, a in enumerate(self.possible_agents) if k != self.late_seat]
        return ({a: self._obs(a, -1) for a in self.agents}, {a: {"t": 0} for a in self.agents})

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        obs, rewards, terms, truncs, infos = {}, {}, {}, {}, {}
        for agent in self.agents:
            seat = self.possible_agents.index(agent)
            action = int(actions[agent])
            obs[agent] = self._obs(agent, action)
            rewards[agent] = action * 0.5 + seat + self.t / 10
            leave = relay_leave_step(self.tag, seat, self.horizon) if self.early_exits else None
            terms[agent] = seat == 1 and leave == self.t
            truncs[agent] = self.t >= self.horizon or (seat == 2 and leave == self.t)
            infos[agent] = {"t": self.t} if self.t % 2 == 0 else {}
            if terms[agent] or truncs[agent]:  # a key only the step an agent leaves has
                infos[agent]["left"] = self.t
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        if self.late_seat is not None and self.t == 2 and self.t < self.horizon:
            late = self.possible_agents[self.late_seat]
            self.agents.append(late)
            self.agents.sort(key=self.possible_agents.index)
            obs[late] = self._obs(late, -1)
            rewards[late], terms[late], truncs[late], infos[late] = 0.0, False, False, {}
        return obs, rewards, terms, truncs, infos


class TurnGame(AECEnv):
    """A turn-based game: agents move in turn for ``horizon`` moves in all.

    Observation of an agent: ``{"observation": [tag, moves, seat, mover],
    "action_mask": mask}`` (the mask allows every action to the agent to move,
    none to the others).  A move ``a`` gives the mover ``a + 1`` and every other
    agent ``-0.5``.  With three agents the last seat leaves (terminated) after
    move ``2 + tag % 2``; after ``horizon`` moves every agent is terminated, and
    the one who moved last gets a bonus of 10.
    """

    metadata = {"render_modes": [], "name": "turns_v0", "is_parallelizable": False}

    def __init__(self, num_agents: int = 2, horizon: int = 5,
                 render_mode: str | None = None) -> None:
        super().__init__()
        self.possible_agents = [f"player_{k}" for k in range(num_agents)]
        self.horizon, self.render_mode = horizon, render_mode
        obs_space = spaces.Dict({
            "observation": spaces.Box(-1e6, 1e6, (4,), np.float32),
            "action_mask": spaces.Box(0, 1, (3,), np.int8)})
        self.observation_spaces = {a: obs_space for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(3) for a in self.possible_agents}

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def observe(self, agent: str) -> dict:
        seat = self.possible_agents.index(agent)
        mover = self.possible_agents.index(self.agent_selection)
        mask = np.ones(3, np.int8) if agent == self.agent_selection else np.zeros(3, np.int8)
        return {"observation": np.array([self.tag, self.moves, seat, mover], np.float32),
                "action_mask": mask}

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.tag = next_tag(self, seed)
        self.moves = 0
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self._selector = AgentSelector(self.agents)
        self.agent_selection = self._selector.reset()

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self.moves += 1
        for other in self.agents:
            self.rewards[other] = float(action) + 1 if other == agent else -0.5
        if len(self.possible_agents) > 2 and self.moves == 2 + self.tag % 2:
            self.terminations[self.possible_agents[-1]] = True
        if self.moves >= self.horizon:
            self.rewards[agent] += 10.0
            for other in self.agents:
                self.terminations[other] = True
        self.infos[agent] = {"moves": self.moves}
        self._accumulate_rewards()
        self.agent_selection = self._selector.next()
        while (self.agent_selection in self.agents and self.agents
               and self.terminations[self.agent_selection]
               and not all(self.terminations.values())):
            self.agent_selection = self._selector.next()
        self._deads_step_first()


CONTINUE, WIN, RESIGN, DRAW = range(4)


class Duel(AECEnv):
    """Two players move in turn; a move ends the game or not, as the action says.

    ``CONTINUE`` passes the turn; ``WIN``: the mover gets +1, the other -1; ``RESIGN``:
    the mover gets -1, the other +1; ``DRAW``: both 0.  Both agents are terminated
    when the game is decided, truncated after ``horizon`` moves.  Observation:
    ``{"observation": [moves, seat], "action_mask": every move for the mover, none
    for the other}``.
    """

    metadata = {"render_modes": [], "name": "duel_v0", "is_parallelizable": False}

    def __init__(self, horizon: int = 6) -> None:
        super().__init__()
        self.possible_agents = ["first", "second"]
        self.horizon = horizon
        self._obs_space = spaces.Dict({"observation": spaces.Box(0, 100, (2,), np.float32),
                                       "action_mask": spaces.Box(0, 1, (4,), np.int8)})
        self._action_space = spaces.Discrete(4)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._action_space

    def observe(self, agent: str) -> dict:
        mask = np.full(4, agent == self.agent_selection, dtype=np.int8)
        return {"observation": np.array([self.moves, self.possible_agents.index(agent)],
                                        np.float32), "action_mask": mask}

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.moves = 0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: {} for agent in self.agents}
        self.agent_selection = self.agents[0]

    def step(self, action: Any) -> None:
        mover = self.agent_selection
        if self.terminations[mover] or self.truncations[mover]:
            self._was_dead_step(action)
            return
        other = self.agents[1 - self.agents.index(mover)]
        self._cumulative_rewards[mover] = 0.0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.moves += 1
        if action in (WIN, RESIGN):
            self.rewards[mover], self.rewards[other] = (1.0, -1.0) if action == WIN else (-1.0, 1.0)
        if action != CONTINUE:
            self.terminations = dict.fromkeys(self.agents, True)
        elif self.moves >= self.horizon:
            self.truncations = dict.fromkeys(self.agents, True)
        self.agent_selection = other
        self._accumulate_rewards()


def game_fns(game_cls: Callable[..., Any], num_games: int, **kwargs: Any) -> list[Callable]:
    """``num_games`` factories of ``game_cls(**kwargs)``."""
    return [functools.partial(game_cls, **kwargs) for _ in range(num_games)]
