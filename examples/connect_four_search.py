"""Connect four by negamax with an evaluation of the leaves: a positional search player.

:class:`NegamaxConnectFour` (``search_players.py``) sees only wins and losses within its
depth: every other leaf scores 0, so it plays at random unless a tactic is in reach.
:class:`HeuristicConnectFour` searches the same way (full-width over the batch, every
line to ``depth`` plies, the scores alpha-beta gives) and scores each leaf that neither
wins nor fills the board with the usual window heuristic, :func:`heuristic_values`:

- **centre**: +3 for each of the mover's pieces in the centre column (column 3);
- **open two**: +2 for each window of four cells (a line of four in any of the 69
  horizontal, vertical or diagonal places on the board) that holds two of the mover's
  pieces and two empty cells;
- **open three**: +5 for each window that holds three of the mover's pieces and one
  empty cell (reachable now or not);
- the same for the opponent, subtracted: the value is the mover's total minus the
  opponent's, so it is zero-sum (what is good for one side is as bad for the other).

"The mover" at a leaf is the side that made the move leading to it; the negamax backs the
values up as :func:`search_players.connect_four_scores` does.  A win at ply ``k`` scores
``1000 - k`` (a loss ``-(1000 - k)``) and a full board 0; a value's magnitude is at most
``3 * 6 + 5 * 69 = 363``, so a win or loss found within the depth always outweighs it.
Among the moves of the best score, the player picks uniformly at random.

:func:`heuristic_value` is the same evaluation in plain Python (a loop over the windows
of a grid), the reference the bitboard version is tested against; with it,
``search_players.alphabeta_scores(board, depth, heuristic_value)`` is the plain
alpha-beta reference of :func:`heuristic_scores`.
"""

from __future__ import annotations

import numpy as np
from search_players import (
    _BOARD,
    NegamaxConnectFour,
    _bitboards,
    alphabeta_scores,
    connect_four_scores,
)

__all__ = [
    "CENTRE",
    "OPEN_THREE",
    "OPEN_TWO",
    "HeuristicConnectFour",
    "heuristic_alphabeta_scores",
    "heuristic_scores",
    "heuristic_value",
    "heuristic_values",
]

CENTRE = 3
"""Value of each of a side's pieces in the centre column."""
OPEN_TWO = 2
"""Value of each window of four with two of a side's pieces and two empty cells."""
OPEN_THREE = 5
"""Value of each window of four with three of a side's pieces and one empty cell."""

_CENTRE_COLUMN = np.int64(0b111111 << 21)
_OUTSIDE = np.int64(~_BOARD)  # the guard row and every bit above the board
_STEPS = (1, 7, 6, 8)  # vertical, horizontal and the two diagonals
_ON_BOARD = {s: np.int64(~(_OUTSIDE | _OUTSIDE >> s | _OUTSIDE >> 2 * s | _OUTSIDE >> 3 * s))
             for s in _STEPS}  # the windows that lie on the board, by their lowest cell


def _popcount(x: np.ndarray) -> np.ndarray:
    """Set bits of each non-negative int64 (numpy's ``bitwise_count`` where it has one)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x).astype(np.int64)
    x = x.astype(np.uint64)
    m1, m2, m4 = (np.uint64(0x5555555555555555), np.uint64(0x3333333333333333),
                  np.uint64(0x0F0F0F0F0F0F0F0F))
    x = x - ((x >> np.uint64(1)) & m1)
    x = (x & m2) + ((x >> np.uint64(2)) & m2)
    x = (x + (x >> np.uint64(4))) & m4
    return ((x * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.int64)


def _windows_of(cells: list[np.ndarray], free: np.ndarray) -> np.ndarray:
    """Open twos and threes of one side, weighted: ``cells[k]`` holds the side's piece in
    the ``k``-th cell of each window (as bits of the window's lowest cell), ``free`` the
    windows without an opponent's piece.  The count of pieces, 0 to 4, is added up
    bit-parallel in two bits (four reads as 0: four in a line has already won)."""
    low, high = cells[0] ^ cells[1], cells[2] ^ cells[3]
    bit0 = low ^ high
    bit1 = (cells[0] & cells[1]) ^ (cells[2] & cells[3]) ^ (low & high)
    return OPEN_THREE * _popcount(free & bit0 & bit1) + OPEN_TWO * _popcount(free & bit1 & ~bit0)


def _evaluate(pieces: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The heuristic of positions as bitboards, for the side whose ``pieces`` they are.

    A window of four is named by its lowest cell ``p`` and its step ``s`` (one bit of a
    bitboard); bit ``p`` of ``x >> k * s`` is its ``k``-th cell.
    """
    other = pieces ^ mask
    total = CENTRE * (_popcount(pieces & _CENTRE_COLUMN) - _popcount(other & _CENTRE_COLUMN))
    for s in _STEPS:
        mine = [pieces >> (k * s) for k in range(4)]
        theirs = [other >> (k * s) for k in range(4)]
        total += _windows_of(mine, _ON_BOARD[s] & ~(theirs[0] | theirs[1] | theirs[2] | theirs[3]))
        total -= _windows_of(theirs, _ON_BOARD[s] & ~(mine[0] | mine[1] | mine[2] | mine[3]))
    return total.astype(np.int32)


def heuristic_values(observation: np.ndarray) -> np.ndarray:
    """The heuristic of each ``[B, 6, 7, 2]`` position for the player to move: ``[B]``."""
    pieces, mask = _bitboards(observation)
    return _evaluate(pieces, mask)


def heuristic_scores(observation: np.ndarray, depth: int,
                     max_nodes: int = 1 << 16) -> np.ndarray:
    """Negamax score of each root move with the heuristic at the leaves: ``[B, 7]`` int32.

    As :func:`search_players.connect_four_scores` (wins, losses, full boards, full
    columns at :data:`search_players.ILLEGAL`), a leaf at ``depth`` plies scoring
    :func:`heuristic_values` of the position after its move, for the side that made it.
    """
    return connect_four_scores(observation, depth, max_nodes, leaf=_evaluate)


class HeuristicConnectFour(NegamaxConnectFour):
    """Connect four by negamax to ``depth`` plies with the window heuristic at the leaves
    (the module's docstring), uniformly random among the moves of the best score.

    ``player(observation, action_mask) -> actions`` over a batch, as every search player.
    Depth 5 takes about 5 ms a position (``max_nodes`` leaves at a time).
    """

    def scores(self, observation: np.ndarray) -> np.ndarray:
        """The root score of every move of every row (:func:`heuristic_scores`)."""
        return heuristic_scores(observation, self.depth)


# --- the plain reference -----------------------------------------------------------------


def _windows() -> list[list[tuple[int, int]]]:
    """The 69 windows of four cells ``(row, column)`` of a ``6 x 7`` grid."""
    found = []
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(6):
            for c in range(7):
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= y < 6 and 0 <= x < 7 for y, x in cells):
                    found.append(cells)
    return found


_WINDOWS = _windows()


def heuristic_value(grid: list[list[int]], who: int) -> int:
    """The heuristic of a ``6 x 7`` grid (0 empty, 1 and 2 the players) for ``who``.

    Plain Python, window by window; the reference for :func:`heuristic_values`.
    """
    value = 0
    for side, sign in ((who, 1), (3 - who, -1)):
        value += sign * CENTRE * sum(row[3] == side for row in grid)
        for cells in _WINDOWS:
            held = [grid[r][c] for r, c in cells]
            mine, empty = held.count(side), held.count(0)
            if mine == 3 and empty == 1:
                value += sign * OPEN_THREE
            elif mine == 2 and empty == 2:
                value += sign * OPEN_TWO
    return value


def heuristic_alphabeta_scores(board: np.ndarray, depth: int) -> np.ndarray:
    """The scores of :func:`heuristic_scores` for one ``[6, 7, 2]`` position, by plain
    alpha-beta (:func:`search_players.alphabeta_scores` with :func:`heuristic_value`)."""
    return alphabeta_scores(board, depth, heuristic_value)

