"""The few library internals tests look at, read in one place.

Tests that must see inside a vector env (a worker's pid to kill, the shared rows
a view points into) go through these functions, so a change of internals is
one edit here.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def worker_pids(envs: Any) -> list[int]:
    """The process id of each worker of a ``SubprocVecEnv``, in worker order."""
    return list(envs._pool.pids)


def worker_exitcodes(envs: Any) -> list[int | None]:
    """Each worker's exit code (None while it runs)."""
    return list(envs._pool.exitcodes)


def shared_rows(envs: Any) -> np.ndarray:
    """The ``(num_envs, record_size)`` bytes the observations are written into."""
    return envs._buffers.obs.rows


def obs_views(envs: Any) -> Any:
    """The batched observations as views of :func:`shared_rows`."""
    return envs._buffers.obs.views


def infos_raw_only(envs: Any) -> bool:
    """Whether the workers were told to send raw infos only."""
    return envs._pool.infos_raw_only


def block_bounds(envs: Any) -> list[tuple[int, int]]:
    """The ``(start, stop)`` rows of each block (with ``local_block``, block 0 is the
    trainer's and block ``b`` is worker ``b - 1``'s)."""
    return list(envs._pool.bounds)


def block_name(envs: Any, block: int) -> str:
    """How messages name the host of ``block``: ``worker 0``, ``actor 1``, ``the local
    block``."""
    return envs._pool.block_name(block)
