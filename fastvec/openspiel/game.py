"""An OpenSpiel game as a PettingZoo turn-based (AEC) game.

Each agent ``player_<i>`` observes a dict: ``"observation"``, OpenSpiel's
``information_state_tensor(i)`` (float32), and ``"action_mask"``, one int8 per
distinct action, 1 for the legal actions of the player to move (all 0 for the
others).  Chance nodes are played inside the game, drawn from the game's own
generator (seeded by ``reset(seed=...)``); a move's reward is OpenSpiel's
``rewards()`` after it (for poker: 0 until the end, then the returns).  When the
game is over every agent terminates at once.

Shimmy's OpenSpiel wrapper observes ``observation_tensor`` where a game has one
(the public view plus the player's own cards, not the information state that a
strategy is a function of), puts the mask in ``infos`` and computes every
agent's observation on every move; this one computes only what is asked for.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

__all__ = ["OpenSpielGame", "load_game"]


def load_game(game: Any) -> Any:
    """A ``pyspiel.Game`` from itself or its name (e.g. ``"kuhn_poker(players=3)"``),
    checked to be a sequential game with information-state tensors.
    """
    import pyspiel

    loaded = pyspiel.load_game(game) if isinstance(game, str) else game
    kind = loaded.get_type()
    if kind.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
        raise ValueError(f"expected a sequential (turn-based) OpenSpiel game, got "
                         f"{kind.short_name!r} with {kind.dynamics}")
    if not kind.provides_information_state_tensor:
        raise ValueError(f"expected an OpenSpiel game with information_state_tensor, got "
                         f"{kind.short_name!r}, which has none")
    return loaded


class OpenSpielGame(AECEnv):  # type: ignore[misc]
    """An OpenSpiel game (its name or a ``pyspiel.Game``) as a PettingZoo ``AECEnv``.

    >>> game = OpenSpielGame("kuhn_poker")
    >>> game.reset(seed=0)
    >>> game.agent_selection, game.observe("player_0")["action_mask"].tolist()
    ('player_0', [1, 1])
    """

    metadata = {"name": "openspiel", "render_modes": [], "is_parallelizable": False}

    def __init__(self, game: Any = "kuhn_poker") -> None:
        super().__init__()
        self.game = load_game(game)
        self.metadata = {**self.metadata, "name": f"openspiel_{self.game.get_type().short_name}"}
        self.possible_agents = [f"player_{i}" for i in range(self.game.num_players())]
        size = self.game.information_state_tensor_size()
        num_actions = self.game.num_distinct_actions()
        space = spaces.Dict({
            "observation": spaces.Box(-np.inf, np.inf, (size,), np.float32),
            "action_mask": spaces.Box(0, 1, (num_actions,), np.int8),
        })
        self.observation_spaces = dict.fromkeys(self.possible_agents, space)
        self.action_spaces = dict.fromkeys(self.possible_agents, spaces.Discrete(num_actions))
        self._num_actions = num_actions
        self._rng = np.random.default_rng()
        self.state: Any = None

    def observation_space(self, agent: str) -> spaces.Space:
        """Every agent's: the information-state tensor and the action mask."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        """Every agent's: ``Discrete(num_distinct_actions)``."""
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        """A new game from OpenSpiel's initial state, its chance nodes played."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict] = {a: {} for a in self.agents}
        self.state = self.game.new_initial_state()
        self._play_chance()
        self.agent_selection = self.agents[self.state.current_player()]

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        """The agent's information-state tensor; its legal actions if it is to move."""
        player = self.possible_agents.index(agent)
        mask = np.zeros(self._num_actions, dtype=np.int8)
        if not self.state.is_terminal() and self.state.current_player() == player:
            mask[self.state.legal_actions()] = 1
        info = np.asarray(self.state.information_state_tensor(player), dtype=np.float32)
        return {"observation": info, "action_mask": mask}

    def step(self, action: Any) -> None:
        """Play the move of the agent to move (a dead step once it has terminated)."""
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        action = int(action)
        if action not in self.state.legal_actions():
            raise ValueError(f"expected a legal action of {agent} "
                             f"({self.state.legal_actions()}), got {action}")
        self._cumulative_rewards[agent] = 0.0
        self.state.apply_action(action)
        self._play_chance()
        for name, reward in zip(self.possible_agents, self.state.rewards(), strict=True):
            self.rewards[name] = float(reward)
        if self.state.is_terminal():
            self.terminations = dict.fromkeys(self.agents, True)
            self.agent_selection = self.agents[0]
        else:
            self.agent_selection = self.agents[self.state.current_player()]
        self._accumulate_rewards()

    def render(self) -> None:
        """No rendering: ``str(game.state)`` shows the state."""
        return None

    def close(self) -> None:
        """Nothing to release."""

    def _play_chance(self) -> None:
        """Play chance nodes until a player is to move or the game is over."""
        while self.state.is_chance_node():
            outcomes = self.state.chance_outcomes()
            draw, total, chosen = self._rng.random(), 0.0, outcomes[-1][0]
            for outcome, probability in outcomes:
                total += probability
                if draw < total:
                    chosen = outcome
                    break
            self.state.apply_action(chosen)
