"""The poker trainer (examples/selfplay_poker.py): a short run end to end, its NashConv
moving down from the uniform strategy's, and the exported strategy."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pyspiel")
pytest.importorskip("pettingzoo")

from fastvec.openspiel import information_states, nash_conv, softmax_policy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "selfplay_poker.py"
UNIFORM = {"kuhn_poker": 0.9167, "kuhn_poker(players=3)": 2.0625}


def _run(*flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(EXAMPLE), *flags]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("game, flags", [
    ("kuhn_poker", ["--backend", "local"]),
    ("kuhn_poker(players=3)", ["--backend", "sync", "--no-league"]),
])
def test_a_short_run_lowers_nash_conv_and_exports_the_strategy(tmp_path: Path, game: str,
                                                               flags: list) -> None:
    export, history = tmp_path / "strategy.pt", tmp_path / "history.json"
    proc = _run("--game", game, "--num-games", "32", "--total-steps", "40000",
                "--eval-every", "20000", "--snapshot-every", "5000", "--seed", "3",
                "--export", str(export), "--history", str(history), *flags)
    assert proc.returncode == 0, proc.stderr[-3000:]
    curve = json.loads(history.read_text())["curve"]
    assert [step for step, _ in curve][:1] == [0] and len(curve) == 3
    assert curve[0][1] == pytest.approx(UNIFORM[game], abs=1e-4)  # the uniform start
    assert curve[-1][1] < 0.8 * curve[0][1], curve
    assert re.search(r"^throughput: [\d,]+ agent-steps/s .* vector env", proc.stdout, re.M)
    # The export: float32 states and bool masks in, logits out; softmax over the legal
    # actions is a strategy, and OpenSpiel's NashConv of it is the run's last figure.
    strategy = torch.jit.load(str(export))
    _, states, legal = information_states(game)
    logits = strategy(torch.from_numpy(states), torch.from_numpy(legal))
    assert logits.shape == legal.shape and logits.dtype == torch.float32
    probs = torch.softmax(logits, 1).numpy()
    assert np.allclose(probs.sum(1), 1.0) and (probs[~legal] == 0).all()

    def exported(info_state: np.ndarray, legal_mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return strategy(torch.from_numpy(info_state), torch.from_numpy(legal_mask)).numpy()

    assert nash_conv(game, softmax_policy(exported)) == pytest.approx(curve[-1][1], abs=1e-6)
