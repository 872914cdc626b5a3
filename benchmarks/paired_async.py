"""Async batches against sync stepping, measured as interleaved pairs.

Each measurement is a fresh process that builds a ``SubprocVecEnv``, warms up,
then times a fixed number of env-steps, either with ``step`` (sync) or with
``recv``/``send`` at ``batch_size = num_envs // 2`` (async). Sync and async run
in turn (A B A B ...), and the figure quoted is the median of the per-pair
ratios, so a drift of the machine's speed between pairs cancels out.

    PYTHONPATH=. python benchmarks/paired_async.py --pairs 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CASES = {  # name: (workload, num_envs, workers, env-steps timed)
    "cartpole-w2": ("cartpole", 16, 2, 200_000),
    "jitter-w2": ("jitter", 8, 2, 6_000),
    "jitter-w4": ("jitter", 8, 4, 6_000),
    "jitter-w8": ("jitter", 8, 8, 6_000),
}


def child(case: str, mode: str) -> None:
    """Time one mode of one case in this process; print env-steps per second as JSON."""
    import numpy as np

    import fastvec
    from fastvec.bench.workloads import WORKLOADS

    workload, n, workers, steps = CASES[case]
    make = WORKLOADS[workload].make_env
    if mode == "sync":
        envs = fastvec.SubprocVecEnv([make] * n, num_workers=workers)
        envs.reset(seed=0)
        actions = np.zeros(n, np.int64)

        def run(k: int) -> None:
            for _ in range(k // n):
                envs.step(actions)
    else:
        envs = fastvec.SubprocVecEnv([make] * n, num_workers=workers, batch_size=n // 2)
        envs.async_reset(seed=0)
        actions = np.zeros(n // 2, np.int64)

        def run(k: int) -> None:
            for _ in range(2 * k // n):
                *_, ids = envs.recv()
                envs.send(actions, ids)
    run(steps // 10)  # warm-up
    start = time.perf_counter()
    run(steps)
    rate = steps / (time.perf_counter() - start)
    envs.close()
    print(json.dumps({"rate": rate}))


def measure(case: str, mode: str, env: dict) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", case, mode], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["rate"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    env = dict(os.environ)
    if "FASTVEC_BENCH_SPIN_RATE" not in env:  # one calibration for every process
        from fastvec.bench.envs import spin_rate

        env["FASTVEC_BENCH_SPIN_RATE"] = repr(spin_rate())
    print(f"{os.cpu_count()} cores, load average before: {os.getloadavg()}")
    print(f"{'case':<12} {'sync':>9} {'async':>9} {'async/sync (min-max)':>26}")
    for case in args.cases.split(","):
        ratios, syncs, asyncs = [], [], []
        for _ in range(args.pairs):
            s, a = measure(case, "sync", env), measure(case, "async", env)
            syncs.append(s)
            asyncs.append(a)
            ratios.append(a / s)
        print(f"{case:<12} {statistics.median(syncs):>9,.0f} {statistics.median(asyncs):>9,.0f} "
              f"{statistics.median(ratios):>10.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
