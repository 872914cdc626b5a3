"""Checking a batch of actions once, then splitting it into per-env actions.

Every check happens before any env sees an action: wrong batch length, wrong
per-env shape, a scalar where a batch is expected, a non-integer dtype for a
discrete space, a discrete action out of range.  Box actions outside their
bounds pass through (as in Gymnasium); a float64 batch for a float32 Box is
converted.  Envs get what Gymnasium's ``iterate`` gives them: rows of the batch
(numpy scalars for ``Discrete``), dicts/tuples of rows for composite spaces.

Every message names the env whose action is wrong (``env 2``; for games, the row,
its game and agent: ``row 5 (game 2, agent 'player_1')``), or, when the whole
batch is wrong (its shape or dtype), how many envs it was expected for.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, iterate

from fastvec._kernels.stacking import find_out_of_range

__all__ = ["ActionChecker", "CheckersBySize"]

_INT64_MAX = np.iinfo(np.int64).max
_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class ActionChecker:
    """Validates batches for one single-env action space and ``num_envs`` envs.

    ``agents``: for games, the agent of each seat (rows are then named by game and
    agent in messages); None for single-agent envs.
    """

    def __init__(self, single_space: spaces.Space, batched_space: spaces.Space,
                 num_envs: int, agents: tuple[str, ...] | None = None) -> None:
        self.space = single_space
        self.batched_space = batched_space
        self.num_envs = num_envs
        self.agents = agents
        self._leaf = _LeafCheck(single_space, num_envs) if isinstance(
            single_space, _ARRAY_SPACES) else None

    def split(self, checked: Any) -> list:
        """One action per env from a batch that :meth:`check` returned."""
        if isinstance(checked, np.ndarray):
            return list(checked)
        return list(iterate(self.batched_space, checked))

    def check(self, actions: Any, space: spaces.Space | None = None, where: str = "actions",
              env_ids: np.ndarray | None = None):
        """The batch converted to the space's dtype; ValueError if it does not fit.

        ``env_ids``: the envs (rows) the batch is for, when not all of them in order
        (messages name them).
        """
        if space is None and self._leaf is not None:
            return self._leaf.check(actions, where, self, env_ids)
        space = self.space if space is None else space
        if isinstance(space, spaces.Dict):
            if not isinstance(actions, dict):
                raise ValueError(f"expected {where} as a dict with keys {list(space.spaces)}, "
                                 f"each a batch for {self.batch(env_ids)}, "
                                 f"got {type(actions).__name__}")
            return {key: self.check(_item(actions, key, where, self, env_ids), sub,
                                    f'{where}["{key}"]', env_ids)
                    for key, sub in space.spaces.items()}
        if isinstance(space, spaces.Tuple):
            if not isinstance(actions, (tuple, list)) or len(actions) != len(space.spaces):
                raise ValueError(f"expected {where} as a tuple of {len(space.spaces)} batches, "
                                 f"each for {self.batch(env_ids)}, "
                                 f"got {type(actions).__name__}")
            return tuple(self.check(a, sub, f"{where}[{i}]", env_ids)
                         for i, (a, sub) in enumerate(zip(actions, space.spaces, strict=True)))
        if isinstance(space, _ARRAY_SPACES):
            return _LeafCheck(space, self.num_envs).check(actions, where, self, env_ids)
        count = len(actions) if hasattr(actions, "__len__") else None
        if count != self.num_envs:
            got = f"{count}" if count is not None else f"a {type(actions).__name__}"
            raise ValueError(f"expected {where} for {self.batch(env_ids)}, got {got}")
        return actions

    def row(self, k: int, env_ids: np.ndarray | None = None) -> str:
        """How messages name the ``k``-th env of a batch: ``env 3``, or for games
        ``row 5 (game 2, agent 'player_1')``.
        """
        row = k if env_ids is None else int(env_ids[k])
        if self.agents is None:
            return f"env {row}"
        seats = len(self.agents)
        return f"row {row} (game {row // seats}, agent {self.agents[row % seats]!r})"

    def batch(self, env_ids: np.ndarray | None = None) -> str:
        """How messages name a whole batch: ``4 envs``, ``8 rows (4 games of 2 agents)``,
        or ``the 2 envs env_ids [4, 5]``; for games ``8 rows, 4 games of 2 agents``.
        """
        n = self.num_envs
        unit = "env" if self.agents is None else "row"
        units = f"{unit}{'s' if n != 1 else ''}"
        if env_ids is not None:
            return f"the {n} {units} env_ids {list(map(int, env_ids))}"
        if self.agents is None:
            return f"{n} {units}"
        seats = len(self.agents)
        return f"{n} {units}, {n // seats} games of {seats} agents"


class _LeafCheck:
    """The checks for one Box/Discrete/MultiDiscrete/MultiBinary batch, set up once."""

    def __init__(self, space: spaces.Space, num_envs: int) -> None:
        self.space = space
        self.num_envs = num_envs
        self.dtype = np.dtype(space.dtype)
        shape = () if isinstance(space, spaces.Discrete) else tuple(space.shape or ())
        self.shape = (num_envs, *shape)
        self.bounds = None if isinstance(space, spaces.Box) else _integer_bounds(space)

    def check(self, actions: Any, where: str, names: ActionChecker,
              env_ids: np.ndarray | None = None) -> np.ndarray:
        """The batch as a fresh array of the space's dtype; ValueError naming the env
        (``names.row``) or the batch (``names.batch``) when it does not fit.
        """
        try:
            array = actions if type(actions) is np.ndarray else np.asarray(actions)
        except (ValueError, TypeError) as exc:  # ragged: one env's action has another shape
            raise ValueError(self._shape_error(actions, where, names, env_ids,
                                               "a ragged sequence")) from exc
        if array.shape != self.shape:
            raise ValueError(self._shape_error(actions, where, names, env_ids,
                                               "a scalar" if array.ndim == 0
                                               else f"shape {array.shape}"))
        if self.bounds is None:
            if not np.can_cast(array.dtype, self.dtype, casting="same_kind"):
                raise ValueError(f"expected {where} of dtype {self.dtype} (or one that "
                                 f"converts to it) for {names.batch(env_ids)}, got "
                                 f"{array.dtype}{self._first_not(array, names, env_ids)}")
            return np.array(array, dtype=self.dtype)  # a fresh copy the envs may keep
        if array.dtype.kind not in "iub":
            raise ValueError(f"expected integer {where} for {names.batch(env_ids)} "
                             f"({self.space}), got dtype {array.dtype}"
                             f"{self._first_not(array, names, env_ids)}")
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
            raise ValueError(f"{where}: the action for {names.row(env, env_ids)} is out of "
                             f"range: got {values[env, column]}, expected values in "
                             f"[{low[column]}, {high[column]}] "
                             f"for {self.space}")
        return np.array(values.reshape(self.shape), dtype=self.dtype)  # a fresh copy

    def _shape_error(self, actions: Any, where: str, names: ActionChecker,
                     env_ids: np.ndarray | None, got: str) -> str:
        """The message for a batch of the wrong shape: the env whose action has another
        shape than the others' when the batch is a sequence of one action per env.
        """
        per_env = self.shape[1:]
        expected = (f"expected {where} of shape {self.shape} for {names.batch(env_ids)} "
                    f"(one action of shape {per_env} each)")
        if isinstance(actions, (list, tuple)) and len(actions) == self.num_envs:
            for k, action in enumerate(actions):
                try:
                    shape = np.shape(action)
                except ValueError:  # itself ragged
                    shape = None
                if shape != per_env:
                    found = "another shape" if shape is None else f"shape {shape}"
                    return (f"{where}: the action for {names.row(k, env_ids)} has {found}; "
                            f"{expected}")
        return f"{expected}, got {got}"

    def _first_not(self, array: np.ndarray, names: ActionChecker,
                   env_ids: np.ndarray | None) -> str:
        """`` (env 3: 0.5)``: the env whose action does not fit the space's kind (an
        integer for a discrete space), when some envs' actions do; ``""`` otherwise
        (the batch's dtype is the mistake).
        """
        fits = [all(self._fits(value) for value in row)
                for row in array.reshape(self.num_envs, -1)]
        if all(fits) or not any(fits):
            return ""
        k = fits.index(False)
        bad = next(v for v in array.reshape(self.num_envs, -1)[k] if not self._fits(v))
        bad = bad.item() if isinstance(bad, np.generic) else bad
        return f" ({names.row(k, env_ids)}: {bad!r})"

    def _fits(self, value: Any) -> bool:
        number = np.asarray(value)
        kind = number.dtype.kind
        if self.bounds is None:
            return kind != "O" and np.can_cast(number.dtype, self.dtype, casting="same_kind")
        if kind in "iub":
            return True
        return kind == "f" and bool(np.isfinite(number)) and float(number).is_integer()


def _item(actions: dict, key: str, where: str, names: ActionChecker,
          env_ids: np.ndarray | None) -> Any:
    try:
        return actions[key]
    except KeyError:  # the batch's description is made only for the message
        raise ValueError(f'expected {where} to have key "{key}" (a batch for '
                         f'{names.batch(env_ids)}), got keys {list(actions)}') from None


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


class CheckersBySize:
    """An :class:`ActionChecker` per batch size, each made once: the checkers of batches
    of some envs (``send``, ``step(actions, env_ids)``, an actor's rows).
    """

    def __init__(self, single_space: spaces.Space, agents: tuple[str, ...] | None = None
                 ) -> None:
        self.space = single_space
        self.agents = agents
        self._made: dict[int, ActionChecker] = {}

    def __call__(self, count: int) -> ActionChecker:
        """The checker of a batch of ``count`` envs."""
        checker = self._made.get(count)
        if checker is None:
            checker = self._made[count] = ActionChecker(
                self.space, batch_space(self.space, count), count, self.agents)
        return checker
