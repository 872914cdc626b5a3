"""Search players for PettingZoo's tic-tac-toe and connect four, batched with numpy.

Every player is a callable ``player(observation, action_mask) -> actions`` over a batch,
the convention of ``fastvec.selfplay`` opponents (whose ``RandomPlayer`` plays a uniformly
random legal move in any game):

- ``observation``: ``[B, H, W, 2]``, PettingZoo's ``obs["observation"]`` of the player to
  move: channel 0 holds the mover's pieces, channel 1 the opponent's.  Tic-tac-toe
  (``tictactoe_v3``) is ``3 x 3``, action ``a`` is cell ``(a // 3, a % 3)``; connect four
  (``connect_four_v3``) is ``6 x 7``, row 0 the top, action ``a`` drops into column ``a``.
- ``action_mask``: ``[B, A]``, 1 (or True) for a legal action.
- returns ``[B]`` int64 actions.  A row without a legal action gets action 0.

Ties are broken uniformly at random with the player's own generator (``seed``: an int,
a ``numpy.random.Generator`` or None), so the same seed plays the same moves.

Players: :class:`PerfectTicTacToe` (full minimax from
a table of every position) and :class:`NegamaxConnectFour` (a full-width, fixed-depth
negamax over bitboards, level by level over the whole batch; tactics only: it scores
wins and losses within its depth and every other leaf 0, so it plays at random unless
a tactic is in reach).  ``connect_four_search.py`` adds ``HeuristicConnectFour``, the
same search with a window heuristic at the leaves.  The values they act on:
:func:`tictactoe_values`, :func:`connect_four_scores` and, for one position in plain
Python, :func:`alphabeta_scores` (the reference the vectorized search is tested against).
An occupied tic-tac-toe cell has value -2 (the table is int8); a full connect-four column
scores :data:`ILLEGAL`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

__all__ = [
    "ILLEGAL",
    "NegamaxConnectFour",
    "PerfectTicTacToe",
    "alphabeta_scores",
    "connect_four_scores",
    "tictactoe_values",
]

ILLEGAL = -1_000_000
"""The score of a full connect-four column, below every real score (tic-tac-toe: -2)."""

Seed = int | np.random.Generator | None
Leaf = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""A connect-four evaluation ``leaf(pieces, mask) -> values``: int64 bitboards of the
pieces of the side that just moved and of all pieces (the layout below), int values for
that side, of magnitude under 900 (below every win within the depth)."""
GridLeaf = Callable[[list[list[int]], int], int]
"""The same evaluation in plain Python, ``leaf(grid, who) -> value`` for ``who``."""


def _choose(scores: np.ndarray, action_mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per row, a uniformly random legal action among those of the highest score."""
    legal = np.asarray(action_mask).astype(bool)
    scores = np.where(legal, scores, -np.inf)
    best = legal & (scores == scores.max(axis=1, keepdims=True))
    return np.where(best, rng.random(best.shape), -1.0).argmax(axis=1).astype(np.int64)


_TTT_LINES = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6],
                       [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]])
_POW3 = 3 ** np.arange(9)


@functools.cache
def _tictactoe_table() -> np.ndarray:
    """Minimax value of each move of every position: ``[3**9, 9]`` int8, mover's view.

    A position is coded in base 3, cell ``i`` the digit of ``3**i``: 0 empty, 1 the
    mover's, 2 the opponent's.  +1 a win, 0 a draw, -1 a loss with perfect play; -2 an
    occupied cell, and every cell of a finished position (a line or a full board).
    Filled level by level, from eight filled cells down to none; built once (~30 ms).
    """
    digits = (np.arange(3**9)[:, None] // _POW3) % 3  # [19683, 9]
    swapped = ((3 - digits) % 3) @ _POW3  # the same position from the other side's view
    lines = digits[:, _TTT_LINES]  # [19683, 8, 3]
    done = ((lines == 1).all(-1) | (lines == 2).all(-1)).any(-1) | (digits != 0).all(1)
    table = np.full((3**9, 9), -2, dtype=np.int8)
    value = np.zeros(3**9, dtype=np.int8)  # of the position, to its mover
    filled = (digits != 0).sum(1)
    for n in range(8, -1, -1):
        codes = np.flatnonzero((filled == n) & ~done)
        for cell in range(9):
            rows = codes[digits[codes, cell] == 0]
            after = digits[rows].copy()
            after[:, cell] = 1
            wins = (after[:, _TTT_LINES] == 1).all(-1).any(-1)
            child = swapped[rows] + 2 * _POW3[cell]  # the opponent to move
            table[rows, cell] = np.where(wins, 1, np.where(n == 8, 0, -value[child]))
        value[codes] = table[codes].max(axis=1)
    table.setflags(write=False)
    return table


def tictactoe_values(observation: np.ndarray) -> np.ndarray:
    """Minimax value of each move, mover's view: ``[B, 9]`` int8 of +1 / 0 / -1.

    An occupied cell is -2, and so is every cell of a finished game.  No preference for
    faster wins: a win is +1 however long it takes.
    """
    obs = np.asarray(observation).reshape(-1, 9, 2).astype(np.int64)
    codes = (obs[..., 0] + 2 * obs[..., 1]) @ _POW3
    return _tictactoe_table()[codes]


class PerfectTicTacToe:
    """A perfect tic-tac-toe player: uniformly random among the moves of best minimax value.

    Win > draw > loss, with no preference for quicker wins.  The table of every position
    (:func:`tictactoe_values`) is built on first use and shared by all players.
    """

    def __init__(self, seed: Seed = None) -> None:
        self.rng = np.random.default_rng(seed)
        _tictactoe_table()

    def __call__(self, observation: np.ndarray, action_mask: np.ndarray) -> np.ndarray:
        """One optimal legal move per row."""
        return _choose(tictactoe_values(observation), action_mask, self.rng)


# --- connect four: bitboards -------------------------------------------------------------
# Bit ``7 * column + height`` (height 0 the bottom row), height 6 of each column always
# empty, so that shifting by 1, 6, 7 or 8 never wraps a line from one column to the next.

_COLUMN = np.array([0b111111 << (7 * c) for c in range(7)], dtype=np.int64)
_BOTTOM = np.array([1 << (7 * c) for c in range(7)], dtype=np.int64)
_BOARD = int(_COLUMN.sum())
_WIN = 1000


def _bitboards(observation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mover's pieces and all pieces of ``[B, 6, 7, 2]`` observations, as int64."""
    obs = np.asarray(observation).astype(bool)
    bits = np.left_shift(1, 7 * np.arange(7)[None, :] + 5 - np.arange(6)[:, None])
    cur = (obs[..., 0] * bits).reshape(len(obs), 42).sum(1)
    both = ((obs[..., 0] | obs[..., 1]) * bits).reshape(len(obs), 42).sum(1)
    return cur.astype(np.int64), both.astype(np.int64)


def _winning_cells(cur: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Empty cells (reachable or not) that would complete four of ``cur``.

    Pascal Pons' trick: a move wins iff its piece lands on one of these cells, one test
    per node instead of four shift-and tests per child.  Bits shifted past bit 48 (the
    sign bit included) are cleared by the final mask.
    """
    r = (cur << 1) & (cur << 2) & (cur << 3)  # vertical: three below
    for s in (7, 6, 8):  # horizontal and the two diagonals
        p = (cur << s) & (cur << 2 * s)
        r |= p & (cur << 3 * s)
        r |= p & (cur >> s)
        p = (cur >> s) & (cur >> 2 * s)
        r |= p & (cur << s)
        r |= p & (cur >> 3 * s)
    return r & (_BOARD ^ mask)


def _search(cur: np.ndarray, mask: np.ndarray, depth: int, leaf: Leaf | None) -> np.ndarray:
    """Root move scores ``[N, 7]`` (int32) of a full-width negamax to ``depth`` plies.

    Every node has 7 children, even after an illegal, winning or board-filling move:
    those children are expanded like the rest (the shapes stay regular) and their values
    ignored when the scores are backed up, ply by ply, with max and negation.  A move at
    ``depth`` that neither wins nor fills the board scores 0, or ``leaf(pieces, mask)``
    of the position after it (``pieces``: the mover's).
    """
    levels = []  # per ply k: (legal, win, full, value) of each move, [nodes at ply k - 1, 7]
    for k in range(1, depth + 1):
        piece = (mask[:, None] + _BOTTOM) & _COLUMN  # 0: the column is full
        legal = piece != 0
        win = (piece & _winning_cells(cur, mask)[:, None]) != 0
        after = mask[:, None] | piece
        if k == depth:
            value = 0 if leaf is None else \
                leaf((cur[:, None] | piece).ravel(), after.ravel()).reshape(legal.shape)
            levels.append((legal, win, after == _BOARD, value))
            break
        cur = np.repeat(cur ^ mask, 7)  # the opponent's pieces: the next mover's
        mask = after.ravel()
        levels.append((legal, win, after == _BOARD, None))
    value = None
    for k in range(len(levels), 0, -1):
        legal, win, full, rest = levels[k - 1]
        if rest is None:
            rest = -value.reshape(legal.shape)
        rest = np.where(full, 0, rest)
        scores = np.where(legal, np.where(win, _WIN - k, rest), ILLEGAL).astype(np.int32)
        value = scores.max(axis=1)
    return scores


def connect_four_scores(observation: np.ndarray, depth: int, max_nodes: int = 1 << 21,
                        leaf: Leaf | None = None) -> np.ndarray:
    """Negamax score of each root move, mover's view: ``[B, 7]`` int32.

    A win at ply ``k`` (``k = 1`` the root move itself) scores ``1000 - k`` for the side
    that wins, so ``+(1000 - k)`` or ``-(1000 - k)`` here; a full board with no winner and
    every leaf at ``depth`` plies score 0 (no evaluation; ``leaf``, if given, scores
    them instead: :data:`Leaf`).  A full column scores :data:`ILLEGAL`.  The root is
    taken to be undecided (no four on the board yet).

    The whole tree is expanded, ``B * 7**depth`` nodes, ``max_nodes`` of them at a time
    (positions in chunks): full-width minimax gives exactly the root scores that
    alpha-beta with a full window gives for each root move (alpha-beta only prunes).
    Depth 5 is quick; each ply more is 7 times the work.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    cur, mask = _bitboards(observation)
    chunk = max(1, max_nodes // 7**depth)
    out = np.empty((len(cur), 7), dtype=np.int32)
    for start in range(0, len(cur), chunk):
        end = start + chunk
        out[start:end] = _search(cur[start:end], mask[start:end], depth, leaf)
    return out


class NegamaxConnectFour:
    """Connect four by negamax to ``depth`` plies, uniformly random among the best moves.

    Scores as :func:`connect_four_scores`: quicker wins and slower losses are preferred;
    moves that neither win nor lose within ``depth`` plies are all equal (tactics only:
    ``connect_four_search.HeuristicConnectFour`` tells them apart).
    """

    def __init__(self, depth: int, seed: Seed = None) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.depth = depth
        self.rng = np.random.default_rng(seed)

    def __call__(self, observation: np.ndarray, action_mask: np.ndarray) -> np.ndarray:
        """One move of best score per row."""
        return _choose(self.scores(observation), action_mask, self.rng)

    def scores(self, observation: np.ndarray) -> np.ndarray:
        """The root score of every move of every row (:func:`connect_four_scores`)."""
        return connect_four_scores(observation, self.depth)


# --- connect four: the plain reference ----------------------------------------------------


def _fours_through(grid: list[list[int]], row: int, col: int) -> bool:
    """Whether the piece at ``grid[row][col]`` is part of four in a line."""
    who = grid[row][col]
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        run = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < 6 and 0 <= c < 7 and grid[r][c] == who:
                run, r, c = run + 1, r + sign * dr, c + sign * dc
        if run >= 4:
            return True
    return False


def _move_score(grid: list[list[int]], col: int, who: int, ply: int, depth: int,
                alpha: float, beta: float, leaf: GridLeaf | None = None) -> float:
    """Score for ``who`` of dropping into ``col`` at ``ply`` (the column has room)."""
    row = max(r for r in range(6) if grid[r][col] == 0)  # row 0 is the top
    grid[row][col] = who
    if _fours_through(grid, row, col):
        score: float = _WIN - ply
    elif all(grid[0]):
        score = 0
    elif ply == depth:
        score = 0 if leaf is None else leaf(grid, who)
    else:
        score = -_negamax(grid, 3 - who, ply + 1, depth, -beta, -alpha, leaf)
    grid[row][col] = 0
    return score


def _negamax(grid: list[list[int]], who: int, ply: int, depth: int,
             alpha: float, beta: float, leaf: GridLeaf | None) -> float:
    """Alpha-beta value for ``who`` to move, its moves being at ``ply`` (fail-soft)."""
    best = -float("inf")
    for col in range(7):
        if grid[0][col] == 0:
            best = max(best, _move_score(grid, col, who, ply, depth, alpha, beta, leaf))
            alpha = max(alpha, best)
            if alpha >= beta:
                break
    return best


def alphabeta_scores(board: np.ndarray, depth: int,
                     leaf: GridLeaf | None = None) -> np.ndarray:
    """The scores of :func:`connect_four_scores` for one ``[6, 7, 2]`` position: ``[7]``.

    Plain Python alpha-beta on a grid, each root move searched with a full window; the
    reference for the vectorized search.  ``leaf(grid, who)``, if given, scores the
    moves at ``depth`` for ``who`` (1 or 2) from the grid after them (``6 x 7`` lists,
    row 0 the top, 0 an empty cell), as ``leaf`` does in :func:`connect_four_scores`.
    """
    obs = np.asarray(board)
    grid = (obs[..., 0] + 2 * obs[..., 1]).astype(int).tolist()  # 1: the mover's
    inf = float("inf")
    return np.array([_move_score(grid, col, 1, 1, depth, -inf, inf, leaf) if grid[0][col] == 0
                     else ILLEGAL for col in range(7)], dtype=np.int32)
