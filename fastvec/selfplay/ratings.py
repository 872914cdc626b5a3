"""Elo ratings: the update after one game, and a fit to the results of a tournament.

The league updates ratings game by game (:func:`elo_update`): with ratings
``a`` and ``b``, player A's expected score is ``1 / (1 + 10 ** ((b - a) / 400))``;
after a game in which A scored ``s`` (1 win, 0.5 draw, 0 loss), A gains
``k * (s - expected)`` and B loses as much.

A tournament's table (:func:`fit_elo`) is the maximum-likelihood fit of the same
model to all its games at once (Bradley-Terry on the Elo scale, draws as half a
win each), with one virtual draw added between every pair that played, so that a
player who never lost still gets a finite rating.  Ratings are shifted so that a
chosen player (or the mean) sits at a chosen value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["elo_expected", "elo_update", "fit_elo"]


def elo_expected(rating: float, other: float) -> float:
    """The expected score of a player rated ``rating`` against one rated ``other``.

    >>> elo_expected(1400.0, 1000.0)  # 400 points ahead: 10 to 1
    0.9090909090909091
    """
    return 1.0 / (1.0 + 10.0 ** ((other - rating) / 400.0))


def elo_update(rating: float, other: float, score: float, k: float) -> tuple[float, float]:
    """Both ratings after one game in which the first player scored ``score``.

    >>> elo_update(1000.0, 1000.0, 1.0, k=16.0)
    (1008.0, 992.0)
    """
    change = k * (score - elo_expected(rating, other))
    return rating + change, other - change


def fit_elo(scores: np.ndarray, games: np.ndarray, *, center: int | None = None,
            value: float = 1000.0, iterations: int = 10_000) -> np.ndarray:
    """Elo ratings that best explain a tournament's results.

    Args:
        scores: ``scores[i, j]`` the points player i took from player j (wins plus half
            the draws).
        games: ``games[i, j]`` the games i and j played (symmetric).
        center: The player who is given ``value``; None: the mean rating is ``value``.
        value: See ``center``.
        iterations: At most this many rounds of the fixed-point iteration.

    Returns:
        One rating per player.  Players who played nobody get ``value``.

    >>> wins = np.array([[0, 30], [10, 0]]); played = np.array([[0, 40], [40, 0]])
    >>> np.round(fit_elo(wins, played, center=1, value=0.0), 1)  # 30.5 of 41: 74.4%
    array([185.2,   0. ])
    """
    scores = np.asarray(scores, dtype=np.float64)
    games = np.asarray(games, dtype=np.float64)
    played = games > 0
    scores = scores + 0.5 * played  # the virtual draw of every pair that played
    games = games + played
    total = scores.sum(axis=1)
    strength = np.ones(len(games))
    active = played.any(axis=1)
    for _ in range(iterations):  # Hunter's minorization-maximization for Bradley-Terry
        pair = games / (strength[:, None] + strength[None, :])
        new = np.where(active, total / np.maximum(pair.sum(axis=1), 1e-300), 1.0)
        new /= np.exp(np.log(new[active]).mean()) if active.any() else 1.0
        done = np.allclose(new, strength, rtol=1e-10, atol=0.0)
        strength = new
        if done:
            break
    ratings = 400.0 * np.log10(strength)
    shift = ratings[center] if center is not None else ratings[active].mean() if active.any() \
        else 0.0
    return np.where(active, ratings - shift + value, value)


def ranked(names: Sequence[str], ratings: np.ndarray) -> list[tuple[str, float]]:
    """Names with their ratings, best first."""
    order = np.argsort(-np.asarray(ratings), kind="stable")
    return [(names[i], float(ratings[i])) for i in order]
