"""Restarts are never silent, on every backend that restarts (all but ``SyncVecEnv``).

With ``on_worker_failure="restart"`` each restart logs a WARNING on the
``fastvec`` logger in the trainer's process (the envs, the worker, the
exception's type and message; its traceback at DEBUG), ``restart_counts`` and
``total_restarts`` count them, and past ``max_restarts`` (an int, or a
``fastvec.RestartBudget``: restarts in all, per block and in all within a window of
seconds) the next failure raises the ``WorkerError`` it would have been, naming the
budget it hit.  What a restart does to the batch
(truncation, ``infos["worker_restarted"]``, the other envs untouched) is
``test_faults.py``'s, ``test_local_block.py``'s and ``test_ray_env.py``'s.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import numpy as np
import pytest

import fastvec.pool.restarts
from fastvec import RestartBudget
from fastvec.errors import WorkerError
from tests.support import backends, internals
from tests.support.envs import CountingEnv, RaisingEnv, make_fns

pytestmark = pytest.mark.fastvec_only

N = 6
FAULTY = 3  # env 3 raises at step 3 of each of its episodes: on steps 3, 6, 9...


TWO_FAULTY = (0, FAULTY)  # in two blocks, but on one actor (the Ray backend) in one


def faulty_fns(faulty: tuple[int, ...] = (FAULTY,)) -> list:
    return make_fns(RaisingEnv, N, per_env={"faulty": [i in faulty for i in range(N)]},
                    raise_at=3)


def block_of(envs: Any, env: int) -> tuple[int, int]:
    return next((a, z) for a, z in internals.block_bounds(envs) if a <= env < z)


def block_name(envs: Any, env: int) -> str:
    """How messages name the host of ``env``'s block: ``worker 1``, ``actor 0``..."""
    return internals.block_name(envs, internals.block_bounds(envs).index(block_of(envs, env)))


def step_until_raised(envs: Any, most: int) -> tuple[WorkerError, int]:
    """Step (zeros) until a ``WorkerError``, at most ``most`` steps: it and the step."""
    for step in range(1, most + 1):
        try:
            envs.step(np.zeros(N, np.int64))
        except WorkerError as exc:
            return exc, step
    raise AssertionError(f"no WorkerError in {most} steps")


@pytest.fixture
def restarting(make_envs: Any, backend: str) -> Any:
    """``restarting(**kwargs)``: a vector env of ``backend`` over :func:`faulty_fns` that
    restarts failed blocks."""
    if backend == backends.SYNC:
        pytest.skip("SyncVecEnv does not restart: an env's exception reaches the caller")

    def make(faulty: tuple[int, ...] = (FAULTY,), **kwargs: Any) -> Any:
        return make_envs(faulty_fns(faulty), on_worker_failure="restart", **kwargs)
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


@pytest.mark.parametrize("budget, named", [(2, "max_restarts=2"),
                                           (RestartBudget(total=2), "RestartBudget(total=2)")])
def test_past_max_restarts_the_failure_is_raised(restarting: Any, budget: Any,
                                                 named: str) -> None:
    envs = restarting(max_restarts=budget)
    envs.reset(seed=0)
    for _ in range(8):  # two restarts, on steps 3 and 6
        envs.step(np.zeros(N, np.int64))
    assert envs.total_restarts == 2
    with pytest.raises(WorkerError, match=r"raised EnvBoom.*\(not restarted: 2 restarts "
                       rf"happened already, {re.escape(named)}\)$") as caught:
        envs.step(np.zeros(N, np.int64))
    assert caught.value.env_index == FAULTY
    assert caught.value.raised is not None and caught.value.raised[0] == "EnvBoom"
    assert "EnvBoom" in str(caught.value.__cause__)
    assert envs.total_restarts == 2
    assert envs.max_restarts == budget  # what was passed


def test_max_restarts_zero_restarts_nothing(restarting: Any) -> None:
    envs = restarting(max_restarts=0)
    envs.reset(seed=0)
    envs.step(np.zeros(N, np.int64))
    envs.step(np.zeros(N, np.int64))
    with pytest.raises(WorkerError, match="max_restarts=0"):
        envs.step(np.zeros(N, np.int64))


@pytest.mark.parametrize("value", [-1, 1.5, "10", True, {"per_block": 3}])
def test_a_bad_max_restarts_is_a_value_error(make_envs: Any, backend: str, value: Any) -> None:
    if backend == backends.SYNC:
        pytest.skip("SyncVecEnv does not restart")
    with pytest.raises(ValueError, match=r"max_restarts to be an int >= 0, None \(no limit\) "
                       r"or a fastvec.RestartBudget, got"):
        make_envs(make_fns(CountingEnv, 2), on_worker_failure="restart", max_restarts=value)


# -- restart budgets: per block and in all within a window ----------------------------


def test_past_a_per_block_budget_the_failure_is_raised_naming_it(restarting: Any) -> None:
    budget = RestartBudget(per_block=2)
    envs = restarting(TWO_FAULTY, max_restarts=budget)
    failing = {block_of(envs, env) for env in TWO_FAULTY}
    envs.reset(seed=0)
    for _ in range(8):  # each failing block restarted on steps 3 and 6
        envs.step(np.zeros(N, np.int64))
    assert envs.total_restarts == 2 * len(failing)  # counted per block, not in all
    with pytest.raises(WorkerError, match=r"raised EnvBoom.*\(not restarted: ") as caught:
        envs.step(np.zeros(N, np.int64))
    error = caught.value
    assert error.env_index in TWO_FAULTY  # the first to come back, in async batches
    assert str(error).endswith(
        f"(not restarted: {block_name(envs, error.env_index)} restarted 2 times in the last "
        "60 s, RestartBudget(per_block=2, window=60.0))"), str(error)
    assert error.raised is not None and error.raised[0] == "EnvBoom"
    assert error.__cause__ is not None  # the traceback, as without a budget
    assert envs.total_restarts == 2 * len(failing)
    assert envs.max_restarts is budget


def test_past_an_in_all_budget_the_failure_is_raised_naming_it(restarting: Any) -> None:
    envs = restarting(TWO_FAULTY, max_restarts=RestartBudget(in_all=3))
    envs.reset(seed=0)
    error, step = step_until_raised(envs, 12)  # two blocks: 2 restarts on step 3, 1 on 6
    assert step == (6 if len({block_of(envs, env) for env in TWO_FAULTY}) == 2 else 12)
    assert error.env_index in TWO_FAULTY
    assert str(error).endswith("(not restarted: 3 restarts in the last 60 s, "
                               "RestartBudget(in_all=3, window=60.0))"), str(error)
    assert envs.total_restarts == 3


def test_restarts_older_than_the_window_no_longer_count(restarting: Any, monkeypatch: Any
                                                        ) -> None:
    now = [1000.0]
    monkeypatch.setattr(fastvec.pool.restarts, "clock", lambda: now[0])
    envs = restarting(max_restarts=RestartBudget(per_block=1, in_all=1, window=10.0))
    envs.reset(seed=0)
    for _ in range(3):  # a restart at t=1000
        envs.step(np.zeros(N, np.int64))
    assert envs.total_restarts == 1
    now[0] = 1010.0  # the window is (t - 10, t]: that restart has left it
    for _ in range(3):
        envs.step(np.zeros(N, np.int64))
    assert envs.total_restarts == 2
    now[0] = 1019.9  # the restart at 1010 is still in it
    envs.step(np.zeros(N, np.int64))
    envs.step(np.zeros(N, np.int64))
    with pytest.raises(WorkerError, match=re.escape(
            f"(not restarted: {block_name(envs, FAULTY)} restarted 1 time in the last 10 s, "
            "RestartBudget(per_block=1, in_all=1, window=10.0))")):
        envs.step(np.zeros(N, np.int64))
    assert envs.total_restarts == 2


def test_the_window_is_real_time(restarting: Any) -> None:
    envs = restarting(max_restarts=RestartBudget(per_block=1, window=0.2))
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.zeros(N, np.int64))
    time.sleep(0.25)  # the first restart leaves the window
    for _ in range(3):
        envs.step(np.zeros(N, np.int64))
    assert envs.total_restarts == 2


@pytest.mark.parametrize("field, value, expected", [
    ("total", -1, "an int >= 0 or None (no limit)"),
    ("total", 2.0, "an int >= 0 or None (no limit)"),
    ("per_block", 0, "an int >= 1 or None (no limit), got 0 (to never restart, use total=0)"),
    ("per_block", True, "an int >= 1 or None (no limit)"),
    ("in_all", "3", "an int >= 1 or None (no limit)"),
    ("in_all", -2, "an int >= 1 or None (no limit)"),
    ("window", 0, "a positive, finite number of seconds or None (the whole run)"),
    ("window", -1.0, "a positive, finite number of seconds or None (the whole run)"),
    ("window", float("nan"), "a positive, finite number of seconds or None (the whole run)"),
    ("window", float("inf"), "a positive, finite number of seconds or None (the whole run)"),
    ("window", "60", "a positive, finite number of seconds or None (the whole run)"),
])
def test_a_bad_restart_budget_is_a_value_error_naming_the_field(field: str, value: Any,
                                                                expected: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"expected RestartBudget's {field} to be "
                                                   f"{expected}")):
        RestartBudget(**{field: value})


def test_without_failures_the_counts_are_zero(make_envs: Any) -> None:
    envs = make_envs(make_fns(CountingEnv, 2))
    envs.reset(seed=0)
    envs.step(np.zeros(2, np.int64))
    assert envs.total_restarts == 0 and envs.restart_counts.tolist() == [0, 0]
