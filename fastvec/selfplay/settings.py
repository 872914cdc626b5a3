"""The league's settings checked: the shares of the kinds of games, counts and rates."""

from __future__ import annotations

from collections.abc import Mapping

from fastvec.selfplay.pool import EVICTION_RULES

__all__ = ["SHARES", "check_settings", "parse_shares"]

SHARES = ("self_play", "snapshots", "fixed")
"""The kinds of games: pure self-play, against a snapshot, against a fixed opponent."""


def check_settings(*, snapshot_win_rate: float | None, eviction: str, elo_k: float,
                   **counts: int | None) -> None:
    """Refuse settings out of their range (``counts``: positive ints or None)."""
    for name, value in counts.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ValueError(f"expected {name} to be a positive int, got {value!r}")
    if snapshot_win_rate is not None and not 0.0 < snapshot_win_rate <= 1.0:
        raise ValueError(f"expected 0 < snapshot_win_rate <= 1, got {snapshot_win_rate!r}")
    if eviction not in EVICTION_RULES:
        raise ValueError(f"expected eviction in {EVICTION_RULES}, got {eviction!r}")
    if not elo_k > 0:
        raise ValueError(f"expected a positive elo_k, got {elo_k!r}")


def parse_shares(shares: Mapping[str, float]) -> dict[str, float]:
    """The share of each kind of game; they must add up to 1."""
    unknown = set(shares) - set(SHARES)
    values = {kind: float(shares.get(kind, 0.0)) for kind in SHARES}
    if unknown or any(not 0.0 <= v <= 1.0 for v in values.values()) \
            or abs(sum(values.values()) - 1.0) > 1e-9:
        raise ValueError(f"expected shares of {SHARES} between 0 and 1 that add up to 1, got "
                         f"{dict(shares)} (sum {sum(values.values()):g})")
    return values
