"""fastvec.selfplay.League on scripted steps: who plays whom, ratings, triggers, the pool."""

from __future__ import annotations

import numpy as np
import pytest

from fastvec.selfplay import LEARNER, PFSP, League, RandomPlayer, Recency, Uniform
from tests.selfplay.helpers import ending, finish_all, layout, quiet


def first_legal(observation, action_mask):
    return np.asarray(action_mask).argmax(axis=1)


def kinds(league: League) -> dict[str, float]:
    """The share of games of each kind now."""
    opponents = league.opponents
    snapshot = sum(league.entry(o).kind == "snapshot" for o in opponents if o != LEARNER)
    self_play = opponents.count(LEARNER)
    n = len(opponents)
    return {"self_play": self_play / n, "snapshots": snapshot / n,
            "fixed": (n - self_play - snapshot) / n}


def check_partition(league: League) -> None:
    """Every row is played by one policy; per game the learner has one seat (every seat in
    self-play) and one opponent the others."""
    groups = league.policy_rows()
    rows = np.sort(np.concatenate(list(groups.values())))
    assert rows.tolist() == list(range(league.seats.num_rows))
    for game, opponent in enumerate(league.opponents):
        players = [league._name(int(c)) for c in league.seats.code[game]]
        if opponent == LEARNER:
            assert players == [LEARNER] * league.seats.num_seats
        else:
            seat = int(league.learner_seat[game])
            assert players[seat] == LEARNER
            assert set(players[:seat] + players[seat + 1:]) == {opponent}


def test_shares_decide_the_kind_of_each_new_game() -> None:
    league = League(*layout(4000, 2), opponents={"fixed": first_legal},
                    shares={"self_play": 0.5, "snapshots": 0.3, "fixed": 0.2}, seed=0)
    # no snapshot yet: its share plays self-play
    assert kinds(league) == pytest.approx({"self_play": 0.8, "snapshots": 0.0, "fixed": 0.2},
                                          abs=0.03)
    league.add_snapshot()
    finish_all(league)
    assert kinds(league) == pytest.approx({"self_play": 0.5, "snapshots": 0.3, "fixed": 0.2},
                                          abs=0.03)
    check_partition(league)


@pytest.mark.parametrize("num_seats", [2, 3])
def test_every_game_has_the_learner_and_one_opponent(num_seats: int) -> None:
    league = League(*layout(30, num_seats), opponents={"a": first_legal, "b": first_legal},
                    shares={"self_play": 0.3, "snapshots": 0.3, "fixed": 0.4}, seed=1)
    league.add_snapshot()
    for step in range(30):  # games end at random; the partition holds throughout
        check_partition(league)
        ended = [g for g in range(30) if (step + g) % 4 == 0]
        league.update(*ending(30, num_seats, ended))
    assert {kind for kind, share in kinds(league).items() if share} \
        == {"self_play", "snapshots", "fixed"}


@pytest.mark.parametrize("num_seats", [2, 3])
def test_the_learner_moves_to_the_next_seat_each_time_its_game_ends(num_seats: int) -> None:
    league = League(*layout(2, num_seats), opponents={"a": first_legal},
                    shares={"fixed": 1.0}, seed=0)
    assert league.learner_seat.tolist() == [0, 1 % num_seats]
    seats = []
    for _ in range(2 * num_seats):
        (outcome,) = league.update(*ending(2, num_seats, [0]))  # only game 0 ends
        league.update(*quiet(2 * num_seats))                     # its reset step
        seats.append((outcome.learner_seat, int(league.learner_seat[0])))
    assert seats == [(k % num_seats, (k + 1) % num_seats) for k in range(2 * num_seats)]
    assert league.learner_seat[1] == 1 % num_seats  # game 1 never ended


def test_outcomes_from_rewards_over_the_whole_game() -> None:
    """Rewards add up over a game, from the learner's seat; reset() forgets them."""
    league = League(*layout(3, 2), opponents={"a": first_legal}, shares={"fixed": 1.0}, seed=0)
    assert league.rows_of(LEARNER).tolist() == [0, 3, 4]  # seats 0, 1, 0
    r, term, trunc, infos = quiet(6)
    r[:] = [0.5, 0.0, 0.0, 0.25, 0.0, 0.0]
    league.update(r, term, trunc, infos)
    outcomes = league.update(*ending(3, 2, [0, 1, 2], {0: -0.25, 1: 0.25, 2: 1.0, 5: 2.0}))
    assert [(o.game, o.opponent, o.learner_seat, o.result, o.learner_return)
            for o in outcomes] == [(0, "a", 0, "draw", 0.25), (1, "a", 1, "loss", 0.25),
                                   (2, "a", 0, "loss", 0.0)]
    r, term, trunc, infos = quiet(6)
    r[1] = -3.0  # game 0's learner is in seat 1 now: row 1
    league.update(r, term, trunc, infos)
    league.reset()  # envs.reset(): the games restart, unjudged
    (outcome,) = league.update(*ending(3, 2, [0], {1: 1.0}))
    assert (outcome.learner_seat, outcome.result, outcome.learner_return) == (1, "win", 1.0)
    assert league.totals() == {"a": {"win": 1, "draw": 1, "loss": 2}}
    assert league.games == 4


def test_self_play_games_are_judged_from_seat_0_and_not_rated() -> None:
    league = League(*layout(2, 2), shares={"self_play": 1.0}, seed=0)
    outcomes = league.update(*ending(2, 2, [0, 1], {0: 1.0, 1: -1.0, 2: -1.0, 3: 1.0}))
    assert [(o.opponent, o.learner_seat, o.result) for o in outcomes] \
        == [(LEARNER, 0, "win"), (LEARNER, 0, "loss")]
    assert league.learner_rating == 1000.0 and league.totals() == {}


def test_every_three_seat_game_counts_in_the_record_shared_places_included() -> None:
    """Learner first alone (1), first shared (0.75), last shared (0.25): a win, a win and
    a loss, each one game of the record; ratings and the trigger take the scores."""
    league = League(*layout(3, 3), opponents={"a": first_legal}, shares={"fixed": 1.0},
                    snapshot_every=None, snapshot_win_rate=0.5, snapshot_min_games=3, seed=0)
    assert league.learner_seat.tolist() == [0, 1, 2]
    rewards = {0: 2.0, 1: -1.0, 2: -1.0,  # game 0: the learner (seat 0) alone first
               3: 1.0, 4: 1.0, 5: -2.0,   # game 1: the learner (seat 1) shares first place
               6: 1.0, 7: -1.0, 8: -1.0}  # game 2: the learner (seat 2) shares last place
    outcomes = league.update(*ending(3, 3, [0, 1, 2], rewards))
    assert [o.result for o in outcomes] == ["win", "win", "loss"]
    entry = league.entry("a")
    assert (entry.wins, entry.draws, entry.losses, entry.games) == (2, 0, 1, 3)
    assert league.since_snapshot["score"] == 2.0 and league.snapshot_due


def test_ratings_move_the_right_way_against_a_weaker_player() -> None:
    league = League(*layout(10, 2), opponents={"weak": first_legal, "strong": first_legal},
                    shares={"fixed": 1.0}, elo_k=20.0, seed=0)
    for _ in range(20):
        finish_all(league, {"weak": "win", "strong": "loss"})
    weak, strong = league.entry("weak"), league.entry("strong")
    assert strong.rating > league.settings.initial_rating > weak.rating
    assert (weak.wins, weak.losses, strong.wins, strong.losses) \
        == (weak.games, 0, 0, strong.games)
    assert weak.games + strong.games == 200
    assert weak.win_rate > 0.9 and strong.win_rate < 0.1
    # Elo is zero-sum: what the learner gained from one it lost to the other
    total = league.learner_rating + weak.rating + strong.rating
    assert total == pytest.approx(3 * league.settings.initial_rating)
    table = league.table()
    assert table.index("strong") < table.index("weak")  # best first


def test_a_snapshot_is_due_every_n_learner_steps() -> None:
    league = League(*layout(4, 2), shares={"self_play": 1.0}, snapshot_every=10, seed=0)
    active = np.tile([True, False], 4)  # seat 0 of each game moves: 4 learner steps
    for _ in range(3):
        assert not league.snapshot_due
        groups = league.policy_rows(active)
        assert groups[LEARNER].tolist() == [0, 2, 4, 6]
    assert league.learner_steps == 12 and league.snapshot_due
    policy = league.add_snapshot()
    assert policy == "snapshot-1" and not league.snapshot_due
    entry = league.entry(policy)
    assert (entry.kind, entry.created, entry.rating) == ("snapshot", 12, league.learner_rating)
    assert league.pool_ids == ("snapshot-1",) and len(league.history) == 1
    assert league.add_snapshot("mine") == "mine" and league.snapshots_taken == 2


def test_a_snapshot_is_due_when_the_learner_wins_enough_games() -> None:
    league = League(*layout(10, 2), opponents={"a": first_legal}, shares={"fixed": 1.0},
                    snapshot_every=None, snapshot_win_rate=0.7, snapshot_min_games=30, seed=0)
    finish_all(league, default="win")
    finish_all(league, default="loss")  # 10 of 20: not enough games, nor wins
    assert not league.snapshot_due
    finish_all(league, default="win")  # 20 of 30: 0.67
    assert not league.snapshot_due
    finish_all(league, default="draw")  # 25 of 40: 0.625
    assert not league.snapshot_due
    finish_all(league, default="win")
    finish_all(league, default="win")  # 45 of 60 = 0.75
    assert league.snapshot_due
    league.add_snapshot()
    assert league.since_snapshot == {"steps": 0, "games": 0, "score": 0.0}
    assert not league.snapshot_due


@pytest.mark.parametrize("eviction", ["oldest", "weakest"])
def test_a_full_pool_evicts_a_snapshot_which_retires_when_its_games_end(eviction: str) -> None:
    league = League(*layout(40, 2), shares={"snapshots": 1.0}, max_snapshots=2,
                    eviction=eviction, sampling="uniform", seed=0)
    first, second = league.add_snapshot(), league.add_snapshot()
    finish_all(league)  # the games now draw from both
    assert set(league.opponents) == {first, second}
    league.entry(first).rating, league.entry(second).rating = 1200.0, 900.0
    third = league.add_snapshot()
    evicted = first if eviction == "oldest" else second
    assert league.pool_ids == tuple(p for p in (first, second, third) if p != evicted)
    assert evicted in league.opponents  # its games go on ...
    assert league.pop_retired() == []
    finish_all(league)  # ... to their end; then it retires, once
    assert evicted not in league.opponents
    assert league.pop_retired() == [evicted] and league.pop_retired() == []
    assert evicted in league.ratings()  # still rated and in the table
    assert "retired" in league.table()


def test_removed_entries_and_unknown_ids_give_clear_errors() -> None:
    league = League(*layout(4, 2), opponents={"a": first_legal, "b": first_legal},
                    shares={"fixed": 1.0}, seed=3)
    playing = set(league.opponents)
    league.remove("a")
    assert set(league.opponents) == playing  # a still plays its games
    with pytest.raises(ValueError, match="'a' was already removed"):
        league.remove("a")
    with pytest.raises(ValueError, match=r"unknown policy id 'zed': the league knows "
                                         r"'learner' and 'a', 'b'"):
        league.rows_of("zed")
    with pytest.raises(ValueError, match="unknown policy id"):
        league.remove("zed")
    finish_all(league)
    assert league.opponents == ("b",) * 4 and league.pop_retired() == ["a"]
    with pytest.raises(ValueError, match="'a' is a snapshot or retired"):
        league.evaluate(None, first_legal, 2, anchors=["a"])  # type: ignore[arg-type]
    league.remove("b")  # nobody left to draw: the fixed share plays self-play
    finish_all(league)
    assert league.opponents == (LEARNER,) * 4


@pytest.mark.parametrize("kwargs, message", [
    ({"shares": {"self_play": 0.5, "snapshots": 0.4}}, r"add up to 1, got .* \(sum 0.9\)"),
    ({"shares": {"self_play": 0.5, "others": 0.5}}, "expected shares of"),
    ({"shares": {"self_play": 1.5, "fixed": -0.5}}, "between 0 and 1"),
    ({"sampling": "greedy"}, "expected sampling to be one of"),
    ({"eviction": "random"}, "expected eviction in"),
    ({"snapshot_every": 0}, "snapshot_every to be a positive int"),
    ({"max_snapshots": True}, "max_snapshots to be a positive int"),
    ({"snapshot_win_rate": 1.5}, "snapshot_win_rate"),
    ({"elo_k": 0}, "positive elo_k"),
    ({"opponents": {LEARNER: first_legal}}, "cannot be one of its own opponents"),
    ({"opponents": {"a": 3}}, "expected a callable act"),
    ({"opponents": {7: first_legal}}, "non-empty string"),
])
def test_arguments_are_checked(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        League(*layout(2, 2), **kwargs)


def test_ids_are_unique_and_weights_positive() -> None:
    league = League(*layout(2, 2), opponents={"a": first_legal})
    with pytest.raises(ValueError, match="'a' is already in the league"):
        league.add_anchor("a", first_legal)
    with pytest.raises(ValueError, match="positive weight"):
        league.add_opponent("b", first_legal, weight=0.0)


def test_pfsp_hard_favours_the_opponents_the_learner_loses_to() -> None:
    league = League(*layout(500, 2), opponents={"hard": first_legal, "easy": first_legal},
                    shares={"fixed": 1.0}, sampling=PFSP("hard", power=2.0, floor=0.05),
                    seed=0)
    for _ in range(6):
        finish_all(league, {"hard": "loss", "easy": "win"})
    share = league.opponents.count("hard") / 500
    # weights: hard (1 - ~0)^2 ~ 1, easy max((1 - ~1)^2, 0.05) = 0.05
    assert 0.9 < share < 0.99


def test_pfsp_variance_favours_the_opponents_the_learner_is_even_with() -> None:
    league = League(*layout(600, 2),
                    opponents={"hard": first_legal, "even": first_legal, "easy": first_legal},
                    shares={"fixed": 1.0}, sampling=PFSP("variance", floor=0.01), seed=0)
    for _ in range(8):
        finish_all(league, {"hard": "loss", "even": "draw", "easy": "win"})
    counts = {p: league.opponents.count(p) for p in ("hard", "even", "easy")}
    assert counts["even"] > 0.8 * 600 and counts["hard"] > 0 and counts["easy"] > 0


def test_recency_and_uniform_draws() -> None:
    league = League(*layout(3000, 2), shares={"snapshots": 1.0}, sampling=Recency(0.5),
                    seed=0)
    ids = [league.add_snapshot() for _ in range(3)]
    finish_all(league)
    shares = [league.opponents.count(p) / 3000 for p in ids]
    assert shares == pytest.approx([1 / 7, 2 / 7, 4 / 7], abs=0.03)  # 0.25 : 0.5 : 1
    league.sampling = Uniform()
    finish_all(league)
    assert [league.opponents.count(p) / 3000 for p in ids] == pytest.approx([1 / 3] * 3,
                                                                             abs=0.03)


def test_opponent_weights_scale_the_draws() -> None:
    league = League(*layout(2000, 2), shares={"fixed": 1.0}, sampling="uniform", seed=0)
    league.add_opponent("a", first_legal, weight=3.0)
    league.add_opponent("b", first_legal)
    finish_all(league)
    assert league.opponents.count("a") / 2000 == pytest.approx(0.75, abs=0.03)


def test_anchors_play_only_evaluation_unless_asked() -> None:
    league = League(*layout(50, 2), shares={"fixed": 1.0}, seed=0)
    league.add_anchor("judge", first_legal)
    finish_all(league)
    assert set(league.opponents) == {LEARNER} and league.anchors == {"judge": first_legal}
    league.add_anchor("sparring", first_legal, train=True)
    finish_all(league)
    assert set(league.opponents) == {"sparring"}


def test_act_fixed_moves_the_fixed_players_and_returns_the_rest() -> None:
    league = League(*layout(6, 2), opponents={"rnd": RandomPlayer(seed=0)},
                    shares={"self_play": 0.5, "snapshots": 0.0, "fixed": 0.5}, seed=2)
    mask = np.zeros((12, 4), dtype=np.int8)
    mask[:, 2] = 1  # one legal move everywhere
    obs = {"observation": np.zeros((12, 3), np.float32), "action_mask": mask}
    actions = np.full(12, -1)
    groups = league.policy_rows()
    rest = league.act_fixed(obs, groups, actions)
    assert list(rest) == [LEARNER]
    assert (actions[groups["rnd"]] == 2).all() and (actions[rest[LEARNER]] == -1).all()
    broken = League(*layout(6, 2), opponents={"broken": lambda o, m: np.zeros(1, np.int64)},
                    shares={"fixed": 1.0})
    with pytest.raises(ValueError, match=r"player 'broken' returned \(1,\) actions for 6 rows"):
        broken.act_fixed(obs, broken.policy_rows(), actions)


def test_the_same_seed_gives_the_same_draws() -> None:
    def run(seed: int) -> list:
        league = League(*layout(6, 2), opponents={"a": first_legal, "b": first_legal},
                        shares={"self_play": 0.4, "snapshots": 0.3, "fixed": 0.3}, seed=seed)
        seen = [league.opponents]
        for step in range(12):
            if step % 3 == 0:
                league.add_snapshot()
            league.update(*ending(6, 2, [step % 6], {2 * (step % 6): 1.0}))
            seen.append(league.opponents)
        return seen

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_three_seats_rotate_and_rate_by_the_share_of_seats_beaten() -> None:
    """One three-seat game against a fixed opponent: the learner's seat moves 0, 1, 2, 0;
    first place alone scores 1, the middle 0.5, last 0; Elo moves by that score."""
    league = League(*layout(1, 3), opponents={"fixed": first_legal}, shares={"fixed": 1.0},
                    elo_k=16.0, seed=0)
    returns = [[2.0, -1.0, -1.0], [1.0, 0.0, -1.0], [1.0, 0.0, -1.0], [-1.0, 3.0, -2.0]]
    expected = [("win", 1.0), ("draw", 0.5), ("loss", 0.0), ("draw", 0.5)]
    for game, (values, (result, score)) in enumerate(zip(returns, expected, strict=True)):
        seat = game % 3
        assert int(league.learner_seat[0]) == seat and league.opponents == ("fixed",)
        before = league.learner_rating
        chance = 1.0 / (1.0 + 10.0 ** ((league.entry("fixed").rating - before) / 400.0))
        rewards = dict(enumerate(values))
        (outcome,) = league.update(*ending(1, 3, [0], rewards))
        assert (outcome.learner_seat, outcome.result) == (seat, result)
        assert outcome.learner_return == values[seat]
        assert league.learner_rating - before == pytest.approx(16.0 * (score - chance))
    assert league.entry("fixed").games == 4
