"""Multi-agent games as rows: recognising a PettingZoo game, its spaces, turn-based adapter.

A PettingZoo game (``ParallelEnv``, or ``AECEnv`` for turn-based games) fills
``len(possible_agents)`` consecutive rows of a batch, one per *seat* (agent of
``possible_agents``, in order).  The compiled per-game stepper
(``fastvec._kernels.games.GameStepper``) talks to every game through one
parallel-style interface:

- ``reset(seed, options) -> (obs, infos)`` and ``step(actions) -> (obs, rewards,
  terminations, truncations, infos)``, dicts keyed by agent name; an agent in the
  returned ``obs`` is alive on that step;
- ``agents``: the agents still in the game (empty: the game is over);
- ``acting()``: the agents whose actions the next step uses;
- ``active()``: the agents that act next (``None``: every live agent).

A ``ParallelEnv`` has it already (``acting()`` and ``active()`` are added by
:class:`ParallelGame`); :class:`TurnBasedGame` gives it to an ``AECEnv``, with
the rewards of docs/multiagent.md: a row's reward is what its agent received
since it last acted, reported when it is to act again or when it leaves.
PettingZoo itself is never imported here: games are recognised by their API.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from fastvec.errors import SpacesMismatchError

__all__ = ["SINGLE_AGENT", "ParallelGame", "TurnBasedGame", "adapt", "is_game", "unit_spaces",
           "zero_observation"]

SINGLE_AGENT = ("agent_0",)


def is_game(env: Any) -> bool:
    """Whether ``env`` is a PettingZoo game (parallel or turn-based), not a Gymnasium env."""
    return hasattr(env, "possible_agents") and callable(getattr(env, "observation_space", None))


def is_turn_based(game: Any) -> bool:
    """Whether ``game`` follows PettingZoo's AEC (agent-environment cycle) API."""
    kind = type(game)  # class attributes: PettingZoo's wrappers refuse some before reset
    return callable(getattr(kind, "agent_iter", None)) and callable(getattr(kind, "last", None))


def unit_spaces(env: Any) -> tuple[spaces.Space, spaces.Space, tuple[str, ...]]:
    """``(observation_space, action_space, agents)`` of an env or a game.

    An env has one seat, ``("agent_0",)``.  A game's agents must share one
    observation space and one action space.

    Raises:
        SpacesMismatchError: the game's agents have different spaces (the message names
            them), or it has no agents.
    """
    if not is_game(env):
        return env.observation_space, env.action_space, SINGLE_AGENT
    agents = tuple(env.possible_agents)
    if not agents:
        raise SpacesMismatchError(f"expected a game with at least one agent in "
                                  f"possible_agents, got {type(env).__name__} with none")
    obs_space, act_space = env.observation_space(agents[0]), env.action_space(agents[0])
    for agent in agents[1:]:
        for kind, first, other in (("observation", obs_space, env.observation_space(agent)),
                                   ("action", act_space, env.action_space(agent))):
            if other != first:
                raise SpacesMismatchError(
                    f"agents {agents[0]!r} and {agent!r} of {type(env).__name__} have different "
                    f"{kind} spaces ({first} and {other}); fastvec needs one observation and "
                    "one action space shared by every agent of a game")
    return obs_space, act_space, agents


def zero_observation(space: spaces.Space) -> Any:
    """The observation a row whose agent is not in the game shows: zeros of ``space``.

    Matches the zero record of the flat layout (every leaf 0 / False).
    """
    if isinstance(space, spaces.Dict):
        return {key: zero_observation(sub) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(zero_observation(sub) for sub in space.spaces)
    if isinstance(space, spaces.Discrete):
        return space.dtype.type(0)
    if space.shape is not None and space.dtype is not None:
        return np.zeros(space.shape, dtype=space.dtype)
    return None  # a space without a shape (Text, Graph, ...): no observation


class ParallelGame:
    """A ``ParallelEnv`` with ``acting()`` and ``active()``: every live agent acts."""

    def __init__(self, game: Any) -> None:
        self.game = game

    @property
    def agents(self) -> list:
        return self.game.agents

    def acting(self) -> list:
        return self.game.agents

    def active(self) -> None:
        return None

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        return self.game.reset(seed=seed, options=options)

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        return self.game.step(actions)


class TurnBasedGame:
    """An ``AECEnv`` seen as a parallel game in which one agent acts per step.

    A step applies the action of the agent to move, observes every live agent,
    reports agents that ended (their last observation, their reward owed and
    their flag) and steps them out of the game as PettingZoo's API requires.
    """

    def __init__(self, game: Any) -> None:
        self.game = game
        self.state = state_holder(game)  # where rewards, flags, infos, agents are read
        self.owed: dict[str, float] = {}  # rewards received since the agent last acted
        self.gone: set[str] = set()  # reported as ended, not yet stepped out

    @property
    def agents(self) -> list:
        return [a for a in self.state.agents if a not in self.gone]

    def acting(self) -> list:
        agents = self.agents
        return [self.state.agent_selection] if agents else []

    def active(self) -> list:
        return self.acting()

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        game, state = self.game, self.state
        game.reset(seed=seed, options=options)
        self.owed = {agent: 0.0 for agent in state.agents}
        self.gone = set()
        return ({agent: game.observe(agent) for agent in state.agents},
                {agent: state.infos[agent] for agent in state.agents})

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        game, state = self.game, self.state
        mover = state.agent_selection
        self.owed[mover] = 0.0
        game.step(actions[mover])
        self._collect_rewards()
        obs, rewards, terminations, truncations, infos = {}, {}, {}, {}, {}
        for agent in self.agents:
            obs[agent] = game.observe(agent)
            infos[agent] = state.infos[agent]
            terminated, truncated = state.terminations[agent], state.truncations[agent]
            terminations[agent], truncations[agent] = terminated, truncated
            rewards[agent] = 0.0
            if terminated or truncated:
                rewards[agent] = self.owed.pop(agent, 0.0)
                self.gone.add(agent)
        # Ended agents leave through PettingZoo's "dead steps" (action None).
        while state.agents and state.agent_selection in self.gone:
            leaving = state.agent_selection
            game.step(None)
            self.gone.discard(leaving)
            self._collect_rewards()
        if self.agents:  # the next agent to move gets what it is owed now
            nxt = state.agent_selection
            rewards[nxt] = rewards.get(nxt, 0.0) + self.owed.get(nxt, 0.0)
            self.owed[nxt] = 0.0
        return obs, rewards, terminations, truncations, infos

    def _collect_rewards(self) -> None:
        state = self.state
        for agent in state.agents:
            if agent not in self.gone:
                self.owed[agent] = self.owed.get(agent, 0.0) + float(state.rewards[agent])


_STATE = ("agents", "agent_selection", "rewards", "terminations", "truncations", "infos")


def state_holder(game: Any) -> Any:
    """Where a turn-based game's state can be read: the innermost game, when no wrapper
    defines any of its state attributes (PettingZoo's wrappers pass them through
    ``__getattr__``, which costs a lookup per layer), else the outermost wrapper.
    """
    layer = game
    while hasattr(layer, "env") and hasattr(layer, "unwrapped"):
        if any(name in vars(layer) or any(name in vars(cls) for cls in type(layer).__mro__
                                          if cls.__module__.split(".")[0] != "pettingzoo"
                                          or "wrappers" in cls.__module__)
               for name in _STATE):
            return game
        layer = layer.env
    return layer


def adapt(game: Any) -> ParallelGame | TurnBasedGame:
    """The parallel-style view of a game the per-game stepper uses."""
    return TurnBasedGame(game) if is_turn_based(game) else ParallelGame(game)
