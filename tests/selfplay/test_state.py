"""A league saved and loaded goes on as the original would: same draws, same records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fastvec.selfplay import PFSP, League
from tests.selfplay.helpers import ending, finish_all, layout


def first_legal(observation, action_mask):
    return np.asarray(action_mask).argmax(axis=1)


def played(league: League, steps: int) -> list:
    """Scripted games: every step one game ends, the learner winning odd ones."""
    seen = []
    for step in range(steps):
        game = step % league.seats.num_games
        rewards = {int(league.seats.row_of[game, int(league.learner_seat[game])]):
                   1.0 if step % 2 else -1.0}
        seen.extend(league.update(*ending(league.seats.num_games, 2, [game], rewards)))
        if league.snapshot_due:
            league.add_snapshot()
        seen.append(league.opponents)
        league.policy_rows()
    return seen


def make() -> League:
    return League(*layout(5, 2), opponents={"first": first_legal},
                  shares={"self_play": 0.3, "snapshots": 0.5, "fixed": 0.2},
                  sampling=PFSP("variance", floor=0.1), snapshot_every=20, max_snapshots=2,
                  seed=11)


def test_a_saved_league_goes_on_as_the_original(tmp_path: Path) -> None:
    original = make()
    played(original, 40)
    path = tmp_path / "league.json"
    original.save(path)
    json.loads(path.read_text())  # plain JSON
    loaded = League.load(path, players={"first": first_legal})
    assert loaded.state_dict() == original.state_dict()
    assert loaded.table() == original.table()
    assert played(loaded, 40) == played(original, 40)
    assert loaded.state_dict() == original.state_dict()
    assert loaded.entry("first").act is first_legal


def test_load_asks_for_the_callables_and_the_same_games(tmp_path: Path) -> None:
    league = make()
    finish_all(league)
    state = league.state_dict()
    with pytest.raises(ValueError, match=r"fixed opponents or anchors \['first'\]; pass"):
        make().load_state_dict(state)
    with pytest.raises(ValueError, match="same games and seats"):
        League(*layout(4, 2)).load_state_dict(state, {"first": first_legal})
    with pytest.raises(ValueError, match="version"):
        make().load_state_dict({**state, "version": 99}, {"first": first_legal})


SAVED = Path(__file__).parent / "data" / "league_saved_v1.json"


def test_a_league_saved_in_the_first_format_loads_and_goes_on_as_it_did() -> None:
    """``data/league_saved_v1.json``: 3 games of 2 seats after 12 scripted steps, state
    version 1 as written before the settings were one record; loaded, it writes the same
    state and plays the next 12 steps as the league that saved it did."""
    league = League.load(SAVED, players={"first": first_legal})
    assert league.state_dict() == json.loads(SAVED.read_text())
    for step in range(12, 24):
        game = step % 3
        row = int(league.seats.row_of[game, int(league.learner_seat[game])])
        league.update(*ending(3, 2, [game], {row: 1.0 if step % 3 else -1.0}))
        if league.snapshot_due:
            league.add_snapshot()
        league.policy_rows()
    assert league.opponents == ("first", "learner", "snapshot-8")
    assert (league.learner_rating, league.games, league.learner_steps) \
        == (1041.31040005662, 24, 98)
    assert league.pool_ids == ("first", "snapshot-9", "snapshot-10")
    assert league.totals()["first"] == {"win": 4, "draw": 0, "loss": 1}
