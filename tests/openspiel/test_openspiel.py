"""fastvec.openspiel: OpenSpiel games as PettingZoo games, and their exact NashConv."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pyspiel = pytest.importorskip("pyspiel")
pytest.importorskip("pettingzoo")

from open_spiel.python import policy as policy_lib  # noqa: E402
from open_spiel.python.algorithms import exploitability  # noqa: E402
from pettingzoo.test import api_test  # noqa: E402

from fastvec.openspiel import (  # noqa: E402
    OpenSpielGame,
    information_states,
    load_game,
    nash_conv,
    softmax_policy,
    tabular_policy,
)

GAMES = ["kuhn_poker", "leduc_poker", "kuhn_poker(players=3)"]
UNIFORM_NASH_CONV = {"kuhn_poker": 0.9167, "leduc_poker": 4.7472, "kuhn_poker(players=3)": 2.0625}


def uniform(info_state: np.ndarray, legal_mask: np.ndarray) -> np.ndarray:
    return legal_mask.astype(float)


@pytest.mark.parametrize("name", GAMES)
def test_passes_pettingzoos_api_test(name: str) -> None:
    api_test(OpenSpielGame(name), num_cycles=100)


@pytest.mark.parametrize("name", GAMES)
def test_a_game_played_through_matches_openspiels_own(name: str) -> None:
    """The same chance outcomes and moves give the same observations and returns."""
    game = OpenSpielGame(name)
    game.reset(seed=3)
    rng = np.random.default_rng(0)
    state = load_game(name).new_initial_state()
    for action in game.state.history():  # the chance outcomes the game drew
        state.apply_action(action)
    returns = dict.fromkeys(game.possible_agents, 0.0)
    while game.agents:
        agent = game.agent_selection
        _, reward, terminated, _, _ = game.last()
        returns[agent] += reward
        if terminated:
            game.step(None)
            continue
        player = game.possible_agents.index(agent)
        assert player == state.current_player()
        seen = game.observe(agent)
        assert seen["observation"].tolist() == state.information_state_tensor(player)
        assert np.flatnonzero(seen["action_mask"]).tolist() == state.legal_actions()
        for other in game.possible_agents:
            if other != agent:
                assert not game.observe(other)["action_mask"].any()
        action = int(rng.choice(state.legal_actions()))
        game.step(action)
        state.apply_action(action)
        while state.is_chance_node():  # the game's draw, played on OpenSpiel's state
            state.apply_action(game.state.history()[len(state.history())])
    assert state.is_terminal()
    assert [returns[a] for a in game.possible_agents] == state.returns()


def test_the_same_seed_deals_the_same_cards() -> None:
    a, b = OpenSpielGame("leduc_poker"), OpenSpielGame("leduc_poker")
    deals = set()
    for seed in range(20):
        a.reset(seed=seed)
        b.reset(seed=seed)
        assert a.state.history() == b.state.history()
        deals.add(tuple(a.state.history()))
    assert len(deals) > 5


def test_refuses_what_it_cannot_run() -> None:
    with pytest.raises(ValueError, match="expected a sequential"):
        load_game("matrix_rps")
    with pytest.raises(ValueError, match="information_state_tensor"):
        load_game("tic_tac_toe")  # observation tensors only
    game = OpenSpielGame("leduc_poker")
    game.reset(seed=0)
    illegal = next(a for a in range(3) if a not in game.state.legal_actions())
    with pytest.raises(ValueError, match="expected a legal action of player_0"):
        game.step(illegal)


@pytest.mark.parametrize("name", GAMES)
def test_nash_conv_of_the_uniform_strategy_is_openspiels(name: str) -> None:
    assert nash_conv(name, uniform) == pytest.approx(UNIFORM_NASH_CONV[name], abs=1e-4)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), name=st.sampled_from(GAMES))
def test_nash_conv_of_any_fixed_strategy_is_openspiels(seed: int, name: str) -> None:
    """A random strategy, given as a function of (info_state, legal_mask), against the
    same strategy written into OpenSpiel's own table by information-state string."""
    game = pyspiel.load_game(name)
    table = policy_lib.TabularPolicy(game)
    rng = np.random.default_rng(seed)
    by_tensor = {}
    for state in table.states:
        legal = np.zeros(game.num_distinct_actions(), dtype=bool)
        legal[state.legal_actions()] = True
        probs = np.where(legal, rng.random(legal.shape) ** 3, 0.0)
        probs /= probs.sum()
        table.policy_for_key(state.information_state_string())[:] = probs
        by_tensor[tuple(state.information_state_tensor())] = probs

    def fixed(info_state: np.ndarray, legal_mask: np.ndarray) -> np.ndarray:
        return np.array([by_tensor[tuple(map(float, row))] for row in info_state])

    assert nash_conv(name, fixed) == pytest.approx(exploitability.nash_conv(game, table),
                                                   abs=1e-9)


def test_a_nash_equilibrium_of_kuhn_poker_has_nash_conv_zero() -> None:
    """Kuhn's equilibrium with alpha = 0 (the first player never bluffs)."""
    bet = {("0", ""): 0.0, ("1", ""): 0.0, ("2", ""): 0.0,      # player 0 opens
           ("0", "pb"): 0.0, ("1", "pb"): 1 / 3, ("2", "pb"): 1.0,  # player 0 facing a bet
           ("0", "p"): 1 / 3, ("1", "p"): 0.0, ("2", "p"): 1.0,     # player 1 after a pass
           ("0", "b"): 0.0, ("1", "b"): 1 / 3, ("2", "b"): 1.0}     # player 1 facing a bet
    table, _, _ = information_states("kuhn_poker")
    keys = [s.information_state_string() for s in table.states]

    def equilibrium(info_state: np.ndarray, legal_mask: np.ndarray) -> np.ndarray:
        p = np.array([bet[(key[0], key[1:])] for key in keys])
        return np.stack([1 - p, p], axis=1)

    assert nash_conv("kuhn_poker", equilibrium) == pytest.approx(0.0, abs=1e-9)


def test_softmax_policy_spreads_over_legal_actions_only() -> None:
    logits = softmax_policy(lambda s, m: np.array([[0.0, np.log(3.0), 5.0]] * len(s)))
    probs = logits(np.zeros((2, 4)), np.array([[1, 1, 0], [0, 1, 0]], dtype=bool))
    np.testing.assert_allclose(probs, [[0.25, 0.75, 0.0], [0.0, 1.0, 0.0]])


def test_tabular_policy_checks_what_the_strategy_returns() -> None:
    with pytest.raises(ValueError, match=r"shape \(12, 2\)"):
        tabular_policy("kuhn_poker", lambda s, m: np.ones((3, 2)))
    with pytest.raises(ValueError, match="finite probabilities >= 0"):
        tabular_policy("kuhn_poker", lambda s, m: -np.ones(m.shape))
    table = tabular_policy("kuhn_poker", lambda s, m: np.tile([1.0, 3.0], (len(s), 1)))
    assert table.action_probability_array.tolist() == [[0.25, 0.75]] * 12


@pytest.mark.parametrize("name", ["fastvec.openspiel.game", "fastvec.openspiel.exploitability"])
def test_doctests_of_module_pass(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), report=False)
    assert result.attempted and result.failed == 0
