"""plot_history draws a league's ratings and evaluations as a PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fastvec.selfplay import League, plot_history, plots
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


def evaluated_league() -> League:
    """A league with a fixed opponent, an anchor never trained against, snapshots, and
    two evaluations at its last learner step (a check, then the final games)."""
    league = League(*layout(20, 2), opponents={"random": first_legal},
                    anchors={"random-eval": first_legal},
                    shares={"self_play": 0.2, "snapshots": 0.5, "fixed": 0.3}, seed=0)
    active = np.ones(40, dtype=bool)
    for step in range(3):
        league.policy_rows(active)
        league.add_snapshot()
        finish_all(league, default="win" if step % 2 else "draw")
        league.evaluations.append({"learner_steps": league.learner_steps,
                                   "results": {"random-eval": [[3, 1, 1], [2, 2, 1]]}})
    league.evaluations.append({"learner_steps": league.learner_steps,
                               "results": {"random-eval": [[40, 5, 5], [30, 10, 10]]}})
    league.record()  # a second history point at the same step
    return league


def test_series_have_one_point_per_learner_step() -> None:
    league = evaluated_league()
    steps, counts = plots.evaluation_series(league.evaluations)
    assert len(league.evaluations) == 4 and len(steps) == 3 == len(set(steps))
    assert counts["random-eval"].tolist() == [[5, 3, 2], [5, 3, 2], [75, 18, 17]]
    steps, ratings = plots.rating_series(league)
    assert len(league.history) == 4 and steps == sorted(set(steps)) and len(steps) == 3
    assert set(ratings) == {"learner", "random"}
    last, before = (point["ratings"]["learner"] for point in league.history[:-3:-1])
    assert last != before and ratings["learner"][-1] == last  # the last point of its step


def test_legend_gives_roles_and_axes_count_learner_steps() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    league = evaluated_league()
    league.add_anchor("trained-anchor", first_legal, train=True)
    league.entry("trained-anchor").wins = 1  # as if it played a rated game
    fig = plots._figure(league, "a league")
    try:
        rating_ax, eval_ax = fig.axes
        rating_labels = [t.get_text() for t in rating_ax.get_legend().get_texts()]
        eval_labels = [t.get_text() for t in eval_ax.get_legend().get_texts()]
        assert rating_labels == ["learner", "random (training opponent)",
                                 "trained-anchor (evaluation anchor, also a training opponent)",
                                 "snapshots of the learner: rating now, by when taken"]
        assert eval_labels == ["random-eval (evaluation anchor, never trained against)",
                               "win", "draw", "loss"]
        for ax in fig.axes:
            assert ax.get_xlabel() == "learner steps (moves of the learner)"
        for line in eval_ax.get_lines():  # win, draw, loss: one point per step
            assert len(line.get_xdata()) == 3 == len(set(line.get_xdata()))
        win = eval_ax.get_lines()[0].get_ydata()
        assert win[-1] == pytest.approx(75 / 110)
        learner = rating_ax.get_lines()[0]
        assert len(learner.get_xdata()) == 3 == len(set(learner.get_xdata()))
    finally:
        plt.close(fig)


def test_role_of_each_kind() -> None:
    league = evaluated_league()
    assert plots.role(league, "learner") == "learner"
    assert plots.role(league, "random") == "random (training opponent)"
    assert plots.role(league, "snapshot-1") == "snapshot-1 (snapshot of the learner)"
    assert plots.role(league, "random-eval") == \
        "random-eval (evaluation anchor, never trained against)"
