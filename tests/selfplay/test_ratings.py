"""Elo updates and fits, sampling rules and running win rates, against hand computations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastvec.selfplay import PFSP, Recency, Uniform, elo_expected, elo_update, fit_elo
from fastvec.selfplay.opponents import PoolEntry
from fastvec.selfplay.sampling import parse_sampling, sampling_from_state, sampling_state
from fastvec.selfplay.seats import Result


@given(st.floats(0, 3000), st.floats(0, 3000), st.sampled_from([0.0, 0.5, 1.0]),
       st.floats(1, 64))
def test_elo_update_is_zero_sum_and_moves_toward_the_result(a: float, b: float, score: float,
                                                            k: float) -> None:
    new_a, new_b = elo_update(a, b, score, k)
    assert new_a + new_b == pytest.approx(a + b)
    expected = 1 / (1 + 10 ** ((b - a) / 400))
    assert new_a - a == pytest.approx(k * (score - expected))
    assert elo_expected(a, b) + elo_expected(b, a) == pytest.approx(1.0)


def test_fit_elo_recovers_the_ratings_that_made_the_results() -> None:
    true = np.array([0.0, 200.0, 400.0, 800.0])
    rng = np.random.default_rng(0)
    n = 4000
    scores = np.zeros((4, 4))
    games = np.zeros((4, 4))
    for i in range(4):
        for j in range(i + 1, 4):
            wins = rng.binomial(n, elo_expected(true[i], true[j]))
            scores[i, j], scores[j, i] = wins, n - wins
            games[i, j] = games[j, i] = n
    fitted = fit_elo(scores, games, center=0, value=0.0)
    assert fitted == pytest.approx(true, abs=25.0)
    mean_centered = fit_elo(scores, games)
    assert mean_centered.mean() == pytest.approx(1000.0)
    assert np.diff(mean_centered) == pytest.approx(np.diff(fitted))


def test_fit_elo_gives_a_finite_rating_to_a_player_who_never_lost() -> None:
    scores = np.array([[0, 20, 0], [0, 0, 10], [0, 10, 0]], dtype=float)
    games = np.array([[0, 20, 0], [20, 0, 20], [0, 20, 0]], dtype=float)
    fitted = fit_elo(scores, games, center=1, value=0.0)
    assert np.isfinite(fitted).all() and fitted[0] > 400
    assert fitted[2] == pytest.approx(0.0, abs=1e-3)
    alone = fit_elo(np.zeros((2, 2)), np.zeros((2, 2)))
    assert alone.tolist() == [1000.0, 1000.0]  # nobody played: everyone at the value


def entries(*win_rates: float, weights: tuple = ()) -> list[PoolEntry]:
    return [PoolEntry(f"e{k}", k + 1, "snapshot", win_rate=w,
                  weight=weights[k] if weights else 1.0) for k, w in enumerate(win_rates)]


def test_the_sampling_rules_weigh_as_documented() -> None:
    pool = entries(0.1, 0.5, 0.99, weights=(1.0, 2.0, 1.0))
    assert Uniform().weights(pool).tolist() == [1.0, 2.0, 1.0]
    assert Recency(0.5).weights(pool).tolist() == [0.25, 1.0, 1.0]  # newest last
    assert PFSP("hard", power=2, floor=0.05).weights(pool) \
        == pytest.approx([0.81, 0.5, 0.05])
    assert PFSP("variance", floor=0.05).weights(pool) == pytest.approx([0.09, 0.5, 0.05])


@pytest.mark.parametrize("rule", [Uniform(), Recency(0.7), PFSP("variance", 3.0, 0.1)])
def test_a_rule_survives_its_state(rule) -> None:
    assert sampling_from_state(sampling_state(rule)) == rule


@pytest.mark.parametrize("make, message", [
    (lambda: Recency(0.0), "0 < decay"), (lambda: PFSP("soft"), "weighting in"),
    (lambda: PFSP(power=0), "positive power"), (lambda: PFSP(floor=0), "0 < floor"),
    (lambda: parse_sampling(3), "expected sampling"),
])
def test_bad_rules_are_refused(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_the_running_win_rate_is_a_mean_with_a_prior_then_a_window() -> None:
    entry = PoolEntry("e", 1, "fixed")
    entry.record(Result(1.0), window=4)  # (0.5 + 1) / 2
    assert entry.win_rate == pytest.approx(0.75)
    entry.record(Result(0.0), window=4)  # (0.5 + 1 + 0) / 3
    assert entry.win_rate == pytest.approx(0.5)
    entry.record(Result(1.0), window=4)  # (0.5 + 1 + 0 + 1) / 4
    assert entry.win_rate == pytest.approx(0.625)
    entry.record(Result(1.0), window=4)  # past the window: an exponential average, 1/4
    assert entry.win_rate == pytest.approx(0.625 + (1 - 0.625) / 4)
    assert (entry.wins, entry.draws, entry.losses) == (3, 0, 1)


def test_a_shared_place_of_three_seats_counts_as_a_win_or_a_loss() -> None:
    """Scores 0.75 and 0.25 (first or last place shared) are a win and a loss in the
    record, and each counts as one game of the running win rate."""
    entry = PoolEntry("e", 1, "fixed")
    entry.record(Result(0.75), window=10)  # (0.5 + 0.75) / 2
    entry.record(Result(0.25), window=10)  # (0.5 + 0.75 + 0.25) / 3
    assert (entry.wins, entry.draws, entry.losses, entry.games) == (1, 0, 1, 2)
    assert entry.win_rate == pytest.approx(0.5)
