"""The PPO trainer on every vector env, side by side: steps/s of the whole training loop.

    python examples/compare_vector_envs.py                          # every --vector, 100k steps
    python examples/compare_vector_envs.py --plot compare.png       # and a bar chart
    python examples/compare_vector_envs.py --vectors fastvec-subproc,fastvec-local \\
        --total-timesteps 200000 --repeats 3 --json compare.json
    python examples/compare_vector_envs.py --num-envs 16 -- --num-steps 64  # after --: trainer's

Each run is ``examples/ppo_cartpole.py --vector NAME`` in a fresh process, with the
same seed and the same fixed number of steps; with ``--repeats`` the rounds are
interleaved (every choice once, then again, the order rotated) and the table
shows medians.  Per choice it prints the steps per second of the whole training
loop (collecting, GAE, the PPO update), the share of that loop spent in the
vector env (``step``, or ``recv`` + ``send`` for the async choices: the envs'
work and the waiting for it, as the trainer sees it), the final average return,
and the wall time of the whole process (start-up included).  A choice whose
package is absent (``sb3-subproc`` needs stable-baselines3) is listed as
unavailable.  The same seed gives the same learning curve on every sync choice
of fastvec and Gymnasium (the same trajectories), so their final returns agree;
SB3 resets in the same step and the async choices order their batches by
readiness, so theirs differ.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAINER = HERE / "ppo_cartpole.py"
VECTORS = ("gymnasium-sync", "gymnasium-async", "sb3-subproc", "fastvec-sync",
           "fastvec-subproc", "fastvec-local", "fastvec-async", "fastvec-local-async")
NEEDS = {"sb3-subproc": "stable_baselines3"}

STEPS = re.compile(r"^([\d,]+) steps in ([\d.]+) s \(([\d,]+) steps/s\)$", re.MULTILINE)
IN_ENV = re.compile(r"^time in the vector env: ([\d.]+) s \((\d+)% ", re.MULTILINE)
FINAL = re.compile(r"^final average return: (nan|[\d.]+)$", re.MULTILINE)


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """This script's options; what follows ``--`` goes to the trainer unchanged."""
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Options after -- go to examples/ppo_cartpole.py (see its --help).")
    p.add_argument("--vectors", default=",".join(VECTORS),
                   help=f"comma-separated subset of {','.join(VECTORS)} (default: all)")
    p.add_argument("--total-timesteps", type=int, default=100_000,
                   help="env steps of each training run (default: 100000)")
    p.add_argument("--seed", type=int, default=1, help="the same for every run (default: 1)")
    p.add_argument("--num-envs", type=int, default=8, help="default: 8")
    p.add_argument("--num-workers", type=int, default=2,
                   help="processes stepping envs, for the fastvec choices (default: 2)")
    p.add_argument("--repeats", type=int, default=1,
                   help="interleaved rounds; the table shows medians (default: 1)")
    p.add_argument("--timeout", type=float, default=1800.0,
                   help="seconds one training run may take (default: 1800)")
    p.add_argument("--json", metavar="PATH", help="write every run's figures")
    p.add_argument("--plot", metavar="PATH", help="write a PNG bar chart (needs matplotlib)")
    args = p.parse_args(argv)
    args.vectors = [v.strip() for v in args.vectors.split(",") if v.strip()]
    unknown = [v for v in args.vectors if v not in VECTORS]
    if unknown or not args.vectors:
        p.error(f"unknown --vectors {unknown}; known: {', '.join(VECTORS)}")
    if args.repeats < 1 or args.total_timesteps < 1:
        p.error("need --repeats >= 1 and --total-timesteps >= 1")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        p.error("--plot needs matplotlib: pip install matplotlib")
    return args, passthrough


def train(vector: str, args: argparse.Namespace, passthrough: list[str]) -> dict:
    """One training run in a fresh process; its figures, or ``{"error": ...}``."""
    cmd = [sys.executable, str(TRAINER), "--vector", vector,
           "--total-timesteps", str(args.total_timesteps), "--seed", str(args.seed),
           "--num-envs", str(args.num_envs), "--num-workers", str(args.num_workers),
           "--log-every", "1000000", *passthrough]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout:g} s"}
    wall = time.perf_counter() - start
    steps, in_env, final = (r.search(proc.stdout) for r in (STEPS, IN_ENV, FINAL))
    if proc.returncode != 0 or not (steps and in_env and final):
        lines = proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"]
        return {"error": f"failed: {lines[-1]}"}
    return {
        "steps": int(steps.group(1).replace(",", "")),
        "loop_seconds": float(steps.group(2)),
        "steps_per_second": float(steps.group(3).replace(",", "")),
        "env_seconds": float(in_env.group(1)),
        "env_fraction": int(in_env.group(2)) / 100,
        "final_return": float(final.group(1)),
        "wall_seconds": wall,
    }


def unavailable(vector: str) -> str | None:
    """Why ``vector`` cannot run here, or None."""
    module = NEEDS.get(vector)
    if module and importlib.util.find_spec(module) is None:
        return f"unavailable: no module {module!r} (pip install {module.replace('_', '-')})"
    return None


def run(args: argparse.Namespace, passthrough: list[str]) -> dict[str, list[dict]]:
    """Every choice ``--repeats`` times, interleaved; the runs of each choice."""
    runs: dict[str, list[dict]] = {v: [] for v in args.vectors}
    for v in args.vectors:
        if why := unavailable(v):
            runs[v].append({"error": why})
    todo = [v for v in args.vectors if not runs[v]]
    total, done = len(todo) * args.repeats, 0
    for r in range(args.repeats):
        shift = r % max(len(todo), 1)
        for v in todo[shift:] + todo[:shift]:
            if any("error" in x for x in runs[v]):
                continue
            result = train(v, args, passthrough)
            runs[v].append(result)
            done += 1
            outcome = result.get("error") or f"{result['steps_per_second']:,.0f} steps/s"
            print(f"[{done}/{total}] {v}: {outcome}", file=sys.stderr, flush=True)
    return runs


def summary(runs: list[dict]) -> dict | None:
    """Medians over the runs of one choice, or None if it has no figures."""
    ok = [x for x in runs if "error" not in x]
    if not ok or len(ok) < len(runs):
        return None
    keys = ("steps_per_second", "env_fraction", "final_return", "wall_seconds")
    return {k: statistics.median(x[k] for x in ok) for k in keys}


def format_table(runs: dict[str, list[dict]]) -> str:
    """One row per choice: loop steps/s, share in the vector env, final return, wall time."""
    head = ["vector", "steps/s (loop)", "in vector env", "final return", "wall s"]
    rows = [head]
    for v, rs in runs.items():
        s = summary(rs)
        if s is None:
            rows.append([v, next(x["error"] for x in rs if "error" in x)])
            continue
        rows.append([v, f"{s['steps_per_second']:,.0f}", f"{s['env_fraction']:.0%}",
                     f"{s['final_return']:.1f}", f"{s['wall_seconds']:.1f}"])
    widths = [max(len(r[i]) for r in rows if i == 0 or len(r) == len(head))
              for i in range(len(head))]
    lines = []
    for row in rows:
        cols = [f"{c:<{widths[i]}}" if i == 0 or len(row) < len(head) else f"{c:>{widths[i]}}"
                for i, c in enumerate(row)]
        lines.append("  ".join(cols).rstrip())
    return "\n".join(lines)


def write_plot(path: str, runs: dict[str, list[dict]], title: str) -> None:
    """Bars of loop steps/s per choice, split into time in the vector env and the rest."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(v, s) for v, rs in runs.items() if (s := summary(rs)) is not None]
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.6))
    ys = range(len(rows))
    rates = [s["steps_per_second"] for _, s in rows]
    env_part = [s["steps_per_second"] * s["env_fraction"] for _, s in rows]
    ax.barh(ys, env_part, color="tab:orange", label="share of the loop in the vector env")
    ax.barh(ys, [r - e for r, e in zip(rates, env_part, strict=True)], left=env_part,
            color="tab:blue", label="share in the policy, GAE and update")
    for y, (_, s) in zip(ys, rows, strict=True):
        ax.text(s["steps_per_second"], y, f" {s['steps_per_second']:,.0f}"
                f"  (return {s['final_return']:.0f})", va="center", fontsize=8)
    ax.set_yticks(list(ys), [v for v, _ in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, max(rates, default=1.0) * 1.4)
    ax.set_xlabel("env steps per second of the whole training loop")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, print the table, write JSON and the plot if asked."""
    args, passthrough = parse_args(argv)
    print(f"PPO on CartPole-v1: {args.total_timesteps:,} steps, {args.num_envs} envs, "
          f"seed {args.seed}, {args.repeats} round(s), a fresh process per run")
    runs = run(args, passthrough)
    print(format_table(runs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": {k: v for k, v in vars(args).items() if k != "plot"},
                       "trainer_args": passthrough, "runs": runs}, f, indent=2)
            f.write("\n")
        print(f"wrote {args.json}")
    if args.plot:
        title = (f"PPO CartPole-v1, {args.total_timesteps:,} steps, {args.num_envs} envs, "
                 f"seed {args.seed}, median of {args.repeats}")
        write_plot(args.plot, runs, title)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
