"""evaluate and tournament on real vector envs of games: counts per seat, Elo tables."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from fastvec.selfplay import League, RandomPlayer, evaluate, play_matches, tournament  # noqa: E402
from fastvec.selfplay.evaluation import wilson  # noqa: E402
from tests.support.games import CONTINUE, DRAW, RESIGN, WIN, Duel  # noqa: E402


def always(move: int):
    """A player that always makes ``move``."""
    def act(observation: Any, action_mask: Any) -> np.ndarray:
        return np.full(len(action_mask), move, dtype=np.int64)
    return act


def test_evaluate_counts_each_seat_and_adds_up(make_vec) -> None:
    """The first mover of a duel decides it: DRAW from seat 0 draws, and from seat 1 the
    anchor's WIN comes first."""
    envs = make_vec([Duel] * 3)
    results = evaluate(envs, always(DRAW), {"winner": always(WIN), "slow": always(CONTINUE)},
                       games=11, seed=0)
    winner, slow = results["winner"], results["slow"]
    assert winner.counts.tolist() == [[0, 6, 0], [0, 0, 5]]  # games 0, 2, ... from seat 0
    assert slow.counts.tolist() == [[0, 6, 0], [0, 5, 0]]
    assert winner.games() == 11 and winner.games(0) == 6
    assert winner.rate("loss", 1) == 1.0 and winner.rate("draw") == pytest.approx(6 / 11)
    assert winner.interval("loss", 0) == wilson(0, 6)
    assert "vs winner (seat 1, 5 games): win 0.0% draw 0.0% loss 100.0%" in winner.summary()
    one_seat = evaluate(envs, always(DRAW), {"winner": always(WIN)}, games=4, seats=1, seed=0)
    assert one_seat["winner"].counts.tolist() == [[0, 0, 0], [0, 0, 4]]


def test_evaluate_on_async_batches_counts_every_game_and_leaves_the_envs_idle(
        make_vec, make_subproc) -> None:
    anchors = {"random": RandomPlayer(seed=0)}
    sync = evaluate(make_vec([Duel] * 4), RandomPlayer(seed=1), anchors, 30, seed=3)
    envs = make_subproc([Duel] * 4, num_workers=2, batch_size=4, context="fork")
    anchors = {"random": RandomPlayer(seed=0)}
    batched = evaluate(envs, RandomPlayer(seed=1), anchors, 30, seed=3)
    assert batched["random"].counts.sum() == 30
    assert batched["random"].counts.sum(axis=1).tolist() == [15, 15]
    assert sync["random"].counts.sum() == 30
    envs.async_reset(seed=0)  # nothing in flight: the envs take new work
    assert len(envs.recv()[5]) == 4


def test_a_tournament_ranks_the_players(make_vec) -> None:
    envs = make_vec([Duel] * 4)
    table = tournament(envs, {"resigner": always(RESIGN), "winner": always(WIN),
                              "drawer": always(DRAW)}, games_per_pair=20, center="resigner",
                       value=0.0)
    assert table.games.sum() == 2 * 3 * 20
    i = {name: k for k, name in enumerate(table.names)}
    # winner vs drawer: a win from seat 0, a draw from seat 1: 15 of 20
    assert table.scores[i["winner"], i["drawer"]] == 15.0
    assert table.ratings[i["winner"]] > table.ratings[i["drawer"]] > table.ratings[i["resigner"]]
    assert table.ratings[i["resigner"]] == pytest.approx(0.0)
    lines = table.table().splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["winner", "drawer", "resigner"]


def test_matches_are_checked(make_vec) -> None:
    envs = make_vec([Duel] * 2)
    with pytest.raises(ValueError, match="expected a match to name one of the players"):
        play_matches(envs, {"a": always(WIN)}, [("a", "b")])
    with pytest.raises(ValueError, match="positive int"):
        evaluate(envs, always(WIN), {"a": always(WIN)}, games=0)
    with pytest.raises(ValueError, match="'both' or a seat in 0..1"):
        evaluate(envs, always(WIN), {"a": always(WIN)}, games=2, seats=2)
    with pytest.raises(ValueError, match="at least two players"):
        tournament(envs, {"a": always(WIN)}, 2)
    disabled = make_vec([Duel] * 2, autoreset_mode="disabled")
    with pytest.raises(ValueError, match="auto-resets"):
        evaluate(disabled, always(WIN), {"a": always(WIN)}, games=2)


def test_league_evaluate_records_its_results(make_vec) -> None:
    envs = make_vec([Duel] * 2)
    league = League.from_env(envs, anchors={"winner": always(WIN)})
    league.learner_steps = 123
    results = league.evaluate(envs, always(DRAW), games=4, seed=0)
    assert list(results) == ["winner"]
    assert league.evaluations == [{"learner_steps": 123,
                                   "results": {"winner": [[0, 2, 0], [0, 0, 2]]}}]
