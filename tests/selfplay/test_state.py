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
