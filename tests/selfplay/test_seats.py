"""fastvec.selfplay.seats: rows grouped by policy, the end of games, judging a game."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastvec.selfplay.seats import RESULTS, Result, Seats, batch_rows, judge, score
from tests.selfplay.helpers import ending, layout, quiet


@pytest.mark.parametrize("game_of_row, seat_of_row", [
    ([0, 0, 1], [0, 1, 0]),          # game 1 lacks a seat
    ([0, 0, 1, 1], [0, 0, 0, 1]),    # a seat twice
    ([0, 1, 2], [0, 0, 0]),          # one seat per game: nobody to play against
    ([0, 0], [0, 1, 2]),             # lengths differ
    ([], []),
])
def test_rows_that_are_not_whole_games_are_refused(game_of_row: list, seat_of_row: list) -> None:
    with pytest.raises(ValueError, match="expected"):
        Seats(game_of_row, seat_of_row)


def test_groups_by_code_with_where_and_env_ids() -> None:
    seats = Seats(*layout(3, 2))
    seats.assign([0, 1, 2], [[0, 5], [7, 0], [0, 5]])
    assert seats.codes() == (0, 5, 7)
    assert {c: r.tolist() for c, r in seats.groups().items()} == {0: [0, 3, 4], 5: [1, 5],
                                                                  7: [2]}
    active = np.array([True, False, True, False, False, True])
    assert {c: r.tolist() for c, r in seats.groups(active).items()} == {0: [0], 5: [5], 7: [2]}
    # an async batch of games 2 and 0 (rows 4, 5, 0, 1): positions in the batch
    batch = np.array([4, 5, 0, 1])
    assert {c: r.tolist() for c, r in seats.groups(env_ids=batch).items()} \
        == {0: [0, 2], 5: [1, 3]}
    where = np.array([False, True, True, False])
    assert {c: r.tolist() for c, r in seats.groups(where, batch).items()} == {0: [2], 5: [1]}
    with pytest.raises(ValueError, match="one bool per row"):
        seats.groups(np.ones(5, bool))
    with pytest.raises(ValueError, match="env_ids between 0 and 5"):
        batch_rows([6], 6)


def test_a_game_ends_when_its_last_agent_leaves() -> None:
    """Seat 2 leaves first (terminated, then dead rows: not alive, no flags); the game is
    over only when seats 0 and 1 leave too, in a later step, one of them by truncation."""
    seats = Seats(*layout(1, 3))
    r, term, trunc, infos = quiet(3)
    term[2], r[2] = True, 5.0
    assert seats.ended(r, term, trunc, infos).tolist() == []
    r, term, trunc, infos = quiet(3)
    infos["alive"][2] = False  # the dead row
    assert seats.ended(r, term, trunc, infos).tolist() == []
    r[:] = [1.0, 2.0, 0.0]
    term[0], trunc[1] = True, True
    assert seats.ended(r, term, trunc, infos).tolist() == [0]
    assert seats.take_returns(0).tolist() == [1.0, 2.0, 5.0]
    assert seats.returns.tolist() == [0.0, 0.0, 0.0]


def test_an_async_batch_ends_only_its_own_games() -> None:
    seats = Seats(*layout(4, 2))
    r, term, trunc, infos = ending(2, 2, [1], {2: 1.0, 3: -1.0})  # batch of games 3, 1
    assert seats.ended(r, term, trunc, infos, env_ids=[6, 7, 2, 3]).tolist() == [1]
    assert seats.take_returns(1).tolist() == [1.0, -1.0]
    with pytest.raises(ValueError, match="one reward, flag and alive per row of the batch"):
        seats.ended(r, term, trunc, infos, env_ids=[6, 7])


@pytest.mark.parametrize("returns, seat, result", [
    ([1.0, -1.0], 0, "win"), ([1.0, -1.0], 1, "loss"), ([0.5, 0.5], 1, "draw"),
    ([0.0, 2.0, 2.0], 1, "win"), ([3.0, 2.0, 2.0], 1, "loss"), ([0.0, 2.0, 1.0], 1, "win"),
    ([3.0, 2.0, 1.0], 1, "draw"), ([1.0, 1.0, 1.0], 2, "draw"), ([0.0, 0.0, 1.0], 0, "loss"),
])
def test_judge(returns: list, seat: int, result: str) -> None:
    judged = judge(np.array(returns), seat)
    assert judged.word == result and RESULTS[judged.index] == result
    assert judged.score == score(np.array(returns), seat)


@pytest.mark.parametrize("value, word", [(1.0, "win"), (0.75, "win"), (0.5, "draw"),
                                         (0.25, "loss"), (0.0, "loss")])
def test_a_result_is_its_score_and_the_word_follows(value: float, word: str) -> None:
    assert Result(value).word == word


def test_seats_are_assigned_in_one_place_that_regroups() -> None:
    """The codes are read only; ``assign`` writes them and the groups follow at once."""
    seats = Seats(*layout(2, 3))
    with pytest.raises(ValueError, match="read-only"):
        seats.code[0, 1] = 4
    seats.assign([1], [[0, 4, 4]])
    assert seats.code.tolist() == [[0, 0, 0], [0, 4, 4]]
    assert {c: r.tolist() for c, r in seats.groups().items()} == {0: [0, 1, 2, 3], 4: [4, 5]}
    seats.assign(np.array([0, 1]), 0)  # broadcast: every seat back to the learner
    assert seats.codes() == (0,) and seats.rows(4).tolist() == []


@given(st.lists(st.integers(-3, 3), min_size=2, max_size=5), st.data())
def test_scores_of_all_seats_add_up_to_half_the_pairs(returns: list, data) -> None:
    """Every pair of seats shares one point: the scores times (seats - 1) add up to the
    number of pairs, and a seat's score is 1 exactly when it alone has the best return."""
    values = np.array(returns, dtype=float)
    n = len(values)
    scores = [score(values, s) for s in range(n)]
    assert sum(scores) * (n - 1) == pytest.approx(n * (n - 1) / 2)
    seat = data.draw(st.integers(0, n - 1))
    assert (scores[seat] == 1.0) == (values[seat] > np.delete(values, seat).max())
