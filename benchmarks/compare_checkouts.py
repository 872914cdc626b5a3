"""Compare two checkouts of fastvec with its own benchmark, as interleaved pairs.

For a refactor that must not slow anything down: each round runs
``python -m fastvec.bench`` once from the base checkout and once from the head
checkout (order alternating), every system in a fresh process as the bench does,
with one CPU calibration shared by both; the table gives, per workload and
system, the median over rounds of head/base env-steps per second, its range, and
how steady head is between fresh processes (second-highest over second-lowest of
its rounds, with 4 rounds or more).

    python benchmarks/compare_checkouts.py --base ../fastvec-old --head . --rounds 5 \\
        --workloads cartpole,atari,dict,info,heavy,jitter \\
        --systems fastvec-sync,fastvec-sync-nocopy,fastvec-subproc,fastvec-async

Both checkouts need their compiled kernels built in place.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run_bench(checkout: Path, bench_args: list[str], out: Path, env: dict[str, str]) -> dict:
    cmd = [sys.executable, "-m", "fastvec.bench", *bench_args, "--json", str(out)]
    subprocess.run(cmd, cwd=checkout, env={**env, "PYTHONPATH": str(checkout)}, check=True,
                   stdout=subprocess.DEVNULL)
    data = json.loads(out.read_text())
    return {(r["workload"], r["system"]): r["median"] for r in data["results"]
            if r.get("median")}


def steadiness(rates: list[float]) -> str:
    """Second-highest over second-lowest of one checkout's fresh runs (4 or more)."""
    if len(rates) < 4:
        return "-"
    ranked = sorted(rates)
    return f"{ranked[-2] / ranked[1]:.3f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", type=Path, required=True, help="the checkout to compare against")
    p.add_argument("--head", type=Path, default=Path("."), help="the checkout under test")
    p.add_argument("--rounds", type=int, default=5, help="interleaved pairs (default: 5)")
    p.add_argument("--workloads", default="cartpole,atari,dict,info,heavy,jitter")
    p.add_argument("--systems",
                   default="fastvec-sync,fastvec-sync-nocopy,fastvec-subproc,fastvec-async")
    p.add_argument("--seconds", default="0.5")
    args = p.parse_args()
    bench_args = [f"--workloads={args.workloads}", f"--systems={args.systems}", "--repeats=1",
                  f"--seconds={args.seconds}", "--warmup=0.2"]
    env = dict(os.environ)
    if "FASTVEC_BENCH_SPIN_RATE" not in env:  # one calibration for every run
        sys.path.insert(0, str(args.head.resolve()))
        from fastvec.bench.envs import spin_rate

        env["FASTVEC_BENCH_SPIN_RATE"] = repr(spin_rate())
    ratios: dict[tuple[str, str], list[float]] = {}
    rates: dict[tuple[str, str], dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = [("base", args.base), ("head", args.head)]
            if r % 2:
                order.reverse()
            got = {name: run_bench(path.resolve(), bench_args, Path(tmp) / f"{name}{r}.json",
                                   env) for name, path in order}
            for key, head_rate in got["head"].items():
                base_rate = got["base"].get(key)
                if base_rate:
                    ratios.setdefault(key, []).append(head_rate / base_rate)
                    per = rates.setdefault(key, {"base": [], "head": []})
                    per["base"].append(base_rate)
                    per["head"].append(head_rate)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print("| workload | system | base env-steps/s | head env-steps/s | head/base (median) "
          "| range | head 2nd-hi/2nd-lo |")
    print("|---|---|---:|---:|---:|---|---:|")
    for (workload, system), values in sorted(ratios.items()):
        per = rates[workload, system]
        print(f"| {workload} | {system} | {statistics.median(per['base']):,.0f} | "
              f"{statistics.median(per['head']):,.0f} | {statistics.median(values):.3f} | "
              f"{min(values):.2f}-{max(values):.2f} | {steadiness(per['head'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
