"""Seats: which policy plays each seat of each game, and when a game is over.

A vector env of games (``fastvec.make_multiagent``) has one row per seat of each
game (``game_of_row``, ``seat_of_row``).  :class:`Seats` holds, per game and seat,
the code of the policy that plays it (set by :meth:`Seats.assign` only, which groups
the rows by policy again), adds up each row's rewards over its game and tells which
games ended in a step; :func:`judge` gives a seat's :class:`Result` in a game.

A game is over on the step in which its last agents leave: every row of the game
either ends there (``terminations | truncations``) or is no longer alive
(``infos["alive"]`` False), and at least one ends.  With ``NEXT_STEP`` autoreset
the next step is the game's reset step (no flags), so a new assignment plays the
new game from its first move.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["RESULTS", "Result", "Seats", "batch_rows", "judge", "score"]

RESULTS = ("win", "draw", "loss")
"""The results of a game, from one seat's point of view."""


def score(returns: np.ndarray, seat: int) -> float:
    """The score of ``seat`` in a game whose seats got ``returns`` over it: the share of
    the other seats whose return is below its own, a tie counting half (two seats: 1 a
    win, 0.5 a draw, 0 a loss; three: 1 alone in first place, 0.5 in the middle, 0 last).

    >>> score(np.array([2.0, -1.0, -1.0]), 0), score(np.array([-1.0, 2.0, -1.0]), 0)
    (1.0, 0.25)
    """
    values = np.asarray(returns, dtype=np.float64)
    others = np.delete(values, seat)
    mine = values[seat]
    return float(((others < mine).sum() + 0.5 * (others == mine).sum()) / others.size)


@dataclass(frozen=True)
class Result:
    """One seat's result in a finished game: its :func:`score`, and the word it comes to.

    >>> result = judge(np.array([1.0, -1.0]), 1)
    >>> result.score, result.word, RESULTS[result.index]
    (0.0, 'loss', 'loss')
    """

    score: float

    @property
    def word(self) -> str:
        """One of :data:`RESULTS`: a win above one half, a loss below, a draw at one half."""
        return "win" if self.score > 0.5 else "loss" if self.score < 0.5 else "draw"

    @property
    def index(self) -> int:
        """The position of :attr:`word` in :data:`RESULTS` (a column of win/draw/loss counts)."""
        return RESULTS.index(self.word)


def judge(returns: np.ndarray, seat: int) -> Result:
    """The result of ``seat`` in a game whose seats got ``returns`` over it (two seats: a
    win if its return is above the other's, a loss if below, else a draw).
    """
    return Result(score(returns, seat))


def batch_rows(env_ids: Any, num_rows: int) -> np.ndarray:
    """The rows a batch holds: ``env_ids`` of an async batch, or every row if None."""
    if env_ids is None:
        return np.arange(num_rows, dtype=np.int64)
    rows = np.asarray(env_ids, dtype=np.int64).reshape(-1)
    if rows.size and (rows.min() < 0 or rows.max() >= num_rows):
        raise ValueError(f"expected env_ids between 0 and {num_rows - 1} (rows of the vector "
                         f"env), got {rows.tolist()}")
    return rows


class Seats:
    """The policy code of every seat of every game, rows grouped by code, running returns.

    Args:
        game_of_row: The game of each row (``envs.game_of_row``).
        seat_of_row: The seat of each row in its game; every game must have the same
            seats ``0 .. num_seats - 1``, at least two.

    Raises:
        ValueError: the rows do not describe whole games of two or more seats.
    """

    def __init__(self, game_of_row: Any, seat_of_row: Any) -> None:
        games = np.asarray(game_of_row, dtype=np.int64)
        seats = np.asarray(seat_of_row, dtype=np.int64)
        if games.ndim != 1 or games.shape != seats.shape or games.size == 0:
            raise ValueError("expected game_of_row and seat_of_row of the same length (one per "
                             f"row), got shapes {games.shape} and {seats.shape}")
        num_games, num_seats = int(games.max()) + 1, int(seats.max()) + 1
        grid = np.full((num_games, num_seats), -1, dtype=np.int64)
        if games.min() >= 0 and seats.min() >= 0:
            grid[games, seats] = np.arange(games.size)
        if num_seats < 2 or games.size != num_games * num_seats or (grid < 0).any():
            raise ValueError("expected every game to have the seats 0 .. num_seats - 1 (two or "
                             f"more) once each, got game_of_row={games.tolist()} "
                             f"seat_of_row={seats.tolist()}")
        self.num_games, self.num_seats, self.num_rows = num_games, num_seats, games.size
        self.game_of_row, self.seat_of_row = games, seats
        self.row_of = grid  # [game, seat] -> row
        self.returns = np.zeros(games.size, dtype=np.float64)
        self._code = np.zeros((num_games, num_seats), dtype=np.int64)  # [game, seat] -> policy
        self._groups: dict[int, np.ndarray] = {}
        self._code_of_row = np.zeros(games.size, dtype=np.int64)
        self._regroup()

    @property
    def code(self) -> np.ndarray:
        """The policy code of each seat of each game, ``[game, seat]`` (read only: see
        :meth:`assign`).
        """
        view = self._code.view()
        view.flags.writeable = False
        return view

    def assign(self, games: Any, codes: Any) -> None:
        """Give the seats of ``games`` to the policies ``codes`` (a row of seats per game,
        or anything that broadcasts to it), and group the rows by policy again.
        """
        self._code[np.asarray(games, dtype=np.int64)] = codes
        self._regroup()

    def _regroup(self) -> None:
        self._code_of_row = self._code[self.game_of_row, self.seat_of_row]
        self._groups = {int(code): np.flatnonzero(self._code_of_row == code)
                        for code in np.unique(self._code_of_row)}

    def codes(self) -> tuple[int, ...]:
        """The codes that play some row now, ascending."""
        return tuple(self._groups)

    def rows(self, code: int) -> np.ndarray:
        """The rows (ascending) that ``code`` plays now."""
        return self._groups.get(code, np.empty(0, dtype=np.int64))

    def groups(self, where: Any = None, env_ids: Any = None) -> dict[int, np.ndarray]:
        """Each code with the positions in the batch of the rows it plays.

        Positions index the batch: rows themselves when ``env_ids`` is None, else
        positions into ``env_ids`` (an async batch).  Only rows where ``where`` (one
        bool per position) is True count; codes left with none are left out.
        """
        if env_ids is None:
            mask = None if where is None else np.asarray(where, dtype=bool)
            if mask is not None and mask.shape != (self.num_rows,):
                raise ValueError(f"expected one bool per row ({self.num_rows}), got shape "
                                 f"{mask.shape}")
            found = {c: rows if mask is None else rows[mask[rows]]
                     for c, rows in self._groups.items()}
        else:
            rows = batch_rows(env_ids, self.num_rows)
            codes = self._code_of_row[rows]
            if where is not None:
                mask = np.asarray(where, dtype=bool)
                if mask.shape != rows.shape:
                    raise ValueError(f"expected one bool per row of the batch ({rows.size}), "
                                     f"got shape {mask.shape}")
                codes = np.where(mask, codes, np.iinfo(np.int64).min)
            found = {int(c): np.flatnonzero(codes == c) for c in np.unique(codes)}
            found.pop(int(np.iinfo(np.int64).min), None)
        return {code: pos for code, pos in found.items() if pos.size}

    def ended(self, rewards: Any, terminations: Any, truncations: Any,
              infos: Mapping[str, Any], env_ids: Any = None) -> np.ndarray:
        """Add one step's rewards to the running returns; the games (ascending) it ended.

        The arrays hold one entry per row of the batch (``env_ids``, or every row).
        """
        rows = batch_rows(env_ids, self.num_rows)
        rewards = np.asarray(rewards, dtype=np.float64)
        ended = np.asarray(terminations, dtype=bool) | np.asarray(truncations, dtype=bool)
        alive = np.asarray(infos.get("alive", np.ones_like(ended)), dtype=bool)
        if not rewards.shape == ended.shape == alive.shape == rows.shape:
            raise ValueError(f"expected one reward, flag and alive per row of the batch "
                             f"({rows.size}), got shapes {rewards.shape}, {ended.shape} and "
                             f"{alive.shape}")
        self.returns[rows] += rewards
        games = self.game_of_row[rows]
        staying = np.bincount(games, weights=~ended & alive, minlength=self.num_games)
        leaving = np.bincount(games, weights=ended, minlength=self.num_games)
        return np.flatnonzero((staying == 0) & (leaving > 0))

    def take_returns(self, game: int) -> np.ndarray:
        """The returns of each seat of ``game`` over the game that ended; zeroed here."""
        rows = self.row_of[game]
        returns = self.returns[rows].copy()
        self.returns[rows] = 0.0
        return returns
