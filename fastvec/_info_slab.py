"""Infos through shared memory: a worker's batched infos as fixed leaves in its info area.

A worker batches its envs' infos (``batch_block_infos``).  When every value went
in as it came and the result is plain (str keys, each followed by its ``_key``
mask, no object arrays, no empty dicts), its *schema* (each leaf's key path, dtype
and shape) goes to the parent once over the pipe, together with that step's raw
infos; on later steps with the same schema only the leaves' bytes travel, written
into the worker's area of the shared block.  The parent rebuilds the block's dict
and merges the blocks of all workers into the batch, which equals batching every
env's info in env order (Gymnasium's ``_add_info``) whenever the blocks agree on
each leaf's dtype and shape; when they do not, ``merge_block`` says so and the
caller falls back to the raw infos.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from fastvec._kernels.infos import add_info, batch_infos

__all__ = ["INFO_BYTES", "Block", "Mismatch", "area_views", "batch_entries", "fetch_raw",
           "leaves_of", "read_block", "schema_of", "write_leaves"]

INFO_BYTES = 16 * 1024  # each worker's info area; bigger infos go over the pipe
_ALIGN = 16

Path = tuple[str, ...]
Schema = tuple[tuple[Path, str, tuple[int, ...]], ...]


class Block(NamedTuple):
    """One worker's batched infos, standing for its envs' entries from ``start``."""

    infos: dict
    size: int
    worker: int


class Mismatch(Exception):
    """Two blocks disagree on a leaf's dtype or shape: batch the raw infos instead."""


def leaves_of(batched: dict, prefix: Path = ()) -> list[tuple[Path, np.ndarray]] | None:
    """The leaves of a batched info dict, in order; None if it is not plain."""
    items = list(batched.items())
    if len(items) % 2:
        return None
    leaves: list[tuple[Path, np.ndarray]] = []
    for (key, value), (mask_key, mask) in zip(items[::2], items[1::2], strict=True):
        if type(key) is not str or mask_key != "_" + key or type(mask) is not np.ndarray:
            return None
        if type(value) is dict:
            inner = leaves_of(value, (*prefix, key))
            if not inner:
                return None
            leaves.extend(inner)
        elif type(value) is np.ndarray and not value.dtype.hasobject:
            leaves.append(((*prefix, key), value))
        else:
            return None
        leaves.append(((*prefix, mask_key), mask))
    return leaves


def schema_of(leaves: list[tuple[Path, np.ndarray]]) -> Schema:
    """Key path, dtype and shape of each leaf."""
    return tuple((path, array.dtype.str, array.shape) for path, array in leaves)


def area_views(schema: Schema, area: np.ndarray) -> list[np.ndarray] | None:
    """Views of ``area`` (bytes) for the schema's leaves, or None if they do not fit."""
    views, offset = [], 0
    for _, dtype, shape in schema:
        dt = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if offset + size > area.nbytes:
            return None
        views.append(area[offset:offset + size].view(dt).reshape(shape))
        offset += -(-size // _ALIGN) * _ALIGN
    return views


def write_leaves(views: list[np.ndarray], leaves: list[tuple[Path, np.ndarray]]) -> None:
    """Copy the leaves into their views (the worker)."""
    for view, (_, array) in zip(views, leaves, strict=True):
        np.copyto(view, array)


def read_block(schema: Schema, views: list[np.ndarray]) -> dict:
    """The batched info dict a worker wrote, as fresh arrays (the parent)."""
    out: dict = {}
    for (path, _, _), view in zip(schema, views, strict=True):
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = view.copy()
    return out


def batch_entries(entries: list, num_envs: int) -> dict:
    """Batch ``(env_index, info)`` entries, some of them ``(start, Block)``; Mismatch if unsure."""
    if not any(type(info) is Block for _, info in entries):
        return batch_infos(entries, num_envs)
    out: dict = {}
    for index, info in entries:
        if type(info) is Block:
            _merge_block(out, info.infos, index, info.size, num_envs, check=True)
            _merge_block(out, info.infos, index, info.size, num_envs, check=False)
        else:
            add_info(out, info, index, num_envs)
    return out


def _merge_block(out: dict, block: dict, start: int, size: int, num_envs: int,
                 check: bool) -> None:
    """Put ``block`` (rows ``start:start+size``) into ``out``; with ``check``, only verify."""
    stop = start + size
    for key, value in block.items():
        known = out.get(key)
        if type(value) is dict:
            if known is not None and type(known) is not dict:
                raise Mismatch(key)
            inner = {} if known is None else known
            _merge_block(inner, value, start, size, num_envs, check)
            if not check:
                out[key] = inner
            continue
        if known is None:
            if not check:
                known = np.zeros((num_envs, *value.shape[1:]), dtype=value.dtype)
                known[start:stop] = value
                out[key] = known
        elif (type(known) is not np.ndarray or known.dtype != value.dtype
              or known.shape[1:] != value.shape[1:]):
            raise Mismatch(key)
        elif not check:
            known[start:stop] = value
            out[key] = known


def fetch_raw(entries: list, raw: dict[int, list]) -> list:
    """``entries`` with each ``(start, Block)`` replaced by the raw entries ``raw[start]``."""
    out: list[Any] = []
    for index, info in entries:
        if type(info) is Block:
            out.extend(raw[index])
        else:
            out.append((index, info))
    return out
