"""How steady a system is between fresh processes: the bench run N times, the spread per cell.

Each run is ``python -m fastvec.bench`` with one repeat per system (every system
in a fresh process, as the bench does), so the spread is between fresh
processes, not within one.  The table gives, per workload and system, the
second-highest over the second-lowest of the runs (one outlier each way
forgiven), the range, and the median.

    python benchmarks/steadiness.py --runs 7 --workloads atari,cartpole,dict,info,heavy,jitter \\
        --systems fastvec-local,fastvec-sync
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cpu_times() -> tuple[float, float]:
    """(steal, total) jiffies of all CPUs from /proc/stat: the time the hypervisor gave
    this machine's CPUs to others, which a system that needs every core feels and a
    one-core system does not.
    """
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except OSError:  # not Linux
        return 0.0, 1.0
    return (fields[7] if len(fields) > 7 else 0.0), sum(fields)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=7, help="fresh bench runs (default: 7)")
    p.add_argument("--workloads", default="atari,cartpole,dict,info,heavy,jitter")
    p.add_argument("--systems", default="fastvec-local,fastvec-sync")
    p.add_argument("--seconds", default="1")
    args = p.parse_args()
    if args.runs < 4:
        p.error("--runs must be at least 4 (the second-highest and second-lowest)")
    env = dict(os.environ)
    if "FASTVEC_BENCH_SPIN_RATE" not in env:  # one calibration for every run
        from fastvec.bench.envs import spin_rate

        env["FASTVEC_BENCH_SPIN_RATE"] = repr(spin_rate())
    rates: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "run.json")
        for r in range(args.runs):
            steal0, total0 = cpu_times()
            started = time.monotonic()
            subprocess.run([sys.executable, "-m", "fastvec.bench", f"--workloads={args.workloads}",
                            f"--systems={args.systems}", "--repeats=1", "--warmup=0.2",
                            f"--seconds={args.seconds}", "--json", str(out)],
                           env=env, check=True, stdout=subprocess.DEVNULL)
            for row in json.loads(out.read_text())["results"]:
                if row.get("median"):
                    rates.setdefault((row["workload"], row["system"]), []).append(row["median"])
            steal1, total1 = cpu_times()
            steal = 100 * (steal1 - steal0) / max(total1 - total0, 1.0)
            print(f"run {r + 1}/{args.runs}: {time.monotonic() - started:.0f} s, CPU time "
                  f"stolen by the hypervisor {steal:.1f}%", file=sys.stderr)
    print("| workload | system | 2nd-hi / 2nd-lo | max / min | median env-steps/s |")
    print("|---|---|---|---|---|")
    for (workload, system), values in rates.items():
        ranked = sorted(values)
        steady = ranked[-2] / ranked[1]
        print(f"| {workload} | {system} | {steady:.3f} | {ranked[-1] / ranked[0]:.3f} | "
              f"{statistics.median(values):,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
