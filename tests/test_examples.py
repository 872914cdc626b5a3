"""The example trainer runs end to end, for a few updates, on both backends."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("tqdm")

ROOT = Path(__file__).resolve().parents[1]
PPO_CARTPOLE = ROOT / "examples" / "ppo_cartpole.py"
CURVE_LINE = re.compile(r"^step +[\d,]+ +sps +[\d,]+ +mean_return +(nan|[\d.]+) ")


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sync", "subproc"])
def test_ppo_cartpole_runs_a_few_updates(backend: str) -> None:
    num_envs, num_steps, updates = 4, 64, 4
    command = [
        sys.executable, str(PPO_CARTPOLE),
        "--total-timesteps", str(num_envs * num_steps * updates),
        "--num-envs", str(num_envs), "--num-steps", str(num_steps),
        "--backend", backend, "--seed", "3", "--log-every", "1",
    ]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit code {proc.returncode}\n{proc.stderr[-3000:]}"
    curve = [line for line in proc.stdout.splitlines() if CURVE_LINE.match(line)]
    assert len(curve) == updates, proc.stdout
    assert curve[-1].startswith(f"step {num_envs * num_steps * updates:>8,}")
    assert "global step" in proc.stdout  # the plot's axis
    final = re.search(r"^final average return: ([\d.]+)$", proc.stdout, re.MULTILINE)
    assert final is not None, proc.stdout
    assert 0.0 < float(final.group(1)) <= 500.0
    assert "Traceback" not in proc.stderr
