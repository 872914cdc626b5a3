"""Players as callables, and the part of a batch each one sees.

A fixed opponent or an anchor is a callable ``act(observation, action_mask) ->
actions`` over a batch of rows: ``observation`` is ``obs["observation"]`` of those
rows when the observations are a dict with that key (PettingZoo's classic games),
else the rows' observations as they are (a dict of arrays stays a dict);
``action_mask`` is ``obs["action_mask"]`` of those rows, or None.  It returns one
action per row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["Act", "RandomPlayer", "call_player", "first_legal", "rows_view"]

Act = Callable[[Any, Any], Any]
"""A player: ``act(observation, action_mask) -> actions``."""


def rows_view(obs: Any, positions: np.ndarray) -> tuple[Any, np.ndarray | None]:
    """The observation and the action mask (or None) of the rows at ``positions``."""
    if isinstance(obs, Mapping):
        mask = obs.get("action_mask")
        mask = None if mask is None else np.asarray(mask)[positions]
        if "observation" in obs:
            return np.asarray(obs["observation"])[positions], mask
        return {k: np.asarray(v)[positions] for k, v in obs.items() if k != "action_mask"}, mask
    return np.asarray(obs)[positions], None


def call_player(policy: str, act: Act, obs: Any, positions: np.ndarray) -> np.ndarray:
    """``act`` on the rows at ``positions``; its actions, checked for their number."""
    actions = np.asarray(act(*rows_view(obs, positions)))
    if actions.shape[:1] != positions.shape:
        raise ValueError(f"player {policy!r} returned {actions.shape[:1] or 'a scalar'} "
                         f"actions for {positions.size} rows; expected one action per row")
    return actions


def first_legal(obs: Any, positions: np.ndarray) -> np.ndarray:
    """The first legal action of each row (0 when the observations carry no mask)."""
    _, mask = rows_view(obs, positions)
    if mask is None:
        return np.zeros(positions.size, dtype=np.int64)
    return np.asarray(mask).argmax(axis=1).astype(np.int64)


class RandomPlayer:
    """A uniformly random legal action per row (from ``action_mask``).

    Args:
        num_actions: The number of actions of a ``Discrete`` action space, needed only
            when the observations carry no action mask.
        seed: Seed (or generator) of its choices.

    >>> player = RandomPlayer(seed=0)
    >>> player(None, np.array([[0, 1, 0], [1, 0, 0]])).tolist()
    [1, 0]
    """

    def __init__(self, num_actions: int | None = None,
                 seed: int | np.random.Generator | None = None) -> None:
        self.num_actions = num_actions
        self.rng = np.random.default_rng(seed)

    def __call__(self, observation: Any, action_mask: Any) -> np.ndarray:
        """One uniformly random legal action per row."""
        if action_mask is None:
            if self.num_actions is None:
                raise ValueError("RandomPlayer needs an action mask or num_actions")
            rows = len(next(iter(observation.values()))) if isinstance(observation, Mapping) \
                else len(observation)
            return self.rng.integers(self.num_actions, size=rows)
        legal = np.asarray(action_mask, dtype=bool)
        noise = self.rng.random(legal.shape)
        return np.where(legal, noise, -1.0).argmax(axis=1).astype(np.int64)
