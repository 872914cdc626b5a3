# Stub of the compiled module built from csrc/infos.pyx (see csrc/README.md).
"""Batch per-env info dicts into Gymnasium's dict-of-arrays form with ``_key`` masks."""

from typing import Any, SupportsIndex

def add_info(
    vector_infos: dict[Any, Any], info: dict[Any, Any], env_index: SupportsIndex, num_envs: int
) -> dict[Any, Any]:
    """Add ``info`` of env ``env_index`` to ``vector_infos``; mutates and returns it."""

def batch_infos(
    entries: list[tuple[SupportsIndex, dict[Any, Any]]], num_envs: int
) -> dict[Any, Any]:
    """Fold ``(env_index, info)`` pairs, in order, into a new batched info dict."""

def batch_block_infos(
    entries: list[tuple[SupportsIndex, dict[Any, Any]]], num_envs: int, first: int = 0
) -> tuple[dict[Any, Any], bool]:
    """:func:`batch_infos`, and whether every value was stored exactly as it came."""

class InfosDisagree(Exception):
    """A block's leaf has another dtype, shape or nesting than the batch has for it."""

def merge_entries(
    entries: list[tuple[SupportsIndex, Any]], num_envs: int, block_type: type
) -> dict[Any, Any]:
    """Fold ``(row, info)`` entries in order, merging blocks batched already."""

def write_block(batched: dict[Any, Any], paths: tuple[Any, ...], views: list[Any]) -> bool:
    """Copy a batched info dict into ``views`` when its leaves are exactly ``paths``."""
