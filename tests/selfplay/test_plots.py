"""plot_history draws a league's ratings and evaluations as a PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fastvec.selfplay import League, plot_history
from tests.selfplay.helpers import finish_all, layout


def first_legal(observation, action_mask):
    return np.asarray(action_mask).argmax(axis=1)


@pytest.mark.parametrize("evaluated", [False, True])
def test_plot_history_writes_a_png(tmp_path: Path, evaluated: bool) -> None:
    pytest.importorskip("matplotlib")
    league = League(*layout(20, 2), opponents={"fixed": first_legal},
                    shares={"self_play": 0.2, "snapshots": 0.5, "fixed": 0.3}, seed=0)
    for step in range(6):
        league.add_snapshot()
        finish_all(league, default="win" if step % 2 else "draw")
    if evaluated:  # as League.evaluate records them
        for steps in (0, 100):
            league.evaluations.append({"learner_steps": steps,
                                       "results": {"judge": [[3, 1, 1], [2, 2, 1]]}})
    path = tmp_path / "history.png"
    plot_history(league, path, title="a league")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(league.history) == 6
