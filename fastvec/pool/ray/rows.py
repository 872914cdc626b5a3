"""Which rows of a batch go to one actor: its slice of the actions, by env ids or bounds."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["rows_of", "take_rows"]


def take_rows(space: spaces.Space, batch: Any, rows: slice | np.ndarray) -> Any:
    """The rows ``rows`` of a checked batch of ``space`` (dict/tuple batches leaf by leaf)."""
    if type(batch) is np.ndarray:
        return batch[rows]
    if isinstance(space, spaces.Dict):
        return {key: take_rows(sub, batch[key], rows) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(take_rows(sub, part, rows) for sub, part in zip(space.spaces, batch,
                                                                      strict=True))
    if isinstance(rows, slice):
        return batch[rows]
    return type(batch)(batch[k] for k in rows.tolist())


def rows_of(env_ids: np.ndarray, start: int, stop: int) -> slice | np.ndarray:
    """Where the envs ``start:stop`` sit in a batch for ``env_ids``, in env order."""
    where = np.flatnonzero((env_ids >= start) & (env_ids < stop))
    where = where[np.argsort(env_ids[where], kind="stable")]
    if len(where) and where[-1] - where[0] == len(where) - 1 and (np.diff(where) == 1).all():
        return slice(int(where[0]), int(where[-1]) + 1)
    return where
