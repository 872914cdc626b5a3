"""How the league draws an opponent for a new game: uniform, by recency, or PFSP.

A rule turns the drawable entries of one kind (in the order they joined) into
weights; each entry's own ``weight`` multiplies its rule weight, and the draw is
proportional to the product.

- :class:`Uniform`: every entry alike.
- :class:`Recency`: the newest entry weighs 1, the one before ``decay``, then
  ``decay ** 2``, ... (ML-Agents' window, made smooth).
- :class:`PFSP`: prioritized fictitious self-play (AlphaStar) from the learner's
  running win rate ``w`` against each entry (draws count half): ``"hard"`` weighs
  ``(1 - w) ** power`` (the opponents the learner loses to), ``"variance"`` weighs
  ``w * (1 - w)`` (the opponents it is even with); either at least ``floor``, so no
  opponent is forgotten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from fastvec.selfplay.opponents import PoolEntry

__all__ = ["PFSP", "Recency", "Sampling", "Uniform", "sampling_from_state"]


class Sampling(Protocol):
    """A rule that weighs the entries a new game may draw."""

    def weights(self, entries: Sequence[PoolEntry]) -> np.ndarray:
        """One weight (>= 0, not all 0) per entry, entries in the order they joined."""
        ...


@dataclass(frozen=True)
class Uniform:
    """Every entry alike."""

    def weights(self, entries: Sequence[PoolEntry]) -> np.ndarray:
        """Ones, times each entry's weight."""
        return np.array([e.weight for e in entries], dtype=np.float64)


@dataclass(frozen=True)
class Recency:
    """The newest entry weighs 1, each older one ``decay`` times the next newer one."""

    decay: float = 0.8

    def __post_init__(self) -> None:
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"expected 0 < decay <= 1, got {self.decay!r}")

    def weights(self, entries: Sequence[PoolEntry]) -> np.ndarray:
        """``decay ** age`` (age 0 for the newest), times each entry's weight."""
        ages = np.arange(len(entries) - 1, -1, -1, dtype=np.float64)
        return self.decay ** ages * np.array([e.weight for e in entries], dtype=np.float64)


PFSP_WEIGHTINGS = ("hard", "variance")


@dataclass(frozen=True)
class PFSP:
    """Prioritized fictitious self-play from the learner's running win rates."""

    weighting: str = "hard"  # "hard": (1 - w) ** power; "variance": w * (1 - w)
    power: float = 2.0
    floor: float = 0.05

    def __post_init__(self) -> None:
        if self.weighting not in PFSP_WEIGHTINGS:
            raise ValueError(f"expected weighting in {PFSP_WEIGHTINGS}, got {self.weighting!r}")
        if not self.power > 0:
            raise ValueError(f"expected a positive power, got {self.power!r}")
        if not 0.0 < self.floor <= 1.0:
            raise ValueError(f"expected 0 < floor <= 1, got {self.floor!r}")

    def weights(self, entries: Sequence[PoolEntry]) -> np.ndarray:
        """The PFSP weight of each entry, at least ``floor``, times its weight."""
        w = np.array([e.win_rate for e in entries], dtype=np.float64)
        rule = (1.0 - w) ** self.power if self.weighting == "hard" else w * (1.0 - w)
        return np.maximum(rule, self.floor) * np.array([e.weight for e in entries])


RULES: dict[str, type] = {"uniform": Uniform, "recency": Recency, "pfsp": PFSP}


def sampling_state(rule: Sampling) -> dict[str, Any]:
    """A rule as plain data: its name and parameters."""
    name = next(n for n, cls in RULES.items() if isinstance(rule, cls))
    return {"rule": name, **asdict(rule)}  # type: ignore[call-overload]


def sampling_from_state(state: Mapping[str, Any]) -> Sampling:
    """The rule that :func:`sampling_state` wrote down."""
    params = dict(state)
    return RULES[params.pop("rule")](**params)  # type: ignore[no-any-return]


def parse_sampling(rule: Sampling | str) -> Sampling:
    """A rule object from itself or its name (``"uniform"``, ``"recency"``, ``"pfsp"``,
    with default parameters).
    """
    if isinstance(rule, str):
        if rule not in RULES:
            raise ValueError(f"expected sampling to be one of {tuple(RULES)} or an instance of "
                             f"Uniform, Recency or PFSP, got {rule!r}")
        return RULES[rule]()  # type: ignore[no-any-return]
    if not isinstance(rule, tuple(RULES.values())):
        raise ValueError(f"expected sampling to be one of {tuple(RULES)} or an instance of "
                         f"Uniform, Recency or PFSP, got {rule!r}")
    return rule
