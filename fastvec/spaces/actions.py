"""Checking a batch of actions once, then splitting it into per-env actions.

Every check happens before any env sees an action: wrong batch length, wrong
per-env shape, a scalar where a batch is expected, a non-integer dtype for a
discrete space, a discrete action out of range.  Box actions outside their
bounds pass through (as in Gymnasium); a float64 batch for a float32 Box is
converted.  Envs get what Gymnasium's ``iterate`` gives them: rows of the batch
(numpy scalars for ``Discrete``), dicts/tuples of rows for composite spaces.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import iterate

from fastvec._kernels.stacking import find_out_of_range

__all__ = ["ActionChecker"]

_INT64_MAX = np.iinfo(np.int64).max
_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class ActionChecker:
    """Validates batches for one single-env action space and ``num_envs`` envs."""

    def __init__(self, single_space: spaces.Space, batched_space: spaces.Space,
                 num_envs: int) -> None:
        self.space = single_space
        self.batched_space = batched_space
        self.num_envs = num_envs
        self._leaf = _LeafCheck(single_space, num_envs) if isinstance(
            single_space, _ARRAY_SPACES) else None

    def split(self, checked: Any) -> list:
        """One action per env from a batch that :meth:`check` returned."""
        if isinstance(checked, np.ndarray):
            return list(checked)
        return list(iterate(self.batched_space, checked))

    def check(self, actions: Any, space: spaces.Space | None = None, where: str = "actions"):
        """The batch converted to the space's dtype; ValueError if it does not fit."""
        if space is None and self._leaf is not None:
            return self._leaf.check(actions, where)
        space = self.space if space is None else space
        if isinstance(space, spaces.Dict):
            if not isinstance(actions, dict):
                raise ValueError(f"expected {where} as a dict with keys {list(space.spaces)}, "
                                 f"got {type(actions).__name__}")
            return {key: self.check(_item(actions, key, where), sub, f'{where}["{key}"]')
                    for key, sub in space.spaces.items()}
        if isinstance(space, spaces.Tuple):
            if not isinstance(actions, (tuple, list)) or len(actions) != len(space.spaces):
                raise ValueError(f"expected {where} as a tuple of {len(space.spaces)} batches, "
                                 f"got {type(actions).__name__}")
            return tuple(self.check(a, sub, f"{where}[{i}]")
                         for i, (a, sub) in enumerate(zip(actions, space.spaces, strict=True)))
        if isinstance(space, _ARRAY_SPACES):
            return _LeafCheck(space, self.num_envs).check(actions, where)
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {where} for {self.num_envs} envs, got {len(actions)}")
        return actions


class _LeafCheck:
    """The checks for one Box/Discrete/MultiDiscrete/MultiBinary batch, set up once."""

    def __init__(self, space: spaces.Space, num_envs: int) -> None:
        self.space = space
        self.num_envs = num_envs
        self.dtype = np.dtype(space.dtype)
        shape = () if isinstance(space, spaces.Discrete) else tuple(space.shape or ())
        self.shape = (num_envs, *shape)
        self.bounds = None if isinstance(space, spaces.Box) else _integer_bounds(space)

    def check(self, actions: Any, where: str) -> np.ndarray:
        array = actions if type(actions) is np.ndarray else np.asarray(actions)
        if array.shape != self.shape:
            what = "a scalar" if array.ndim == 0 else f"shape {array.shape}"
            raise ValueError(f"expected {where} of shape {self.shape} (one action of shape "
                             f"{self.shape[1:]} per env for {self.num_envs} envs), got {what}")
        if self.bounds is None:
            if not np.can_cast(array.dtype, self.dtype, casting="same_kind"):
                raise ValueError(f"expected {where} of dtype {self.dtype} (or one that "
                                 f"converts to it), got {array.dtype}")
            return np.array(array, dtype=self.dtype)  # a fresh copy the envs may keep
        if array.dtype.kind not in "iub":
            raise ValueError(f"expected integer {where} for {self.space}, "
                             f"got dtype {array.dtype}")
        values = array.reshape(self.num_envs, -1)
        low, high = self.bounds
        if array.dtype == np.uint64 and values.size and values.max() > _INT64_MAX:
            env, column = np.argwhere(values > _INT64_MAX)[0]  # would wrap in int64
            found: tuple[int, int] | None = (int(env), int(column))
        else:
            values = np.ascontiguousarray(values, dtype=np.int64)
            found = find_out_of_range(values, low, high)
        if found is not None:
            env, column = found
            raise ValueError(f"{where}: the action for env {env} is out of range: got "
                             f"{values[env, column]}, expected values in "
                             f"[{low[column]}, {high[column]}] "
                             f"for {self.space}")
        return np.array(values.reshape(self.shape), dtype=self.dtype)  # a fresh copy


def _item(actions: dict, key: str, where: str) -> Any:
    try:
        return actions[key]
    except KeyError:
        raise ValueError(f'expected {where} to have key "{key}", got keys {list(actions)}') \
            from None


def _integer_bounds(space: spaces.Space) -> tuple[np.ndarray, np.ndarray]:
    """Per-element inclusive bounds of a discrete space, flattened."""
    if isinstance(space, spaces.Discrete):
        low = np.array([space.start], dtype=np.int64)
        return low, low + int(space.n) - 1
    if isinstance(space, spaces.MultiDiscrete):
        low = np.ascontiguousarray(space.start, dtype=np.int64).ravel()
        return low, low + np.asarray(space.nvec, dtype=np.int64).ravel() - 1
    size = int(np.prod(space.shape or ()))
    return np.zeros(size, np.int64), np.ones(size, np.int64)
