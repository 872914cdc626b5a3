"""A league's history as a picture: ratings over training, and evaluation results.

Needs matplotlib (``pip install matplotlib``, or the ``bench`` extra).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from fastvec.selfplay.opponents import LEARNER

__all__ = ["plot_history"]

STEPS_LABEL = "learner steps (moves of the learner)"
"""The x axis of both panels: :attr:`League.learner_steps`, the positions where the
learner was to move and chose the move (both seats of a self-play game count; an
opponent's moves do not)."""
RESULTS: dict[str, Any] = {"win": "-", "draw": ":", "loss": "--"}
"""The line style of each result in the evaluation panel."""


def plot_history(league: Any, path: str | os.PathLike[str], title: str = "") -> None:
    """Write a PNG of ``league.history`` and ``league.evaluations``.

    Both panels count learner steps on the x axis (:attr:`League.learner_steps`: the
    learner's moves, not every player's).  Left: the Elo rating of the learner and of
    each fixed opponent or anchor that played rated games, a point per
    :meth:`League.record` (so per snapshot), and each snapshot's rating now against the
    learner steps when it was taken.  Right (when the league evaluated): win, draw and
    loss rates against each player :meth:`League.evaluate` played, a colour per player
    and a line style per result.  The legend gives each player's role, from its kind:
    training opponent (``"fixed"``), evaluation anchor (never trained against, or also
    a training opponent if registered with ``train=True``), snapshot.  Records at the
    same learner steps make one point: the last history point, and the evaluations'
    games added up.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is an optional extra
        raise ImportError("plot_history needs matplotlib: pip install matplotlib") from exc
    fig = _figure(league, title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def role(league: Any, policy: str) -> str:
    """``policy``'s legend label: its id and, from its pool entry's kind, its role."""
    if policy == LEARNER or policy not in league.pool:
        return policy
    entry = league.entry(policy)
    if entry.kind == "fixed":
        return f"{policy} (training opponent)"
    if entry.kind == "anchor":
        trained = "also a training opponent" if entry.train else "never trained against"
        return f"{policy} (evaluation anchor, {trained})"
    return f"{policy} (snapshot of the learner)"


def rating_series(league: Any) -> tuple[list[int], dict[str, list[float]]]:
    """The ratings panel's lines: the learner steps of ``league.history`` (one point per
    step, the last recorded there) and, for the learner and each fixed opponent or
    anchor that played rated games, its rating at each (NaN before it joined).
    """
    last = {point["learner_steps"]: point for point in league.history}
    steps = sorted(last)
    named = [LEARNER] + [e.id for e in league.pool if e.kind != "snapshot" and e.games]
    return steps, {policy: [last[s]["ratings"].get(policy, np.nan) for s in steps]
                   for policy in named}


def evaluation_series(evaluations: list[dict[str, Any]]
                      ) -> tuple[list[int], dict[str, np.ndarray]]:
    """The evaluation panel's points: the learner steps of ``evaluations`` (one point
    per step) and, per player evaluated against, ``(steps, 3)`` counts of wins, draws
    and losses over all seats, those of evaluations at the same step added up (0 where
    it was not played).
    """
    steps = sorted({e["learner_steps"] for e in evaluations})
    index = {s: i for i, s in enumerate(steps)}
    counts: dict[str, np.ndarray] = {}
    for e in evaluations:
        for policy, per_seat in e["results"].items():
            totals = counts.setdefault(policy, np.zeros((len(steps), 3), dtype=np.int64))
            totals[index[e["learner_steps"]]] += np.asarray(per_seat, dtype=np.int64).sum(axis=0)
    return steps, counts


def _figure(league: Any, title: str) -> Any:
    import matplotlib.pyplot as plt

    panels = 2 if league.evaluations else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.2), squeeze=False)
    _ratings(axes[0, 0], league)
    if league.evaluations:
        _evaluations(axes[0, 1], league)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def _ratings(ax: Any, league: Any) -> None:
    steps, series = rating_series(league)
    for policy, values in series.items():
        ax.plot(steps, values, "-" if policy == LEARNER else "--", label=role(league, policy),
                linewidth=2 if policy == LEARNER else 1)
    now = league.ratings()
    born = [(e.created, now[e.id]) for e in league.pool if e.kind == "snapshot"]
    if born:
        taken, rating = zip(*born, strict=True)
        ax.scatter(taken, rating, s=12, color="grey", zorder=3,
                   label="snapshots of the learner: rating now, by when taken")
    ax.set(xlabel=STEPS_LABEL, ylabel="Elo", title="ratings")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _evaluations(ax: Any, league: Any) -> None:
    from matplotlib.lines import Line2D

    steps, counts = evaluation_series(league.evaluations)
    handles = []
    for k, (policy, totals) in enumerate(counts.items()):
        colour = f"C{k % 10}"
        games = totals.sum(axis=1, keepdims=True)
        rates = np.divide(totals, games, out=np.full(totals.shape, np.nan), where=games > 0)
        for r, (result, style) in enumerate(RESULTS.items()):
            ax.plot(steps, rates[:, r], style, color=colour, marker=".",
                    label=f"{result} vs {policy}")
        handles.append(Line2D([], [], color=colour, marker=".", label=role(league, policy)))
    handles += [Line2D([], [], color="black", linestyle=style, label=result)
                for result, style in RESULTS.items()]
    ax.set(xlabel=STEPS_LABEL, ylabel="share of games (all seats)", ylim=(-0.02, 1.02),
           title="evaluation")
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, fontsize=8)
