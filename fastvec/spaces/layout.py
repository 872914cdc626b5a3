"""Observation space -> fixed per-env byte record ("flat record layout").

Every leaf of a ``Box``/``Discrete``/``MultiDiscrete``/``MultiBinary`` space, at
any depth of ``Dict``/``Tuple`` nesting, gets a fixed byte offset in one record.
A batch is an ``(num_envs, record_size)`` uint8 array; each leaf of the batch is a
zero-copy strided view into it with Gymnasium's batched structure (dict of
arrays, tuple of arrays).  Spaces with other leaves have no layout
(:func:`layout_of` returns ``None``) and take the object path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from fastvec._kernels.flatten import FieldTable

__all__ = ["Layout", "Leaf", "batch_views", "copy_into", "copy_tree", "layout_of", "leaf_name"]

MIN_ALIGN = 8  # every leaf starts on at least an 8-byte boundary

PathKey = str | int
# A batched-structure template: a leaf index, or ("dict", keys, children), or ("tuple", children).
Template = int | tuple


@dataclass(frozen=True)
class Leaf:
    """One array leaf of a record: where it sits and what it holds."""

    path: tuple[PathKey, ...]
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    strides: tuple[int, ...]  # C-contiguous strides of one env's value


@dataclass(frozen=True)
class Layout:
    """The record layout of one observation space."""

    leaves: tuple[Leaf, ...]
    record_size: int
    template: Template
    table: FieldTable

    def __reduce__(self) -> tuple:
        """Pickled without its compiled table, which is rebuilt from the leaves: the
        trainer lays out the records once and sends the layout to its workers.
        """
        return _layout, (self.leaves, self.record_size, self.template)


def leaf_name(path: tuple[PathKey, ...]) -> str:
    """``('image', 0)`` -> ``obs["image"][0]``: how errors name a leaf."""
    return "obs" + "".join(f'["{k}"]' if isinstance(k, str) else f"[{k}]" for k in path)


def _align(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


def _leaf_spec(space: spaces.Space) -> tuple[np.dtype, tuple[int, ...]] | None:
    if isinstance(space, spaces.Discrete):
        return np.dtype(space.dtype), ()
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        return np.dtype(space.dtype), tuple(int(d) for d in space.shape)
    return None


def layout_of(space: spaces.Space) -> Layout | None:
    """Compile ``space`` into a record layout, or ``None`` if a leaf cannot be flat."""
    leaves: list[Leaf] = []

    def visit(sub: spaces.Space, path: tuple[PathKey, ...], offset: int) -> tuple[Template, int]:
        if isinstance(sub, spaces.Dict):
            keys, children = list(sub.spaces.keys()), []
            for key in keys:
                child, offset = visit(sub.spaces[key], (*path, key), offset)
                children.append(child)
            return ("dict", tuple(keys), tuple(children)), offset
        if isinstance(sub, spaces.Tuple):
            children = []
            for index, child_space in enumerate(sub.spaces):
                child, offset = visit(child_space, (*path, index), offset)
                children.append(child)
            return ("tuple", tuple(children)), offset
        spec = _leaf_spec(sub)
        if spec is None or spec[0].hasobject:
            raise _NotFlat
        dtype, shape = spec
        offset = _align(offset, max(MIN_ALIGN, dtype.alignment))
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        strides = np.empty(shape, dtype).strides
        leaves.append(Leaf(path, dtype, shape, offset, nbytes, strides))
        return len(leaves) - 1, offset + nbytes

    try:
        template, end = visit(space, (), 0)
    except _NotFlat:
        return None
    alignment = max([MIN_ALIGN, *(leaf.dtype.alignment for leaf in leaves)])
    record_size = max(_align(end, alignment), alignment)
    return _layout(tuple(leaves), record_size, template)


def _layout(leaves: tuple[Leaf, ...], record_size: int, template: Template) -> Layout:
    """The layout of ``leaves``, with their compiled writer table."""
    table = FieldTable(
        [leaf.path for leaf in leaves],
        [leaf_name(leaf.path) for leaf in leaves],
        [leaf.dtype for leaf in leaves],
        [leaf.shape for leaf in leaves],
        [leaf.offset for leaf in leaves],
    )
    return Layout(leaves, record_size, template, table)


class _NotFlat(Exception):
    pass


def batch_views(layout: Layout, rows: np.ndarray) -> Any:
    """Gymnasium's batched structure of ``rows`` (n, record_size) as zero-copy views."""
    n = rows.shape[0]
    if isinstance(layout.template, int) and layout.leaves[0].nbytes == rows.strides[0]:
        leaf = layout.leaves[0]  # one leaf filling the record: a plain reshape
        return rows.view(leaf.dtype).reshape((n, *leaf.shape))
    return _build_views(layout.template, layout.leaves, rows)


def _build_views(node: Template, leaves: tuple[Leaf, ...], rows: np.ndarray) -> Any:
    # A plain recursive function, not a closure over ``rows``: a closure that calls
    # itself is a reference cycle, which would keep ``rows`` (and a shared-memory
    # mapping under it) alive until the garbage collector runs.
    if isinstance(node, int):
        leaf = leaves[node]
        return np.ndarray((rows.shape[0], *leaf.shape), leaf.dtype, buffer=rows,
                          offset=leaf.offset, strides=(rows.strides[0], *leaf.strides))
    if node[0] == "dict":
        return {key: _build_views(child, leaves, rows)
                for key, child in zip(node[1], node[2], strict=True)}
    return tuple(_build_views(child, leaves, rows) for child in node[1])


def copy_tree(node: Any) -> Any:
    """A C-contiguous copy of every array in a batched structure (dicts, tuples, arrays)."""
    if isinstance(node, dict):
        return {key: copy_tree(value) for key, value in node.items()}
    if isinstance(node, tuple):
        return tuple(copy_tree(value) for value in node)
    return node.copy()


def copy_into(views: Any, batch: Any, rows: np.ndarray | None = None) -> None:
    """Copy a batch (dicts, tuples, arrays) into views of the same structure.

    With ``rows``, the batch's entries go to those rows of the views, in order.
    """
    if isinstance(views, dict):
        for key, view in views.items():
            copy_into(view, batch[key], rows)
    elif isinstance(views, tuple):
        for view, part in zip(views, batch, strict=True):
            copy_into(view, part, rows)
    elif rows is None:
        np.copyto(views, batch)
    else:
        views[rows] = batch
