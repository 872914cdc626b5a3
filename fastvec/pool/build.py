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
from fastvec.pool.process.procs import preload_in_forkserver
from fastvec.pool.process.workers import usable_cpus
from fastvec.pool.restarts import (
    DEFAULT_MAX_RESTARTS,
    RestartBudget,
    Restarts,
    check_failure_policy,
)
from fastvec.spaces.frame_stack import FrameStack
from fastvec.spaces.observation_mode import (
    ObservationMode,
    check_observation_mode,
    observation_spaces,
    same_space_hint,
)

__all__ = ["check_count", "check_env_fns", "check_timeout", "default_context",
           "default_num_workers", "failure_policy", "local_pool", "process_pool"]


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
                 max_restarts: int | RestartBudget | None = DEFAULT_MAX_RESTARTS,
                 local_block: bool = False, daemon: bool = True,
                 frame_stack: FrameStack | None = None) -> ProcessPool:
    """Worker processes for ``env_fns``, in contiguous blocks (with ``local_block``, block
    0 in this process), started, checked and attached.

    Raises:
        ValueError: an argument out of range (before any worker starts), or envs that
            cannot be batched (``SpacesMismatchError``).
        WorkerError: an env could not be built.
    """
    num_envs = check_env_fns(env_fns)  # env functions; a game fills several rows, known later
    local = 1 if local_block else 0
    if num_workers is None:
        num_workers = default_num_workers(num_envs, local_block)
    check_count(num_workers, "num_workers", num_envs - local,
                " with local_block=True (the first block stays in this process)"
                if local_block else "")
    restarts = failure_policy(num_envs, on_worker_failure, max_restarts)
    check_observation_mode(observation_mode)
    check_stacking(frame_stack, observation_mode)
    check_timeout(timeout)
    if context is not None and context not in mp.get_all_start_methods():
        raise ValueError(f"expected context in {mp.get_all_start_methods()} or None, "
                         f"got {context!r}")
    if (context or default_context()) == "forkserver":
        preload_in_forkserver()
    pool = ProcessPool(env_fns, split_blocks(num_envs, num_workers + local),
                       mp.get_context(context or default_context()), mode, copy, timeout,
                       on_worker_failure, observation_mode, restarts, local=bool(local_block),
                       daemon=bool(daemon), frame_stack=frame_stack)
    pool.num_workers = num_workers
    pool.context = context or default_context()
    return pool


# -- the checks every pool builder makes (the process pool's here, the Ray pool's in
# pool/ray/build.py), each written once

def check_env_fns(env_fns: Sequence[Any]) -> int:
    """How many env functions; ValueError if none."""
    if len(env_fns) < 1:
        raise ValueError("expected at least one env function, got none")
    return len(env_fns)


def check_count(value: Any, name: str, most: int, where: str = "") -> None:
    """``value`` (``num_workers``, ``num_actors``) is an int in ``[1, most]``, else a
    ValueError that names it (``where``: why the bound is what it is).
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ValueError(f"expected {name} in [1, {most}]{where}, got {value!r}")


def check_timeout(timeout: float | None) -> None:
    """None or a positive number of seconds (not NaN)."""
    if timeout is not None and not timeout > 0:
        raise ValueError(f"expected a positive timeout in seconds or None, got {timeout}")


def failure_policy(num_envs: int, on_failure: str,
                   max_restarts: int | RestartBudget | None) -> Restarts | None:
    """``on_worker_failure`` and ``max_restarts`` (an int, None or a ``RestartBudget``)
    checked; the restart counter and budget for ``"restart"``.
    """
    check_failure_policy(on_failure, max_restarts)
    return Restarts(num_envs, max_restarts) if on_failure == "restart" else None


def check_stacking(frame_stack: FrameStack | None, observation_mode: ObservationMode) -> None:
    """Padding other than the reset observation is one value for all envs, so their
    spaces must be the same.
    """
    if frame_stack is not None and observation_mode != "same" and not (
            isinstance(frame_stack.padding_type, str) and frame_stack.padding_type == "reset"):
        raise ValueError("expected observation_mode='same' with a frame_stack padding_type "
                         "other than 'reset' (the padding is one value for every env)")
