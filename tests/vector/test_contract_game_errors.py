"""One mistake, one exception, on every backend: games handed over wrong, or misbehaving.

A mistake in what the user handed over that shows when the envs are built
(spaces, agents) is a ``ValueError`` subclass raised in the trainer, with the
worker's traceback as ``__cause__`` where it was found in a worker or actor; a
game that misbehaves while stepping is a ``WorkerError`` naming the game, on
``SyncVecEnv`` too (the check is fastvec's, not the game's own exception).  A game
function that returns no game is an ``EnvFnError`` naming it; a bad action names the
row, its game and agent.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

pytest.importorskip("pettingzoo")

from fastvec.errors import EnvFnError, SpacesMismatchError, WorkerError  # noqa: E402
from tests.support import backends  # noqa: E402
from tests.support.games import RelayGame, game_fns  # noqa: E402

pytestmark = pytest.mark.fastvec_only


class MixedSpacesRelay(RelayGame):
    """Its second agent observes a different space."""

    def observation_space(self, agent: str) -> spaces.Space:
        if agent == self.possible_agents[1]:
            return spaces.Box(0, 1, (2,), np.float32)
        return super().observation_space(agent)


class NoAgentsRelay(RelayGame):
    """A game whose ``possible_agents`` is empty."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.possible_agents = []


class StrayAgentRelay(RelayGame):
    """Reports an agent that is not one of its possible agents."""

    def step(self, actions: dict) -> tuple:
        obs, rewards, terms, truncs, infos = super().step(actions)
        obs["stray"] = obs[self.possible_agents[0]]
        return obs, rewards, terms, truncs, infos


def four_games(last: Any) -> list:
    """Three relay games of 2 seats and ``last`` as game 3 (in a worker's block)."""
    return game_fns(RelayGame, 3, num_agents=2) + [functools.partial(last, num_agents=2)]


def remote(backend: str) -> bool:
    return backend in backends.SUBPROCESS_BACKENDS


def assert_found_where_it_ran(error: BaseException, backend: str) -> None:
    """Found in a worker or actor: its traceback is the cause; else raised right here."""
    if remote(backend):
        assert "Traceback" in str(error.__cause__), repr(error.__cause__)


def test_agents_with_different_spaces_are_a_value_error(make_envs: Any, backend: str) -> None:
    with pytest.raises(SpacesMismatchError) as caught:
        make_envs(four_games(MixedSpacesRelay))
    assert isinstance(caught.value, ValueError)
    assert "game 3: agents 'runner_0' and 'runner_1'" in str(caught.value)
    assert "observation spaces" in str(caught.value)
    assert_found_where_it_ran(caught.value, backend)


def test_a_game_without_agents_is_a_value_error(make_envs: Any, backend: str) -> None:
    with pytest.raises(SpacesMismatchError, match="game 3: expected a game with at least one "
                                                  "agent") as caught:
        make_envs(four_games(NoAgentsRelay))
    assert_found_where_it_ran(caught.value, backend)


def test_games_and_envs_mixed_are_a_value_error(make_envs: Any, backend: str) -> None:
    import gymnasium as gym
    fns = game_fns(RelayGame, 2, num_agents=1) + [lambda: gym.make("CartPole-v1")] * 2
    with pytest.raises(SpacesMismatchError, match="game"):
        make_envs(fns)


def test_observation_mode_other_than_same_is_a_value_error(make_envs: Any,
                                                           backend: str) -> None:
    if backend == backends.RAY:
        pytest.skip("RayVecEnv has no observation_mode")
    with pytest.raises(ValueError, match="games need observation_mode='same'"):
        make_envs(game_fns(RelayGame, 4, num_agents=2), observation_mode="different")


def test_an_unknown_agent_is_a_worker_error_naming_game_and_agent(make_envs: Any,
                                                                  backend: str) -> None:
    kwargs = {"batch_size": 4} if backend == backends.ASYNC else {}
    envs = make_envs(four_games(StrayAgentRelay), **kwargs)
    envs.reset(seed=0)
    with pytest.raises(WorkerError, match="game 3.*reported agent 'stray'") as caught:
        envs.step(np.zeros(8, np.int64))
    assert caught.value.env_index == 3


def no_game(**kwargs: Any) -> None:
    """A game function that forgot its ``return``."""


def test_a_game_fn_that_returns_no_game_is_an_env_fn_error(make_envs: Any, backend: str) -> None:
    with pytest.raises(EnvFnError, match=r"env_fns\[3\] returned None \(NoneType\); expected "
                                         r"a gymnasium.Env \(or a PettingZoo game") as caught:
        make_envs(four_games(no_game))
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)
    assert_found_where_it_ran(caught.value, backend)


def test_a_bad_action_names_the_row_its_game_and_agent(make_envs: Any, backend: str) -> None:
    kwargs = {"batch_size": 4} if backend == backends.ASYNC else {}
    envs = make_envs(four_games(RelayGame), **kwargs)
    envs.reset(seed=0)
    actions = np.zeros(8, np.int64)
    actions[7] = 5  # Discrete(3)
    with pytest.raises(ValueError, match=r"the action for row 7 \(game 3, agent 'runner_1'\) "
                                         r"is out of range: got 5"):
        envs.step(actions)
    if backend != backends.ASYNC:  # there, the test's driver splits the batch by env_ids
        with pytest.raises(ValueError, match=r"shape \(8,\) for 8 rows, 4 games of 2 agents"):
            envs.step(np.zeros(6, np.int64))
    envs.step(np.zeros(8, np.int64))  # nothing was left pending
