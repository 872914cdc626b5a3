"""The league's settings, checked once: the shares of the kinds of games, counts, rates."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from fastvec.selfplay.opponents import EVICTION_RULES

__all__ = ["DEFAULT_SHARES", "DRAWN_FROM", "SHARES", "LeagueSettings", "check_player",
           "check_player_dicts", "check_seed", "parse_shares"]

DRAWN_FROM: dict[str, tuple[str, ...]] = {
    "self_play": (),  # the learner in every seat
    "snapshots": ("snapshot",),
    "fixed": ("fixed", "anchor"),  # anchors only if registered with train=True
}
"""Each kind of game, with the kinds of pool entries its opponent is drawn from."""
SHARES = tuple(DRAWN_FROM)
"""The kinds of games: pure self-play, against a snapshot, against a fixed opponent."""
DEFAULT_SHARES = {"self_play": 0.5, "snapshots": 0.5}
"""The shares of a league given ``shares=None``."""
COUNTS = ("snapshot_every", "snapshot_min_games", "max_snapshots", "win_rate_window")
"""The settings that are counts: positive ints (the first three may also be None)."""


def is_number(value: object) -> bool:
    """A finite real number (an int or a float, numpy's included; not a bool)."""
    return (isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, bool) and math.isfinite(value))


@dataclass(frozen=True)
class LeagueSettings:
    """Every setting of a :class:`~fastvec.selfplay.League` (see its arguments), checked
    here once (``ValueError`` saying what was expected); ``shares`` are kept with every
    kind of game (:data:`SHARES`).  A league saves them as a dict
    (``dataclasses.asdict``) and takes them back with ``LeagueSettings(**saved)``.
    """

    shares: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_SHARES))
    snapshot_every: int | None = 50_000
    snapshot_win_rate: float | None = None
    snapshot_min_games: int | None = 200
    max_snapshots: int | None = 20
    eviction: str = "oldest"
    elo_k: float = 16.0
    initial_rating: float = 1000.0
    win_rate_window: int = 100

    def __post_init__(self) -> None:
        object.__setattr__(self, "shares", parse_shares(self.shares))
        for name in COUNTS:
            value = getattr(self, name)
            if value is None and name != "win_rate_window":
                continue  # that count is off
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"expected {name} to be a positive int, got {value!r}")
        rate = self.snapshot_win_rate
        if rate is not None and not (is_number(rate) and 0.0 < rate <= 1.0):
            raise ValueError(f"expected 0 < snapshot_win_rate <= 1, got {rate!r}")
        if rate is not None and self.snapshot_min_games is None:
            raise ValueError("expected snapshot_min_games to be a positive int with "
                             f"snapshot_win_rate={rate!r}, got None (the score trigger is "
                             "off with snapshot_win_rate=None)")
        if self.eviction not in EVICTION_RULES:
            raise ValueError(f"expected eviction in {EVICTION_RULES}, got {self.eviction!r}")
        if not (is_number(self.elo_k) and self.elo_k > 0):
            raise ValueError(f"expected a positive elo_k, got {self.elo_k!r}")
        if not is_number(self.initial_rating):
            raise ValueError(f"expected initial_rating to be a number, got "
                             f"{self.initial_rating!r}")
        object.__setattr__(self, "elo_k", float(self.elo_k))
        object.__setattr__(self, "initial_rating", float(self.initial_rating))


def check_seed(seed: object) -> None:
    """Refuse a seed that is not None or a non-negative int (numpy's ints included)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or seed < 0):
        raise ValueError(f"expected seed to be None or a non-negative int, got {seed!r}")


def check_player_dicts(**given: object) -> None:
    """Refuse players given other than as None or a dict ``{id: act}`` (by argument name)."""
    for name, players in given.items():
        if players is not None and not isinstance(players, Mapping):
            raise ValueError(f"expected {name} to be a dict {{id: act}}, got {players!r}")


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
