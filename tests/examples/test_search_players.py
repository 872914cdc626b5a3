"""The search players of examples/search_players.py: conventions, optimality, scores, seeds."""

from __future__ import annotations

import functools
import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

from fastvec.selfplay import RandomPlayer

ROOT = Path(__file__).resolve().parents[2]
SEARCH_PLAYERS = ROOT / "examples" / "search_players.py"


def _load(path: Path, name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


sp = _load(SEARCH_PLAYERS, "search_players")

TTT_LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8),
             (2, 4, 6)]


def _pettingzoo():
    return pytest.importorskip("pettingzoo.classic")


def _batch(obs: dict) -> tuple[np.ndarray, np.ndarray]:
    return obs["observation"][None], obs["action_mask"][None]


def _play(env, players: dict, seed: int) -> dict:
    """One game of a PettingZoo AEC env; the final reward of each agent."""
    env.reset(seed=seed)
    rewards = dict.fromkeys(env.agents, 0)
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, _ = env.last()
        rewards[agent] = reward
        if terminated or truncated:
            env.step(None)
            continue
        action = players[agent](*_batch(obs))
        assert action.shape == (1,) and action.dtype == np.int64
        assert obs["action_mask"][action[0]] == 1
        env.step(int(action[0]))
    return rewards


def _immediate_outcome(make_env, history: list[int], action: int) -> float | None:
    """The mover's reward if ``action`` after the moves ``history`` ends the game, else None."""
    trial = make_env()
    trial.reset(seed=0)
    for move in history:
        trial.step(move)
    mover = trial.agent_selection
    trial.step(action)
    return trial.rewards[mover] if trial.terminations[mover] else None


def _random_games(make_env, games: int, score):
    """Random games; ``score(obs, outcomes)`` at each move, outcomes of each legal action."""
    env = make_env()
    rng = np.random.default_rng(0)
    for game in range(games):
        env.reset(seed=game)
        history: list[int] = []
        while not any(env.terminations.values()):
            obs = env.last()[0]
            legal = np.flatnonzero(obs["action_mask"])
            score(obs, {int(a): _immediate_outcome(make_env, history, int(a)) for a in legal})
            history.append(int(rng.choice(legal)))
            env.step(history[-1])


# --- tic-tac-toe ---------------------------------------------------------------------------


def test_tictactoe_conventions_against_pettingzoo() -> None:
    """Occupied cells, immediate wins and draws of real games show in the values."""
    seen = {1: 0, 0: 0}

    def check(obs: dict, outcomes: dict) -> None:
        values = sp.tictactoe_values(obs["observation"][None])[0]
        np.testing.assert_array_equal(values != -2, obs["action_mask"] == 1)
        for action, outcome in outcomes.items():
            if outcome is not None:  # a win at once (+1), or a draw by the last move
                assert values[action] == outcome
                seen[outcome] += 1

    _random_games(_pettingzoo().tictactoe_v3.env, 15, check)
    assert seen[1] > 10 and seen[0] > 0


@functools.cache
def _minimax(cells: tuple[int, ...]) -> int:
    """Plain minimax value for the mover (1) of a board of 0 / 1 / 2 cells."""
    values = [_move_value(cells, i) for i in range(9) if cells[i] == 0]
    return max(values) if values else 0


def _move_value(cells: tuple[int, ...], i: int) -> int:
    after = list(cells)
    after[i] = 1
    if any(all(after[j] == 1 for j in line) for line in TTT_LINES):
        return 1
    if all(after):
        return 0
    return -_minimax(tuple((3 - c) % 3 for c in after))


def _reachable(cells: tuple[int, ...], seen: set) -> None:
    if cells in seen:
        return
    seen.add(cells)
    for i in range(9):
        if cells[i] == 0:
            after = list(cells)
            after[i] = 1
            won = any(all(after[j] == 1 for j in line) for line in TTT_LINES)
            if not won and not all(after):
                _reachable(tuple((3 - c) % 3 for c in after), seen)


def test_tictactoe_values_match_plain_minimax_on_every_reachable_position() -> None:
    seen: set = set()
    _reachable((0,) * 9, seen)
    assert len(seen) == 4520  # the reachable positions of an unfinished game
    boards = np.array(sorted(seen))
    obs = np.stack([boards == 1, boards == 2], axis=-1).reshape(-1, 3, 3, 2).astype(np.int8)
    values = sp.tictactoe_values(obs)
    expected = np.array([[_move_value(b, i) if b[i] == 0 else -2 for i in range(9)]
                         for b in map(tuple, boards)])
    np.testing.assert_array_equal(values, expected)


def test_tictactoe_known_values() -> None:
    empty = np.zeros((1, 3, 3, 2), dtype=np.int8)
    np.testing.assert_array_equal(sp.tictactoe_values(empty), np.zeros((1, 9)))
    # X (the mover) at 0 and 1, O at 3 and 4: 2 wins, 5 blocks and draws, the rest lose.
    board = np.zeros((9, 2), dtype=np.int8)
    board[[0, 1], 0] = 1
    board[[3, 4], 1] = 1
    values = sp.tictactoe_values(board.reshape(1, 3, 3, 2))[0]
    np.testing.assert_array_equal(values, [-2, -2, 1, -2, -2, 0, -1, -1, -1])
    # O to move after X took a corner: only the centre draws.
    board = np.zeros((9, 2), dtype=np.int8)
    board[0, 1] = 1
    values = sp.tictactoe_values(board.reshape(1, 3, 3, 2))[0]
    np.testing.assert_array_equal(values, [-2, -1, -1, -1, 0, -1, -1, -1, -1])


def test_perfect_tictactoe_never_loses_to_random_and_draws_itself() -> None:
    env = _pettingzoo().tictactoe_v3.env()
    first, second = env.possible_agents
    perfect = sp.PerfectTicTacToe(seed=1)
    rand = RandomPlayer(seed=2)
    won = 0
    for game in range(300):
        seat, other = (first, second) if game % 2 else (second, first)
        rewards = _play(env, {seat: perfect, other: rand}, seed=game)
        assert rewards[seat] >= 0
        won += rewards[seat] == 1
    assert won > 200
    for game in range(20):
        rewards = _play(env, {first: perfect, second: sp.PerfectTicTacToe(game)}, seed=game)
        assert rewards == {first: 0, second: 0}


# --- connect four ----------------------------------------------------------------------------


def _connect_four_env(moves: list[int]):
    env = _pettingzoo().connect_four_v3.env()
    env.reset(seed=0)
    for move in moves:
        env.step(move)
    return env


def test_connect_four_conventions_against_pettingzoo() -> None:
    """Full columns and immediate wins of real games show in the depth-1 scores."""
    seen = {"wins": 0, "full": 0}

    def check(obs: dict, outcomes: dict) -> None:
        scores = sp.connect_four_scores(obs["observation"][None], 1)[0]
        np.testing.assert_array_equal(scores != sp.ILLEGAL, obs["action_mask"] == 1)
        seen["full"] += (obs["action_mask"] == 0).any()
        for action, outcome in outcomes.items():
            assert scores[action] == (999 if outcome == 1 else 0)
            seen["wins"] += outcome == 1

    _random_games(_pettingzoo().connect_four_v3.env, 12, check)
    assert seen["wins"] > 5 and seen["full"] > 0


@pytest.mark.parametrize(("moves", "best"), [
    ([0, 6, 0, 6, 0, 6], 0),  # player_1 wins at once in column 0 (vertical)
    ([0, 0, 1, 1, 2, 6], 3),  # player_1 wins at once in column 3 (bottom row)
    ([0, 6, 0, 6, 0], 0),  # player_2 blocks column 0
    ([0, 0, 1, 1, 2], 3),  # player_2 blocks column 3
])
@pytest.mark.parametrize("depth", [2, 3, 4])
def test_connect_four_takes_wins_and_blocks_losses(moves: list[int], best: int,
                                                   depth: int) -> None:
    obs = _connect_four_env(moves).last()[0]
    player = sp.NegamaxConnectFour(depth, seed=0)
    assert player(*_batch(obs)).tolist() == [best]
    scores = sp.connect_four_scores(obs["observation"][None], depth)[0]
    np.testing.assert_array_equal(scores, sp.alphabeta_scores(obs["observation"], depth))


def _fours(grid: np.ndarray) -> np.ndarray:
    """Per player (1, 2), whether ``grid`` (6 x 7 of 0 / 1 / 2) has four in a line."""
    found = np.zeros(3, dtype=bool)
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r, c in itertools.product(range(6), range(7)):
            cells = [(r + k * dr, c + k * dc) for k in range(4)]
            if all(0 <= y < 6 and 0 <= x < 7 for y, x in cells):
                who = {grid[y, x] for y, x in cells}
                if len(who) == 1:
                    found[who.pop()] = True
    return found[1:]


def _random_position(rng: np.random.Generator, length: int) -> np.ndarray:
    """An undecided position after up to ``length`` random moves that win nothing."""
    grid = np.zeros((6, 7), dtype=np.int8)
    who = 1
    for _ in range(length):
        choices = []
        for col in np.flatnonzero(grid[0] == 0):
            row = np.flatnonzero(grid[:, col] == 0).max()
            trial = grid.copy()
            trial[row, col] = who
            if not _fours(trial).any():
                choices.append(trial)
        if not choices:
            break
        grid = choices[rng.integers(len(choices))]
        who = 3 - who
    return np.stack([grid == who, grid == 3 - who], axis=-1).astype(np.int8)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_vectorized_scores_equal_alphabeta(depth: int) -> None:
    rng = np.random.default_rng(depth)
    count = {1: 60, 2: 60, 3: 40, 4: 16}[depth]
    lengths = rng.integers(0, 42, size=count)
    lengths[:4] = [0, 39, 40, 41]  # the empty board, and boards about to fill up
    obs = np.stack([_random_position(rng, n) for n in lengths])
    scores = sp.connect_four_scores(obs, depth, max_nodes=7**depth * 5)  # several chunks
    expected = np.stack([sp.alphabeta_scores(o, depth) for o in obs])
    np.testing.assert_array_equal(scores, expected)
    assert (expected == sp.ILLEGAL).any()  # full columns
    assert (expected == 999).any()  # wins at once
    if depth >= 2:
        assert (expected == -998).any()  # losses at once


def test_connect_four_scores_of_a_full_board_draw() -> None:
    # One cell left: filling it ends the game in a draw (scored 0, not a leaf issue).
    rng = np.random.default_rng(5)
    obs = next(o for o in (_random_position(rng, 41) for _ in range(50))
               if o.sum() == 41 and o[..., 0].sum() == 20)
    for depth in (1, 3):
        scores = sp.connect_four_scores(obs[None], depth)[0]
        assert sorted(scores.tolist()) == [sp.ILLEGAL] * 6 + [0]


def test_negamax_beats_random() -> None:
    env = _pettingzoo().connect_four_v3.env()
    first, second = env.possible_agents
    wins = 0
    for game in range(20):
        seat, other = (first, second) if game % 2 else (second, first)
        rewards = _play(env, {seat: sp.NegamaxConnectFour(3, seed=game),
                              other: RandomPlayer(seed=game)}, seed=game)
        wins += rewards[seat] == 1
    assert wins >= 15  # about 96% over 1,000 games; these seeded 20 games win 17


# --- seeds, batches, edge cases ----------------------------------------------------------------

PLAYERS = {
    "random-ttt": (lambda seed: RandomPlayer(seed=seed), (3, 3, 2), 9),
    "perfect-ttt": (lambda seed: sp.PerfectTicTacToe(seed), (3, 3, 2), 9),
    "random-c4": (lambda seed: RandomPlayer(seed=seed), (6, 7, 2), 7),
    "negamax-c4": (lambda seed: sp.NegamaxConnectFour(3, seed=seed), (6, 7, 2), 7),
}


@pytest.mark.parametrize("name", PLAYERS)
def test_ties_are_broken_at_random_and_seeded(name: str) -> None:
    make, shape, actions = PLAYERS[name]
    obs = np.zeros((40, *shape), dtype=np.int8)
    mask = np.ones((40, actions), dtype=np.int8)
    moves = [make(seed)(obs, mask) for seed in range(4)]
    assert all(m.dtype == np.int64 and m.shape == (40,) for m in moves)
    assert len({tuple(m) for m in moves}) == 4
    assert all(len(set(m.tolist())) == actions for m in moves)  # every move, some row
    np.testing.assert_array_equal(make(7)(obs, mask), make(7)(obs, mask))
    gen = make(np.random.default_rng(3))
    np.testing.assert_array_equal(gen(obs, mask), make(3)(obs, mask))
    # An empty batch, and a mask of bools that allows one move.
    assert make(0)(obs[:0], mask[:0]).shape == (0,)
    only = np.zeros((40, actions), dtype=bool)
    only[:, 2] = True
    assert (make(0)(obs, only) == 2).all()


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError):
        sp.NegamaxConnectFour(0)
    with pytest.raises(ValueError):
        sp.connect_four_scores(np.zeros((1, 6, 7, 2), dtype=np.int8), 0)


# --- connect four: the heuristic search (connect_four_search.py) ------------------------------

cs = _load(ROOT / "examples" / "connect_four_search.py", "connect_four_search")


def _grid(obs: np.ndarray) -> list[list[int]]:
    """A ``[6, 7, 2]`` observation as the plain reference's grid: 1 the mover's, 2 the other's."""
    return (obs[..., 0] + 2 * obs[..., 1]).astype(int).tolist()


def _four_through(grid: np.ndarray, row: int, col: int) -> bool:
    """Whether the piece at ``(row, col)`` makes four in a line (runs from it, each way)."""
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        run = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < 6 and 0 <= c < 7 and grid[r, c] == grid[row, col]:
                run, r, c = run + 1, r + sign * dr, c + sign * dc
        if run >= 4:
            return True
    return False


@functools.cache
def _positions() -> np.ndarray:
    """100 undecided positions after 0 to 41 random moves that win nothing (as
    :func:`_random_position`, quicker), the first four of 0, 1, 40 and 41 moves."""
    rng = np.random.default_rng(11)
    lengths = rng.integers(0, 42, size=100)
    lengths[:4] = [0, 1, 40, 41]  # the empty board, one piece, boards about to fill up
    boards = []
    for length in lengths:
        grid = np.zeros((6, 7), dtype=np.int8)
        who = 1
        for _ in range(length):
            choices = []
            for col in np.flatnonzero(grid[0] == 0):
                row = np.flatnonzero(grid[:, col] == 0).max()
                grid[row, col] = who
                if not _four_through(grid, row, col):
                    choices.append((row, col))
                grid[row, col] = 0
            if not choices:
                break
            grid[choices[rng.integers(len(choices))]] = who
            who = 3 - who
        boards.append(np.stack([grid == who, grid == 3 - who], axis=-1))
    return np.array(boards, dtype=np.int8)


def test_heuristic_equals_the_plain_window_count_on_random_positions() -> None:
    obs = _positions()
    values = cs.heuristic_values(obs)
    expected = [cs.heuristic_value(_grid(o), 1) for o in obs]
    np.testing.assert_array_equal(values, expected)
    # Zero-sum: the same position from the other side's view is worth the opposite.
    np.testing.assert_array_equal(cs.heuristic_values(obs[..., ::-1]), -values)
    assert values[0] == 0 and len(set(values.tolist())) > 30
    assert np.abs(values).max() <= 3 * 6 + 5 * 69  # below every win: wins dominate


def test_heuristic_worked_by_hand() -> None:
    """The mover holds the bottom row's columns 0-2 and the centre cell above column 3's
    bottom is empty; the opponent holds column 6's two bottom cells and the bottom of 3."""
    grid = np.zeros((6, 7), dtype=np.int8)  # row 0 the top
    grid[5, [0, 1, 2]] = 1
    grid[[5, 4], 6] = 2
    obs = np.stack([grid == 1, grid == 2], axis=-1).astype(np.int8)[None]
    # Mover: an open three (columns 0-3 of the bottom row) 5, an open two (1-4) 2.
    # Opponent: an open two in column 6 (heights 0-3) -2.
    assert cs.heuristic_values(obs).tolist() == [5 + 2 - 2]
    grid[5, 3] = 2  # now the bottom row is blocked, and the opponent has a centre piece
    obs = np.stack([grid == 1, grid == 2], axis=-1).astype(np.int8)[None]
    # Mover: nothing open in the bottom row; diagonals and columns hold one piece each.
    # Opponent: centre 3, column 6's open two 2, the bottom row 3-6 (two of theirs) 2.
    assert cs.heuristic_values(obs).tolist() == [-(3 + 2 + 2)]
    assert cs.heuristic_value(_grid(obs[0]), 1) == -(3 + 2 + 2)


def test_popcount_without_bitwise_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy before 2.0 has no ``bitwise_count``: the fallback counts the same bits."""
    x = np.random.default_rng(0).integers(0, 1 << 62, size=500, dtype=np.int64)
    x[:3] = [0, 1, (1 << 49) - 1]
    expected = [bin(v).count("1") for v in x.tolist()]
    monkeypatch.delattr(np, "bitwise_count", raising=False)
    np.testing.assert_array_equal(cs._popcount(x), expected)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_heuristic_search_equals_plain_alphabeta(depth: int) -> None:
    obs = _positions()[::{1: 2, 2: 3, 3: 6, 4: 17}[depth]]  # 50, 34, 17 and 6 of them
    scores = cs.heuristic_scores(obs, depth, max_nodes=7**depth * 3)  # several chunks
    expected = np.stack([cs.heuristic_alphabeta_scores(o, depth) for o in obs])
    np.testing.assert_array_equal(scores, expected)
    assert (expected == sp.ILLEGAL).any() and (expected == 999).any()
    quiet = (np.abs(expected) < 900) & (expected != sp.ILLEGAL)
    assert len(set(expected[quiet].tolist())) > 5  # the leaves are evaluated, not 0


def test_heuristic_scores_are_mirror_symmetric() -> None:
    obs = _positions()
    scores = cs.heuristic_scores(obs, 3)
    np.testing.assert_array_equal(cs.heuristic_scores(obs[:, :, ::-1], 3), scores[:, ::-1])


@pytest.mark.parametrize(("moves", "best", "depths"), [
    ([0, 6, 0, 6, 0, 6], 0, (1, 2, 3, 5)),  # player_1 wins at once in column 0 (vertical)
    ([0, 0, 1, 1, 2, 6], 3, (1, 2, 3, 5)),  # player_1 wins at once in column 3 (bottom row)
    ([0, 1, 1, 2, 3, 2, 2, 3, 6, 3], 3, (1, 2, 3, 5)),  # player_1 wins on a diagonal
    ([0, 6, 0, 6, 0], 0, (2, 3, 4, 5)),  # player_2 blocks column 0
    ([0, 0, 1, 1, 2], 3, (2, 3, 4, 5)),  # player_2 blocks column 3
    ([0, 1, 1, 2, 3, 2, 2, 3, 3], 3, (2, 3, 4, 5)),  # player_2 blocks the diagonal
])
def test_heuristic_takes_wins_and_blocks_losses(moves: list[int], best: int,
                                                depths: tuple[int, ...]) -> None:
    obs = _connect_four_env(moves).last()[0]
    for depth in depths:
        moves_made = cs.HeuristicConnectFour(depth, seed=0)(*_batch(obs)).tolist()
        scores = cs.heuristic_scores(obs["observation"][None], depth)[0]
        if depth <= 3:
            np.testing.assert_array_equal(
                scores, cs.heuristic_alphabeta_scores(obs["observation"], depth))
        assert moves_made == [best], (depth, scores)


def test_heuristic_search_beats_tactics_only_search_of_the_same_depth() -> None:
    env = _pettingzoo().connect_four_v3.env()
    first, second = env.possible_agents
    wins = 0
    for game in range(20):
        seat, other = (first, second) if game % 2 else (second, first)
        rewards = _play(env, {seat: cs.HeuristicConnectFour(2, seed=game),
                              other: sp.NegamaxConnectFour(2, seed=game)}, seed=game)
        wins += rewards[seat] == 1
    assert wins >= 16  # these seeded 20 games: 20 (depth 1: 19, depth 3: 20)


def test_heuristic_seeds_and_depth() -> None:
    """Columns 2 and 4 of the empty board are mirror images, equally scored: the ties
    are broken at random, by the player's own seed."""
    obs = np.zeros((40, 6, 7, 2), dtype=np.int8)
    mask = np.zeros((40, 7), dtype=bool)
    mask[:, [2, 4]] = True
    moves = cs.HeuristicConnectFour(3, seed=1)(obs, mask)
    assert set(moves.tolist()) == {2, 4}
    np.testing.assert_array_equal(cs.HeuristicConnectFour(3, seed=1)(obs, mask), moves)
    full = np.ones((40, 7), dtype=bool)
    assert (cs.HeuristicConnectFour(3, seed=1)(obs, full) == 3).all()  # the centre
    assert cs.HeuristicConnectFour(2, seed=0)(obs[:0], full[:0]).shape == (0,)
    with pytest.raises(ValueError):
        cs.HeuristicConnectFour(0)
