"""Scripted steps for the league's tests: layouts of games, quiet steps, games ending."""

from __future__ import annotations

import numpy as np


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


def finish_all(league, result_of: dict[str, str] | None = None,
               default: str = "win") -> list:
    """End every game at once, the learner getting ``result_of[opponent]`` (or
    ``default``) in each; returns the outcomes."""
    seats = league.seats
    rewards = np.zeros(seats.num_rows)
    for game, opponent in enumerate(league.opponents):
        result = (result_of or {}).get(opponent, default)
        seat = int(league.learner_seat[game]) if opponent != "learner" else 0
        score = {"win": 1.0, "draw": 0.0, "loss": -1.0}[result]
        rewards[seats.row_of[game]] = -score
        rewards[seats.row_of[game, seat]] = score
    no = np.zeros(seats.num_rows, dtype=bool)
    return league.update(rewards, ~no, no, {"alive": ~no})
