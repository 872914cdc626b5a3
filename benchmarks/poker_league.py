"""The poker trainer with and without its league: exact NashConv per game and seed.

Runs ``examples/selfplay_poker.py`` for every game, seed and mode (``league``:
the learner also plays snapshots of itself drawn by PFSP; ``naive``: it plays
only itself), each in a fresh process, ``--jobs`` at a time, each run writing
its NashConv curve (``--history``) with the game's flags (``FLAGS``, those of its
command in examples/README.md) and its budget (``BUDGETS``).  Then prints the final
NashConv of every run and the medians, and plots, per game, the median curve of each
mode with the runs' spread.

    python benchmarks/poker_league.py --out poker-runs          # all three games, 3 seeds
    python benchmarks/poker_league.py --games leduc_poker --seeds 1 2 3 --jobs 6
    python benchmarks/poker_league.py --out poker-runs --report-only   # tables, plot again
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "selfplay_poker.py"
BUDGETS = {"kuhn_poker": 2_000_000, "leduc_poker": 10_000_000,
           "kuhn_poker(players=3)": 5_000_000}
TARGETS = {"kuhn_poker": 0.02, "leduc_poker": 0.2, "kuhn_poker(players=3)": 0.1}
FLAGS = {"kuhn_poker": ["--average", "network", "--average-window", "1000000"],  # the README's
         "leduc_poker": ["--average", "network", "--max-weight", "20",  # commands
                         "--average-window", "4000000", "--mmd-eta", "0.125",
                         "--magnet-coef", "0.8", "--eta-floor", "0.25",
                         "--eval-every", "500000"],
         "kuhn_poker(players=3)": ["--mmd-eta", "1.0"]}
MODES = {"league": [], "naive": ["--no-league"]}


def slug(game: str) -> str:
    return game.replace("(", "-").replace(")", "").replace("=", "").replace(",", "-")


def run(out: Path, game: str, seed: int, mode: str, extra: list[str]) -> Path:
    """One training run in a fresh process; its history file."""
    history = out / f"{slug(game)}_{mode}_seed{seed}.json"
    command = [sys.executable, str(EXAMPLE), "--game", game, "--seed", str(seed),
               "--total-steps", str(BUDGETS[game]), "--history", str(history),
               *FLAGS.get(game, []), *MODES[mode], *extra]
    log = history.with_suffix(".log")
    with open(log, "w") as file:
        subprocess.run(command, stdout=file, stderr=subprocess.STDOUT, check=True)
    return history


def report(out: Path, games: list[str]) -> None:
    """The final NashConv of every run, the medians, and one plot per game."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(games), figsize=(5.5 * len(games), 4), squeeze=False)
    for ax, game in zip(axes[0], games, strict=True):
        print(f"\n{game} (target {TARGETS[game]}, {BUDGETS[game]:,} agent-steps)")
        for mode in MODES:
            runs = [json.loads(p.read_text())
                    for p in sorted(out.glob(f"{slug(game)}_{mode}_seed*.json"))]
            if not runs:
                continue
            finals = [r["curve"][-1][1] for r in runs]
            rates = [r["agent_steps"] / r["seconds"] for r in runs]
            seeds = [r["args"]["seed"] for r in runs]
            print(f"  {mode:<7} median {statistics.median(finals):.4f}  per seed "
                  + ", ".join(f"{s}: {f:.4f}" for s, f in zip(seeds, finals, strict=True))
                  + f"  ({statistics.median([r['seconds'] for r in runs]):.0f} s, "
                  f"{statistics.median(rates):,.0f} agent-steps/s, vector env "
                  f"{statistics.median([r['env_seconds'] / r['seconds'] for r in runs]):.0%})")
            length = min(len(r["curve"]) for r in runs)
            steps = [runs[0]["curve"][i][0] for i in range(length)]
            values = [[r["curve"][i][1] for r in runs] for i in range(length)]
            line, = ax.plot(steps, [statistics.median(v) for v in values],
                            label=f"{mode} (median of {len(runs)})")
            ax.fill_between(steps, [min(v) for v in values], [max(v) for v in values],
                            color=line.get_color(), alpha=0.2)
        ax.axhline(TARGETS[game], color="grey", linestyle="--", linewidth=1, label="target")
        ax.set_yscale("log")
        ax.set_title(game)
        ax.set_xlabel("agent-steps")
        ax.set_ylabel("NashConv (exact, OpenSpiel)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "nash_conv.png", dpi=110)
    print(f"\nplot: {out / 'nash_conv.png'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(BUDGETS), choices=list(BUDGETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    parser.add_argument("--out", default="poker-runs")
    parser.add_argument("--report-only", action="store_true")
    args, extra = parser.parse_known_args()  # the rest goes to every run
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        runs = [(g, s, m) for g in args.games for m in args.modes for s in args.seeds]
        runs.sort(key=lambda r: -BUDGETS[r[0]])  # the longest first
        began = time.perf_counter()
        with ThreadPoolExecutor(args.jobs) as pool:
            for history in pool.map(lambda r: run(out, *r, extra), runs):
                print(f"done: {history.name} ({time.perf_counter() - began:.0f} s)", flush=True)
    report(out, args.games)


if __name__ == "__main__":
    main()
