"""close(timeout=..., terminate=...) as Gymnasium's ``close_extras`` documents it.

``terminate=True`` stops at once without closing the envs; ``timeout`` bounds how
long close waits for a step in flight and for the envs to close, after which the
workers are terminated; the default drops what is in flight and gives the workers
a second to close their envs.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import numpy as np
import pytest

from fastvec import SubprocVecEnv, SyncVecEnv
from tests.support.envs import HangingEnv, ProbeEnv

pytestmark = pytest.mark.fastvec_only


class SlowProbeEnv(ProbeEnv):
    """A ProbeEnv whose steps take ``delay`` seconds."""

    def __init__(self, delay: float, env_id: int = 0, close_log: str | None = None):
        super().__init__(episode_len=100, env_id=env_id, close_log=close_log)
        self.delay = delay

    def step(self, action):
        time.sleep(self.delay)
        return super().step(action)


def closed_envs(log: Path) -> list[int]:
    return sorted(int(line) for line in log.read_text().split()) if log.exists() else []


def probe_fns(log: Path, n: int, delay: float = 0.0) -> list:
    return [functools.partial(SlowProbeEnv, delay, i, str(log)) for i in range(n)]


@pytest.mark.parametrize("terminate", [False, True])
def test_sync_close_terminate_skips_env_close(tmp_path, terminate):
    log = tmp_path / "closed"
    envs = SyncVecEnv(probe_fns(log, 3))
    envs.reset(seed=0)
    envs.close(terminate=terminate)
    assert envs.closed
    assert closed_envs(log) == ([] if terminate else [0, 1, 2])


@pytest.mark.subprocess
def test_close_default_closes_every_env(tmp_path):
    log = tmp_path / "closed"
    envs = SubprocVecEnv(probe_fns(log, 4), num_workers=2)
    envs.reset(seed=0)
    envs.close()
    envs.close()  # idempotent
    assert closed_envs(log) == [0, 1, 2, 3]


@pytest.mark.subprocess
def test_close_terminate_stops_at_once_without_closing_envs(tmp_path):
    log = tmp_path / "closed"
    envs = SubprocVecEnv(probe_fns(log, 4, delay=2.0), num_workers=2)
    envs.reset(seed=0)
    envs.step_async(np.zeros(4, np.int64))  # every worker busy for 2 s
    start = time.monotonic()
    envs.close(terminate=True)
    assert time.monotonic() - start < 1.0
    assert closed_envs(log) == []


@pytest.mark.subprocess
def test_close_with_timeout_waits_for_the_step_in_flight(tmp_path):
    log = tmp_path / "closed"
    envs = SubprocVecEnv(probe_fns(log, 2, delay=0.5), num_workers=2)
    envs.reset(seed=0)
    envs.step_async(np.zeros(2, np.int64))
    start = time.monotonic()
    envs.close(timeout=10.0)
    elapsed = time.monotonic() - start
    assert 0.3 < elapsed < 5.0  # waited for the step, then the envs closed
    assert closed_envs(log) == [0, 1]


@pytest.mark.subprocess
def test_close_with_timeout_terminates_a_hung_worker(tmp_path):
    fns = [functools.partial(HangingEnv, hang_at=1, faulty=(i == 1), env_id=i)
           for i in range(2)]
    envs = SubprocVecEnv(fns, num_workers=2)
    envs.reset(seed=0)
    envs.step_async(np.zeros(2, np.int64))  # worker 1 never finishes
    start = time.monotonic()
    envs.close(timeout=0.5)
    assert time.monotonic() - start < 3.0  # 0.5 s, then terminate (and kill if need be)


@pytest.mark.subprocess
def test_close_with_timeout_in_async_mode_waits_for_envs_in_flight(tmp_path):
    log = tmp_path / "closed"
    envs = SubprocVecEnv(probe_fns(log, 4, delay=0.3), num_workers=2, batch_size=2)
    envs.async_reset(seed=0)
    _, _, _, _, _, ids = envs.recv()
    envs.send(np.zeros(2, np.int64), ids)  # both workers in flight now
    envs.close(timeout=10.0)
    assert closed_envs(log) == [0, 1, 2, 3]
