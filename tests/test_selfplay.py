"""fastvec.selfplay: every game's seats assigned, seats alternating, new draws only when a
game ends, and the learner's wins, draws and losses as a hand-written script says."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from fastvec.selfplay import LEARNER, RANDOM, RESULTS, Outcome, SelfPlay


def layout(num_games: int, num_seats: int) -> tuple[np.ndarray, np.ndarray]:
    """``game_of_row`` and ``seat_of_row`` of consecutive games, as the vector envs lay out."""
    rows = np.arange(num_games * num_seats)
    return rows // num_seats, rows % num_seats


def quiet(num_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """A step in which nothing ends: rewards, terminations, truncations, infos."""
    no = np.zeros(num_rows, dtype=bool)
    return np.zeros(num_rows), no, no.copy(), {"alive": ~no, "active": ~no}


def ending(num_games: int, num_seats: int, games: list[int],
           rewards: dict[int, float] | None = None) -> tuple:
    """A step in which ``games`` end (every seat terminated); ``rewards`` by row."""
    r, term, trunc, infos = quiet(num_games * num_seats)
    game_of_row, _ = layout(num_games, num_seats)
    term[np.isin(game_of_row, games)] = True
    for row, value in (rewards or {}).items():
        r[row] = value
    return r, term, trunc, infos


def check_partition(selfplay: SelfPlay) -> None:
    """Every row is played by exactly one policy; one learner seat per game; the other
    seats of a game share one opponent."""
    groups = selfplay.policy_rows()
    assert next(iter(groups)) == LEARNER
    rows = np.sort(np.concatenate(list(groups.values())))
    assert rows.tolist() == list(range(selfplay.game_of_row.size))
    learner = groups[LEARNER]
    assert np.bincount(selfplay.game_of_row[learner], minlength=selfplay.num_games).tolist() \
        == [1] * selfplay.num_games
    seats = selfplay.learner_seat[selfplay.game_of_row[learner]]
    assert (selfplay.seat_of_row[learner] == seats).all()
    for policy, policy_rows in groups.items():
        if policy != LEARNER:
            for game in np.unique(selfplay.game_of_row[policy_rows]):
                assert selfplay.opponents[game] == policy


# -- the helper on its own, driven by scripted steps -------------------------------


@pytest.mark.parametrize("num_seats", [2, 3])
def test_every_game_has_one_learner_seat_and_one_opponent(num_seats: int) -> None:
    selfplay = SelfPlay(*layout(7, num_seats), pool=[RANDOM, "a", "b"], seed=1)
    assert (selfplay.num_games, selfplay.num_seats) == (7, num_seats)
    assert selfplay.learner_seat.tolist() == [g % num_seats for g in range(7)]
    check_partition(selfplay)
    assert set(selfplay.opponents) <= {RANDOM, "a", "b"}
    for step in range(30):  # games end at random; the partition holds throughout
        ended = [g for g in range(7) if (step + g) % 4 == 0]
        selfplay.update(*ending(7, num_seats, ended))
        check_partition(selfplay)


def test_rows_of_selects_rows_where_given() -> None:
    selfplay = SelfPlay(*layout(3, 2), pool=["a"], seed=0)
    assert selfplay.rows_of(LEARNER).tolist() == [0, 3, 4]  # seats 0, 1, 0
    assert selfplay.rows_of("a").tolist() == [1, 2, 5]
    active = np.array([True, False, True, False, False, True])
    assert selfplay.rows_of(LEARNER, active).tolist() == [0]
    assert selfplay.rows_of("a", active).tolist() == [2, 5]
    assert selfplay.rows_of("nobody").tolist() == []
    assert list(selfplay.policy_rows(np.zeros(6, bool))) == []
    assert {p: r.tolist() for p, r in selfplay.policy_rows(active).items()} \
        == {LEARNER: [0], "a": [2, 5]}


@pytest.mark.parametrize("num_seats", [2, 3])
def test_the_learner_moves_to_the_next_seat_each_time_its_game_ends(num_seats: int) -> None:
    selfplay = SelfPlay(*layout(2, num_seats), seed=0)
    seats = []
    for _ in range(2 * num_seats):
        selfplay.update(*ending(2, num_seats, [0]))  # only game 0 ends, again and again
        selfplay.update(*quiet(2 * num_seats))       # its reset step (NEXT_STEP)
        seats.append(selfplay.learner_seat.tolist())
    assert [s[0] for s in seats] == [(k + 1) % num_seats for k in range(2 * num_seats)]
    assert [s[1] for s in seats] == [1] * (2 * num_seats)  # game 1 never ended


def test_new_draws_only_when_a_game_ends() -> None:
    pool = [RANDOM] + [f"snapshot-{k}" for k in range(20)]
    selfplay = SelfPlay(*layout(8, 2), pool=pool, seed=3)
    before = selfplay.opponents
    for _ in range(10):
        assert selfplay.update(*quiet(16)) == []
    assert selfplay.opponents == before
    changed = set()
    for _ in range(20):  # game 5 alone ends: only its opponent is drawn again
        before = selfplay.opponents
        (outcome,) = selfplay.update(*ending(8, 2, [5]))
        assert outcome.game == 5 and outcome.opponent == before[5]
        after = selfplay.opponents
        assert [a for g, a in enumerate(after) if g != 5] == [b for g, b in enumerate(before)
                                                              if g != 5]
        changed.add(after[5])
    assert len(changed) > 5  # drawn from the pool each time, not kept


def test_a_game_ends_when_its_last_agent_leaves() -> None:
    """Seat 2 leaves first (terminated, then dead rows: not alive, no flags); the game is
    over only when seats 0 and 1 leave too, in a later step, one of them by truncation."""
    selfplay = SelfPlay(*layout(1, 3), pool=["a"], seed=0)
    r, term, trunc, infos = quiet(3)
    term[2], r[2] = True, 5.0
    assert selfplay.update(r, term, trunc, infos) == []
    r, term, trunc, infos = quiet(3)
    infos["alive"][2] = False  # the dead row
    assert selfplay.update(r, term, trunc, infos) == []
    r[:] = [1.0, 2.0, 0.0]
    term[0], trunc[1] = True, True
    (outcome,) = selfplay.update(r, term, trunc, infos)
    # learner in seat 0 got 1.0; seat 2 got 5.0 before leaving: a loss
    assert outcome == Outcome(0, "a", 0, "loss", 1.0)
    r, term, trunc, infos = quiet(3)  # the reset step: all alive, no flags, reward 0
    assert selfplay.update(r, term, trunc, infos) == []
    assert selfplay.learner_seat.tolist() == [1]


def test_a_step_with_no_game_left_and_no_flag_ends_nothing() -> None:
    """DISABLED autoreset: after a game is over its rows are dead until reset; those steps
    are not new ends."""
    selfplay = SelfPlay(*layout(2, 2), pool=["a"], seed=0)
    assert len(selfplay.update(*ending(2, 2, [0, 1]))) == 2
    r, term, trunc, infos = quiet(4)
    infos["alive"][:] = False
    for _ in range(3):
        assert selfplay.update(r, term, trunc, infos) == []
    assert sum(sum(c.values()) for c in selfplay.totals().values()) == 2


def test_outcomes_from_rewards_over_the_whole_game() -> None:
    """Rewards add up over a game, from the learner's point of view; reset() forgets them."""
    selfplay = SelfPlay(*layout(3, 2), pool=["a"], seed=0)  # learner rows 0, 3, 4
    r, term, trunc, infos = quiet(6)
    r[:] = [0.5, 0.0, 0.0, 0.25, 0.0, 0.0]
    selfplay.update(r, term, trunc, infos)
    outcomes = selfplay.update(*ending(3, 2, [0, 1, 2], {0: -0.25, 1: 0.25, 2: 1.0, 5: 2.0}))
    # game 0: 0.25 vs 0.25 draw; game 1: learner (row 3) 0.25 vs 1.0 loss; game 2: 0 vs 2 loss
    assert [(o.game, o.learner_seat, o.result, o.learner_return) for o in outcomes] \
        == [(0, 0, "draw", 0.25), (1, 1, "loss", 0.25), (2, 0, "loss", 0.0)]
    selfplay.update(*quiet(6))
    r, term, trunc, infos = quiet(6)
    r[1] = -3.0  # game 0's learner is in seat 1 now: row 1
    selfplay.update(r, term, trunc, infos)
    selfplay.reset()  # envs.reset(): the games restart, unjudged
    (outcome,) = selfplay.update(*ending(3, 2, [0], {1: 1.0}))
    assert (outcome.learner_seat, outcome.result, outcome.learner_return) == (1, "win", 1.0)
    assert selfplay.totals() == {"a": {"win": 1, "draw": 1, "loss": 2}}


def test_same_seed_same_draws() -> None:
    def run(seed: int) -> list:
        selfplay = SelfPlay(*layout(4, 2), pool=[RANDOM, "a", "b", "c"], seed=seed)
        seen = [selfplay.opponents]
        for step in range(12):
            selfplay.update(*ending(4, 2, [step % 4]))
            seen.append(selfplay.opponents)
        return seen

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_the_pool_grows_and_shrinks() -> None:
    selfplay = SelfPlay(*layout(50, 2), pool=[RANDOM], seed=0)
    assert set(selfplay.opponents) == {RANDOM}
    selfplay.add("snapshot-1")
    selfplay.add("snapshot-1")  # once only
    assert selfplay.pool == (RANDOM, "snapshot-1")
    assert set(selfplay.opponents) == {RANDOM}  # running games keep theirs
    selfplay.update(*ending(50, 2, list(range(50))))
    assert set(selfplay.opponents) == {RANDOM, "snapshot-1"}
    selfplay.remove(RANDOM)
    selfplay.update(*ending(50, 2, list(range(50))))
    assert set(selfplay.opponents) == {"snapshot-1"}
    assert selfplay.rows_of(RANDOM).size == 0 and RANDOM not in selfplay.policy_rows()
    with pytest.raises(ValueError, match="at least one opponent"):
        selfplay.remove("snapshot-1")
    with pytest.raises(ValueError, match="learner"):
        selfplay.add(LEARNER)
    with pytest.raises(ValueError, match="positive weight"):
        selfplay.add("snapshot-2", weight=0.0)


def test_draws_follow_the_weights() -> None:
    selfplay = SelfPlay(*layout(1000, 2), pool=["a", "b"], seed=0)
    selfplay.add("a", weight=3.0)  # already there: its weight changes
    assert selfplay.pool == ("a", "b")
    selfplay.update(*ending(1000, 2, list(range(1000))))
    share = selfplay.opponents.count("a") / 1000
    assert 0.7 < share < 0.8  # 3 / (3 + 1)


@pytest.mark.parametrize("game_of_row, seat_of_row", [
    ([0, 0, 1], [0, 1, 0]),          # game 1 lacks a seat
    ([0, 0, 1, 1], [0, 0, 0, 1]),    # a seat twice
    ([0, 1, 2], [0, 0, 0]),          # one seat per game: nobody to play against
    ([0, 0], [0, 1, 2]),             # lengths differ
    ([], []),
])
def test_rows_that_are_not_whole_games_are_refused(game_of_row: list, seat_of_row: list) -> None:
    with pytest.raises(ValueError, match="expected"):
        SelfPlay(game_of_row, seat_of_row)
    with pytest.raises(ValueError, match="at least one opponent"):
        SelfPlay(*layout(2, 2), pool=[])


def test_update_checks_its_arrays() -> None:
    selfplay = SelfPlay(*layout(2, 2))
    r, term, trunc, infos = quiet(3)
    with pytest.raises(ValueError, match="one reward, flag and alive per row"):
        selfplay.update(r, term, trunc, infos)


# -- on a vector env of real (tiny, numpy-only) PettingZoo games ---------------------

# (the tests above need numpy only; those below a PettingZoo game)
try:
    from pettingzoo import AECEnv
except ImportError:  # pragma: no cover - the multiagent extra is not installed
    AECEnv = object
needs_pettingzoo = pytest.mark.skipif(AECEnv is object, reason="needs pettingzoo")

CONTINUE, WIN, RESIGN, DRAW = range(4)


class Duel(AECEnv):
    """Two players move in turn; a move ends the game or not, as the action says.

    ``CONTINUE`` passes the turn; ``WIN``: the mover gets +1, the other -1; ``RESIGN``:
    the mover gets -1, the other +1; ``DRAW``: both 0.  Both agents are terminated
    when the game is decided, truncated after ``horizon`` moves.  Observation:
    ``{"observation": [moves, seat], "action_mask": every move for the mover, none
    for the other}``.
    """

    metadata = {"render_modes": [], "name": "duel_v0", "is_parallelizable": False}

    def __init__(self, horizon: int = 6) -> None:
        super().__init__()
        self.possible_agents = ["first", "second"]
        self.horizon = horizon
        self._obs_space = spaces.Dict({"observation": spaces.Box(0, 100, (2,), np.float32),
                                       "action_mask": spaces.Box(0, 1, (4,), np.int8)})
        self._action_space = spaces.Discrete(4)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._action_space

    def observe(self, agent: str) -> dict:
        mask = np.full(4, agent == self.agent_selection, dtype=np.int8)
        return {"observation": np.array([self.moves, self.possible_agents.index(agent)],
                                        np.float32), "action_mask": mask}

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.moves = 0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: {} for agent in self.agents}
        self.agent_selection = self.agents[0]

    def step(self, action: Any) -> None:
        mover = self.agent_selection
        if self.terminations[mover] or self.truncations[mover]:
            self._was_dead_step(action)
            return
        other = self.agents[1 - self.agents.index(mover)]
        self._cumulative_rewards[mover] = 0.0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.moves += 1
        if action in (WIN, RESIGN):
            self.rewards[mover], self.rewards[other] = (1.0, -1.0) if action == WIN else (-1.0, 1.0)
        if action != CONTINUE:
            self.terminations = dict.fromkeys(self.agents, True)
        elif self.moves >= self.horizon:
            self.truncations = dict.fromkeys(self.agents, True)
        self.agent_selection = other
        self._accumulate_rewards()


@needs_pettingzoo
def test_the_duel_passes_pettingzoo_api_test() -> None:
    from pettingzoo.test import api_test
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "all zeros": the first observation of seat 0
        api_test(Duel(), num_cycles=20)


# Game g plays these games in turn (the moves of the agent to move, in order); by hand:
# the learner starts in seat g % 2 and changes seat after every game.
SCRIPTS = {
    0: [[CONTINUE, WIN],            # learner first: second wins -> loss
        [RESIGN],                   # learner second: first resigns -> win
        [CONTINUE] * 6,             # learner first: truncated at the horizon -> draw
        [CONTINUE, CONTINUE, DRAW]],  # learner second: draw
    1: [[WIN],                      # learner second: first wins -> loss
        [CONTINUE, RESIGN],         # learner first: second resigns -> win
        [CONTINUE, CONTINUE, WIN]],  # learner second: first wins on move 3 -> loss
}
EXPECTED = {0: [(0, "loss", -1.0), (1, "win", 1.0), (0, "draw", 0.0), (1, "draw", 0.0)],
            1: [(1, "loss", -1.0), (0, "win", 1.0), (1, "loss", -1.0)]}


@needs_pettingzoo
@pytest.mark.parametrize("autoreset_mode", ["next_step", "same_step"])
def test_outcomes_of_scripted_games_on_a_vector_env(autoreset_mode: str) -> None:
    from fastvec.multiagent import make_multiagent
    envs = make_multiagent(Duel, 2, vector_kwargs={"autoreset_mode": autoreset_mode})
    try:
        selfplay = SelfPlay.from_env(envs, pool=[RANDOM, "a", "b"], seed=4)
        obs, infos = envs.reset(seed=0)
        moves = {g: [m for game in SCRIPTS[g] for m in game] for g in SCRIPTS}
        seen: dict[int, list] = {0: [], 1: []}
        opponents = {g: [selfplay.opponents[g]] for g in SCRIPTS}
        for _ in range(40):
            check_partition(selfplay)
            actions = np.zeros(envs.num_envs, dtype=np.int64)
            for row in np.flatnonzero(infos["active"]):
                game = int(envs.game_of_row[row])
                if moves[game]:
                    actions[row] = moves[game].pop(0)
            obs, rewards, terminations, truncations, infos = envs.step(actions)
            for outcome in selfplay.update(rewards, terminations, truncations, infos):
                seen[outcome.game].append((outcome.learner_seat, outcome.result,
                                           outcome.learner_return))
                assert outcome.opponent == opponents[outcome.game][-1]
                opponents[outcome.game].append(selfplay.opponents[outcome.game])
        for game, expected in EXPECTED.items():  # then it plays on (CONTINUE) to horizons
            assert seen[game][:len(expected)] == expected
            extra = seen[game][len(expected):]
            assert extra and extra == [((game + k) % 2, "draw", 0.0)
                                       for k in range(len(expected), len(seen[game]))]
        totals = {r: 0 for r in RESULTS}
        for counts in selfplay.totals().values():
            for result, n in counts.items():
                totals[result] += n
        assert sum(totals.values()) == len(seen[0]) + len(seen[1])
        for policy, counts in selfplay.totals().items():  # per opponent, by hand
            mine = [s[1] for g in SCRIPTS for s, o in zip(seen[g], opponents[g]) if o == policy]
            assert counts == {r: mine.count(r) for r in RESULTS}
    finally:
        envs.close()


@needs_pettingzoo
def test_games_whose_agents_leave_at_different_steps() -> None:
    """Three seats, the last leaving after move 2 or 3; a game of 5 moves then its reset
    step: each game ends every 6 steps, and the learner visits seats 0, 1, 2 in turn."""
    from fastvec.multiagent import make_multiagent
    from tests.support.games import TurnGame
    envs = make_multiagent(functools.partial(TurnGame, num_agents=3, horizon=5), 3)
    try:
        selfplay = SelfPlay.from_env(envs, seed=0)
        envs.reset(seed=0)
        ends = []
        for step in range(1, 25):
            _, rewards, terminations, truncations, infos = envs.step(np.zeros(9, np.int64))
            for outcome in selfplay.update(rewards, terminations, truncations, infos):
                ends.append((step, outcome.game, outcome.learner_seat))
        assert ends == [(step, game, (game + k) % 3) for k, step in enumerate([5, 11, 17, 23])
                        for game in range(3)]
    finally:
        envs.close()
