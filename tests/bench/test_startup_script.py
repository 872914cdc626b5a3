"""benchmarks/startup.py's mechanics on tiny sizes: cases, repeats, the cap, the table.

Never its speed: the figures depend on the machine and what else runs on it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "startup.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("startup_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


startup = load()


def test_skip_patterns_match_any_part_of_a_case() -> None:
    case = ("gymnasium-async", "cpu", 256)
    assert startup.skipped(case, ["gymnasium-async:256"])
    assert startup.skipped(case, ["cpu"])
    assert startup.skipped(case, ["256:gymnasium-async:cpu"])
    assert not startup.skipped(case, ["gymnasium-async:64"])
    assert not startup.skipped(case, ["gymnasium-sync", ""])


def test_cells_show_median_and_range_or_why_not() -> None:
    records = [{"start": 0.5}, {"start": 0.25}, {"start": 12.5}]
    assert startup.cell(records, "start") == "0.500 s (0.250-12.5)"
    assert startup.cell(records[:1], "start") == "0.500 s"
    assert startup.cell([{"start": 1.0}, {"over": 30.0}], "start") == "over 30 s"
    assert startup.cell([{"error": "boom"}], "close") == "error"
    assert startup.cell([], "start") == ""


def test_slow_init_env_takes_its_time_in_init() -> None:
    for burn in (False, True):
        t = time.perf_counter()
        env = startup.SlowInitEnv(0.02, burn)
        assert time.perf_counter() - t >= 0.02
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)


def test_a_child_past_the_cap_is_killed_and_reported() -> None:
    t = time.perf_counter()
    record = startup.run_child(("fastvec-sync", "sleep", 2), 30.0, cap=0.5)
    assert record == {"over": 0.5}
    assert time.perf_counter() - t < 10


def test_a_child_that_fails_says_why() -> None:
    record = startup.run_child(("no-such-system", "cheap", 1), 0.0, cap=60)
    assert "unknown system" in record["error"]


def test_rounds_interleave_and_stop_after_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake(case: tuple, seconds: float, cap: float) -> dict:
        calls.append(case)
        return {"error": "x"} if case[0] == "bad" else {"start": 1.0, "close": 0.1}

    monkeypatch.setattr(startup, "run_child", fake)
    cases = [("a", "cheap", 1), ("b", "sleep", 1), ("bad", "cheap", 1)]
    results = startup.run_rounds(cases, 3, 1, 0.0, 1.0, log=lambda line: None)
    assert [len(results[c]) for c in cases] == [3, 1, 1]
    assert calls[:3] == cases and calls[3] == ("a", "cheap", 1)  # round 2 rotated
    assert calls.count(("bad", "cheap", 1)) == 1


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_tiny_run_prints_the_table_and_writes_the_records(tmp_path: Path) -> None:
    out = tmp_path / "startup.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--systems", "fastvec-sync,gymnasium-sync,"
         "fastvec-subproc-w2", "--envs", "cheap,sleep", "--sizes", "2", "--repeats", "2",
         "--slow-repeats", "1", "--ctor-seconds", "0.01", "--skip", "fastvec-subproc-w2:sleep",
         "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "| `fastvec-subproc-w2` |" in result.stdout and "2 envs" in result.stdout
    data = json.loads(out.read_text())
    counts = {(r["system"], r["env"]): len(r["records"]) for r in data["results"]}
    assert counts == {("fastvec-sync", "cheap"): 2, ("gymnasium-sync", "cheap"): 2,
                      ("fastvec-subproc-w2", "cheap"): 2, ("fastvec-sync", "sleep"): 1,
                      ("gymnasium-sync", "sleep"): 1}
    for entry in data["results"]:
        for record in entry["records"]:
            assert 0 < record["construct"] <= record["start"] and record["close"] >= 0
