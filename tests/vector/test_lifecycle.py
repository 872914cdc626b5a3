"""Create / step / close in a loop, as evaluation loops and sweeps do: nothing grows.

Each backend and start method runs many cycles in this one process; after a
warm-up, open file descriptors, threads, child processes and ``/dev/shm``
entries must be back where they started after every cycle, and RSS must not
creep.  ``FASTVEC_LIFECYCLE_SCALE`` multiplies the cycle counts (the CI tier
runs 1x: a few hundred cycles in all; 10 gives about 1,000 cycles per backend).
"""

from __future__ import annotations

import gc
import os
import threading

import numpy as np
import pytest

import fastvec
from tests.support import leaks
from tests.support.envs import CountingEnv, DictCountingEnv, make_fns

SCALE = float(os.environ.get("FASTVEC_LIFECYCLE_SCALE", "1"))
RSS_SLACK_MB = 8.0  # allocator noise; a leak of one block per cycle would pass it fast

# (backend, kwargs, cycles at scale 1)
CASES = [
    ("sync", {}, 100),
    ("subproc", {"context": "fork", "num_workers": 2}, 40),
    ("subproc", {"context": "fork", "num_workers": 1, "local_block": True}, 30),
    ("subproc", {"context": "fork", "num_workers": 2, "batch_size": 2}, 30),
    ("subproc", {"context": "forkserver", "num_workers": 2}, 8),
    ("subproc", {"context": "spawn", "num_workers": 2}, 4),
]


def open_files() -> list[str]:
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass  # the directory listing's own descriptor
    return sorted(names)


def resources() -> dict[str, object]:
    return {
        "fds": open_files(),
        "threads": len(os.listdir("/proc/self/task")),
        "python threads": threading.active_count(),
        "children": len(leaks.live_children()),
        "shm": len(leaks.shm_entries()),
    }


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def one_cycle(backend: str, kwargs: dict, k: int) -> None:
    env_cls = DictCountingEnv if k % 2 else CountingEnv
    fns = make_fns(env_cls, 4, episode_len=3)
    make = fastvec.SyncVecEnv if backend == "sync" else fastvec.SubprocVecEnv
    with make(fns, **kwargs) as envs:
        if kwargs.get("batch_size"):
            envs.async_reset(seed=k)
            for _ in range(4):
                *_, ids = envs.recv()
                envs.send(np.zeros(len(ids), np.int64), ids)
        else:
            envs.reset(seed=k)
            for _ in range(4):
                envs.step(np.zeros(4, np.int64))


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("backend, kwargs, cycles", CASES,
                         ids=[f"{b}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" or b
                              for b, kw, _ in CASES])
def test_create_step_close_cycles_leave_nothing_behind(backend, kwargs, cycles):
    cycles = max(3, int(cycles * SCALE))
    warm = max(2, cycles // 10)
    for k in range(warm):
        one_cycle(backend, kwargs, k)
    gc.collect()
    leaks.wait_no_children(2.0)
    before, rss_before = resources(), rss_mb()
    for k in range(warm, cycles):
        one_cycle(backend, kwargs, k)
        if k % 5 == 0 or k == cycles - 1:
            leaks.wait_no_children(2.0)
            now = resources()
            assert now == before, f"after cycle {k}: {now} (was {before})"
    gc.collect()
    growth = rss_mb() - rss_before
    assert growth < RSS_SLACK_MB, f"RSS grew {growth:.1f} MiB over {cycles - warm} cycles"
