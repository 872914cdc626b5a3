"""``python -m fastvec.bench``: env-steps per second of vector envs, side by side.

Each (system, workload) measurement runs in a fresh Python process: build the
envs, reset with a fixed seed, warm up, then count batched steps over a fixed
wall-clock window, cycling through seeded actions drawn in advance (the same for
every system).  The parent interleaves the repeats (every system on a workload,
then again, order rotated) and reports medians, with ratios to ``plain`` and
``gymnasium-sync`` from the same run.  A new system is one loader in ``SYSTEMS``;
a loader that raises (its package is absent, say) marks the system unavailable.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

from fastvec.bench_envs import WORKLOADS

EnvFn = Callable[[], gym.Env[Any, Any]]
# A builder takes the env makers and returns an object with Gymnasium's vector
# ``reset(seed=...)``, ``step(actions)`` and ``close()``; an adapter can supply them.
Builder = Callable[[list[EnvFn]], Any]
RESULT_MARK = "fastvec-bench-result:"  # prefix of the child's one line of output
BASELINES = ("plain", "gymnasium-sync")
ACTION_BATCHES = 256  # pre-generated action batches, cycled through


@dataclass(frozen=True)
class System:
    """A vector env to measure: ``load()`` imports it and returns a builder."""

    name: str
    about: str
    load: Callable[[], Builder]


SYSTEMS: dict[str, System] = {}


def system(name: str, about: str) -> Callable[[Callable[[], Builder]], Callable[[], Builder]]:
    """Register a loader under ``name``; the loader may raise if its package is absent."""

    def register(load: Callable[[], Builder]) -> Callable[[], Builder]:
        SYSTEMS[name] = System(name, about, load)
        return load

    return register


class PlainLoop:
    """The baseline: a Python for-loop over the envs, resetting each by hand."""

    def __init__(self, env_fns: list[EnvFn]) -> None:
        self.envs = [fn() for fn in env_fns]

    def reset(self, *, seed: int) -> None:
        """Reset env ``i`` with ``seed + i``, as the vector envs do."""
        for i, env in enumerate(self.envs):
            env.reset(seed=seed + i)

    def step(self, actions: np.ndarray) -> None:
        """Step every env once with its action; reset the ones that finished."""
        for i, env in enumerate(self.envs):
            obs, r, term, trunc, info = env.step(actions[i])
            if term or trunc:
                env.reset()

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()


@system("plain", "a Python for-loop calling each env's step, resetting finished envs")
def _load_plain() -> Builder:
    return PlainLoop


@system("gymnasium-sync", "gymnasium.vector.SyncVectorEnv(copy=True)")
def _load_gymnasium_sync() -> Builder:
    return functools.partial(gym.vector.SyncVectorEnv, copy=True)


@system("fastvec-sync", "fastvec.SyncVecEnv(copy=True)")
def _load_fastvec_sync() -> Builder:
    import fastvec

    return functools.partial(fastvec.SyncVecEnv, copy=True)  # type: ignore[attr-defined]


@system("fastvec-sync-nocopy", "fastvec.SyncVecEnv(copy=False): observations are views")
def _load_fastvec_sync_nocopy() -> Builder:
    import fastvec

    return functools.partial(fastvec.SyncVecEnv, copy=False)  # type: ignore[attr-defined]


# ---------------------------------------------------------------- child side


def _step_for(vec: Any, actions: Sequence[np.ndarray], seconds: float) -> tuple[int, float]:
    """Step until ``seconds`` of wall-clock time pass; return (batches, elapsed)."""
    batches = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        vec.step(actions[batches % len(actions)])
        batches += 1
    return batches, time.perf_counter() - start


def measure(
    system: str, workload: str, seconds: float, warmup: float, seed: int
) -> dict[str, float]:
    """Build one system on one workload and time it (the child process's whole job).

    ``cpu_seconds`` is this process's CPU time in the window: well under ``seconds``
    for an in-process system means other processes took the CPU away.
    """
    spec = WORKLOADS[workload]
    probe = spec.make_env()
    action_space = batch_space(probe.action_space, spec.num_envs)
    probe.close()
    action_space.seed(seed)
    actions = [action_space.sample() for _ in range(ACTION_BATCHES)]

    vec = SYSTEMS[system].load()([spec.make_env] * spec.num_envs)
    try:
        vec.reset(seed=seed)
        _step_for(vec, actions, warmup)
        gc.collect()
        cpu_start = time.process_time()
        batches, elapsed = _step_for(vec, actions, seconds)
        cpu = time.process_time() - cpu_start
    finally:
        vec.close()
    steps = batches * spec.num_envs
    return {"env_steps": steps, "seconds": elapsed, "cpu_seconds": cpu, "rate": steps / elapsed}


# --------------------------------------------------------------- parent side


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


Cells = dict[tuple[str, str], Cell]


def _run_child(system: str, workload: str, args: argparse.Namespace) -> dict[str, float]:
    """Measure in a fresh interpreter; return its record or raise RuntimeError."""
    flags = [f"--seconds={args.seconds}", f"--warmup={args.warmup}", f"--seed={args.seed}"]
    cmd = [sys.executable, "-m", "fastvec.bench", "--child", system, workload, *flags]
    limit = args.seconds + args.warmup + 120  # generous: start-up, building envs, close
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {limit:g} s") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            return dict(json.loads(line[len(RESULT_MARK) :]))
    lines = proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}, no output"]
    raise RuntimeError(lines[-1])


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


def unavailable_reason(name: str) -> str | None:
    """Why system ``name`` cannot run here (its loader raised), or None if it can."""
    try:
        SYSTEMS[name].load()
    except Exception as exc:  # any failure to load means "not on this machine"
        return f"unavailable: {type(exc).__name__}: {exc}"
    return None


def run(args: argparse.Namespace) -> Cells:
    """Measure every workload x system, interleaving the repeats."""
    reasons = {s: unavailable_reason(s) for s in args.systems}
    for s, why in reasons.items():
        if why:
            print(f"note: skipping {s}: {why}")
    cells = {(w, s): Cell(w, s, error=reasons[s]) for w in args.workloads for s in args.systems}
    systems = [s for s in args.systems if not reasons[s]]
    progress = Progress(len(args.workloads) * len(systems) * args.repeats)
    try:
        for workload in args.workloads:
            for r in range(args.repeats):
                shift = r % max(len(systems), 1)
                for name in systems[shift:] + systems[:shift]:
                    cell, label = cells[workload, name], f"{workload} {name} #{r + 1}"
                    progress.start(label)
                    if cell.error:  # failed in an earlier repeat
                        progress.finish(label, "skipped")
                        continue
                    try:
                        cell.records.append(_run_child(name, workload, args))
                    except RuntimeError as exc:
                        cell.error = f"failed: {exc}"
                    progress.finish(label, cell.error or f"{cell.rates[-1]:,.0f} env-steps/s")
    finally:
        progress.close()
    return cells


def ratio(cells: Cells, cell: Cell, baseline: str) -> float | None:
    """Median of ``cell`` over the median of ``baseline`` on the same workload."""
    base = cells.get((cell.workload, baseline))
    if base is None or base.median is None or cell.median is None:
        return None
    return cell.median / base.median


def format_table(cells: Cells) -> str:
    """Workload x system: median env-steps/s, spread ((max - min) / median), ratios."""
    head = ["workload", "system", "env-steps/s", "spread", *(f"vs {b}" for b in BASELINES)]
    rows = [head]
    for cell in cells.values():
        if cell.median is None:
            rows.append([cell.workload, cell.system, str(cell.error)])
            continue
        spread = (max(cell.rates) - min(cell.rates)) / cell.median
        ratios = [ratio(cells, cell, b) for b in BASELINES]
        ratio_text = ["-" if x is None else f"{x:.2f}x" for x in ratios]
        rows.append(
            [cell.workload, cell.system, f"{cell.median:,.0f}", f"{spread:.0%}", *ratio_text]
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


def _loadavg() -> list[float]:
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
            "error": c.error,
            **{f"vs_{b}": ratio(cells, c, b) for b in BASELINES},
        }
        for c in cells.values()
    ]
    keys = ("workloads", "systems", "repeats", "seconds", "warmup", "seed")
    settings = {k: getattr(args, k) for k in keys}
    with open(path, "w") as f:
        json.dump({**extra, "settings": settings, "results": results}, f, indent=2)
        f.write("\n")


def write_plot(path: str, cells: Cells, workloads: list[str], title: str) -> None:
    """One bar panel per workload (their scales differ), each bar labelled with its median."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    systems = list(dict.fromkeys(c.system for c in cells.values() if c.median is not None))
    size = (2.6 * len(workloads) + 2.0, 0.45 * len(systems) + 1.6)
    fig, axes = plt.subplots(1, len(workloads), figsize=size, sharey=True, squeeze=False)
    for ax, w in zip(axes[0], workloads, strict=True):
        bars = [(y, cells[w, s].median or 0.0) for y, s in enumerate(systems) if cells[w, s].median]
        ax.barh([y for y, _ in bars], [m for _, m in bars], color="tab:blue")
        for y, m in bars:
            ax.text(m, y, f" {m / 1000:,.0f}k", va="center", fontsize=8)
        ax.set_xlim(0, max((m for _, m in bars), default=1.0) * 1.35)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:,.0f}k"))
        ax.locator_params(axis="x", nbins=3)
        ax.set_title(w)
        ax.set_xlabel("env-steps/s")
    axes[0][0].set_yticks(range(len(systems)), systems)
    axes[0][0].invert_yaxis()  # shared: once inverts every panel
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _names(kind: str, known: dict[str, Any]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"unknown {kind} {unknown}; known: {', '.join(known)}")
        return names

    return parse


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line; ``--child`` is the hidden entry point of one measurement."""
    p = argparse.ArgumentParser(
        prog="python -m fastvec.bench",
        description="Env-steps per second of vector envs on a few workloads (median of repeats).",
    )
    add = p.add_argument
    # fmt: off
    add("--workloads", type=_names("workloads", WORKLOADS), default=list(WORKLOADS),
        help=f"comma-separated subset of {','.join(WORKLOADS)} (default: all)")
    add("--systems", type=_names("systems", SYSTEMS), default=list(SYSTEMS),
        help=f"comma-separated subset of {','.join(SYSTEMS)} (default: all)")
    add("--repeats", type=int, default=3, help="interleaved rounds per workload (default: 3)")
    add("--seconds", type=float, default=0.4, help="timed window per measurement (default: 0.4)")
    add("--warmup", type=float, default=0.15, help="untimed seconds before it (default: 0.15)")
    add("--seed", type=int, default=0, help="seed of the envs and of the actions (default: 0)")
    add("--json", metavar="PATH", help="write per-repeat figures, medians and machine info")
    add("--plot", metavar="PATH", help="write a PNG bar chart (needs matplotlib)")
    add("--list", action="store_true", help="describe the workloads and systems, then exit")
    add("--child", nargs=2, metavar=("SYSTEM", "WORKLOAD"), help=argparse.SUPPRESS)
    # fmt: on
    args = p.parse_args(argv)
    if args.repeats < 1 or args.seconds <= 0 or args.warmup < 0:
        p.error("need --repeats >= 1, --seconds > 0 and --warmup >= 0")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        p.error("--plot needs matplotlib: pip install matplotlib (or pip install 'fastvec[bench]')")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, with ``--child``, one measurement) and print the table."""
    args = parse_args(argv)
    if args.child:
        system, workload = args.child
        record = measure(system, workload, args.seconds, args.warmup, args.seed)
        print(RESULT_MARK + json.dumps(record), flush=True)
        return 0
    if args.list:
        for w in WORKLOADS.values():
            print(f"workload {w.name:<20} {w.num_envs} envs; {w.about}")
        for s in SYSTEMS.values():
            print(f"system   {s.name:<20} {s.about}")
        return 0

    m, load_before = machine_info(), _loadavg()
    print(f"{m['date']}  {m['cpu_count']} CPUs ({m['cpu_model']})  python {m['python']}")
    print(f"numpy {m['numpy']}  gymnasium {m['gymnasium']}  {m['platform']}")
    print(f"load average before (1, 5, 15 min): {load_before}")
    cells = run(args)
    load_after = _loadavg()
    print(f"\nmedian of {args.repeats} x {args.seconds:g} s, a fresh process per measurement")
    print(format_table(cells))
    print(f"\nload average after (1, 5, 15 min): {load_after}")
    if args.json:
        extra = {"machine": m, "load_before": load_before, "load_after": load_after}
        write_json(args.json, args, cells, extra)
        print(f"wrote {args.json}")
    if args.plot:
        title = f"fastvec.bench, {m['date']}, {m['cpu_count']} CPUs, median of {args.repeats}"
        write_plot(args.plot, cells, args.workloads, title)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
