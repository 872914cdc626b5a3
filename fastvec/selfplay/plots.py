"""A league's history as a picture: ratings over training, and evaluation results.

Needs matplotlib (``pip install matplotlib``, or the ``bench`` extra).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from fastvec.selfplay.pool import LEARNER

__all__ = ["plot_history"]


def plot_history(league: Any, path: str | os.PathLike[str], title: str = "") -> None:
    """Write a PNG of ``league.history`` and ``league.evaluations``.

    Left: the Elo rating of the learner and of each fixed opponent or anchor that
    played rated games, over learner steps (a point per :meth:`League.record`, so per
    snapshot), and each snapshot's rating now against the learner steps when it was
    taken.  Right (when the league evaluated): win, draw
    and loss rates against each anchor, over learner steps.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is an optional extra
        raise ImportError("plot_history needs matplotlib: pip install matplotlib") from exc
    panels = 2 if league.evaluations else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.2), squeeze=False)
    _ratings(axes[0, 0], league)
    if league.evaluations:
        _evaluations(axes[0, 1], league.evaluations)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ratings(ax: Any, league: Any) -> None:
    steps = [point["learner_steps"] for point in league.history]
    named = [LEARNER] + [e.id for e in league.pool if e.kind != "snapshot" and e.games]
    for policy in named:
        values = [point["ratings"].get(policy, np.nan) for point in league.history]
        ax.plot(steps, values, "-" if policy == LEARNER else "--", label=policy,
                linewidth=2 if policy == LEARNER else 1)
    now = league.ratings()
    born = [(e.created, now[e.id]) for e in league.pool if e.kind == "snapshot"]
    if born:
        taken, rating = zip(*born, strict=True)
        ax.scatter(taken, rating, s=12, color="grey", zorder=3,
                   label="snapshots: rating now, by when taken")
    ax.set(xlabel="learner steps", ylabel="Elo", title="ratings")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _evaluations(ax: Any, evaluations: list[dict[str, Any]]) -> None:
    steps = [e["learner_steps"] for e in evaluations]
    anchors = list(evaluations[-1]["results"])
    styles = {"win": "-", "draw": ":", "loss": "--"}
    for anchor in anchors:
        totals = [np.asarray(e["results"][anchor]).sum(axis=0) if anchor in e["results"]
                  else np.full(3, np.nan) for e in evaluations]
        for k, (result, style) in enumerate(styles.items()):
            rate = [t[k] / max(1, t.sum()) for t in totals]
            ax.plot(steps, rate, style, marker=".", label=f"{result} vs {anchor}")
    ax.set(xlabel="learner steps", ylabel="share of games (all seats)", ylim=(-0.02, 1.02),
           title="evaluation")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
