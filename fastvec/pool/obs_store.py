"""Where the envs' observations land, and how the trainer gets them back as a batch.

Two stores with one interface:

- :class:`RecordStore`: spaces with a flat record layout (``fastvec.spaces.layout``).
  Envs write one byte record per env into ``rows`` (shared memory under
  ``SubprocVecEnv``); the batch is zero-copy views of the rows, copied out when
  ``copy=True``.
- :class:`ObjectStore`: every other space.  Each env's observation object is
  kept as it came and batched with Gymnasium's ``concatenate``.

A block of envs writes into ``target(start, stop)``; blocks stepped in another
process hand their objects back with ``receive``.
"""

from __future__ import annotations

import warnings
from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array

from fastvec._kernels.flatten import FieldTable
from fastvec._kernels.rows import gather_rows
from fastvec.errors import ObjectSpaceWarning
from fastvec.spaces.layout import Layout, batch_views, copy_tree, layout_of

__all__ = ["ObjectStore", "ObsStore", "RecordStore", "make_obs_store"]

Rows = slice | np.ndarray  # which envs of the batch: a slice of rows, or env ids
# Below this many bytes a batch is cheaper to copy out than to write into a new buffer
# each step (allocating it and its views costs ~2.5 us; a copy ~0.6 us per KiB here).
FRESH_ROWS_MIN_BYTES = 4096
_object_path_warned = False


def make_obs_store(space: spaces.Space, num_envs: int, copy: bool,
                   rows: np.ndarray | None = None, fresh_rows: bool = False,
                   layout: Layout | None = None) -> ObsStore:
    """The store for ``space``: records in ``rows`` (allocated if None), or objects.

    ``fresh_rows`` (``copy=True``, in-process blocks only): when one array leaf fills
    the record and the batch has ``FRESH_ROWS_MIN_BYTES`` or more, each write goes into
    a new buffer that is handed out as it is, instead of writing one buffer and copying
    it out.  ``layout``: ``space``'s, where
    the caller made it already.
    """
    layout = layout or layout_of(space)
    if layout is None:
        _warn_object_path(space)
        return ObjectStore(space, num_envs, copy)
    if rows is None:
        rows = np.zeros((num_envs, layout.record_size), dtype=np.uint8)
    return RecordStore(layout, rows, copy, fresh_rows)


def _warn_object_path(space: spaces.Space) -> None:
    global _object_path_warned
    if not _object_path_warned:
        _object_path_warned = True
        warnings.warn(
            f"observation space {space} has leaves other than Box, Discrete, MultiDiscrete "
            "and MultiBinary; its observations take the slower object path",
            ObjectSpaceWarning, stacklevel=5,
        )


class ObsStore:
    """The interface both stores implement."""

    layout: Layout | None = None
    copy: bool

    def target(self, start: int, stop: int) -> tuple[FieldTable | None, np.ndarray | None,
                                                     list | None]:
        """What an ``EnvStepper`` of envs ``start:stop`` writes: (table, rows, objects)."""
        raise NotImplementedError

    def receive(self, start: int, objects: list | None) -> None:
        """Take the observation objects a block of envs from ``start`` sent back."""

    def before_write(self, keep: bool) -> np.ndarray | None:
        """Called before every env writes; new rows to write into, or None (same rows).

        ``keep``: a partial write (masked reset), so the new rows start as a copy.
        """
        return None

    def observations(self) -> Any:
        """The whole batch (copied when ``copy``)."""
        raise NotImplementedError

    def batch(self, rows: Rows, env_ids: np.ndarray) -> Any:
        """The batch of envs ``env_ids`` (``rows`` is the same envs as a slice when they
        are neighbours).
        """
        raise NotImplementedError


class RecordStore(ObsStore):
    """Observations as flat byte records, one row per env."""

    layout: Layout

    def __init__(self, layout: Layout, rows: np.ndarray, copy: bool,
                 fresh_rows: bool = False) -> None:
        self.layout = layout
        self.rows = rows
        self.copy = copy
        self.views = batch_views(layout, rows)
        # One array leaf filling the record: the batch is C-contiguous as it is.
        self.single_leaf = len(layout.leaves) == 1 and layout.leaves[0].nbytes == \
            layout.record_size
        self.fresh_rows = (fresh_rows and copy and self.single_leaf
                           and rows.nbytes >= FRESH_ROWS_MIN_BYTES)

    def target(self, start: int, stop: int) -> tuple[FieldTable, np.ndarray, None]:
        return self.layout.table, self.rows[start:stop], None

    def before_write(self, keep: bool) -> np.ndarray | None:
        if not self.fresh_rows:
            return None
        self.rows = self.rows.copy() if keep else np.empty_like(self.rows)
        return self.rows

    def observations(self) -> Any:
        if self.fresh_rows:
            return batch_views(self.layout, self.rows)
        return copy_tree(self.views) if self.copy else self.views

    def batch(self, rows: Rows, env_ids: np.ndarray) -> Any:
        if isinstance(rows, slice):
            views = batch_views(self.layout, self.rows[rows])
            return copy_tree(views) if self.copy else views
        gathered = np.empty((len(env_ids), self.rows.shape[1]), dtype=np.uint8)
        gather_rows(self.rows, env_ids, gathered)
        views = batch_views(self.layout, gathered)  # fresh, but padded records are strided
        return copy_tree(views) if self.copy and not self.single_leaf else views


class ObjectStore(ObsStore):
    """Observations as the objects the envs returned (spaces with no record layout)."""

    def __init__(self, space: spaces.Space, num_envs: int, copy: bool) -> None:
        self.space = space
        self.copy = copy
        self.objects: list[Any] = [None] * num_envs
        self._out: Any = None  # the batch, made on first use

    def target(self, start: int, stop: int) -> tuple[None, None, list]:
        return None, None, [None] * (stop - start)

    def receive(self, start: int, objects: list | None) -> None:
        if objects is not None:
            self.objects[start:start + len(objects)] = objects

    def observations(self) -> Any:
        if self._out is None:
            self._out = create_empty_array(self.space, len(self.objects))
        self._out = concatenate(self.space, self.objects, self._out)
        return deepcopy(self._out) if self.copy else self._out

    def batch(self, rows: Rows, env_ids: np.ndarray) -> Any:
        objects = [self.objects[i] for i in env_ids]
        out: Any = create_empty_array(self.space, len(env_ids))
        return concatenate(self.space, objects, out)
