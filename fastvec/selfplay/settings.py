"""The league's settings checked: the shares of the kinds of games, counts and rates."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from fastvec.selfplay.pool import EVICTION_RULES

__all__ = ["SHARES", "check_player", "check_settings", "parse_shares"]

SHARES = ("self_play", "snapshots", "fixed")
"""The kinds of games: pure self-play, against a snapshot, against a fixed opponent."""


def is_number(value: object) -> bool:
    """A finite real number (an int or a float, numpy's included; not a bool)."""
    return (isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, bool) and math.isfinite(value))


def check_settings(*, snapshot_win_rate: float | None, eviction: str, elo_k: float,
                   initial_rating: float, seed: object, players: Mapping[str, object],
                   **counts: int | None) -> None:
    """Refuse settings out of their range (``counts``: positive ints or None;
    ``players``: the ``opponents=`` and ``anchors=`` given, None or dicts).
    """
    for name, value in counts.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ValueError(f"expected {name} to be a positive int, got {value!r}")
    if snapshot_win_rate is not None and not (is_number(snapshot_win_rate)
                                              and 0.0 < snapshot_win_rate <= 1.0):
        raise ValueError(f"expected 0 < snapshot_win_rate <= 1, got {snapshot_win_rate!r}")
    if snapshot_win_rate is not None and counts.get("snapshot_min_games", 1) is None:
        raise ValueError("expected snapshot_min_games to be a positive int with "
                         f"snapshot_win_rate={snapshot_win_rate!r}, got None (the score "
                         "trigger is off with snapshot_win_rate=None)")
    if eviction not in EVICTION_RULES:
        raise ValueError(f"expected eviction in {EVICTION_RULES}, got {eviction!r}")
    if not (is_number(elo_k) and elo_k > 0):
        raise ValueError(f"expected a positive elo_k, got {elo_k!r}")
    if not is_number(initial_rating):
        raise ValueError(f"expected initial_rating to be a number, got {initial_rating!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or seed < 0):
        raise ValueError(f"expected seed to be None or a non-negative int, got {seed!r}")
    for name, given in players.items():
        if given is not None and not isinstance(given, Mapping):
            raise ValueError(f"expected {name} to be a dict {{id: act}}, got {given!r}")


def check_player(policy: str, act: object, weight: float, rating: float | None) -> None:
    """Refuse a player that cannot join: ``act`` not callable, a bad weight or rating."""
    if not callable(act):
        raise ValueError(f"expected a callable act(observation, action_mask) -> actions "
                         f"for {policy!r}, got {act!r}")
    if not (is_number(weight) and weight > 0):
        raise ValueError(f"expected a positive weight, got {weight!r}")
    if rating is not None and not is_number(rating):
        raise ValueError(f"expected the rating of {policy!r} to be a number or None, got "
                         f"{rating!r}")


def parse_shares(shares: Mapping[str, float]) -> dict[str, float]:
    """The share of each kind of game; they must add up to 1."""
    expected = f"expected shares of {SHARES} between 0 and 1 that add up to 1, got"
    if not isinstance(shares, Mapping) or not all(is_number(v) for v in shares.values()):
        raise ValueError(f"{expected} {shares!r}")
    unknown = set(shares) - set(SHARES)
    values = {kind: float(shares.get(kind, 0.0)) for kind in SHARES}
    if unknown or any(not 0.0 <= v <= 1.0 for v in values.values()) \
            or abs(sum(values.values()) - 1.0) > 1e-9:
        raise ValueError(f"{expected} {dict(shares)} (sum {sum(values.values()):g})")
    return values
