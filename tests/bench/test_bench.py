"""The benchmark command (a tiny run) and its synthetic workload envs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fastvec.bench import arguments, cli, envs, report, systems
from fastvec.bench.envs import (
    InfoEnv,
)
from fastvec.bench.workloads import WORKLOADS

ROOT = Path(__file__).resolve().parents[2]
NEW_FASTVEC_SYSTEMS = [
    "fastvec-subproc",
    "fastvec-async",
    "fastvec-local",
    "fastvec-local-async",
    "fastvec-subproc-w4",
    "fastvec-async-w4",
    "fastvec-subproc-w8",
    "fastvec-async-w8",
]


@pytest.mark.parametrize("system", ["plain", "fastvec-sync", "supersuit"])
def test_measure_a_game_workload_counts_agent_steps(system: str) -> None:
    if cli.workload_unavailable_reason("duel") or cli.unavailable_reason(system):
        pytest.skip("needs pettingzoo (and supersuit)")
    record = cli.measure(system, "duel", seconds=0.02, warmup=0.0, seed=0)
    assert record["env_steps"] == record["batches"] * 2 * WORKLOADS["duel"].num_envs
    assert not systems.SYSTEMS["gymnasium-sync"].runs_on("duel")
    assert not systems.SYSTEMS["supersuit"].runs_on("cartpole")


def test_measure_plain_in_process() -> None:
    record = cli.measure("plain", "info", seconds=0.02, warmup=0.0, seed=0)
    assert record["env_steps"] > 0 and record["rate"] > 0


def test_table_ratios_and_notes() -> None:
    w = "atari-like"
    cells = {
        (w, "plain"): report.Cell(w, "plain", [{"rate": 100.0}, {"rate": 300.0}]),
        (w, "gymnasium-sync"): report.Cell(w, "gymnasium-sync", [{"rate": 50.0}]),
        (w, "other"): report.Cell(w, "other", error="unavailable: ImportError: x"),
    }
    assert report.ratio(cells, cells["atari-like", "gymnasium-sync"], "plain") == 0.25
    assert report.ratio(cells, cells["atari-like", "other"], "plain") is None
    table = report.format_table(cells)
    assert "200" in table and "0.25x" in table and "4.00x" in table
    assert "unavailable: ImportError: x" in table


def test_a_loader_that_raises_marks_the_system_unavailable(monkeypatch) -> None:
    def load() -> systems.Builder:
        raise ImportError("No module named 'nothere'")

    monkeypatch.setitem(systems.SYSTEMS, "nothere", systems.System("nothere", "test", load))
    reason = cli.unavailable_reason("nothere")
    assert reason == "unavailable: ImportError: No module named 'nothere'"
    assert cli.unavailable_reason("plain") is None


def test_unknown_names_are_rejected() -> None:
    with pytest.raises(SystemExit):
        cli.parse_args(["--workloads", "atari-like,nope"])


def test_plot_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    cells = {("atari-like", "plain"): report.Cell("atari-like", "plain", [{"rate": 1e5}])}
    report.write_plot(str(tmp_path / "b.png"), cells, ["atari-like"], "test")
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


def test_run_interleaves_repeats_and_skips_a_failed_system(monkeypatch) -> None:
    def broken() -> systems.Builder:
        raise ImportError("not installed")

    monkeypatch.setitem(systems.SYSTEMS, "broken", systems.System("broken", "test", broken))
    calls = []

    def fake_child(system: str, workload: str, args) -> dict[str, float]:
        calls.append(system)
        if system == "gymnasium-sync":
            raise RuntimeError("boom")
        return {"rate": 10.0}

    monkeypatch.setattr(cli, "_run_child", fake_child)
    args = cli.parse_args(["--workloads=info", "--systems=plain,gymnasium-sync,broken"])
    cells = cli.run(args)
    # Round 1 runs both loadable systems, then the failed one is skipped; order rotates.
    assert calls == ["plain", "gymnasium-sync", "plain", "plain"]
    assert cells["info", "plain"].median == 10.0
    assert cells["info", "gymnasium-sync"].error == "failed: boom"
    assert cells["info", "broken"].error == "unavailable: ImportError: not installed"


def test_command_smoke(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ["--workloads=atari-like,info", "--systems=plain,gymnasium-sync", "--repeats=2"]
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
    written = json.loads(out.read_text())
    assert written["machine"]["cpu_count"] >= 1 and len(written["load_before"]) == 3
    results = {(r["workload"], r["system"]): r for r in written["results"]}
    assert set(results) == {(w, s) for w in ("atari-like", "info")
                            for s in ("plain", "gymnasium-sync")}
    for r in results.values():
        assert r["error"] is None, r["error"]
        assert len(r["repeats"]) == 2 and r["median"] > 0
        assert r["repeats"][0]["cpu_seconds"] > 0
    assert results["atari-like", "plain"]["vs_plain"] == 1.0
    assert results["info", "gymnasium-sync"]["vs_gymnasium-sync"] == 1.0


# ------------------------------------------------- systems, defaults, latency


@pytest.mark.subprocess
@pytest.mark.parametrize("name", NEW_FASTVEC_SYSTEMS)
def test_fastvec_subprocess_systems_smoke(name: str) -> None:
    record = cli.measure(name, "heavy", seconds=0.05, warmup=0.02, seed=0)
    per_step = 4 if "async" in name else 8  # async: batch_size = num_envs // 2
    assert record["batches"] > 0 and record["env_steps"] == per_step * record["batches"]
    assert 0 < record["p50_us"] <= record["p99_us"]


@pytest.mark.subprocess
def test_gymnasium_async_smoke() -> None:
    record = cli.measure("gymnasium-async", "info", seconds=0.05, warmup=0.0, seed=0)
    assert record["env_steps"] == 16 * record["batches"] > 0


def test_recv_send_driver_sends_each_batch_its_actions() -> None:
    class FakeAsync:
        def __init__(self) -> None:
            self.sent: list[tuple] = []

        def recv(self) -> tuple:
            return None, None, None, None, {}, np.array([2, 3])

        def send(self, actions: np.ndarray, env_ids: np.ndarray) -> None:
            self.sent.append((actions.tolist(), env_ids.tolist()))

    fake = FakeAsync()
    driver = systems.RecvSendDriver(fake, 4)
    assert driver.step(np.array([5, 6, 7, 8])) == 2
    assert fake.sent == [([5, 6], [2, 3])]


def test_sb3_driver_seeds_before_reset() -> None:
    calls: list[tuple] = []

    class FakeSB3:
        def seed(self, seed: int) -> None:
            calls.append(("seed", seed))

        def reset(self) -> None:
            calls.append(("reset",))

    systems.SB3Driver(FakeSB3(), 2).reset(7)
    assert calls == [("seed", 7), ("reset",)]


OPTIONAL = {
    "sb3-subproc": "stable_baselines3",
    "pufferlib-mp": "pufferlib",
    "pufferlib-async": "pufferlib",
}


@pytest.mark.parametrize("name", list(OPTIONAL))
def test_an_absent_optional_package_makes_its_system_unavailable(monkeypatch, name) -> None:
    package = OPTIONAL[name]
    for module in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.setitem(sys.modules, module, None)  # imports of it now fail,
    monkeypatch.setitem(sys.modules, package, None)  # even when imported before
    reason = cli.unavailable_reason(name)
    assert reason is not None and reason.startswith("unavailable: ModuleNotFoundError")

    def fake_child(system: str, workload: str, args) -> dict[str, float]:
        return {"rate": 1.0, "p50_us": 1.0, "p99_us": 2.0}

    monkeypatch.setattr(cli, "_run_child", fake_child)
    cells = cli.run(cli.parse_args(["--workloads=info", f"--systems=plain,{name}"]))
    assert cells["info", name].error == reason and cells["info", name].median is None
    assert cells["info", "plain"].median == 1.0
    assert "unavailable: ModuleNotFoundError" in report.format_table(cells)


def test_command_with_absent_optional_systems_does_not_crash(tmp_path: Path) -> None:
    absent = [n for n, module in OPTIONAL.items() if importlib.util.find_spec(module) is None]
    if not absent:
        pytest.skip("every optional package is installed here")
    out = tmp_path / "bench.json"
    args = ["--workloads=info", f"--systems=plain,{','.join(absent)}", "--repeats=1"]
    args += ["--seconds=0.02", "--warmup=0", f"--json={out}"]
    proc = subprocess.run(
        [sys.executable, "-m", "fastvec.bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for name in absent:
        assert f"note: skipping {name}: unavailable" in proc.stdout
    results = {r["system"]: r for r in json.loads(out.read_text())["results"]}
    assert results["plain"]["median"] > 0 and results["plain"]["p99_us"] > 0
    assert all(results[n]["error"].startswith("unavailable: ") for n in absent)


def test_default_and_full_selections() -> None:
    quick = cli.parse_args([])
    assert quick.workloads == ["cartpole", "atari-like", "dict", "info"]
    assert quick.systems == [
        "plain",
        "gymnasium-sync",
        "fastvec-sync",
        "fastvec-subproc",
        "fastvec-local",
        "gymnasium-async",
    ]
    full = cli.parse_args(["--full"])
    everything_but_pong = [w for w, spec in WORKLOADS.items() if spec.tier != "named"]
    assert "pong" not in everything_but_pong
    assert full.workloads == everything_but_pong
    assert set(quick.systems) < set(full.systems)
    assert {"fastvec-async", "fastvec-local-async", "fastvec-sync-nocopy", "sb3-subproc",
            "envpool"} <= set(full.systems)
    assert not any(n.endswith(("-w4", "-w8")) for n in full.systems)
    named = cli.parse_args(["--full", "--systems=fastvec-async-w8"])
    assert named.systems == ["fastvec-async-w8"] and named.workloads == everything_but_pong
    assert cli.parse_args(["--workloads=pong"]).workloads == ["pong"]
    assert WORKLOADS["pong"].tier == "named" and WORKLOADS["pong"].num_envs == 8
    assert WORKLOADS["heavy"].num_envs == WORKLOADS["jitter"].num_envs == 8


def test_step_for_records_each_step_duration() -> None:
    class Counting:
        def step(self, actions: np.ndarray) -> int:
            return 3

    steps, durations, elapsed = cli._step_for(Counting(), [np.zeros(3)], 0.01)
    assert steps == 3 * len(durations) and len(durations) > 0
    assert sum(durations) == pytest.approx(elapsed)


def test_table_and_json_show_latency_percentiles(tmp_path: Path) -> None:
    records = [{"rate": 10.0, "p50_us": p50, "p99_us": 10 * p50} for p50 in (100.0, 300.0, 200.0)]
    cells = {("info", "plain"): report.Cell("info", "plain", records)}
    assert cells["info", "plain"].latency("p50_us") == 200.0
    table = report.format_table(cells)
    assert "p50 us" in table and "p99 us" in table and "2,000" in table
    report.write_json(str(tmp_path / "r.json"), cli.parse_args([]), cells, {})
    result = json.loads((tmp_path / "r.json").read_text())["results"][0]
    assert result["p50_us"] == 200.0 and result["p99_us"] == 2000.0


# ------------------------------------------------------------ a policy in the loop


class _Recorder:
    """Stands in for a vector env (sync and async API); records the calls."""

    def __init__(self, batch: int) -> None:
        self.batch, self.calls = batch, []

    def step(self, actions: np.ndarray) -> None:
        self.calls.append(("step", len(actions)))

    def recv(self) -> tuple:
        self.calls.append(("recv",))
        ids = np.arange(self.batch)
        return None, np.zeros(self.batch), None, None, {}, ids

    def send(self, actions: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        self.calls.append(("send", len(actions)))


def _burns(monkeypatch, calls: list) -> None:
    monkeypatch.setattr(envs, "burn", lambda us: calls.append(("burn", us)))


def test_policy_is_burnt_before_a_sync_step_for_all_envs(monkeypatch) -> None:
    fake = _Recorder(8)
    _burns(monkeypatch, fake.calls)
    driver = systems.VectorDriver(fake, 8)
    driver.step(np.zeros(8))  # policy_us 0: nothing burnt
    driver.policy_us = 1000.0
    driver.step(np.zeros(8))
    assert fake.calls == [("step", 8), ("burn", 1000.0), ("step", 8)]


def test_policy_is_burnt_between_recv_and_send_pro_rata(monkeypatch) -> None:
    fake = _Recorder(2)
    _burns(monkeypatch, fake.calls)
    driver = systems.RecvSendDriver(fake, 8)
    driver.policy_us = 1000.0
    assert driver.step(np.zeros(8)) == 2
    assert fake.calls == [("recv",), ("burn", 250.0), ("send", 2)]


def test_policy_in_plain_loop_and_pufferlib_drivers(monkeypatch) -> None:
    calls: list = []
    _burns(monkeypatch, calls)
    plain = systems.PlainLoop([InfoEnv] * 4)
    plain.reset(0)
    plain.policy_us = 400.0
    plain.step(np.ones(4, dtype=np.int64))
    assert calls == [("burn", 400.0)]
    fake = _Recorder(3)
    _burns(monkeypatch, fake.calls)
    puffer = systems.PufferDriver(fake, 6, batched=True)
    puffer.policy_us = 600.0
    assert puffer.step(np.zeros(6)) == 3
    assert fake.calls == [("recv",), ("burn", 300.0), ("send", 3)]


def test_measure_records_the_policy_and_it_slows_the_step() -> None:
    free = cli.measure("plain", "info", seconds=0.05, warmup=0.0, seed=0)
    busy = cli.measure("plain", "info", seconds=0.05, warmup=0.0, seed=0, policy_us=2000.0)
    assert free["policy_us"] == 0.0 and busy["policy_us"] == 2000.0
    # 2 ms asked; the machine's speed may wander from its calibration by up to ~2x.
    assert busy["p50_us"] > 500.0 > free["p50_us"]


def test_policy_us_goes_to_the_children_and_the_json(monkeypatch, tmp_path: Path) -> None:
    seen: list[list[str]] = []

    class Done:
        stdout = cli.RESULT_MARK + json.dumps({"rate": 1.0})
        stderr, returncode = "", 0

    def fake_run(cmd, **kwargs):
        seen.append(cmd)
        return Done()

    monkeypatch.setattr(cli.subprocess, "run", fake_run)
    args = cli.parse_args(["--workloads=info", "--systems=plain", "--policy-us=750"])
    cells = cli.run(args)
    assert seen and "--policy-us=750.0" in seen[0]
    report.write_json(str(tmp_path / "r.json"), args, cells, {})
    assert json.loads((tmp_path / "r.json").read_text())["settings"]["policy_us"] == 750.0
    with pytest.raises(SystemExit):
        cli.parse_args(["--policy-us=-1"])


def test_help_documents_the_new_options(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.parse_args(["--help"])
    text = capsys.readouterr().out
    assert "--policy-us N" in text and "N * k / num_envs" in text
    assert ".[atari]" in text and "pong" in text and "envpool" in text
    assert "fastvec-local" in text and "fastvec-local-async" in text
    assert "envpool and ale-vector run only on pong, pong-direct, breakout, breakout-direct." \
        in text  # the registry's restriction, not a copy of it
    assert "block10ms (synthetic" in text and "breakout-direct (real Atari games)" in text


def test_help_lists_every_workload_and_system_once() -> None:
    text = arguments._epilog(arguments._defaults())
    listed = [name for line in text.splitlines()
              if line.strip().startswith(("workloads ", "systems "))
              for name in line.split(None, 1)[1].split(" (")[0].split(", ")]
    assert sorted(listed) == sorted([*WORKLOADS, *systems.SYSTEMS])
