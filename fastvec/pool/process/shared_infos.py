"""Infos through shared memory: a worker's batched infos as fixed leaves in its info area.

A worker batches its envs' infos (``batch_block_infos``).  When every value went
in as it came and the result is plain (str keys, each followed by its ``_key``
mask, no object arrays, no empty dicts), its *schema* (each leaf's key path, dtype
and shape) goes to the parent once over the pipe, together with that step's raw
infos; on later steps with the same schema only the leaves' bytes travel, written
into the worker's area of the shared segment.  The parent merges the blocks of all
workers (and the raw infos of a block it stepped itself) into the batch in one
compiled pass, copying each leaf's rows straight from the info area
(``fastvec._kernels.infos.merge_entries``); that equals batching every env's
info in env order (Gymnasium's ``_add_info``) whenever the blocks agree on each
leaf's dtype and shape; when they do not, the kernel says so and the caller
falls back to the raw infos.

The two ends: :class:`InfoWriter` in the worker, :class:`InfoReader` in the parent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from fastvec._kernels.infos import (
    InfosDisagree,
    batch_block_infos,
    batch_infos,
    merge_entries,
    write_block,
)
from fastvec.pool.process.protocol import BlockReply, InfoSchema, Status

__all__ = ["INFO_BYTES", "BlockInfos", "InfoReader", "InfoWriter", "area_views",
           "batch_entries", "fetch_raw", "leaves_of", "schema_of", "write_leaves"]

INFO_BYTES = 16 * 1024  # each worker's info area; bigger infos go over the pipe
_ALIGN = 16

Path = tuple[str, ...]


class BlockInfos(NamedTuple):
    """A block's batched infos, standing for its envs' entries from a row.

    A worker's: each leaf's key path and its array (a view of the worker's info
    area, read at once).  The trainer's own block's (``worker`` None): the
    ``batched`` dict, and the ``raw`` entries it was made of.
    """

    paths: tuple[Path, ...]
    views: list[np.ndarray]
    size: int
    worker: int | None
    batched: dict | None = None
    raw: list | None = None

    @classmethod
    def local(cls, entries: list, size: int) -> BlockInfos | None:
        """The trainer's block of ``size`` envs (rows from 0) as one, if it batches
        exactly (see ``batch_block_infos``); else None.
        """
        batched, exact = batch_block_infos(entries, size)
        return cls((), [], size, None, batched, entries) if exact else None

    @classmethod
    def of(cls, batched: dict, size: int, worker: int) -> BlockInfos:
        """The block of a batched info dict (plain: see :func:`leaves_of`)."""
        leaves = leaves_of(batched)
        assert leaves is not None, "not a plain batched info dict"
        return cls(tuple(path for path, _ in leaves), [array for _, array in leaves], size,
                   worker)



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


def schema_of(leaves: list[tuple[Path, np.ndarray]]) -> InfoSchema:
    """Key path, dtype and shape of each leaf."""
    return tuple((path, array.dtype.str, array.shape) for path, array in leaves)


def area_views(schema: InfoSchema, area: np.ndarray) -> list[np.ndarray] | None:
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


def batch_entries(entries: list, num_envs: int) -> dict:
    """Batch ``(env_index, info)`` entries, some of them ``(start, BlockInfos)``;
    ``InfosDisagree`` if unsure.
    """
    return merge_entries(entries, num_envs, BlockInfos)


def fetch_raw(entries: list, raw: dict[int, list]) -> list:
    """``entries`` with each ``(start, BlockInfos)`` replaced by the raw entries ``raw[start]``."""
    out: list[Any] = []
    for index, info in entries:
        if type(info) is BlockInfos:
            out.extend(raw[index])
        else:
            out.append((index, info))
    return out


class InfoWriter:
    """The worker's end: its block's infos into its info area when they are plain."""

    def __init__(self, area: np.ndarray, raw_only: np.ndarray, first: int, count: int) -> None:
        self.area = area
        self.raw_only = raw_only  # set by the parent once blocks disagreed
        self.first, self.count = first, count
        self.schema: InfoSchema | None = None  # the layout the parent knows
        self.views: list[np.ndarray] = []
        self.paths: tuple[Path, ...] = ()
        self.last_entries: list = []  # the last step's raw infos, if the parent asks again

    def encode(self, entries: list) -> Status | BlockReply:
        """``Status.INFOS`` once the infos are in the area, else the reply to send."""
        self.last_entries = entries
        if self.raw_only[0]:
            return BlockReply(entries)
        batched, exact = batch_block_infos(entries, self.count, self.first)
        if exact and self.schema is not None and write_block(batched, self.paths, self.views):
            return Status.INFOS  # the layout the parent knows: one compiled copy
        leaves = leaves_of(batched) if exact else None
        if leaves is None:
            return BlockReply(entries)
        schema = schema_of(leaves)
        if schema == self.schema:
            write_leaves(self.views, leaves)
            return Status.INFOS
        views = area_views(schema, self.area)
        if views is None:
            return BlockReply(entries)
        self.schema, self.views = schema, views
        self.paths = tuple(path for path, _, _ in schema)
        return BlockReply(entries, info_schema=schema)  # the parent learns the layout


class InfoReader:
    """The parent's end: the workers' info areas, and batching their blocks with raw infos.

    ``resend(w)`` asks worker ``w`` for its last step's raw infos (used when two
    blocks disagree on a leaf's dtype or shape).
    """

    def __init__(self, areas: np.ndarray, raw_only: np.ndarray,
                 resend: Callable[[int], list]) -> None:
        self.areas = areas
        self.raw_only = raw_only
        self.resend = resend
        self.known: list[tuple[tuple[Path, ...], list[np.ndarray]] | None] = \
            [None] * len(areas)

    def learn(self, w: int, schema: InfoSchema) -> None:
        """Worker ``w`` writes its infos with ``schema`` from now on."""
        views = area_views(schema, self.areas[w])
        self.known[w] = None if views is None else (tuple(path for path, _, _ in schema),
                                                    views)

    def forget(self, w: int) -> None:
        """Worker ``w`` was replaced: it starts without a layout."""
        self.known[w] = None

    def read(self, w: int, start: int, size: int) -> tuple[int, BlockInfos]:
        """Worker ``w``'s infos (envs ``start:start+size``) as one entry (views of its
        area: batch them before the worker steps again).
        """
        known = self.known[w]
        if known is None:
            raise RuntimeError(f"worker {w} reported infos in its area before their layout")
        return start, BlockInfos(known[0], known[1], size, w)

    def batch(self, entries: list, num_envs: int, position: dict[int, int] | None = None
              ) -> dict:
        """Gymnasium's batched infos of entries, some of them workers' blocks.

        ``position`` maps env index to row (async batches) for raw infos fetched again.
        """
        try:
            return batch_entries(entries, num_envs)
        except InfosDisagree:  # two blocks disagree on a leaf: batch the raw infos instead
            pass
        # Two workers' blocks disagree on a leaf's dtype or shape, so their arrays cannot
        # be combined exactly: ask for the raw infos, and from now on send only those.
        self.raw_only[0] = 1
        raw = {}
        for index, info in entries:
            if type(info) is BlockInfos:
                again = info.raw if info.worker is None else self.resend(info.worker)
                assert again is not None, "the trainer's own block keeps its raw infos"
                raw[index] = [(i if position is None else position[i], value)
                              for i, value in again]
        return batch_infos(fetch_raw(entries, raw), num_envs)
