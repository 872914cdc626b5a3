"""The benchmark command (a tiny run) and its synthetic workload envs."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env, data_equivalence

from fastvec import bench
from fastvec.bench_envs import EPISODE_LENGTH, WORKLOADS, AtariLikeEnv, DictObsEnv, InfoEnv

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC = [AtariLikeEnv, DictObsEnv, InfoEnv]


@pytest.mark.parametrize("env_cls", SYNTHETIC)
def test_synthetic_env_passes_check_env(env_cls: type[gym.Env]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env_cls(), skip_render_check=True)


def test_synthetic_spaces() -> None:
    assert AtariLikeEnv().observation_space == spaces.Box(0, 255, (84, 84, 4), np.uint8)
    assert AtariLikeEnv().action_space == spaces.Discrete(6)
    dict_space = DictObsEnv().observation_space
    assert isinstance(dict_space, spaces.Dict)
    assert dict_space["image"] == spaces.Box(0, 255, (64, 64, 3), np.uint8)
    assert dict_space["vec"] == spaces.Box(-1.0, 1.0, (32,), np.float32)
    assert dict_space["mask"] == spaces.MultiBinary(8)
    assert dict_space["mode"] == spaces.Discrete(10)
    assert isinstance(DictObsEnv().action_space, spaces.Discrete)
    assert isinstance(InfoEnv().observation_space, spaces.Box)


def _rollout(env: gym.Env, seed: int, steps: int) -> list[tuple]:
    """Every reset and step output, copied, with actions drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    out: list[tuple] = [env.reset(seed=seed)]
    for _ in range(steps):
        obs, reward, term, trunc, info = env.step(np.int64(rng.integers(env.action_space.n)))
        assert env.observation_space.contains(obs)
        out.append((obs, reward, term, trunc, info))
        if term or trunc:
            out.append(env.reset())
    return out


@pytest.mark.parametrize("env_cls", SYNTHETIC)
def test_synthetic_env_is_deterministic_given_seed(env_cls: type[gym.Env]) -> None:
    steps = 2 * EPISODE_LENGTH[1] + 1  # crosses at least two resets
    first, second = _rollout(env_cls(), 3, steps), _rollout(env_cls(), 3, steps)
    assert data_equivalence(first, second, exact=True)
    assert not data_equivalence(first, _rollout(env_cls(), 4, steps))


@pytest.mark.parametrize("env_cls", SYNTHETIC)
def test_synthetic_episode_length_is_seeded_and_in_range(env_cls: type[gym.Env]) -> None:
    lengths = []
    for seed in range(5):
        env = env_cls()
        env.reset(seed=seed)
        steps, done = 0, False
        while not done:
            _, _, done, _, _ = env.step(np.int64(0))
            steps += 1
        lengths.append(steps)
    assert all(EPISODE_LENGTH[0] <= n <= EPISODE_LENGTH[1] for n in lengths)
    assert len(set(lengths)) > 1


def test_synthetic_observations_change_every_step() -> None:
    for env_cls in SYNTHETIC:
        env = env_cls()
        before, _ = env.reset(seed=0)
        after = env.step(np.int64(1))[0]
        assert not data_equivalence(before, after), env_cls.__name__


def test_info_env_reports_four_typed_keys() -> None:
    env = InfoEnv()
    _, info = env.reset(seed=0)
    *_, info = env.step(np.int64(1))
    assert set(info) == {"count", "score", "flag", "vector"}
    assert isinstance(info["count"], int) and isinstance(info["score"], float)
    assert isinstance(info["flag"], bool)
    assert info["vector"].dtype == np.float32 and info["vector"].shape == (3,)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workload_runs_in_gymnasium_vector_env(name: str) -> None:
    workload = WORKLOADS[name]
    envs = gym.vector.SyncVectorEnv([workload.make_env] * 2)
    try:
        envs.reset(seed=0)
        for _ in range(3):
            envs.step(envs.action_space.sample())
    finally:
        envs.close()


def test_measure_plain_in_process() -> None:
    record = bench.measure("plain", "info", seconds=0.02, warmup=0.0, seed=0)
    assert record["env_steps"] > 0 and record["rate"] > 0


def test_table_ratios_and_notes() -> None:
    cells = {
        ("atari", "plain"): bench.Cell("atari", "plain", [{"rate": 100.0}, {"rate": 300.0}]),
        ("atari", "gymnasium-sync"): bench.Cell("atari", "gymnasium-sync", [{"rate": 50.0}]),
        ("atari", "other"): bench.Cell("atari", "other", error="unavailable: ImportError: x"),
    }
    assert bench.ratio(cells, cells["atari", "gymnasium-sync"], "plain") == 0.25
    assert bench.ratio(cells, cells["atari", "other"], "plain") is None
    table = bench.format_table(cells)
    assert "200" in table and "0.25x" in table and "4.00x" in table
    assert "unavailable: ImportError: x" in table


def test_a_loader_that_raises_marks_the_system_unavailable(monkeypatch) -> None:
    def load() -> bench.Builder:
        raise ImportError("No module named 'nothere'")

    monkeypatch.setitem(bench.SYSTEMS, "nothere", bench.System("nothere", "test", load))
    reason = bench.unavailable_reason("nothere")
    assert reason == "unavailable: ImportError: No module named 'nothere'"
    assert bench.unavailable_reason("plain") is None


def test_unknown_names_are_rejected() -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--workloads", "atari,nope"])


def test_plot_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    cells = {("atari", "plain"): bench.Cell("atari", "plain", [{"rate": 1e5}])}
    bench.write_plot(str(tmp_path / "b.png"), cells, ["atari"], "test")
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


def test_run_interleaves_repeats_and_skips_a_failed_system(monkeypatch) -> None:
    def broken() -> bench.Builder:
        raise ImportError("not installed")

    monkeypatch.setitem(bench.SYSTEMS, "broken", bench.System("broken", "test", broken))
    calls = []

    def fake_child(system: str, workload: str, args) -> dict[str, float]:
        calls.append(system)
        if system == "gymnasium-sync":
            raise RuntimeError("boom")
        return {"rate": 10.0}

    monkeypatch.setattr(bench, "_run_child", fake_child)
    args = bench.parse_args(["--workloads=info", "--systems=plain,gymnasium-sync,broken"])
    cells = bench.run(args)
    # Round 1 runs both loadable systems, then the failed one is skipped; order rotates.
    assert calls == ["plain", "gymnasium-sync", "plain", "plain"]
    assert cells["info", "plain"].median == 10.0
    assert cells["info", "gymnasium-sync"].error == "failed: boom"
    assert cells["info", "broken"].error == "unavailable: ImportError: not installed"


def test_command_smoke(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ["--workloads=atari,info", "--systems=plain,gymnasium-sync", "--repeats=2"]
    args += ["--seconds=0.05", "--warmup=0.01", f"--json={out}"]
    proc = subprocess.run(
        [sys.executable, "-m", "fastvec.bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "vs gymnasium-sync" in proc.stdout and "load average after" in proc.stdout
    assert "[8/8] " in proc.stderr  # the progress fallback: stderr is not a terminal
    report = json.loads(out.read_text())
    assert report["machine"]["cpu_count"] >= 1 and len(report["load_before"]) == 3
    results = {(r["workload"], r["system"]): r for r in report["results"]}
    assert set(results) == {(w, s) for w in ("atari", "info") for s in ("plain", "gymnasium-sync")}
    for r in results.values():
        assert r["error"] is None, r["error"]
        assert len(r["repeats"]) == 2 and r["median"] > 0
        assert r["repeats"][0]["cpu_seconds"] > 0
    assert results["atari", "plain"]["vs_plain"] == 1.0
    assert results["info", "gymnasium-sync"]["vs_gymnasium-sync"] == 1.0
