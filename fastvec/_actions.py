"""Checking a batch of actions once, then splitting it into per-env actions.

Every check happens before any env sees an action: wrong batch length, wrong
per-env shape, a scalar where a batch is expected, a non-integer dtype for a
discrete space, a discrete action out of range.  Box actions outside their
bounds pass through (as in Gymnasium); a float64 batch for a float32 Box is
converted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import iterate

from fastvec._kernels.stacking import find_out_of_range

__all__ = ["ActionChecker"]


class ActionChecker:
    """Validates batches for one single-env action space and ``num_envs`` envs."""

    def __init__(self, single_space: spaces.Space, batched_space: spaces.Space,
                 num_envs: int) -> None:
        self.space = single_space
        self.batched_space = batched_space
        self.num_envs = num_envs
        self._bounds: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # by id of a leaf space

    def split(self, actions: Any) -> list:
        """Check ``actions`` and return one action per env (raises ValueError)."""
        checked = self.check(actions)
        if isinstance(self.space, (spaces.Dict, spaces.Tuple)) or not isinstance(
            checked, np.ndarray
        ):
            return list(iterate(self.batched_space, checked))
        return list(checked)

    def check(self, actions: Any, space: spaces.Space | None = None, where: str = "actions"):
        """The batch converted to the space's dtype; ValueError if it does not fit."""
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
                         for i, (a, sub) in enumerate(zip(actions, space.spaces)))
        if not isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete,
                                  spaces.MultiBinary)):
            if len(actions) != self.num_envs:
                raise ValueError(f"expected {where} for {self.num_envs} envs, got {len(actions)}")
            return actions
        return self._check_array(actions, space, where)

    def _check_array(self, actions: Any, space: spaces.Space, where: str) -> np.ndarray:
        shape = () if isinstance(space, spaces.Discrete) else tuple(space.shape)
        expected = (self.num_envs, *shape)
        array = np.asarray(actions)
        if array.shape != expected:
            what = "a scalar" if array.ndim == 0 else f"shape {array.shape}"
            raise ValueError(f"expected {where} of shape {expected} (one action of shape "
                             f"{shape} per env for {self.num_envs} envs), got {what}")
        if isinstance(space, spaces.Box):
            if not np.can_cast(array.dtype, space.dtype, casting="same_kind"):
                raise ValueError(f"expected {where} of dtype {space.dtype} (or one that "
                                 f"converts to it), got {array.dtype}")
            return np.array(array, dtype=space.dtype)  # a fresh copy the envs may keep
        if array.dtype.kind not in "iub":
            raise ValueError(f"expected integer {where} for {space}, got dtype {array.dtype}")
        if id(space) not in self._bounds:
            self._bounds[id(space)] = _integer_bounds(space)
        low, high = self._bounds[id(space)]
        found = find_out_of_range(
            np.ascontiguousarray(array.reshape(self.num_envs, -1), dtype=np.int64), low, high)
        if found is not None:
            env, column = found
            value = array.reshape(self.num_envs, -1)[env, column]
            raise ValueError(f"{where} for env {env} is out of range: got {value}, expected "
                             f"values in [{low[column]}, {high[column]}] for {space}")
        return np.array(array, dtype=space.dtype)


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
        low = np.asarray(space.start, dtype=np.int64).ravel()
        return low, low + np.asarray(space.nvec, dtype=np.int64).ravel() - 1
    if isinstance(space, spaces.MultiBinary):
        size = int(np.prod(space.shape))
        return np.zeros(size, np.int64), np.ones(size, np.int64)
    raise TypeError(f"{space} is not a discrete space")

