"""Results of ``python -m fastvec.bench``: cells of repeats, the table, JSON and plot."""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import sys
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from fastvec.bench.registry import SYSTEMS
from fastvec.bench.workloads import WORKLOADS

__all__ = [
    "BASELINES",
    "COLORS",
    "LOOPS",
    "Progress",
    "Cell",
    "Cells",
    "bench_figure",
    "format_table",
    "loadavg",
    "machine_info",
    "ratio",
    "write_json",
    "write_plot",
]

BASELINES = ("plain", "gymnasium-sync")


@dataclass
class Cell:
    """One (workload, system): the children's records, or why there are none."""

    workload: str
    system: str
    records: list[dict[str, float]] = field(default_factory=list)
    error: str | None = None

    @property
    def rates(self) -> list[float]:
        """Env-steps/s of each repeat, in the order measured."""
        return [r["rate"] for r in self.records]

    @property
    def median(self) -> float | None:
        """Median env-steps/s over the repeats, or None without any."""
        return statistics.median(self.rates) if self.records and not self.error else None

    def latency(self, key: str) -> float | None:
        """Median over the repeats of a per-repeat latency figure (``p50_us``, ``p99_us``)."""
        values = [r[key] for r in self.records if key in r]
        return statistics.median(values) if values and not self.error else None


Cells = dict[tuple[str, str], Cell]


def ratio(cells: Cells, cell: Cell, baseline: str) -> float | None:
    """Median of ``cell`` over the median of ``baseline`` on the same workload."""
    base = cells.get((cell.workload, baseline))
    if base is None or base.median is None or cell.median is None:
        return None
    return cell.median / base.median


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def format_table(cells: Cells) -> str:
    """Workload x system: median env-steps/s, spread, step latency p50/p99, ratios."""
    head = ["workload", "system", "env-steps/s", "spread", "p50 us", "p99 us"]
    head += [f"vs {b}" for b in BASELINES]
    rows = [head]
    for cell in cells.values():
        if cell.median is None:
            rows.append([cell.workload, cell.system, str(cell.error)])
            continue
        spread = (max(cell.rates) - min(cell.rates)) / cell.median
        ratios = [ratio(cells, cell, b) for b in BASELINES]
        ratio_text = ["-" if x is None else f"{x:.2f}x" for x in ratios]
        latency = [_us(cell.latency("p50_us")), _us(cell.latency("p99_us"))]
        rows.append(
            [cell.workload, cell.system, f"{cell.median:,.0f}", f"{spread:.0%}", *latency]
            + ratio_text
        )
    # A row with a note instead of figures runs past the columns after "system".
    widths = [
        max(len(r[i]) for r in rows if i < 2 or len(r) == len(head)) for i in range(len(head))
    ]
    lines = []
    for row in rows:
        left = len(row) < len(head)  # a note: left-aligned
        cols = [
            f"{v:<{w}}" if i < 2 or left else f"{v:>{w}}"
            for i, (v, w) in enumerate(zip(row, widths, strict=False))
        ]
        lines.append("  ".join(cols).rstrip())
    return "\n".join(lines)


def machine_info() -> dict[str, Any]:
    """Where and when this ran: CPUs, versions, date."""
    try:
        with open("/proc/cpuinfo") as f:
            models = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
    except OSError:
        models = []
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpu_model": models[0] if models else platform.processor(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "gymnasium": gym.__version__,
        "fastvec": getattr(sys.modules.get("fastvec"), "__version__", None),
    }


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the OS has none)."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def write_json(path: str, args: argparse.Namespace, cells: Cells, extra: dict[str, Any]) -> None:
    """Write settings, machine info, raw per-repeat records, medians and ratios."""
    results = [
        {
            "workload": c.workload,
            "system": c.system,
            "num_envs": WORKLOADS[c.workload].num_envs,
            "repeats": c.records,
            "median": c.median,
            "p50_us": c.latency("p50_us"),
            "p99_us": c.latency("p99_us"),
            "error": c.error,
            **{f"vs_{b}": ratio(cells, c, b) for b in BASELINES},
        }
        for c in cells.values()
    ]
    keys = ("workloads", "systems", "repeats", "seconds", "warmup", "seed", "policy_us")
    settings = {k: getattr(args, k, None) for k in keys}
    with open(path, "w") as f:
        json.dump({**extra, "settings": settings, "results": results}, f, indent=2)
        f.write("\n")


LOOPS = ("plain", "plain-discard")  # no vector env: a loop in the trainer
COLORS = {"fastvec": "tab:blue", "other": "tab:gray", "loop": "white"}


def _kind(system: str) -> str:
    """Which colour a system's bar gets: ``fastvec``, ``loop`` or ``other``."""
    if system in LOOPS:
        return "loop"
    return "fastvec" if system.startswith("fastvec") else "other"


def _label(system: str) -> str:
    """A y tick label: the system and where its envs step, ``plain (in the trainer)``."""
    spec = SYSTEMS.get(system)
    return f"{system} ({spec.procs})" if spec is not None and spec.procs else system


def write_plot(path: str, cells: Cells, workloads: list[str], title: str) -> None:
    """Write :func:`bench_figure`'s picture of ``cells`` as a PNG (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = bench_figure(cells, workloads, title)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def bench_figure(cells: Cells, workloads: list[str], title: str) -> Any:
    """One bar panel per workload; a legend for the colours.

    Each bar is a median with a min-max whisker over the repeats, labelled with the
    median.  The panels' x scales differ (a note under the title says so): fastvec's systems are
    blue, other vector envs grey, the loops without a vector env white.  Returns the
    matplotlib figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    systems = list(dict.fromkeys(c.system for c in cells.values() if c.median is not None))
    size = (2.7 * len(workloads) + 2.8, 0.42 * len(systems) + 2.2)
    fig, axes = plt.subplots(1, len(workloads), figsize=size, sharey=True, squeeze=False)
    for ax, w in zip(axes[0], workloads, strict=True):
        shown = [(y, cells[w, s]) for y, s in enumerate(systems)
                 if (w, s) in cells and cells[w, s].median]
        ys = [y for y, _ in shown]
        medians = [float(c.median or 0.0) for _, c in shown]
        lows = [m - min(c.rates) for m, (_, c) in zip(medians, shown, strict=True)]
        highs = [max(c.rates) - m for m, (_, c) in zip(medians, shown, strict=True)]
        kinds = [_kind(systems[y]) for y in ys]
        ax.barh(ys, medians, color=[COLORS[k] for k in kinds], edgecolor="black",
                linewidth=0.5)
        ax.errorbar(medians, ys, xerr=[lows, highs], fmt="none", ecolor="black",
                    elinewidth=0.8, capsize=2)
        for y, m, hi in zip(ys, medians, highs, strict=True):
            text = f" {m / 1000:,.1f}k" if m >= 10_000 else f" {m:,.0f}"
            ax.text(m + hi, y, text, va="center", fontsize=8)
        top = max((m + hi for m, hi in zip(medians, highs, strict=True)), default=1.0)
        ax.set_xlim(0, top * 1.4)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:,.0f}k"))
        ax.locator_params(axis="x", nbins=3)
        label = WORKLOADS[w].label if w in WORKLOADS else ""
        ax.set_title(f"{w}\n{label}" if label else w, fontsize=9)
        ax.set_xlabel("env-steps/s")
    axes[0][0].set_yticks(range(len(systems)), [_label(s) for s in systems], fontsize=8)
    axes[0][0].invert_yaxis()  # shared: once inverts every panel
    handles = [Patch(facecolor=COLORS["fastvec"], edgecolor="black", label="fastvec"),
               Patch(facecolor=COLORS["other"], edgecolor="black",
                     label="other vector envs"),
               Patch(facecolor=COLORS["loop"], edgecolor="black",
                     label="a for-loop, no vector env")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    note = ("bar: median; whisker: min-max of the repeats"
            + ("; each panel has its own x scale" if len(workloads) > 1 else ""))
    fig.suptitle(f"{title}\n{note}", fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


class Progress:
    """A tqdm bar on a terminal, else one line per measurement on stderr."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.bar = total, 0, None
        if sys.stderr.isatty() and importlib.util.find_spec("tqdm") is not None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="run", file=sys.stderr, dynamic_ncols=True)

    def start(self, label: str) -> None:
        """Show what is being measured now."""
        if self.bar is not None:
            self.bar.set_description(label)

    def finish(self, label: str, outcome: str) -> None:
        """Count one measurement (done, failed or skipped)."""
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(outcome)
            self.bar.update(1)
        else:
            print(f"[{self.done}/{self.total}] {label}: {outcome}", file=sys.stderr, flush=True)

    def close(self) -> None:
        """Remove the bar."""
        if self.bar is not None:
            self.bar.close()
