"""The Ray that ``RayVecEnv`` starts when none runs: loopback only, gone with the trainer.

An unauthenticated Ray must never listen on the network: the Ray fastvec starts
binds 127.0.0.1 (Ray's single-machine mode) and has no dashboard, and a reaper
process (:mod:`fastvec.pool.ray.reaper`) ends it if the trainer dies without
``close()``.  Joining a cluster is the trainer's own ``ray.init(address=...)``.
"""

from __future__ import annotations

import os

from fastvec.pool.ray import reaper

__all__ = ["start_local_ray", "stop_local_ray"]

LOOPBACK_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's single-machine mode


def start_local_ray() -> bool:
    """Start a loopback-only, single-machine Ray unless one is up; whether this started it.

    An unauthenticated Ray must never listen on the network: the Ray fastvec starts
    binds 127.0.0.1 (Ray's single-machine mode, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``)
    and has no dashboard.  Joining a cluster is the trainer's own ``ray.init(address=...)``.
    """
    import ray
    from ray._private import ray_constants

    if ray.is_initialized():
        return False
    # Ray reads the variable when it is imported (here, and in the processes it starts);
    # the trainer may have imported Ray before, so its constant is set for the start too.
    # Both are put back afterwards: a later ray.init(address=...) of the trainer's own
    # must not be confined to this machine.
    saved_env = os.environ.get(LOOPBACK_VAR)
    saved_constant = ray_constants.ENABLE_RAY_CLUSTER
    if saved_env is None:
        os.environ[LOOPBACK_VAR] = "0"
    if os.environ[LOOPBACK_VAR] == "0":
        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_constant
        if saved_env is None:
            os.environ.pop(LOOPBACK_VAR, None)
    reaper.watch()  # ends that Ray if this process dies without close()
    return True


def stop_local_ray() -> None:
    """Shut down the Ray :func:`start_local_ray` started, and its reaper."""
    import ray

    ray.shutdown()
    reaper.stop()
