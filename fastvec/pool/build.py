"""Env functions -> the pool that runs them, ready to step.

Used by the vector envs (``SyncVecEnv``: :func:`local_pool`; ``SubprocVecEnv``:
:func:`process_pool`) and by the Ray actor, which hosts a block of envs in one
of the two (every host runs the bottom unit, never a whole vector env).  Each
checks its arguments, builds the envs, checks that they can be batched (spaces,
agents, ``observation_mode``) and lays out the batch buffers.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from typing import Any

from fastvec.pool.about import check_blocks, describe, stacked
from fastvec.pool.base import split_blocks
from fastvec.pool.buffers import Buffers, rows_of
from fastvec.pool.local import LocalPool
from fastvec.pool.obs_store import make_obs_store
from fastvec.pool.process.pool import ProcessPool
from fastvec.pool.process.workers import usable_cpus
from fastvec.pool.restarts import DEFAULT_MAX_RESTARTS, Restarts, check_failure_policy
from fastvec.spaces.frame_stack import FrameStack
from fastvec.spaces.observation_mode import (
    ObservationMode,
    check_observation_mode,
    observation_spaces,
    same_space_hint,
)

__all__ = ["default_context", "default_num_workers", "local_pool", "process_pool"]


def default_context() -> str:
    """Forkserver where available (safe with threads in the trainer), else spawn."""
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


def default_num_workers(num_envs: int, local_block: bool = False) -> int:
    """``min(num_envs, CPUs this process may use)``, minus the trainer's block if any."""
    return max(1, min(num_envs, usable_cpus()) - local_block)


def local_pool(envs: list, mode: int, copy: bool, observation_mode: ObservationMode = "same",
               frame_stack: FrameStack | None = None) -> LocalPool:
    """A pool of one block, ``envs`` (built already), stepped in this process (with
    ``frame_stack``, each record keeps the env's last frames).

    Raises:
        ValueError: no envs; ``SpacesMismatchError`` (a ``ValueError``) when they
            cannot be batched, naming the env or game.
    """
    if not envs:
        raise ValueError("expected at least one env function, got none")
    check_observation_mode(observation_mode)
    check_stacking(frame_stack, observation_mode)
    about = stacked(describe(envs), frame_stack)
    check_blocks([about], 0, observation_mode == "same", same_space_hint)
    single, batched = observation_spaces(observation_mode, [t[0] for t in about.env_spaces],
                                         games=about.agents is not None)
    num_rows = rows_of(envs)
    store = make_obs_store(single, num_rows, copy, fresh_rows=frame_stack is None)
    pool = LocalPool(envs, Buffers.allocate(store, num_rows), mode, frame_stack)
    pool.count_rows(about)
    pool.observation_spaces = (single, batched)
    return pool


def process_pool(env_fns: Sequence[Callable[[], Any]], mode: int, copy: bool,
                 num_workers: int | None = None, context: str | None = None,
                 timeout: float | None = None, on_worker_failure: str = "raise",
                 observation_mode: ObservationMode = "same",
                 max_restarts: int | None = DEFAULT_MAX_RESTARTS,
                 local_block: bool = False, daemon: bool = True,
                 frame_stack: FrameStack | None = None) -> ProcessPool:
    """Worker processes for ``env_fns``, in contiguous blocks (with ``local_block``, block
    0 in this process), started, checked and attached.

    Raises:
        ValueError: an argument out of range (before any worker starts), or envs that
            cannot be batched (``SpacesMismatchError``).
        WorkerError: an env could not be built.
    """
    num_envs = len(env_fns)  # env functions; a game fills several rows, known later
    if num_envs < 1:
        raise ValueError("expected at least one env function, got none")
    local = 1 if local_block else 0
    if num_workers is None:
        num_workers = default_num_workers(num_envs, local_block)
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) \
            or not 1 <= num_workers <= num_envs - local:
        where = " with local_block=True (the first block stays in this process)" \
            if local_block else ""
        raise ValueError(f"expected num_workers in [1, {num_envs - local}]{where}, got "
                         f"{num_workers!r}")
    check_failure_policy(on_worker_failure, max_restarts)
    check_observation_mode(observation_mode)
    check_stacking(frame_stack, observation_mode)
    if timeout is not None and not timeout > 0:
        raise ValueError(f"expected a positive timeout in seconds or None, got {timeout}")
    if context is not None and context not in mp.get_all_start_methods():
        raise ValueError(f"expected context in {mp.get_all_start_methods()} or None, "
                         f"got {context!r}")
    restarts = Restarts(num_envs, max_restarts) if on_worker_failure == "restart" else None
    pool = ProcessPool(env_fns, split_blocks(num_envs, num_workers + local),
                       mp.get_context(context or default_context()), mode, copy, timeout,
                       on_worker_failure, observation_mode, restarts, local=bool(local_block),
                       daemon=bool(daemon), frame_stack=frame_stack)
    pool.num_workers = num_workers
    pool.context = context or default_context()
    return pool


def check_stacking(frame_stack: FrameStack | None, observation_mode: ObservationMode) -> None:
    """Padding other than the reset observation is one value for all envs, so their
    spaces must be the same.
    """
    if frame_stack is not None and observation_mode != "same" and not (
            isinstance(frame_stack.padding_type, str) and frame_stack.padding_type == "reset"):
        raise ValueError("expected observation_mode='same' with a frame_stack padding_type "
                         "other than 'reset' (the padding is one value for every env)")
