"""Env functions -> a :class:`RayPool`, its arguments checked as ``pool/build.py``
checks a process pool's (with the same functions), the actors started.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastvec.pool.base import split_blocks
from fastvec.pool.build import check_count, check_env_fns, check_timeout, failure_policy
from fastvec.pool.ray.placement import Placement
from fastvec.pool.ray.pool import RayPool
from fastvec.pool.ray.session import start_local_ray, stop_local_ray
from fastvec.pool.restarts import DEFAULT_MAX_RESTARTS, RestartBudget

__all__ = ["INNER", "INNER_OPTIONS", "ray_pool"]

INNER = ("sync", "subproc")
"""Where an actor steps its block: in its own process, or through worker processes."""
INNER_OPTIONS = ("num_workers", "context", "daemon", "local_block")
"""What ``inner_options`` may set: the options of those worker processes (``process_pool``'s)."""


def ray_pool(env_fns: Sequence[Callable[[], Any]], *, mode: int, copy: bool,
             num_actors: int | None = None, inner: str = "sync",
             inner_options: dict[str, Any] | None = None,
             actor_options: dict[str, Any] | None = None, timeout: float | None = None,
             on_failure: str = "raise",
             max_restarts: int | RestartBudget | None = DEFAULT_MAX_RESTARTS,
             frame_stack: Any = None) -> RayPool:
    """Ray actors for ``env_fns`` in contiguous blocks (default: one per alive node
    that has the resources ``actor_options`` ask for), started,
    checked; a Ray bound to 127.0.0.1 is started first if none runs (and stopped again if
    the pool cannot be built).

    Raises:
        ValueError: an argument out of range, before any actor starts; envs that cannot
            be batched (``SpacesMismatchError``).
        WorkerError: an env could not be built.
    """
    import ray

    num_envs = check_env_fns(env_fns)
    if inner not in INNER:
        raise ValueError(f"expected inner 'sync' or 'subproc', got {inner!r}")
    unknown = sorted(set(inner_options or {}) - set(INNER_OPTIONS))
    if unknown:
        raise ValueError(f"inner_options takes the options of the worker processes on an "
                         f"actor's node, {', '.join(INNER_OPTIONS)}; got {unknown} (the "
                         "vector env's own options are RayVecEnv's arguments)")
    if inner_options and inner != "subproc":
        raise ValueError(f"inner_options is for inner='subproc', got it with inner={inner!r}")
    restarts = failure_policy(num_envs, on_failure, max_restarts)
    check_timeout(timeout)
    if num_actors is not None:
        check_count(num_actors, "num_actors", num_envs)
    started = start_local_ray()
    try:
        if num_actors is None:
            hosts = Placement.for_options(ray, actor_options or {}).eligible()
            num_actors = max(1, min(num_envs, len(hosts)))
        return RayPool(env_fns, split_blocks(num_envs, num_actors), inner=inner, mode=mode,
                       copy=copy, actor_options=actor_options, inner_options=inner_options,
                       timeout=timeout, on_failure=on_failure, started_ray=started,
                       restarts=restarts, frame_stack=frame_stack)
    except BaseException:
        if started:
            stop_local_ray()
        raise
