"""The bench's Atari workload: Pong, its EnvPool counterpart, and what happens
when ale-py or EnvPool is absent."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from gymnasium import spaces

from fastvec.bench import cli, report, systems
from fastvec.bench.workloads import WORKLOADS


def _hide(monkeypatch, package: str) -> None:
    for module in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setitem(sys.modules, package, None)


def test_pong_without_ale_py_is_skipped_with_the_reason(monkeypatch) -> None:
    _hide(monkeypatch, "ale_py")
    reason = cli.workload_unavailable_reason("pong")
    assert reason is not None and reason.startswith("unavailable: ModuleNotFoundError")
    assert ".[atari]" in reason

    def fake_child(system: str, workload: str, args) -> dict[str, float]:
        assert workload != "pong"
        return {"rate": 1.0}

    monkeypatch.setattr(cli, "_run_child", fake_child)
    cells = cli.run(cli.parse_args(["--workloads=info,pong", "--systems=plain,fastvec-local"]))
    assert cells["pong", "plain"].error == reason == cells["pong", "fastvec-local"].error
    assert cells["info", "plain"].median == 1.0
    assert reason in report.format_table(cells)


def test_envpool_runs_only_on_atari(monkeypatch, capsys) -> None:
    for peer in ("envpool", "ale-vector"):  # their own C++ Atari, beside the Atari workloads
        assert systems.SYSTEMS[peer].workloads == ("pong", "pong-direct", "breakout",
                                                   "breakout-direct")
    assert not systems.SYSTEMS["envpool"].runs_on("info")
    assert systems.SYSTEMS["plain"].runs_on("pong")
    monkeypatch.setattr(cli, "_run_child", lambda s, w, a: {"rate": 1.0})
    monkeypatch.setattr(cli, "unavailable_reason", lambda name: None)
    cells = cli.run(cli.parse_args(["--workloads=info", "--systems=plain,envpool"]))
    assert set(cells) == {("info", "plain")}
    assert "note: envpool runs only on pong, pong-direct, breakout, breakout-direct, which is " \
        "not selected" in capsys.readouterr().out
    with pytest.raises(ValueError, match="runs only on pong"):
        cli.measure("envpool", "info", seconds=0.01, warmup=0.0, seed=0)


def test_absent_envpool_is_unavailable(monkeypatch) -> None:
    _hide(monkeypatch, "envpool")
    reason = cli.unavailable_reason("envpool")
    assert reason is not None and reason.startswith("unavailable: ModuleNotFoundError")
    monkeypatch.setattr(cli, "workload_unavailable_reason", lambda name: None)
    monkeypatch.setattr(cli, "_run_child", lambda s, w, a: {"rate": 1.0})
    cells = cli.run(cli.parse_args(["--workloads=pong", "--systems=plain,envpool"]))
    assert cells["pong", "envpool"].error == reason and cells["pong", "plain"].median == 1.0


def test_pong_workload_matches_the_brief() -> None:
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    env = WORKLOADS["pong"].make_env()
    try:
        assert env.observation_space == spaces.Box(0, 255, (4, 84, 84), np.uint8)
        assert env.action_space == spaces.Discrete(6)
        assert env.unwrapped.spec.id == "ALE/Pong-v5"
        assert env.unwrapped._frameskip == 1
        first, _ = env.reset(seed=0)
        again, _ = WORKLOADS["pong"].make_env().reset(seed=0)
        assert np.array_equal(first, again)
    finally:
        env.close()


@pytest.mark.subprocess
@pytest.mark.parametrize("name", ["plain", "fastvec-local"])
def test_pong_smoke(name: str) -> None:
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    record = cli.measure(name, "pong", seconds=0.05, warmup=0.0, seed=0)
    assert record["env_steps"] == 8 * record["batches"] > 0


def test_envpool_pong_settings_match_the_workload() -> None:
    envpool = pytest.importorskip("envpool")
    pytest.importorskip("ale_py")
    config = envpool.make_spec("Pong-v5", **systems.ENVPOOL_PONG).config
    for key, value in systems.ENVPOOL_PONG.items():
        assert getattr(config, key) == value, key
    record = cli.measure("envpool", "pong", seconds=0.05, warmup=0.0, seed=0)
    assert record["env_steps"] == 8 * record["batches"] > 0
    pool = envpool.make("Pong-v5", env_type="gymnasium", num_envs=2, **systems.ENVPOOL_PONG)
    try:
        assert pool.observation_space == WORKLOADS["pong"].make_env().observation_space
        assert pool.action_space.n == 6
    finally:
        pool.close()
