"""Restarts are never silent, on every backend that restarts (all but ``SyncVecEnv``).

With ``on_worker_failure="restart"`` each restart logs a WARNING on the
``fastvec`` logger in the trainer's process (the envs, the worker, the
exception's type and message; its traceback at DEBUG), ``restart_counts`` and
``total_restarts`` count them, and past ``max_restarts`` the next failure raises
the ``WorkerError`` it would have been.  What a restart does to the batch
(truncation, ``infos["worker_restarted"]``, the other envs untouched) is
``test_subproc_faults.py``'s, ``test_local_block.py``'s and ``test_ray_env.py``'s.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from fastvec.errors import WorkerError
from tests import backends, internals
from tests.envs import CountingEnv, RaisingEnv, make_fns

pytestmark = pytest.mark.fastvec_only

N = 6
FAULTY = 3  # env 3 raises at step 3 of each of its episodes: on steps 3, 6, 9...


def faulty_fns() -> list:
    return make_fns(RaisingEnv, N, per_env={"faulty": [i == FAULTY for i in range(N)]},
                    raise_at=3)


def block_of(envs: Any, env: int) -> tuple[int, int]:
    return next((a, z) for a, z in internals.block_bounds(envs) if a <= env < z)


@pytest.fixture
def restarting(make_envs: Any, backend: str) -> Any:
    """``restarting(**kwargs)``: a vector env of ``backend`` over :func:`faulty_fns` that
    restarts failed blocks."""
    if backend == backends.SYNC:
        pytest.skip("SyncVecEnv does not restart: an env's exception reaches the caller")

    def make(**kwargs: Any) -> Any:
        return make_envs(faulty_fns(), on_worker_failure="restart", **kwargs)
    return make


def test_each_restart_is_logged_and_counted(restarting: Any, caplog: Any) -> None:
    envs = restarting()
    start, stop = block_of(envs, FAULTY)
    envs.reset(seed=0)
    caplog.set_level(logging.DEBUG, logger="fastvec")
    for step in range(1, 7):
        envs.step(np.zeros(N, np.int64))
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING
                    and r.name == "fastvec"]  # (Ray's threads log too)
        assert len(warnings) == step // 3, [r.getMessage() for r in warnings]
    first = warnings[0].getMessage()
    assert warnings[0].name == "fastvec"
    units = f"env {start}" if stop - start == 1 else f"envs {start}..{stop - 1}"
    assert f"restarting {units} (restart 1, max_restarts=1000)" in first
    assert "EnvBoom" in first and f"env {FAULTY} raised on purpose at step 3" in first
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG and r.name == "fastvec"]
    assert debug and "EnvBoom" in str(debug[0].exc_info[1].__cause__)  # the traceback
    expected = np.zeros(N, np.int64)
    expected[start:stop] = 2
    np.testing.assert_array_equal(envs.restart_counts, expected)
    assert envs.total_restarts == 2


def test_past_max_restarts_the_failure_is_raised(restarting: Any) -> None:
    envs = restarting(max_restarts=2)
    envs.reset(seed=0)
    for _ in range(8):  # two restarts, on steps 3 and 6
        envs.step(np.zeros(N, np.int64))
    assert envs.total_restarts == 2
    with pytest.raises(WorkerError, match=r"raised EnvBoom.*max_restarts=2") as caught:
        envs.step(np.zeros(N, np.int64))
    assert caught.value.env_index == FAULTY
    assert "EnvBoom" in str(caught.value.__cause__)
    assert envs.total_restarts == 2


def test_max_restarts_zero_restarts_nothing(restarting: Any) -> None:
    envs = restarting(max_restarts=0)
    envs.reset(seed=0)
    envs.step(np.zeros(N, np.int64))
    envs.step(np.zeros(N, np.int64))
    with pytest.raises(WorkerError, match="max_restarts=0"):
        envs.step(np.zeros(N, np.int64))


@pytest.mark.parametrize("value", [-1, 1.5, "10", True])
def test_a_bad_max_restarts_is_a_value_error(make_envs: Any, backend: str, value: Any) -> None:
    if backend == backends.SYNC:
        pytest.skip("SyncVecEnv does not restart")
    with pytest.raises(ValueError, match="max_restarts to be an int >= 0 or None"):
        make_envs(make_fns(CountingEnv, 2), on_worker_failure="restart", max_restarts=value)


def test_without_failures_the_counts_are_zero(make_envs: Any) -> None:
    envs = make_envs(make_fns(CountingEnv, 2))
    envs.reset(seed=0)
    envs.step(np.zeros(2, np.int64))
    assert envs.total_restarts == 0 and envs.restart_counts.tolist() == [0, 0]
