"""The restart budget on its own: which budget a restart would exceed, and the error it
raises as.  Every backend's restarts against a budget: ``test_contract_restarts.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

import fastvec.pool.restarts
from fastvec import RestartBudget
from fastvec.errors import WorkerError, WorkerTimeout
from fastvec.pool.restarts import Restarts, restart_budget


@pytest.fixture
def now(monkeypatch: Any) -> list[float]:
    """The restarts' clock, set by the test."""
    clock = [0.0]
    monkeypatch.setattr(fastvec.pool.restarts, "clock", lambda: clock[0])
    return clock


def restart(restarts: Restarts, block: int) -> None:
    restarts.check_limit(WorkerError("boom"), block, f"worker {block}")
    restarts.record((block, block + 1), "env", WorkerError("boom"), block)


def test_an_int_or_none_is_a_total() -> None:
    assert restart_budget(5) == RestartBudget(total=5)
    assert restart_budget(None) == RestartBudget(total=None)
    assert repr(RestartBudget()) == "RestartBudget()"
    assert repr(RestartBudget(in_all=4, window=None)) == "RestartBudget(in_all=4, window=None)"
    assert RestartBudget(per_block=2, window=5).window == 5.0


def test_per_block_counts_each_block_and_in_all_every_block(now: list[float]) -> None:
    restarts = Restarts(4, RestartBudget(per_block=2, in_all=5, window=10.0))
    restart(restarts, 0)
    restart(restarts, 0)
    now[0] = 5.0
    for block in (1, 1, 2):
        restart(restarts, block)
    assert restarts.over_budget(0, "worker 0") == \
        "worker 0 restarted 2 times in the last 10 s, " \
        "RestartBudget(per_block=2, in_all=5, window=10.0)"
    assert restarts.over_budget(3, "worker 3") == \
        "5 restarts in the last 10 s, RestartBudget(per_block=2, in_all=5, window=10.0)"
    now[0] = 10.0  # block 0's restarts (at 0 s) have left the window, the others not
    assert restarts.over_budget(0, "worker 0") is None
    assert restarts.over_budget(1, "worker 1") is not None
    assert restarts.over_budget(3, "worker 3") is None


def test_without_a_window_per_block_is_a_lifetime_limit(now: list[float]) -> None:
    restarts = Restarts(2, RestartBudget(per_block=1, window=None))
    restart(restarts, 1)
    now[0] = 1e9
    assert restarts.over_budget(1, "actor 1") == \
        "actor 1 restarted 1 time already, RestartBudget(per_block=1, window=None)"
    assert restarts.over_budget(0, "actor 0") is None


def test_a_worker_timeout_past_the_budget_stays_a_worker_timeout() -> None:
    restarts = Restarts(2, 0)
    late = WorkerTimeout("worker 1 did not finish a step within timeout=0.5 s")
    with pytest.raises(WorkerTimeout, match=r"within timeout=0.5 s \(not restarted: 0 "
                       r"restarts happened already, max_restarts=0\)$"):
        restarts.check_limit(late, 1, "worker 1")


def test_a_worker_error_keeps_its_fields_and_cause() -> None:
    restarts = Restarts(2, RestartBudget(total=0))
    exc = WorkerError("env 1 (worker 0) raised EnvBoom", env_index=1, worker_index=0,
                      raised=("EnvBoom", "boom"))
    exc.__cause__ = RuntimeError("the remote traceback")
    with pytest.raises(WorkerError) as caught:
        restarts.check_limit(exc, 0, "worker 0")
    error = caught.value
    assert str(error) == ("env 1 (worker 0) raised EnvBoom (not restarted: 0 restarts "
                          "happened already, RestartBudget(total=0))")
    assert (error.env_index, error.worker_index, error.exitcode, error.raised) == \
        (1, 0, None, ("EnvBoom", "boom"))
    assert error.__cause__ is exc.__cause__
