"""The league's settings as documented: the score trigger's None, the seed, the table."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fastvec.selfplay import LEARNER, League
from fastvec.selfplay.settings import LeagueSettings
from tests.selfplay.helpers import finish_all, layout


def first_legal(observation, action_mask):
    return np.asarray(action_mask).argmax(axis=1)


@pytest.mark.parametrize("kwargs, message", [
    ({"snapshot_win_rate": 0.6, "snapshot_min_games": None},
     r"expected snapshot_min_games to be a positive int with snapshot_win_rate=0.6, got None"),
    ({"snapshot_min_games": 0}, "expected snapshot_min_games to be a positive int, got 0"),
    ({"seed": "abc"}, "expected seed to be None or a non-negative int, got 'abc'"),
    ({"seed": 1.5}, "expected seed to be None or a non-negative int, got 1.5"),
    ({"seed": -1}, "expected seed to be None or a non-negative int, got -1"),
    ({"seed": True}, "expected seed to be None or a non-negative int, got True"),
    ({"snapshot_win_rate": "high"}, "expected 0 < snapshot_win_rate <= 1, got 'high'"),
    ({"elo_k": "16"}, "expected a positive elo_k, got '16'"),
    ({"initial_rating": float("nan")}, "expected initial_rating to be a number, got nan"),
    ({"win_rate_window": None}, "expected win_rate_window to be a positive int, got None"),
    ({"eviction": "newest"}, r"expected eviction in \('oldest', 'weakest'\), got 'newest'"),
    ({"shares": "self_play"}, "expected shares of .* got 'self_play'"),
    ({"shares": {"self_play": "1"}}, "expected shares of .* got {'self_play': '1'}"),
    ({"opponents": [first_legal]}, r"expected opponents to be a dict \{id: act\}, got \["),
    ({"anchors": "random"}, r"expected anchors to be a dict \{id: act\}, got 'random'"),
])
def test_settings_that_cannot_work_are_a_value_error(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        League(*layout(2, 2), **kwargs)


def test_players_added_later_are_checked_as_well() -> None:
    league = League(*layout(2, 2))
    with pytest.raises(ValueError, match="expected a positive weight, got 'heavy'"):
        league.add_opponent("a", first_legal, weight="heavy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected the rating of 'b' to be a number or None"):
        league.add_anchor("b", first_legal, rating=[1500])  # type: ignore[arg-type]
    league.add_opponent("a", first_legal, weight=np.float32(2.0), rating=np.int64(1200))
    assert (league.entry("a").weight, league.entry("a").rating) == (2.0, 1200.0)


def test_snapshot_min_games_none_is_accepted_while_the_score_trigger_is_off() -> None:
    league = League(*layout(4, 2), opponents={"a": first_legal}, shares={"fixed": 1.0},
                    snapshot_every=8, snapshot_min_games=None, seed=0)
    finish_all(league, default="win")
    assert not league.snapshot_due  # no score trigger, and no learner step yet
    league.policy_rows()
    league.policy_rows()  # the learner's 4 rows, twice: 8 learner steps
    assert league.snapshot_due  # the step trigger still fires
    restored = League(*layout(4, 2), opponents={"a": first_legal})
    restored.load_state_dict(league.state_dict(), {"a": first_legal})
    assert restored.settings.snapshot_min_games is None and restored.snapshot_due


@pytest.mark.parametrize("seed", [None, 0, 7, np.int64(3), 2**40])
def test_seeds_that_numpy_takes_as_ints_are_accepted(seed) -> None:
    League(*layout(2, 2), seed=seed)


def test_the_same_numpy_int_seed_gives_the_same_draws_as_the_int() -> None:
    def draws(seed) -> tuple:
        league = League(*layout(8, 2), opponents={"a": first_legal, "b": first_legal},
                        shares={"self_play": 0.5, "fixed": 0.5}, seed=seed)
        return league.opponents

    assert draws(np.int64(5)) == draws(5)


def test_the_table_lists_the_learner_first_then_entries_best_rated_first() -> None:
    league = League(*layout(10, 2), opponents={"weak": first_legal, "strong": first_legal},
                    shares={"fixed": 1.0}, elo_k=32.0, seed=0)
    for _ in range(20):
        finish_all(league, {"weak": "draw", "strong": "loss"})
    ratings = league.ratings()
    assert ratings["strong"] > ratings[LEARNER]  # the learner is not the best rated ...
    lines = league.table().splitlines()
    assert lines[1].split()[0] == LEARNER  # ... and its line comes first all the same
    assert [line.split()[0] for line in lines[2:]] == ["strong", "weak"]


def test_the_settings_are_one_frozen_record_saved_as_a_dict() -> None:
    league = League(*layout(2, 2), shares={"self_play": 1.0}, elo_k=8, seed=0)
    settings = league.settings
    assert (settings.elo_k, settings.snapshot_every, settings.shares) \
        == (8.0, 50_000, {"self_play": 1.0, "snapshots": 0.0, "fixed": 0.0})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.elo_k = 4.0  # type: ignore[misc]
    saved = league.state_dict()["settings"]
    assert saved == dataclasses.asdict(settings) and LeagueSettings(**saved) == settings
    assert list(saved) == ["shares", "snapshot_every", "snapshot_win_rate",  # the saved form
                           "snapshot_min_games", "max_snapshots", "eviction", "elo_k",
                           "initial_rating", "win_rate_window"]
    with pytest.raises(ValueError, match="expected a positive elo_k"):
        LeagueSettings(elo_k=0)
